from libc.stdint cimport uint64_t
from smpnet.kernel.percpu cimport smp_header, cpu_state, irq_cpustat
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "smp.h" nogil:
    struct cpu_ctx:
        smp_header *hdr
        int cpu
        int check
        int popf
        irq_cpustat *irq
        spinlock_t *irq_test_lock
        uint64_t spin_deadline
        void *net
        uint64_t ipi_send_cost
        uint64_t irq_entry_cycles
        int lock_algo
        int kbuild
        uint64_t lock_info_searches
        int numa_node

    void cpu_ctx_init(cpu_ctx *c, smp_header *hdr, int cpu, int check, int popf)
    int smp_should_stop(const smp_header *hdr)
    void smp_spin_wait(const smp_header *hdr)
    int smp_barrier_wait(smp_header *hdr, cpu_state *cs)
    uint64_t cpu_idle_poll(const smp_header *hdr, uint64_t timeout_ns)
