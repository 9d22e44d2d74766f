/* Seed 003 as a file of your own: spin_lock_irqsave() -> spin_lock_irq()
 * in skb_defer_free_flush() (commit 7b5d8bd0, Linux 6.7). Its author measured
 * the pair with time_bench: irqsave - irq = 14 cycles on an E5-1650 v4.
 *
 *   smpnet-bench ab examples/seed003.c --cpus 0
 *
 * Both variants lock and unlock one uncontended lock; the difference is the
 * save of the flags register (`pushf; pop`) that irqsave does and irq does
 * not, so `smpnet-bench locks` gives the same pair built in. */
#include <smpnet.h>

struct shared { spinlock_t lock; };
SMPNET_STATE(struct shared, struct smpnet_none);

SMPNET_INIT(irqsave) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(irqsave)
{
	unsigned long flags;

	spin_lock_irqsave(&shared->lock, flags);
	spin_unlock_irqrestore(&shared->lock, flags);
}

SMPNET_INIT(irq) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(irq)
{
	spin_lock_irq(&shared->lock);
	spin_unlock_irq(&shared->lock);
}
