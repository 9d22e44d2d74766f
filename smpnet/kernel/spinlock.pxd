from libc.stdint cimport uint32_t, uint64_t
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.percpu cimport smp_header
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "spinlock.h" nogil:
    enum: VARIANT_PLAIN
    enum: VARIANT_BH
    enum: VARIANT_IRQ
    enum: VARIANT_IRQSAVE
    enum: VARIANT_IRQSAVE_BEFORE_LOCK
    enum: VARIANT_IRQ_DISABLE_BEFORE_LOCK
    enum: SPIN_NR_VARIANTS
    enum: _Q_PENDING_LOOPS
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
    int spin_lock_init(smp_header *hdr, spinlock_t *l, int algo, uint32_t id)
