cdef extern from "compiler.h" nogil:
    enum: SMP_CACHE_BYTES
    void barrier()
    void cpu_relax()
