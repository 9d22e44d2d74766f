/* A change to the lock itself: the ticket spinlock against qspinlock, one
 * file, two kernels (x86 moved from the one to the other in Linux 4.2).
 *
 *   smpnet-bench ab examples/ticket_vs_qspinlock.c --algo qspinlock
 *
 * `ticket` runs on a build of this file whose every lock is a ticket lock
 * (SMPNET_VARIANT_ALGO), `qspinlock` on --algo's: the same critical
 * section, taken in a helper as kernel code takes it. Uncontended the
 * difference is the acquire's locked op and the release's store; on two
 * CPUs at once, how each hands the lock over. Each check counts the
 * sections, so a lock that let two CPUs in at once fails it. */
#include <smpnet.h>

struct shared { spinlock_t lock; unsigned long sections; };
SMPNET_STATE(struct shared, struct smpnet_none);

static void section(struct shared *s)
{
	spin_lock(&s->lock);
	s->sections++;
	spin_unlock(&s->lock);
}

SMPNET_INIT(ticket) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT_ALGO(ticket, ticket) { section(shared); }
SMPNET_CHECK(ticket) { expect(shared->sections == nr_ops, "the ticket lock let two in"); }

SMPNET_INIT(qspinlock) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(qspinlock) { section(shared); }
SMPNET_CHECK(qspinlock) { expect(shared->sections == nr_ops, "the qspinlock let two in"); }
