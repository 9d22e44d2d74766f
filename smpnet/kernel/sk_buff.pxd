from libc.stdint cimport uint32_t

cdef extern from "sk_buff.h" nogil:
    struct sk_buff:
        uint32_t next
        uint32_t alloc_cpu
        uint32_t gen
        uint32_t state
        uint32_t len
        uint32_t hash
