/* qspinlock.h - the kernel's queued spinlock (kernel/locking/qspinlock.c,
 * arch/x86/include/asm/qspinlock.h): a locked byte, a pending bit and an MCS
 * queue of per-CPU nodes in one 4-byte word; qspinlock_paravirt.h builds
 * the PV one on it. spinlock.h dispatches to both. docs/experiments/locks.md.
 */
/* not SMPNET_QSPINLOCK_H: that guards include/smpnet_qspinlock.h, a user's
 * file's own qspinlock, which smpnet.h's users include after this */
#ifndef SMPNET_MODEL_QSPINLOCK_H
#define SMPNET_MODEL_QSPINLOCK_H

#include "irqflags.h"
#include "spinlock_types.h"

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

static __attribute__((__noinline__)) int queued_spin_lock_slowpath(struct cpu_ctx *c,
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

#endif
