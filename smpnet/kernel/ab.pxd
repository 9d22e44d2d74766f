from libc.stdint cimport int32_t, uint32_t, uint64_t, uintptr_t
from smpnet.kernel.smp cimport cpu_ctx

cdef extern from "ab.h" nogil:
    struct smpnet_skb_ops:
        pass

    struct smpnet_env:
        cpu_ctx *c
        void *shared
        char *percpu
        uint64_t percpu_stride
        char *pcpu_area
        uint64_t pcpu_area_stride
        int cpu
        int nr_cpus
        uint64_t hold_cycles
        uint64_t think_cycles
        uint64_t deadline
        uint64_t ops
        uint32_t lock_ids
        int32_t role
        uint64_t work
        const smpnet_skb_ops *skb_ops

    struct smpnet_build_info:
        int algo
        int check
        int popf
        int kbuild

    ctypedef uint64_t (*smpnet_loop_fn)(smpnet_env *e, uint64_t loops) noexcept nogil
    ctypedef int (*smpnet_contended_fn)(smpnet_env *e, uint64_t deadline, uint64_t *ops) noexcept nogil
    ctypedef int (*smpnet_init_fn)(smpnet_env *e) noexcept nogil
    ctypedef const char *(*smpnet_check_fn)(smpnet_env *e) noexcept nogil

    const uint64_t SMPNET_ABI_HASH
    enum: SMPNET_AB_MAX_VARIANTS
    enum: SMPNET_AB_NAME
    enum: SMPNET_AB_MAX_ROLES
