from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "spinlock_api_smp.h" nogil:
    # the lock entry points each kernel build (kernel_build.h) makes a call or inline code
    enum: SPIN_NR_ENTRIES
    const char *const spin_entry_names[]
    int kbuild_calls_of(int build, int entry)

    int spin_lock(cpu_ctx *c, spinlock_t *l)
    void spin_unlock(cpu_ctx *c, spinlock_t *l)
    int spin_lock_bh(cpu_ctx *c, spinlock_t *l)
    void spin_unlock_bh(cpu_ctx *c, spinlock_t *l)
    int spin_lock_irq(cpu_ctx *c, spinlock_t *l)
    void spin_unlock_irq(cpu_ctx *c, spinlock_t *l)
    int spin_lock_irqsave(cpu_ctx *c, spinlock_t *l, unsigned long *flags)
    void spin_unlock_irqrestore(cpu_ctx *c, spinlock_t *l, unsigned long flags)
