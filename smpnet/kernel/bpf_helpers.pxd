# bpf_helpers.h: the kernel referee's lock pair; time_bench.h's loops and
# lock_hammer's bpf_spin_lock pairs call it.
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "bpf_helpers.h" nogil:
    ctypedef int (*bpf_helper_t)(cpu_ctx *c, spinlock_t *l) noexcept nogil
    cdef struct bpf_spin_lock_ops:
        bpf_helper_t lock
        bpf_helper_t unlock[2]
    const bpf_spin_lock_ops *bpf_spin_lock_ops_of(int algo, int check, int build)
