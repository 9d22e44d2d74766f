from libc.stdint cimport uint32_t, uint64_t
from smpnet.kernel.percpu cimport smp_header
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "time_bench.h" nogil:
    void tb_empty_function()
    void (*tb_function_ptr)()
    enum: TB_UNROLL_C "TB_UNROLL"
    enum: TB_PROG_OPS_C "TB_PROG_OPS"
    uint64_t tb_atomics_unrolled(uint32_t *word, uint64_t loops, int op)
    uint64_t tb_this_cpu_inc_unrolled(cpu_ctx *c, uint64_t loops)
    ctypedef uint64_t (*tb_lock_loop_t)(cpu_ctx *c, spinlock_t *l, uint64_t loops) noexcept nogil
    tb_lock_loop_t tb_lock_loop_of(int variant, int algo, int check, int popf, int build)
    enum: TB_VARIANT_IRQSAVE_NOPUSHF
    enum: TB_VARIANT_BPF_SPIN_LOCK
    enum: TB_OP_LOCAL_BH_DISABLE_ENABLE
    enum: TB_OP_LOCAL_IRQ_SAVE_RESTORE
    enum: TB_OP_CALLS_EMPTY
    enum: TB_OP_CALLS_IRQ_SAVE_RESTORE
    tb_lock_loop_t tb_cpu_loop_of(int op, int check, int popf, int build)
    enum: TB_ATOMIC_FETCH_ADD
    enum: TB_ATOMIC_CMPXCHG
    enum: TB_ATOMIC_XCHG
    uint64_t tb_atomic_hammer(const smp_header *hdr, uint32_t *word, int op, uint64_t deadline,
                              uint64_t *cycles)
