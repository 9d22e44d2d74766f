/* spinlock.h - the lock algorithms and the kernel's spin_lock variants.
 *
 * Algorithms (arch_spin_lock): tas, ttas, ticket, qspinlock (the kernel's
 * queued spinlock: locked byte, pending bit, MCS queue with per-CPU nodes,
 * after kernel/locking/qspinlock.c), what a KVM guest runs instead
 * (pvqspinlock, the paravirt one; virt_tas, virt_spin_lock()'s test-and-set
 * fallback), the plain MCS and CLH queue locks
 * (mcs_spinlock.h) and pthread (a process-shared mutex).
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
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "irqflags.h"
#include "lockdep.h"
#include "mcs_spinlock.h"
#include "spinlock_types.h"

/* ---------------------------------------------------------------- tas, ttas */

static __attribute__((noinline)) int tas_lock_slowpath(struct cpu_ctx *c, spinlock_t *l)
{
	do {
		if (spin_wait(c))
			return -1;
	} while (__atomic_exchange_n(&l->val, 1, __ATOMIC_ACQUIRE));
	return 0;
}

static __attribute__((noinline)) int ttas_lock_slowpath(struct cpu_ctx *c, spinlock_t *l)
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

static __attribute__((noinline)) int ticket_lock_slowpath(struct cpu_ctx *c, spinlock_t *l,
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

/* ---------------------------------------------------------------- qspinlock */

#define _Q_LOCKED_VAL		1U
#define _Q_PENDING_VAL		(1U << 8)
#define _Q_LOCKED_MASK		0x000000ffU
#define _Q_PENDING_MASK		0x0000ff00U
#define _Q_LOCKED_PENDING_MASK	0x0000ffffU
#define _Q_TAIL_MASK		0xffff0000U
#define _Q_TAIL_OFFSET		16
#define _Q_TAIL_CPU_OFFSET	18
#define _Q_PENDING_OFFSET	8

/* arch/x86/include/asm/qspinlock.h: x86 waits up to 512 polls for a
 * pending -> locked hand-over before it queues (the generic value is 1),
 * and sets the pending bit with one `lock btsl`, whose carry says whether
 * it was set, then reads the rest of the word: no cmpxchg loop, which is
 * what __atomic_fetch_or() compiles to when its old value is used. */
#define _Q_PENDING_LOOPS	(1 << 9)

static inline uint32_t queued_fetch_set_pending_acquire(spinlock_t *l)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned char was;

	asm volatile("lock btsl %2, %0\n\tsetc %1"
		     : "+m"(l->val), "=q"(was) : "I"(_Q_PENDING_OFFSET) : "memory", "cc");
	return (was ? _Q_PENDING_VAL : 0) | (READ_ONCE(l->val) & ~_Q_PENDING_MASK);
#else
	return __atomic_fetch_or(&l->val, _Q_PENDING_VAL, __ATOMIC_ACQUIRE);
#endif
}

static inline uint32_t encode_tail(int cpu, int idx)
{
	return ((uint32_t)(cpu + 1) << _Q_TAIL_CPU_OFFSET) | ((uint32_t)idx << _Q_TAIL_OFFSET);
}

static inline struct qnode *decode_tail(struct cpu_ctx *c, uint32_t tail)
{
	int cpu = (int)(tail >> _Q_TAIL_CPU_OFFSET) - 1;
	int idx = (tail >> _Q_TAIL_OFFSET) & 3;

	return &((struct qnodes *)per_cpu_ptr(c->hdr, REGION_QNODES, cpu))->n[idx];
}

static inline int queued_spin_trylock(spinlock_t *l)
{
	uint32_t v = READ_ONCE(l->val);

	return !v && __atomic_compare_exchange_n(&l->val, &v, _Q_LOCKED_VAL, 0,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* Claim this CPU's node for the next nesting level (count is node 0's),
 * readied to queue (pv: its state too, pv_init_node()); NULL past
 * MAX_NODES, when the caller spins on a trylock instead, as the kernel
 * does. *tail: the node's encoded tail. */
static __always_inline struct qnode *qnode_claim(struct qnodes *nodes, int cpu, uint32_t *tail,
						 const int pv)
{
	int idx = nodes->n[0].count++;
	struct qnode *node;

	*tail = encode_tail(cpu, idx);
	if (unlikely(idx >= MAX_NODES))
		return NULL;
	node = &nodes->n[idx];
	barrier();
	node->locked = 0;
	node->next = 0;
	if (pv)
		node->pv_state = 0;	/* vcpu_running */
	return node;
}

/* Publish our node as the tail (xchg_tail: x86 xchg is a full barrier) and
 * link it behind the old tail, if any; the old tail word. */
static inline uint32_t xchg_tail_and_link(struct cpu_ctx *c, spinlock_t *l, uint32_t tail)
{
	uint32_t old = (uint32_t)__atomic_exchange_n(&l->tail, (uint16_t)(tail >> _Q_TAIL_OFFSET),
						     __ATOMIC_SEQ_CST) << _Q_TAIL_OFFSET;

	if (old & _Q_TAIL_MASK)
		__atomic_store_n(&decode_tail(c, old)->next, tail, __ATOMIC_RELEASE);
	return old;
}

static __attribute__((noinline)) int queued_spin_lock_slowpath(struct cpu_ctx *c,
								spinlock_t *l, uint32_t val)
{
	struct qnodes *nodes = (struct qnodes *)per_cpu_ptr(c->hdr, REGION_QNODES, c->cpu);
	struct qnode *node;
	uint32_t tail, next = 0;
	int cnt;

	/* a pending -> locked hand-over in progress: wait a little for it */
	if (val == _Q_PENDING_VAL) {
		cnt = _Q_PENDING_LOOPS;
		while ((val = READ_ONCE(l->val)) == _Q_PENDING_VAL && cnt--)
			cpu_relax();
	}
	if (val & ~_Q_LOCKED_MASK)
		goto queue;

	/* trylock || pending */
	val = queued_fetch_set_pending_acquire(l);
	if (!(val & ~_Q_LOCKED_MASK)) {
		/* we are pending: wait for the owner to go, then take over */
		if (val & _Q_LOCKED_MASK)
			while (__atomic_load_n(&l->locked, __ATOMIC_ACQUIRE))
				if (spin_wait(c)) {
					/* give the pending bit back: the lock stays usable */
					__atomic_store_n(&l->pending, 0, __ATOMIC_RELEASE);
					return -1;
				}
		__atomic_store_n(&l->locked_pending, (uint16_t)_Q_LOCKED_VAL, __ATOMIC_RELAXED);
		return 0;
	}
	/* somebody else is pending or queued: undo our pending bit */
	if (!(val & _Q_PENDING_MASK))
		__atomic_store_n(&l->pending, 0, __ATOMIC_RELAXED);
queue:
	node = qnode_claim(nodes, c->cpu, &tail, 0);
	if (unlikely(!node)) {
		/* out of nesting levels: spin on trylock, as the kernel does */
		while (!queued_spin_trylock(l))
			if (spin_wait(c))
				goto abort;
		goto release;
	}
	if (queued_spin_trylock(l))
		goto release;
	if (xchg_tail_and_link(c, l, tail) & _Q_TAIL_MASK) {
		while (!__atomic_load_n(&node->locked, __ATOMIC_ACQUIRE))	/* arch_mcs_spin_lock_contended */
			if (spin_wait(c))
				goto abort;
		/* a waiter may have linked behind us meanwhile: its line for writing */
		next = READ_ONCE(node->next);
		if (next)
			prefetchw(decode_tail(c, next));
	}

	/* at the head of the queue: wait for the owner and the pending waiter */
	while ((val = __atomic_load_n(&l->val, __ATOMIC_ACQUIRE)) & _Q_LOCKED_PENDING_MASK)
		if (spin_wait(c))
			goto abort;

	/* claim the lock; if we are also the tail, the queue becomes empty */
	if ((val & _Q_TAIL_MASK) == tail &&
	    __atomic_compare_exchange_n(&l->val, &val, _Q_LOCKED_VAL, 0,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		goto release;
	__atomic_store_n(&l->locked, (uint8_t)_Q_LOCKED_VAL, __ATOMIC_RELAXED);	/* set_locked */
	while (!next && !(next = __atomic_load_n(&node->next, __ATOMIC_ACQUIRE)))
		if (spin_wait(c))
			goto abort;
	__atomic_store_n(&decode_tail(c, next)->locked, 1, __ATOMIC_RELEASE);	/* hand the MCS lock on */
release:
	nodes->n[0].count--;
	return 0;
abort:
	nodes->n[0].count--;
	return -1;
}

/* queued_spin_lock()'s fast path: one cmpxchg of a free word */
static inline int queued_spin_trylock_fast(spinlock_t *l)
{
	uint32_t val = 0;

	return __atomic_compare_exchange_n(&l->val, &val, _Q_LOCKED_VAL, 0, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static inline int queued_spin_lock(struct cpu_ctx *c, spinlock_t *l)
{
	uint32_t val = 0;

	if (likely(__atomic_compare_exchange_n(&l->val, &val, _Q_LOCKED_VAL, 0,
					       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
		return 0;
	return queued_spin_lock_slowpath(c, l, val);
}

static inline void queued_spin_unlock(spinlock_t *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- virt_tas */

/* arch/x86/include/asm/qspinlock.h's virt_spin_lock(): a guest whose
 * hypervisor gives no PV spinlock support (no KVM_FEATURE_PV_UNHALT) falls
 * back, in the slow path, to a test-and-set loop on the whole word,
 * "because fair locks have horrible lock 'holder' preemption issues".
 * The fast path (the cmpxchg) and the unlock (the byte store) are
 * qspinlock's. */
static __attribute__((noinline)) int virt_spin_lock(struct cpu_ctx *c, spinlock_t *l)
{
	uint32_t val;

	for (;;) {
		val = READ_ONCE(l->val);
		if (!val && __atomic_compare_exchange_n(&l->val, &val, _Q_LOCKED_VAL, 0,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 0;
		if (spin_wait(c))	/* cpu_relax(), and the stop flag */
			return -1;
	}
}

/* ---------------------------------------------------------------- pvqspinlock */

/* The paravirt qspinlock a KVM guest with PARAVIRT_SPINLOCKS and the
 * host's KVM_FEATURE_PV_UNHALT runs (kernel/locking/qspinlock_paravirt.h,
 * arch/x86/kernel/kvm.c's kvm_spinlock_init()):
 *   lock     qspinlock's cmpxchg fast path; the slow path has no pending
 *            bit for newcomers (pv_enabled(): straight to the queue), tries
 *            to steal the lock while the head has not set pending
 *            (pv_hybrid_queued_unfair_trylock()), queues as MCS, and a
 *            waiter spins SPIN_THRESHOLD polls before it halts
 *   unlock   __pv_queued_spin_unlock(): a call, and a `lock cmpxchg` of the
 *            locked byte 1 -> 0 where qspinlock has a byte store; a byte
 *            of _Q_SLOW_VAL (the head halted) takes the slow path, which
 *            releases and kicks the head
 * What user space does for the hypervisor's: a halt (pv_wait(): HLT, the
 * vCPU descheduled until kicked) is a FUTEX_WAIT on the word the kernel
 * waits on (the node's state; for the head, the lock word, which the
 * kernel finds through its pv hash and the futex's own hash finds here),
 * 10 ms at a time so that the stop flag is seen; a kick (pv_kick():
 * KVM_HC_KICK_CPU) is a FUTEX_WAKE. Not modelled: the pv hash (the kick
 * of a halted successor is eager, at the hand-off, as 4.2-4.5; today's
 * pv_kick_node() hashes the lock and leaves the kick to the unlock). */
#define _Q_SLOW_VAL		(3U << 0)
#define PV_SPIN_THRESHOLD	(1 << 15)
#define PV_PREV_CHECK_MASK	0xff
enum vcpu_state { vcpu_running = 0, vcpu_halted = 1, vcpu_hashed = 2 };

/* 1 when the CPU slept (woken, or its 10 ms ran out), 0 when the word had
 * changed already: only a sleep counts as a halt (pv_halts). */
static inline int pv_wait(uint32_t *word, uint32_t val)
{
	const struct timespec poll = { 0, 10 * 1000 * 1000 };

	return syscall(SYS_futex, word, FUTEX_WAIT, val, &poll, NULL, 0) == 0 || errno == ETIMEDOUT;
}

static inline void pv_kick(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Steal the lock while the head has not set pending: 1 when taken. */
static inline int pv_hybrid_queued_unfair_trylock(struct cpu_ctx *c, spinlock_t *l, int *stop)
{
	for (;;) {
		uint32_t val = READ_ONCE(l->val);
		uint8_t old = 0;

		if (!(val & _Q_LOCKED_PENDING_MASK) &&
		    __atomic_compare_exchange_n(&l->locked, &old, _Q_LOCKED_VAL, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 1;
		if (!(val & _Q_TAIL_MASK) || (val & _Q_PENDING_MASK))
			return 0;
		if (spin_wait(c)) {
			*stop = 1;
			return 0;
		}
	}
}

/* pv_wait_node(): spin on our node, then halt until the predecessor's
 * hand-off (node->locked) kicks us; early when the predecessor halted
 * (pv_wait_early(): its state read every PV_PREV_CHECK_MASK + 1 polls,
 * the first poll among them); 0, or -1 when stopped. */
static inline int pv_wait_node(struct cpu_ctx *c, struct qnode *node, struct qnode *prev)
{
	for (;;) {
		int loop;

		for (loop = PV_SPIN_THRESHOLD; loop; loop--) {
			if (__atomic_load_n(&node->locked, __ATOMIC_ACQUIRE))
				return 0;
			if (!(loop & PV_PREV_CHECK_MASK) && READ_ONCE(prev->pv_state) != vcpu_running)
				break;		/* pv_wait_early() */
			if (spin_wait(c))
				return -1;
		}
		uint32_t halted = vcpu_halted;

		__atomic_store_n(&node->pv_state, vcpu_halted, __ATOMIC_SEQ_CST);	/* smp_store_mb */
		if (!__atomic_load_n(&node->locked, __ATOMIC_SEQ_CST) &&
		    pv_wait(&node->pv_state, vcpu_halted))
			c->irq->pv_halts++;
		__atomic_compare_exchange_n(&node->pv_state, &halted, vcpu_running, 0,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
	}
}

/* pv_kick_node() at the hand-off: wake the successor if it halted. */
static inline void pv_kick_node(struct qnode *next)
{
	uint32_t halted = vcpu_halted;

	if (__atomic_compare_exchange_n(&next->pv_state, &halted, vcpu_running, 0,
					__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		pv_kick(&next->pv_state);
}

/* pv_wait_head_or_lock(): the queue head reads its state (vcpu_hashed:
 * the lock is marked slow already; the eager kick here never leaves it,
 * but the read is the kernel's access to the node's line), marks itself
 * running, sets pending (no more stealing) and spins for the lock; past
 * SPIN_THRESHOLD, once, it makes the locked byte _Q_SLOW_VAL (where the
 * kernel hashes the lock too), then marks itself hashed and halts until
 * the unlock kicks it. Returns 0 holding the lock (locked byte set), or
 * -1 when stopped. */
static inline int pv_wait_head_or_lock(struct cpu_ctx *c, spinlock_t *l, struct qnode *node)
{
	int hashed = READ_ONCE(node->pv_state) == vcpu_hashed;	/* the kernel's `lp` */

	for (;;) {
		int loop;

		WRITE_ONCE(node->pv_state, vcpu_running);
		__atomic_store_n(&l->pending, 1, __ATOMIC_RELAXED);	/* set_pending */
		for (loop = PV_SPIN_THRESHOLD; loop; loop--) {
			uint16_t pend = _Q_PENDING_VAL;

			/* trylock_clear_pending: pending -> locked while the byte is 0 */
			if (!READ_ONCE(l->locked) &&
			    __atomic_compare_exchange_n(&l->locked_pending, &pend, _Q_LOCKED_VAL, 0,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return 0;
			if (spin_wait(c))
				goto stopped;
		}
		__atomic_store_n(&l->pending, 0, __ATOMIC_RELAXED);	/* clear_pending */
		if (!hashed) {
			hashed = 1;
			if (__atomic_exchange_n(&l->locked, (uint8_t)_Q_SLOW_VAL,
						__ATOMIC_ACQUIRE) == 0) {
				__atomic_store_n(&l->locked, (uint8_t)_Q_LOCKED_VAL, __ATOMIC_RELAXED);
				return 0;
			}
		}
		WRITE_ONCE(node->pv_state, vcpu_hashed);
		if (pv_wait(&l->val, READ_ONCE(l->val) | _Q_SLOW_VAL))
			c->irq->pv_halts++;
		if (spin_wait(c))
			return -1;
	}
stopped:
	__atomic_store_n(&l->pending, 0, __ATOMIC_RELAXED);
	return -1;
}

/* __pv_queued_spin_lock_slowpath(): kernel/locking/qspinlock.c with
 * pv_enabled(), its accesses to the lock's and the nodes' lines; what
 * differs is the PV hash's (above) and the head's futex on the whole word */
static __attribute__((noinline)) int pv_queued_spin_lock_slowpath(struct cpu_ctx *c,
								   spinlock_t *l)
{
	struct qnodes *nodes = (struct qnodes *)per_cpu_ptr(c->hdr, REGION_QNODES, c->cpu);
	struct qnode *node;
	uint32_t tail, val, old, next = 0;
	int stop = 0;

	/* pv_enabled(): straight to the queue, no trylock before the node is
	 * readied (`goto pv_queue`) */
	node = qnode_claim(nodes, c->cpu, &tail, 1);
	if (unlikely(!node)) {
		while (!pv_hybrid_queued_unfair_trylock(c, l, &stop))
			if (stop || spin_wait(c))
				goto abort;
		goto release;
	}
	if (pv_hybrid_queued_unfair_trylock(c, l, &stop))
		goto release;
	if (stop)
		goto abort;
	old = xchg_tail_and_link(c, l, tail);
	if (old & _Q_TAIL_MASK) {
		if (pv_wait_node(c, node, decode_tail(c, old)))
			goto abort;
		/* a waiter may have linked behind us meanwhile: its line for writing */
		next = READ_ONCE(node->next);
		if (next)
			prefetchw(decode_tail(c, next));
	}
	if (pv_wait_head_or_lock(c, l, node))
		goto abort;
	/* we hold the lock; if we are also the tail, the queue becomes empty */
	val = READ_ONCE(l->val) | _Q_LOCKED_VAL;
	if ((val & _Q_TAIL_MASK) == tail &&
	    __atomic_compare_exchange_n(&l->val, &val, _Q_LOCKED_VAL, 0, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		goto release;
	/* somebody queued behind us (or is about to: the kernel's comment) */
	WRITE_ONCE(l->locked, (uint8_t)_Q_LOCKED_VAL);		/* set_locked */
	while (!next && !(next = __atomic_load_n(&node->next, __ATOMIC_ACQUIRE)))
		if (spin_wait(c))
			goto abort;
	__atomic_store_n(&decode_tail(c, next)->locked, 1, __ATOMIC_RELEASE);
	pv_kick_node(decode_tail(c, next));
release:
	nodes->n[0].count--;
	return 0;
abort:
	nodes->n[0].count--;
	return -1;
}

static inline int pv_queued_spin_lock(struct cpu_ctx *c, spinlock_t *l)
{
	uint32_t val = 0;

	if (likely(__atomic_compare_exchange_n(&l->val, &val, _Q_LOCKED_VAL, 0,
					       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
		return 0;
	return pv_queued_spin_lock_slowpath(c, l);
}

/* __pv_queued_spin_unlock_slowpath(): the head halted; release and kick it */
static __attribute__((noinline)) void pv_queued_spin_unlock_slowpath(spinlock_t *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
	pv_kick(&l->val);
}

/* A call, as the kernel's: pv_ops' unlock is patched to a direct call of
 * __raw_callee_save___pv_queued_spin_unlock (arch/x86/include/asm/
 * qspinlock_paravirt.h: the cmpxchg in asm), which ends in ASM_RET, a `jmp
 * __x86_return_thunk` in a MITIGATION_RETHUNK kernel (asm/linkage.h): it
 * returns as the build returns. One copy per return (kernel_build.h). */
#define DEFINE_PV_QUEUED_SPIN_UNLOCK(t)							\
	static __attribute__((noinline)) RETURN_VIA_##t void				\
	pv_queued_spin_unlock_##t(spinlock_t *l)					\
	{										\
		RETURN_ENTER_##t;							\
		uint8_t locked = _Q_LOCKED_VAL;						\
											\
		if (likely(__atomic_compare_exchange_n(&l->locked, &locked, 0, 0,	\
						       __ATOMIC_RELEASE, __ATOMIC_RELAXED))) \
			return;								\
		pv_queued_spin_unlock_slowpath(l);					\
	}
DEFINE_PV_QUEUED_SPIN_UNLOCK(0)
DEFINE_PV_QUEUED_SPIN_UNLOCK(1)
DEFINE_PV_QUEUED_SPIN_UNLOCK(2)


/* ---------------------------------------------------------------- pthread */

/* The uncontended path is one trylock (glibc's lock fast path is the same
 * cmpxchg) on the mutex in the lock's side-table entry (spin_lock_info(),
 * searched once and then kept by the CPU); a contended waiter sleeps in
 * the futex 10 ms at a time, so it still notices the stop flag. */
static inline pthread_mutex_t *lock_mutex(struct cpu_ctx *c, const spinlock_t *l)
{
	return &spin_lock_info(c, l)->mutex;
}

static __attribute__((noinline)) int pthread_lock_slowpath(struct cpu_ctx *c,
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
