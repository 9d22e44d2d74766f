cdef extern from "layout.h" nogil:
    struct smp_field:
        const char *name
        size_t offset
        size_t size
        const char *type
        const char *record
        size_t count

    struct smp_struct:
        const char *name
        size_t size
        const smp_field *fields

    struct smp_builtin_region:
        const char *name
        const char *record

    const smp_struct smp_structs[]
    const smp_builtin_region smp_builtin_regions[]
