from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "spinlock_api_smp.h" nogil:
    # the lock entry points each kernel build (kernel_build.h) makes a call or inline code
    enum: SPIN_NR_ENTRIES
    const char *const spin_entry_names[]
    int kbuild_calls_of(int build, int entry)

    enum: VARIANT_PLAIN
    enum: VARIANT_BH
    enum: VARIANT_IRQ
    enum: VARIANT_IRQSAVE
    enum: VARIANT_IRQSAVE_BEFORE_LOCK
    enum: VARIANT_IRQ_DISABLE_BEFORE_LOCK
    enum: SPIN_NR_VARIANTS
    const char *const spin_variant_names[]

    int spin_lock(cpu_ctx *c, spinlock_t *l)
    void spin_unlock(cpu_ctx *c, spinlock_t *l)
    int spin_lock_bh(cpu_ctx *c, spinlock_t *l)
    void spin_unlock_bh(cpu_ctx *c, spinlock_t *l)
    int spin_lock_irq(cpu_ctx *c, spinlock_t *l)
    void spin_unlock_irq(cpu_ctx *c, spinlock_t *l)
    int spin_lock_irqsave(cpu_ctx *c, spinlock_t *l, unsigned long *flags)
    void spin_unlock_irqrestore(cpu_ctx *c, spinlock_t *l, unsigned long flags)
    int spin_lock_variant(cpu_ctx *c, spinlock_t *l, int variant, unsigned long *flags)
    void spin_unlock_variant(cpu_ctx *c, spinlock_t *l, int variant, unsigned long flags)
