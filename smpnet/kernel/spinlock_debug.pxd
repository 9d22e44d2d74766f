# do_raw_spin_lock()/unlock(), DEBUG_SPINLOCK's or not: the entry points
# (spinlock_api_smp.h) call them; Cython calls none of them itself
cdef extern from "spinlock_debug.h" nogil:
    pass
