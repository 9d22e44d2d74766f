from libc.stdint cimport uint32_t, uint64_t

cdef extern from "spinlock_types.h" nogil:
    enum: SPIN_TAS
    enum: SPIN_TTAS
    enum: SPIN_TICKET
    enum: SPIN_QSPINLOCK
    enum: SPIN_MCS
    enum: SPIN_CLH
    enum: SPIN_PTHREAD
    enum: SPIN_NR_ALGOS
    const char *const spin_algo_names[]
    enum: MAX_NODES
    enum: MCS_NODES
    enum: LOCK_INFO_PER_CPU

    ctypedef struct spinlock_t:
        uint32_t val

    struct lock_info:
        uint32_t algo
        uint32_t owner
        uint32_t usage
        uint32_t id

    struct lock_slot:
        spinlock_t lock
        uint32_t _pad
        uint64_t counter
