/* spinlock_variant.h - the lock variants by number: what time_bench's
 * tests, the contended runs and the torture take and release, each one of
 * spinlock_api_smp.h's entry point pairs (or time_bench's "before lock"
 * forms). docs/experiments/locks.md. */
#ifndef SMPNET_SPINLOCK_VARIANT_H
#define SMPNET_SPINLOCK_VARIANT_H

#include "spinlock_api_smp.h"

/* Enumerator, and its name as Python offers it; the two *_BEFORE_LOCK
 * variants are local_irq_save() or local_irq_disable() (always inline:
 * arch_local_irq_save()), then spin_lock(). With constant arguments
 * (time_bench.h) the switch folds to one variant; spin_lock_variant() is
 * for loops that pick it at run time (contended runs, torture). */
#define SPIN_VARIANT_TABLE(X)						\
	X(VARIANT_PLAIN,			"plain")		\
	X(VARIANT_BH,				"bh")			\
	X(VARIANT_IRQ,				"irq")			\
	X(VARIANT_IRQSAVE,			"irqsave")		\
	X(VARIANT_IRQSAVE_BEFORE_LOCK,		"irqsave_before_lock")	\
	X(VARIANT_IRQ_DISABLE_BEFORE_LOCK,	"irq_disable_before_lock")

SMP_ENUM(spin_variant, SPIN_VARIANT_TABLE, SPIN_NR_VARIANTS);

static __always_inline int __spin_lock_variant(struct cpu_ctx *c, spinlock_t *l,
					       const int variant, unsigned long *flags,
					       const int algo, const int check, const int build)
{
	switch (variant) {
	case VARIANT_BH:
		return _raw_spin_lock_bh(c, l, algo, check, build);
	case VARIANT_IRQ:
		return _raw_spin_lock_irq(c, l, algo, check, build);
	case VARIANT_IRQSAVE:
		return _raw_spin_lock_irqsave(c, l, flags, algo, check, build);
	case VARIANT_IRQSAVE_BEFORE_LOCK:
		*flags = __local_irq_save(c, check);
		return _raw_spin_lock(c, l, algo, check, build);
	case VARIANT_IRQ_DISABLE_BEFORE_LOCK:
		local_irq_disable(c);
		return _raw_spin_lock(c, l, algo, check, build);
	case VARIANT_PLAIN:
		return _raw_spin_lock(c, l, algo, check, build);
	default:	/* every caller checks the variant against SPIN_NR_VARIANTS */
		BUG();
	}
}

static __always_inline void __spin_unlock_variant(struct cpu_ctx *c, spinlock_t *l,
						  const int variant, unsigned long flags,
						  const int algo, const int check, const int popf,
						  const int build)
{
	switch (variant) {
	case VARIANT_BH:
		_raw_spin_unlock_bh(c, l, algo, check, build);
		break;
	case VARIANT_IRQ:
		_raw_spin_unlock_irq(c, l, algo, check, build);
		break;
	case VARIANT_IRQSAVE:
		_raw_spin_unlock_irqrestore(c, l, flags, algo, check, popf, build);
		break;
	case VARIANT_IRQSAVE_BEFORE_LOCK:
		_raw_spin_unlock(c, l, algo, check, build);
		__local_irq_restore(c, flags, check, popf);
		break;
	case VARIANT_IRQ_DISABLE_BEFORE_LOCK:
		_raw_spin_unlock(c, l, algo, check, build);
		local_irq_enable(c);
		break;
	case VARIANT_PLAIN:
		_raw_spin_unlock(c, l, algo, check, build);
		break;
	default:
		BUG();
	}
}

static inline int spin_lock_variant(struct cpu_ctx *c, spinlock_t *l, int variant,
				    unsigned long *flags)
{
	return __spin_lock_variant(c, l, variant, flags, spin_algo(c, l), c->check, c->kbuild);
}

static inline void spin_unlock_variant(struct cpu_ctx *c, spinlock_t *l, int variant,
				       unsigned long flags)
{
	__spin_unlock_variant(c, l, variant, flags, spin_algo(c, l), c->check, c->popf,
			      c->kbuild);
}

#endif
