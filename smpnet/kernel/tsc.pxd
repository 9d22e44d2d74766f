from libc.stdint cimport uint32_t, uint64_t

cdef extern from "tsc.h" nogil:
    enum: SMPNET_HAVE_TSC
    uint64_t tsc_start()
    uint64_t tsc_stop()
    uint64_t tsc_rdtscp(uint32_t *aux)
    uint64_t tsc_read_unordered()
    uint64_t mono_raw_ns()
    uint64_t mono_ns()
    int smp_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
