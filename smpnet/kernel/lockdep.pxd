from smpnet.kernel.percpu cimport smp_header
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t, lock_info

cdef extern from "lockdep.h" nogil:
    void lockdep_end(cpu_ctx *c)
    lock_info *lock_info_of "lock_info"(const smp_header *hdr, const spinlock_t *l)
