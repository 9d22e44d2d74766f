from libc.stdint cimport uint64_t
from smpnet.kernel.percpu cimport smp_header, cpu_state

cdef extern from "smp.h" nogil:
    int smp_should_stop(const smp_header *hdr)
    void smp_spin_wait(const smp_header *hdr)
    int smp_barrier_wait(smp_header *hdr, cpu_state *cs)
    uint64_t cpu_idle_poll(const smp_header *hdr, uint64_t timeout_ns)
