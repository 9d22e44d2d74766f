from libc.stdint cimport uint32_t, uint64_t

cdef extern from "atomic.h" nogil:
    uint32_t atomic_read(const uint32_t *v)
    void atomic_set(uint32_t *v, uint32_t i)
    void atomic_inc(uint32_t *v)
    uint32_t atomic_inc_return(uint32_t *v)
    uint32_t atomic_dec_return(uint32_t *v)
    uint32_t atomic_xchg(uint32_t *v, uint32_t new)
    uint32_t atomic_cmpxchg(uint32_t *v, uint32_t old, uint32_t new)
    void atomic_long_set(uint64_t *v, uint64_t i)
    uint64_t atomic_long_inc_return(uint64_t *v)
    uint32_t this_cpu_cmpxchg(uint32_t *p, uint32_t old, uint32_t new)
