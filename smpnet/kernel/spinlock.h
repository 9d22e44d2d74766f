/* spinlock.h - the lock algorithms and the kernel's spin_lock variants.
 *
 * Algorithms (arch_spin_lock): tas, ttas, ticket, qspinlock (the kernel's
 * queued spinlock: locked byte, pending bit, MCS queue with per-CPU nodes,
 * after kernel/locking/qspinlock.c: qspinlock.h), what a KVM guest runs
 * instead (pvqspinlock, the paravirt one; virt_tas, virt_spin_lock()'s
 * test-and-set fallback: qspinlock_paravirt.h), the plain MCS and CLH queue
 * locks (mcs_spinlock.h) and pthread (a process-shared mutex).
 * The entry points (spin_lock(), spin_lock_irqsave(), ...) are composed
 * from these as include/linux/spinlock_api_smp.h does, inline or called
 * out of line per kernel build: spinlock_api_smp.h, which includes this.
 * Every wait loop counts a spin, polls the stop flag (a waiter never hangs
 * on a dead holder) and, with IRQs on, takes pending IRQs as a real CPU
 * spinning with IRQs enabled would. An acquire returns 0, or -1 when the
 * run was stopped while it waited. An aborted wait leaves tas, ttas,
 * pthread and a pending qspinlock waiter's lock usable; a ticket taken or
 * a node queued (qspinlock, mcs, clh) cannot be given back (the kernel has
 * no way either), so such a lock needs spin_lock_init() again.
 */
#ifndef SMPNET_SPINLOCK_H
#define SMPNET_SPINLOCK_H

#include <errno.h>
#include <time.h>
#include "irqflags.h"
#include "lockdep.h"
#include "mcs_spinlock.h"
#include "spinlock_types.h"

/* ---------------------------------------------------------------- tas, ttas */

static __attribute__((__noinline__)) int tas_lock_slowpath(struct cpu_ctx *c, spinlock_t *l)
{
	do {
		if (spin_wait(c))
			return -1;
	} while (__atomic_exchange_n(&l->val, 1, __ATOMIC_ACQUIRE));
	return 0;
}

static __attribute__((__noinline__)) int ttas_lock_slowpath(struct cpu_ctx *c, spinlock_t *l)
{
	for (;;) {
		while (READ_ONCE(l->val))	/* spin on a shared copy of the line */
			if (spin_wait(c))
				return -1;
		if (!__atomic_exchange_n(&l->val, 1, __ATOMIC_ACQUIRE))
			return 0;
	}
}

/* ---------------------------------------------------------------- ticket */

static __attribute__((__noinline__)) int ticket_lock_slowpath(struct cpu_ctx *c, spinlock_t *l,
							   uint16_t ticket)
{
	while (__atomic_load_n(&l->locked_pending, __ATOMIC_ACQUIRE) != ticket)
		if (spin_wait(c))
			return -1;
	return 0;
}

static inline int ticket_lock(struct cpu_ctx *c, spinlock_t *l)
{
	uint32_t t = __atomic_fetch_add(&l->val, 1U << 16, __ATOMIC_ACQUIRE);
	uint16_t ticket = (uint16_t)(t >> 16);

	if (likely((uint16_t)t == ticket))
		return 0;
	return ticket_lock_slowpath(c, l, ticket);
}

static inline void ticket_unlock(spinlock_t *l)
{
	/* only the holder writes the serving half */
	__atomic_store_n(&l->locked_pending, (uint16_t)(l->locked_pending + 1), __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- qspinlock, pvqspinlock, virt_tas */

/* Here, in the algorithms' order, so that the object lays out as it did
 * when they were written in this file: a contended lock's figure moves
 * with where its code lies. */
#include "qspinlock.h"
#include "qspinlock_paravirt.h"

/* ---------------------------------------------------------------- pthread */

/* The uncontended path is one trylock (glibc's lock fast path is the same
 * cmpxchg) on the mutex in the lock's side-table entry (spin_lock_info(),
 * searched once and then kept by the CPU); a contended waiter sleeps in
 * the futex 10 ms at a time, so it still notices the stop flag. */
static inline pthread_mutex_t *lock_mutex(struct cpu_ctx *c, const spinlock_t *l)
{
	return &spin_lock_info(c, l)->mutex;
}

static __attribute__((__noinline__)) int pthread_lock_slowpath(struct cpu_ctx *c,
							     pthread_mutex_t *m, int rc)
{
	struct timespec ts;

	while (rc == EBUSY || rc == ETIMEDOUT) {
		if (spin_wait(c))
			return -1;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		rc = pthread_mutex_timedlock(m, &ts);
	}
	if (likely(rc == 0))
		return 0;
	if (rc == EOWNERDEAD) {		/* the holder died: the run is over */
		pthread_mutex_consistent(m);
		pthread_mutex_unlock(m);
		atomic_set(&c->hdr->stop, 1);
	}
	return -1;			/* EDEADLK (recursion) and the rest */
}

/* The fast path inline, as the other algorithms': one trylock. */
static inline int pthread_lock(struct cpu_ctx *c, spinlock_t *l)
{
	pthread_mutex_t *m = lock_mutex(c, l);
	int rc = pthread_mutex_trylock(m);

	if (likely(rc == 0))
		return 0;
	return pthread_lock_slowpath(c, m, rc);
}

/* ---------------------------------------------------------------- dispatch */

/* Every op from here on is written once, with the algorithm and the
 * checker (and, for a restore, popf) as `const int` arguments, and always
 * inlined: the time_bench loops (time_bench.h) pass constants, so each of
 * their specialisations keeps one algorithm's path and no checker test;
 * the kernel-named wrappers pass spin_algo() and c->check, for the code that
 * decides at run time (contended runs, the network model, Python). */
static __always_inline int __arch_spin_lock(struct cpu_ctx *c, spinlock_t *l, const int algo)
{
	switch (algo) {
	case SPIN_QSPINLOCK:
		return queued_spin_lock(c, l);
	case SPIN_PVQSPINLOCK:
		return pv_queued_spin_lock(c, l);
	case SPIN_VIRT_TAS:
		if (likely(queued_spin_trylock_fast(l)))
			return 0;
		return virt_spin_lock(c, l);
	case SPIN_TICKET:
		return ticket_lock(c, l);
	case SPIN_MCS:
		return mcs_spin_lock(c, l);
	case SPIN_CLH:
		return clh_spin_lock(c, l);
	case SPIN_TAS:
		if (likely(!__atomic_exchange_n(&l->val, 1, __ATOMIC_ACQUIRE)))
			return 0;
		return tas_lock_slowpath(c, l);
	case SPIN_TTAS:
		if (likely(!READ_ONCE(l->val) && !__atomic_exchange_n(&l->val, 1, __ATOMIC_ACQUIRE)))
			return 0;
		return ttas_lock_slowpath(c, l);
	default:	/* the last, tested on its path only, so the others' stay as short:
			 * spin_lock_init() takes no other algorithm */
		BUG_UNLESS(algo == SPIN_PTHREAD);
		return pthread_lock(c, l);
	}
}

/* `ret`: how the build's out-of-line functions return (the PV unlock's) */
static __always_inline void __arch_spin_unlock(struct cpu_ctx *c, spinlock_t *l, const int algo,
					       const int ret)
{
	switch (algo) {
	case SPIN_QSPINLOCK:
	case SPIN_VIRT_TAS:
		queued_spin_unlock(l);
		break;
	case SPIN_PVQSPINLOCK:
		RETURN_COPY(pv_queued_spin_unlock, ret)(l);
		break;
	case SPIN_TICKET:
		ticket_unlock(l);
		break;
	case SPIN_MCS:
		mcs_spin_unlock(c, l);
		break;
	case SPIN_CLH:
		clh_spin_unlock(c, l);
		break;
	case SPIN_TAS:
	case SPIN_TTAS:
		__atomic_store_n(&l->val, 0, __ATOMIC_RELEASE);
		break;
	default:	/* the last: a test on its path only, so the others' stay as short */
		BUG_UNLESS(algo == SPIN_PTHREAD);
		pthread_mutex_unlock(lock_mutex(c, l));
	}
}

/* The algorithm of a lock the caller did not name: the CPU's (c->lock_algo,
 * set by the loops that run one algorithm throughout, as a kernel is built
 * with one) or, when that is -1, the lock's side-table entry's. */
static inline int spin_algo(struct cpu_ctx *c, const spinlock_t *l)
{
	if (likely(c->lock_algo >= 0))
		return c->lock_algo;
	return (int)spin_lock_info(c, l)->algo;
}

static inline int arch_spin_lock(struct cpu_ctx *c, spinlock_t *l)
{
	return __arch_spin_lock(c, l, spin_algo(c, l));
}

static inline void arch_spin_unlock(struct cpu_ctx *c, spinlock_t *l)
{
	__arch_spin_unlock(c, l, spin_algo(c, l), kbuild_return(c->kbuild));
}

/* Initialise a lock in shared memory for `algo`, and its side-table entry
 * (created, or reused when the lock was initialised before); 0 or an errno
 * (EINVAL: no such algorithm, so that arch_spin_lock() never meets one;
 * ENOSPC: the side table is full). */
static inline int spin_lock_init(struct smp_header *hdr, spinlock_t *l, int algo, uint32_t id)
{
	pthread_mutexattr_t attr;
	struct lock_info *li;
	int rc = 0;

	if (algo < 0 || algo >= SPIN_NR_ALGOS)
		return EINVAL;
	li = __lock_info(hdr, l, 1);
	if (!li)
		return ENOSPC;
	l->val = 0;
	mcs_nodes_release(hdr, spin_lock_key(hdr, l));	/* nodes left marked for it */
	li->owner = 0;
	li->usage = 0;
	li->id = id;
	li->algo = (uint32_t)algo;
	if (algo == SPIN_PTHREAD) {
		pthread_mutexattr_init(&attr);
		pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
		pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
		rc = pthread_mutex_init(&li->mutex, &attr);
		pthread_mutexattr_destroy(&attr);
	}
	return rc;
}

#endif
