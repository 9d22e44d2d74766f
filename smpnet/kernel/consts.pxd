from libc.stdint cimport uint64_t

cdef extern from "consts.h" nogil:
    struct smp_const:
        const char *name
        uint64_t value

    const smp_const smp_consts[]
