/* qspinlock_paravirt.h - what a KVM guest's kernel runs for its spinlocks
 * in place of qspinlock (arch/x86/kernel/kvm.c's kvm_spinlock_init()):
 * virt_spin_lock()'s test-and-set, or the paravirt qspinlock
 * (kernel/locking/qspinlock_paravirt.h). docs/experiments/locks.md, "What a
 * guest's kernel runs".
 */
#ifndef SMPNET_MODEL_QSPINLOCK_PARAVIRT_H
#define SMPNET_MODEL_QSPINLOCK_PARAVIRT_H

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "kernel_build.h"
#include "qspinlock.h"

/* ---------------------------------------------------------------- virt_tas */

/* arch/x86/include/asm/qspinlock.h's virt_spin_lock(): a guest whose
 * hypervisor gives no PV spinlock support (no KVM_FEATURE_PV_UNHALT) falls
 * back, in the slow path, to a test-and-set loop on the whole word,
 * "because fair locks have horrible lock 'holder' preemption issues".
 * The fast path (the cmpxchg) and the unlock (the byte store) are
 * qspinlock's. */
static __attribute__((__noinline__)) int virt_spin_lock(struct cpu_ctx *c, spinlock_t *l)
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
static __attribute__((__noinline__)) int pv_queued_spin_lock_slowpath(struct cpu_ctx *c,
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
static __attribute__((__noinline__)) void pv_queued_spin_unlock_slowpath(spinlock_t *l)
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
	static __attribute__((__noinline__)) RETURN_VIA_##t void				\
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

#endif
