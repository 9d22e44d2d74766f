from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "spinlock_variant.h" nogil:
    # the lock variants by number (SPIN_VARIANT_TABLE)
    enum: VARIANT_PLAIN
    enum: VARIANT_BH
    enum: VARIANT_IRQ
    enum: VARIANT_IRQSAVE
    enum: VARIANT_IRQSAVE_BEFORE_LOCK
    enum: VARIANT_IRQ_DISABLE_BEFORE_LOCK
    enum: SPIN_NR_VARIANTS
    const char *const spin_variant_names[]
    int spin_lock_variant(cpu_ctx *c, spinlock_t *l, int variant, unsigned long *flags)
    void spin_unlock_variant(cpu_ctx *c, spinlock_t *l, int variant, unsigned long flags)
