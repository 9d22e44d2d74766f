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

/* ---------------------------------------------------------------- the side table */

/* A lock's lock_info (spinlock_types.h), as lockdep finds a lock's class:
 * by a key, here the lock's offset in the segment (the same in every
 * process that maps it), in an open-addressed table of nr_cpus *
 * LOCK_INFO_PER_CPU entries. Only the checker, pthread and the code that
 * looks a lock's algorithm up at run time come here, never a lock's
 * fast path. */
static inline struct lock_info *lock_info_entry(const struct smp_header *hdr, uint32_t i)
{
	struct lock_infos *t = (struct lock_infos *)per_cpu_ptr(hdr, REGION_LOCK_INFO,
								 (int)(i / LOCK_INFO_PER_CPU));

	return &t->e[i % LOCK_INFO_PER_CPU];
}

/* Find lock `l`'s entry; with `create`, claim a free one if it has none.
 * NULL: not found (never initialised), or the table is full. */
static inline struct lock_info *__lock_info(const struct smp_header *hdr, const spinlock_t *l,
					    int create)
{
	uint64_t key = spin_lock_key(hdr, l), cur;
	uint32_t n = hdr->nr_cpus * LOCK_INFO_PER_CPU, i, k;

	/* Fibonacci hashing of the word's index: neighbouring locks spread */
	i = (uint32_t)((((key >> 2) * 0x9e3779b97f4a7c15ull) >> 32) % n);
	for (k = 0; k < n; k++, i = i + 1 == n ? 0 : i + 1) {
		struct lock_info *e = lock_info_entry(hdr, i);

		cur = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		if (cur == key)
			return e;
		if (cur != 0)
			continue;
		if (!create)
			return NULL;
		if (__atomic_compare_exchange_n(&e->key, &cur, key, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_ACQUIRE) || cur == key)
			return e;
	}
	return NULL;
}

static inline struct lock_info *lock_info(const struct smp_header *hdr, const spinlock_t *l)
{
	return __lock_info(hdr, l, 0);
}

/* The entry of a lock being taken or released: spin_lock_init() gave every
 * lock one (Python's callers check before they take one), so none is a bug.
 * The CPU keeps the lock it found an entry for last, and that entry: a
 * caller that takes one lock over and over holds it, as a kernel caller
 * holds its lock's address (pthread's mutex, the kernel's lock itself), and
 * pays one compare of the lock's address, not the hash search (an integer
 * division, a probe) nor a check of the entry's key. The pair stays true:
 * an entry's key is set once, when the lock is first initialised, and never
 * freed while the segment is mapped, and a cpu_ctx lives inside one
 * mapping. */
static inline struct lock_info *spin_lock_info(struct cpu_ctx *c, const spinlock_t *l)
{
	struct lock_info *li;

	if (likely(c->last_lock == l))
		return c->last_lock_info;
	li = lock_info(c->hdr, l);
	if (unlikely(!li)) {
		/* DEBUG_SPINLOCK's "bad magic": counted where the run can read
		 * it, then BUG(), as nothing says which algorithm the lock is */
		c->irq->bugs[LOCKDEP_BAD_MAGIC]++;
		BUG();
	}
	c->lock_info_searches++;
	c->last_lock_info = li;
	c->last_lock = l;
	return li;
}

/* ---------------------------------------------------------------- reports */

static __attribute__((__noinline__)) void lockdep_bug(struct cpu_ctx *c, int kind,
						  const struct spinlock *lock)
{
	struct irq_cpustat *irq = c->irq;
	const struct lock_info *li = lock ? lock_info(c->hdr, lock) : NULL;

	irq->bugs[kind]++;
	if (!irq->first_bug) {
		irq->first_bug = kind + 1;
		irq->first_bug_lock = li ? li->id : 0xffffffffu;
	}
}

/* Before taking `l` with `algo`: recursion, and the contexts it is used in.
 * Every lock is initialised through spin_lock_init(), for the algorithm it
 * is taken with (c->lock_algo must agree): anything else is a bug here.
 * Returns the lock's entry, for the owner the acquire then records. */
static __attribute__((__noinline__)) struct lock_info *lockdep_acquire(struct cpu_ctx *c,
								   struct spinlock *l, int algo)
{
	struct lock_info *lock = spin_lock_info(c, l);
	uint32_t mask = 0, old, now;

	c->irq->lock_checks++;
	BUG_UNLESS(lock->algo == (uint32_t)algo);
	if (READ_ONCE(lock->owner) == (uint32_t)c->cpu + 1) {
		lockdep_bug(c, LOCKDEP_RECURSION, l);
		atomic_set(&c->hdr->stop, 1);	/* the acquire would spin forever */
		return lock;
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
		return lock;
	old = __atomic_fetch_or(&lock->usage, mask, __ATOMIC_RELAXED);
	now = old | mask;
	/* report once per lock: on the use that completes the bad pair */
	if ((now & LOCK_HARDIRQ_PAIR) == LOCK_HARDIRQ_PAIR &&
	    (old & LOCK_HARDIRQ_PAIR) != LOCK_HARDIRQ_PAIR)
		lockdep_bug(c, LOCKDEP_HARDIRQ_INVERSION, l);
	if ((now & LOCK_SOFTIRQ_PAIR) == LOCK_SOFTIRQ_PAIR &&
	    (old & LOCK_SOFTIRQ_PAIR) != LOCK_SOFTIRQ_PAIR)
		lockdep_bug(c, LOCKDEP_SOFTIRQ_INVERSION, l);
	return lock;
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
