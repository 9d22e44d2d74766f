from libc.stdint cimport uint32_t
from smpnet.kernel.percpu cimport smp_header
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "spinlock.h" nogil:
    int spin_lock_init(smp_header *hdr, spinlock_t *l, int algo, uint32_t id)
