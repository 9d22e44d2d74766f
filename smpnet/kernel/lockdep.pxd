from smpnet.kernel.smp cimport cpu_ctx

cdef extern from "lockdep.h" nogil:
    void lockdep_end(cpu_ctx *c)
