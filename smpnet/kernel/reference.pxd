from libc.stdint cimport uint32_t, uint64_t
from smpnet.kernel.spinlock_types cimport spinlock_t, lock_info

cdef extern from "reference.h" nogil:
    uint64_t ref_spin_lock_unlock(uint32_t *preempt_count, spinlock_t *l, lock_info *li,
                                  uint64_t loops)
