cdef extern from "qspinlock.h" nogil:
    enum: _Q_PENDING_LOOPS
