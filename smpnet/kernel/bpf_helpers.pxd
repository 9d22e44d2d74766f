# bpf_helpers.h: the kernel referee's lock pair; time_bench.h's loops call it.
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "bpf_helpers.h" nogil:
    unsigned long bpf_irqsave_flags
    ctypedef struct bpf_spin_lock_ops:
        int (*lock)(cpu_ctx *c, spinlock_t *l)
