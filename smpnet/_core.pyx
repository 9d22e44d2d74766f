# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""smpnet._core: the C side of smpnet.

Everything that is measured runs here, in nogil C: the loops call only the
inline functions of smpnet/kernel/*.h, never back into Python. Python code
calls in once per round (or once per run) and gets totals back.

This file only cimports the model and includes the Cython side of it, one
file per concern under smpnet/core/, as uvloop's loop.pyx does: one
extension, one C translation unit, so every header's static tables
(softirq_vec, irq_handlers, ...) exist once.
"""
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memset
from libc.stdlib cimport malloc, free
from posix.time cimport timespec, nanosleep
from libc.errno cimport errno, EINTR, EIO, ENOSPC, EAGAIN

# The model, smpnet/kernel/*.pxd: one per header, cimported whole where a
# file uses its structs (percpu.smp_header, skbuff.sk_buff, ...), by name
# for the primitives every file uses.
from smpnet.kernel cimport (ab, ab_skb, consts, dev, fake_nic, layout, link, loopback, neighbour, percpu,
                            skb_defer, skbuff)
from smpnet.kernel.compiler cimport barrier, cpu_relax
from smpnet.kernel.tsc cimport (SMPNET_HAVE_TSC, tsc_start, tsc_stop, tsc_rdtscp, tsc_read_unordered,
                                mono_raw_ns, mono_ns, smp_cpuid)
from smpnet.kernel.atomic cimport (atomic_set, atomic_read, atomic_cmpxchg, this_cpu_cmpxchg,
                                   atomic_inc, atomic_inc_return, atomic_xchg)
from smpnet.kernel.percpu cimport smp_header, cpu_state, softnet_data, per_cpu_ptr, REGION_CPU
from smpnet.kernel.skbuff cimport net_ctx, sk_buff, SK_CLIENT, SK_SERVER
from smpnet.kernel.smp cimport (cpu_ctx, cpu_ctx_init, smp_barrier_wait, cpu_idle_poll,
                                smp_should_stop, smp_spin_wait)
from smpnet.kernel.preempt cimport preempt_disable, preempt_enable, irqs_disabled
from smpnet.kernel.irqflags cimport (IRQ_TEST, IPI_NET_RX, HI_SOFTIRQ, NET_RX_SOFTIRQ,
                                     NR_SOFTIRQS, NR_IRQ_VECTORS, do_softirq,
                                     irq_handlers, softirq_vec,
                                     local_irq_disable, local_irq_enable, local_irq_save,
                                     local_irq_restore, local_bh_disable, local_bh_enable,
                                     raise_softirq, irq_poll, send_ipi)
from smpnet.kernel.lockdep cimport lockdep_end, lock_info_of
from smpnet.kernel.spinlock_types cimport (spinlock_t, lock_info, lock_slot, SPIN_NR_ALGOS,
                                           spin_algo_names, LOCK_INFO_PER_CPU)
from smpnet.kernel.spinlock cimport spin_lock_init
from smpnet.kernel.qspinlock cimport _Q_PENDING_LOOPS
from smpnet.kernel.mcs_spinlock cimport mcs_nodes_reset
from smpnet.kernel.spinlock_api_smp cimport (
    spin_lock, spin_unlock, spin_lock_bh, spin_unlock_bh, spin_lock_irq, spin_unlock_irq,
    spin_lock_irqsave, spin_unlock_irqrestore, SPIN_NR_ENTRIES, spin_entry_names,
    kbuild_calls_of)
from smpnet.kernel.spinlock_variant cimport (
    spin_lock_variant, spin_unlock_variant, SPIN_NR_VARIANTS, spin_variant_names, VARIANT_PLAIN,
    VARIANT_BH, VARIANT_IRQ, VARIANT_IRQSAVE, VARIANT_IRQSAVE_BEFORE_LOCK,
    VARIANT_IRQ_DISABLE_BEFORE_LOCK)
from smpnet.kernel.kernel_build cimport (KBUILD, KBUILD_NR, KRET_NR, KSHAPE_NR, kbuild_valid,
                                         kernel_return_names, kernel_shape_names,
                                         RETHUNK_MODELLED)
from smpnet.kernel.reference cimport ref_spin_lock_unlock
from smpnet.kernel.bpf_helpers cimport bpf_spin_lock_ops, bpf_spin_lock_ops_of
from smpnet.kernel.time_bench cimport (tb_empty_function, tb_function_ptr, tb_lock_loop_t,
                                       tb_lock_loop_of, tb_cpu_loop_of,
                                       TB_VARIANT_IRQSAVE_NOPUSHF, TB_VARIANT_BPF_SPIN_LOCK,
                                       TB_OP_LOCAL_BH_DISABLE_ENABLE, TB_OP_LOCAL_IRQ_SAVE_RESTORE,
                                       TB_OP_CALLS_EMPTY, TB_OP_CALLS_IRQ_SAVE_RESTORE,
                                       TB_UNROLL_C, TB_PROG_OPS_C, tb_atomics_unrolled,
                                       tb_this_cpu_inc_unrolled, tb_atomic_hammer,
                                       TB_ATOMIC_FETCH_ADD, TB_ATOMIC_CMPXCHG, TB_ATOMIC_XCHG)

include "core/clock.pyx"
include "core/wakeup.pyx"
include "core/ipi.pyx"
include "core/cacheline.pyx"
include "core/segment.pyx"
include "core/cpu.pyx"
include "core/locks.pyx"
include "core/time_bench.pyx"
include "core/net.pyx"
include "core/loopback.pyx"
include "core/arp.pyx"
include "core/kernel.pyx"
include "core/icmp.pyx"
include "core/ab.pyx"
