from libc.stdint cimport uint32_t, uint64_t

cdef extern from "reference.h" nogil:
    uint64_t ref_spin_lock_unlock(uint32_t *preempt_count, uint32_t *lock, uint64_t loops)
