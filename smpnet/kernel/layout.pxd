cdef extern from "layout.h" nogil:
    struct smp_field:
        const char *name
        size_t offset
        size_t size

    struct smp_struct:
        const char *name
        size_t size
        const smp_field *fields

    const smp_struct smp_structs[]
