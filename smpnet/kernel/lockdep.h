/* lockdep.h - a small lock checker, off unless a run asks for it (--check).
 *
 * It turns the seed 003 safety argument ("skb_defer_free_flush() only runs
 * from net_rx_action(), where IRQs are on") into something a workload can
 * check. Like lockdep, it reports and carries on; each report counts in the
 * reporting CPU's irq_cpustat.bugs[kind], and the first one names its lock.
 *   LOCK_IRQ_IRQS_OFF   spin_lock_irq() entered with IRQs already off: its
 *                       unlock would turn them on under the caller's feet
 *   HARDIRQ_INVERSION   a lock taken in hardirq context and also with IRQs
 *                       on: the IRQ can arrive while the CPU holds it (the
 *                       deadlock irqsave exists to prevent)
 *   SOFTIRQ_INVERSION   the same for softirq context and BHs on
 *   UNBALANCED_RESTORE  local_irq_restore() without a save, or a save left
 *                       unrestored when the run ends
 *   RECURSION           taking a lock this CPU already holds; the run is
 *                       stopped rather than left to deadlock
 *   BH_ENABLE_IRQS_OFF  local_bh_enable() with IRQs off: the softirqs it
 *                       runs would turn IRQs on under the caller
 */
#ifndef SMPNET_LOCKDEP_H
#define SMPNET_LOCKDEP_H

#include "atomic.h"
#include "preempt.h"
#include "spinlock_types.h"

#define LOCK_USED_IN_HARDIRQ	0x1
#define LOCK_USED_HARDIRQ_ON	0x2
#define LOCK_USED_IN_SOFTIRQ	0x4
#define LOCK_USED_SOFTIRQ_ON	0x8
#define LOCK_HARDIRQ_PAIR	(LOCK_USED_IN_HARDIRQ | LOCK_USED_HARDIRQ_ON)
#define LOCK_SOFTIRQ_PAIR	(LOCK_USED_IN_SOFTIRQ | LOCK_USED_SOFTIRQ_ON)

static __attribute__((noinline)) void lockdep_bug(struct cpu_ctx *c, int kind,
						  const struct spinlock *lock)
{
	struct irq_cpustat *irq = c->irq;

	irq->bugs[kind]++;
	if (!irq->first_bug) {
		irq->first_bug = kind + 1;
		irq->first_bug_lock = lock ? lock->id : 0xffffffffu;
	}
}

/* Before taking `lock`: recursion, and the contexts it is used in. */
static __attribute__((noinline)) void lockdep_acquire(struct cpu_ctx *c, struct spinlock *lock)
{
	uint32_t mask = 0, old, now;

	c->irq->lock_checks++;
	if (READ_ONCE(lock->owner) == (uint32_t)c->cpu + 1) {
		lockdep_bug(c, LOCKDEP_RECURSION, lock);
		atomic_set(&c->hdr->stop, 1);	/* the acquire would spin forever */
		return;
	}
	if (in_hardirq(c))
		mask |= LOCK_USED_IN_HARDIRQ;
	else if (!irqs_disabled(c))
		mask |= LOCK_USED_HARDIRQ_ON;
	if (in_serving_softirq(c))
		mask |= LOCK_USED_IN_SOFTIRQ;
	else if (!in_interrupt(c) && !irqs_disabled(c))
		mask |= LOCK_USED_SOFTIRQ_ON;
	if ((READ_ONCE(lock->usage) & mask) == mask)
		return;
	old = __atomic_fetch_or(&lock->usage, mask, __ATOMIC_RELAXED);
	now = old | mask;
	/* report once per lock: on the use that completes the bad pair */
	if ((now & LOCK_HARDIRQ_PAIR) == LOCK_HARDIRQ_PAIR &&
	    (old & LOCK_HARDIRQ_PAIR) != LOCK_HARDIRQ_PAIR)
		lockdep_bug(c, LOCKDEP_HARDIRQ_INVERSION, lock);
	if ((now & LOCK_SOFTIRQ_PAIR) == LOCK_SOFTIRQ_PAIR &&
	    (old & LOCK_SOFTIRQ_PAIR) != LOCK_SOFTIRQ_PAIR)
		lockdep_bug(c, LOCKDEP_SOFTIRQ_INVERSION, lock);
}

/* At the end of a run: every save restored? */
static inline void lockdep_end(struct cpu_ctx *c)
{
	if (c->check && c->irq->save_depth != 0) {
		lockdep_bug(c, LOCKDEP_UNBALANCED_RESTORE, NULL);
		c->irq->save_depth = 0;
	}
}

#endif
