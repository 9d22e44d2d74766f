/* qspinlock_pending_loops.c - a change to qspinlock itself, in one file:
 * how long a locker waits for a pending -> locked hand-over before it
 * queues. kernel/locking/qspinlock.h's generic bound is one poll
 * (_Q_PENDING_LOOPS 1); arch/x86/include/asm/qspinlock.h raises it to 512
 * (1 << 9), so that a CPU that finds the lock changing hands spins a little
 * rather than taking the MCS queue's cache-line traffic.
 *
 *   smpnet-bench ab examples/qspinlock_pending_loops.c
 *
 * Both variants take the kernel's queued spinlock (smpnet_qspinlock.h: the
 * kernel's qspinlock as x86 builds it, on a lock of this file's state):
 * `x86` through queued_spin_lock(), `generic` through the same slow path
 * generated again with the generic bound, as kernel/locking/qspinlock.c
 * generates its PV slow path by including itself. The critical section is
 * a counter + 1, which each check holds to the ops done: no increment lost
 * on any path. */
#include <smpnet.h>
#include <smpnet_qspinlock.h>

/* kernel/locking/qspinlock.c's slow path once more, with the generic bound */
#undef _Q_PENDING_LOOPS
#define _Q_PENDING_LOOPS		1
#define queued_spin_lock_slowpath	generic_spin_lock_slowpath
#include <smpnet_qspinlock_slowpath.h>
#undef queued_spin_lock_slowpath

/* include/asm-generic/qspinlock.h's queued_spin_lock(), calling it */
static __always_inline void generic_spin_lock(struct qspinlock *lock)
{
	int val = 0;

	if (likely(atomic_try_cmpxchg_acquire(&lock->val, &val, _Q_LOCKED_VAL)))
		return;
	generic_spin_lock_slowpath(lock, val);
}

struct shared {
	struct qspinlock lock;
	unsigned long count;
};
SMPNET_STATE(struct shared, struct smpnet_none);

SMPNET_VARIANT(x86)
{
	queued_spin_lock(&shared->lock);
	shared->count++;
	hold();
	queued_spin_unlock(&shared->lock);
}

SMPNET_VARIANT(generic)
{
	generic_spin_lock(&shared->lock);
	shared->count++;
	hold();
	queued_spin_unlock(&shared->lock);
}

static void counted(struct shared *s)
{
	expect(s->count == nr_ops, "an increment lost: the lock let two CPUs in");
	expect(!queued_spin_is_locked(&s->lock), "the lock is still held");
}

SMPNET_CHECK(x86) { counted(shared); }
SMPNET_CHECK(generic) { counted(shared); }
