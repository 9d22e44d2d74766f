from smpnet.kernel.percpu cimport smp_header
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "mcs_spinlock.h" nogil:
    int mcs_spin_lock(cpu_ctx *c, spinlock_t *l)
    void mcs_spin_unlock(cpu_ctx *c, spinlock_t *l)
    int clh_spin_lock(cpu_ctx *c, spinlock_t *l)
    void clh_spin_unlock(cpu_ctx *c, spinlock_t *l)
    void mcs_nodes_reset(smp_header *hdr)
