/* mcs_spinlock.h - the plain queue locks, MCS and CLH, beside qspinlock.
 *
 * qspinlock embeds an MCS queue (its struct mcs_spinlock comes from the
 * kernel's kernel/locking/mcs_spinlock.h) behind a locked byte and a
 * pending bit in a 4-byte word. These two are the queue locks alone, so
 * that a user sees what the rest buys:
 *   mcs  Mellor-Crummey and Scott (1991), kernel/locking/mcs_spinlock.h's
 *        mcs_spin_lock/mcs_spin_unlock: every acquire queues a node (xchg
 *        of the tail), a waiter spins on its own node, the holder hands the
 *        lock to the node behind it; an unlock with nobody behind is a
 *        cmpxchg of the tail back to 0, and one that loses that race waits
 *        for the newcomer to link itself in.
 *   clh  Craig, and Landin and Hagersten (1993), as the textbook has it:
 *        an acquire queues a node the same way (one xchg) and spins on its
 *        predecessor's node; the release is one store, clearing its own
 *        node's `locked`, and the released node stays in the lock as the
 *        next acquirer's predecessor, which recycles it (gives it back to
 *        its CPU) once it has seen the release. Nobody links, so a release
 *        never waits, and the uncontended pair is one atomic.
 * qspinlock's uncontended lock is one cmpxchg and its unlock one byte
 * store; its pending bit lets the second CPU spin on the word without a
 * node. MCS and CLH always queue, and every waiter has a node.
 *
 * The lock word is the tail: a node encoded as (cpu + 1, index), never a
 * pointer (every worker maps the segment at its own address); 0 is free
 * with no node, as a lock is after spin_lock_init(). A free CLH lock is
 * either 0 or a released node (the textbook's dummy node is the first
 * release's). The first acquire of a 0 lock has no predecessor to spin on.
 *
 * The nodes: MCS_NODES per CPU (struct qnodes.mcs), each marked with the
 * lock it is in use for (spin_lock_key(); 0 when free). An acquire takes
 * a free node of its CPU and the CPU keeps which (cpu_ctx.mcs_node_held),
 * as the kernel's caller keeps the node it passes to mcs_spin_unlock():
 * the unlock right after the lock uses that node, found without a search.
 * An unlock of another lock than the last one taken (locks released in
 * any order; handlers that take locks while the task holds or waits for
 * others, spin_wait() taking IRQs) finds its node by its lock. An MCS node
 * is freed by its own CPU's unlock. A released CLH node is freed by the
 * acquire that finds it as its predecessor, or, when its CPU runs out of
 * nodes, taken back by its CPU with a cmpxchg of the lock's tail from it
 * to 0 (clh_node_reclaim(): only while nobody has queued behind it). So a
 * node always goes back to its CPU (none migrates; each CPU's count is
 * conserved) and a CPU's nodes in use are the locks it holds or waits
 * for, plus released CLH nodes still in their locks. An acquire that finds
 * no free node and none to take back waits for one (a CLH successor frees
 * it; for MCS that is a nesting deeper than MCS_NODES, which waits, as a
 * deadlock would, for the run's stop).
 *
 * An aborted wait (stop flag, deadline) leaves the lock needing
 * spin_lock_init() again (spinlock.h): its node stays linked in the
 * queue. MCS gives the node back, as qspinlock does; CLH keeps it marked
 * and locked until that init (or the next run), for a CLH node in a queue
 * that is released or reused lets its successor in while the lock is
 * held. Every run starts with all nodes free and each released CLH node
 * taken out of its lock (mcs_nodes_reset(), from machine.py).
 */
#ifndef SMPNET_MCS_SPINLOCK_H
#define SMPNET_MCS_SPINLOCK_H

#include <string.h>
#include "irqflags.h"
#include "spinlock_types.h"

static inline uint32_t mcs_encode(int cpu, int idx)
{
	return ((uint32_t)(cpu + 1) << MCS_NODE_BITS) | (uint32_t)idx;
}

static inline struct mcs_node *mcs_decode(struct cpu_ctx *c, uint32_t tail)
{
	int cpu = (int)(tail >> MCS_NODE_BITS) - 1;

	return &((struct qnodes *)per_cpu_ptr(c->hdr, REGION_QNODES, cpu))
		->mcs[tail & (MCS_NODES - 1)];
}

static inline struct mcs_node *mcs_nodes(struct cpu_ctx *c)
{
	return c->qnodes->mcs;
}

/* A CLH node's `next` (CLH links nothing): what tells its nodes from MCS
 * ones, for clh_node_reclaim(); no encoded tail is all ones. */
#define CLH_NODE	0xffffffffU

static inline spinlock_t *spin_lock_of_key(struct smp_header *hdr, uint64_t key)
{
	return (spinlock_t *)((char *)hdr + key - 1);
}

/* Take back node `idx` of `cpu`, a released CLH node, from the lock whose
 * tail it is: a cmpxchg of the tail to 0 (free, no node), which fails once
 * anybody has queued behind it (that acquirer frees it). 1 when taken. */
static inline int clh_node_reclaim(struct smp_header *hdr, struct mcs_node *node, int cpu,
				   int idx)
{
	uint64_t key = __atomic_load_n(&node->lock, __ATOMIC_ACQUIRE);
	uint32_t tail = mcs_encode(cpu, idx);
	spinlock_t *l;

	if (!key || READ_ONCE(node->next) != CLH_NODE || READ_ONCE(node->locked))
		return 0;
	l = spin_lock_of_key(hdr, key);
	if (READ_ONCE(l->val) != tail)	/* spare the line */
		return 0;
	if (!__atomic_compare_exchange_n(&l->val, &tail, 0, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return 0;
	__atomic_store_n(&node->lock, 0, __ATOMIC_RELEASE);
	return 1;
}

/* Claim a free node of this CPU for the lock `key`; its index, or -1 when
 * all are in use. Handlers run only inside spin_wait(), never between the
 * test and the claim. The acquire pairs with a CLH successor's freeing. */
static inline int mcs_node_get(struct mcs_node *nodes, uint64_t key)
{
	int i;

	for (i = 0; i < MCS_NODES; i++)
		if (!__atomic_load_n(&nodes[i].lock, __ATOMIC_ACQUIRE)) {
			WRITE_ONCE(nodes[i].lock, key);
			return i;
		}
	return -1;
}

/* Whether `node` is the one this CPU holds lock `key` with. A held CLH
 * node has `locked` set: a released one of the same lock may still wait
 * for its successor to free it. */
static __always_inline int mcs_node_holds(const struct mcs_node *node, uint64_t key,
					  const int clh)
{
	return __atomic_load_n(&node->lock, __ATOMIC_RELAXED) == key &&
	       (!clh || READ_ONCE(node->locked));
}

/* The node this CPU holds lock `key` with, searched for (an unlock of
 * another lock than the last one taken); -1 if none (an unlock of a lock
 * this CPU does not hold, which then does nothing). */
static __attribute__((__noinline__)) int mcs_node_find(struct mcs_node *nodes, uint64_t key,
						   const int clh)
{
	int i;

	for (i = 0; i < MCS_NODES; i++)
		if (mcs_node_holds(&nodes[i], key, clh))
			return i;
	return -1;
}

/* The node this CPU holds lock `key` with: the one its last acquire
 * queued, as the kernel's caller passes it, else searched for. */
static __always_inline int mcs_node_held(struct cpu_ctx *c, struct mcs_node *nodes, uint64_t key,
					 const int clh)
{
	int idx = c->mcs_node_held;

	if (likely(mcs_node_holds(&nodes[idx], key, clh)))
		return idx;
	return mcs_node_find(nodes, key, clh);
}

/* No free node: take back a released CLH node of this CPU's, else wait
 * for a successor to free one (or, MCS nested past MCS_NODES, the stop). */
static __attribute__((__noinline__)) int mcs_node_wait(struct cpu_ctx *c, struct mcs_node *nodes,
						   uint64_t key)
{
	int idx, i;

	while ((idx = mcs_node_get(nodes, key)) < 0) {
		for (i = 0; i < MCS_NODES; i++)
			if (clh_node_reclaim(c->hdr, &nodes[i], c->cpu, i))
				break;
		if (i == MCS_NODES && spin_wait(c))
			return -1;
	}
	return idx;
}

/* spin_lock_init() of lock `key`: a node any CPU still has marked for it
 * (an aborted wait's, a CLH holder's whose successor gave up, a released
 * CLH node left in it) is given back, so that the new lock's unlock cannot
 * find a stale one. */
static inline void mcs_nodes_release(struct smp_header *hdr, uint64_t key)
{
	uint32_t cpu;
	int i;

	for (cpu = 0; cpu < hdr->nr_cpus; cpu++) {
		struct qnodes *q = (struct qnodes *)per_cpu_ptr(hdr, REGION_QNODES, (int)cpu);

		for (i = 0; i < MCS_NODES; i++) {
			uint64_t k = key;	/* not a node its CPU took back meanwhile */

			__atomic_compare_exchange_n(&q->mcs[i].lock, &k, 0, 0, __ATOMIC_ACQ_REL,
						    __ATOMIC_RELAXED);
		}
	}
}

/* A run's start (machine.py), no worker running: every released CLH node
 * is taken out of its lock (which is then 0, free), so that no lock's tail
 * names a node the reset below frees; then every node is free. */
static inline void mcs_nodes_reset(struct smp_header *hdr)
{
	uint32_t cpu;
	int i;

	for (cpu = 0; cpu < hdr->nr_cpus; cpu++) {
		struct qnodes *q = (struct qnodes *)per_cpu_ptr(hdr, REGION_QNODES, (int)cpu);

		for (i = 0; i < MCS_NODES; i++) {
			clh_node_reclaim(hdr, &q->mcs[i], (int)cpu, i);
			memset(&q->mcs[i], 0, sizeof(q->mcs[i]));
		}
	}
}

/* ---------------------------------------------------------------- mcs */

static __attribute__((__noinline__)) int mcs_spin_lock_contended(struct cpu_ctx *c,
							     struct mcs_node *node,
							     uint32_t tail, uint32_t prev)
{
	__atomic_store_n(&mcs_decode(c, prev)->next, tail, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&node->locked, __ATOMIC_ACQUIRE))	/* our own node */
		if (spin_wait(c)) {
			__atomic_store_n(&node->lock, 0, __ATOMIC_RELEASE);
			return -1;
		}
	return 0;
}

/* Somebody queued behind us but has not linked in yet: wait for it (the
 * kernel's loop in mcs_spin_unlock); 0 when the run was stopped first. */
static __attribute__((__noinline__)) uint32_t mcs_wait_next(struct cpu_ctx *c, struct mcs_node *node)
{
	uint32_t next;

	while (!(next = __atomic_load_n(&node->next, __ATOMIC_ACQUIRE)))
		if (spin_wait(c))
			break;
	return next;
}

static inline void mcs_spin_unlock(struct cpu_ctx *c, spinlock_t *l)
{
	struct mcs_node *nodes = mcs_nodes(c);
	int idx = mcs_node_held(c, nodes, spin_lock_key(c->hdr, l), 0);
	uint32_t tail, next;

	if (unlikely(idx < 0))
		return;
	tail = mcs_encode(c->cpu, idx);
	next = __atomic_load_n(&nodes[idx].next, __ATOMIC_ACQUIRE);
	if (likely(!next)) {
		if (likely(__atomic_compare_exchange_n(&l->val, &tail, 0, 0, __ATOMIC_RELEASE,
						       __ATOMIC_RELAXED)))
			goto out;
		next = mcs_wait_next(c, &nodes[idx]);
	}
	if (likely(next))
		__atomic_store_n(&mcs_decode(c, next)->locked, 1, __ATOMIC_RELEASE);
out:
	WRITE_ONCE(nodes[idx].lock, 0);		/* nobody else looks at it now */
}

/* ---------------------------------------------------------------- clh */

/* Spin on the predecessor's node until it is released, then recycle that
 * node: give it back to its CPU. */
static __attribute__((__noinline__)) int clh_spin_lock_contended(struct cpu_ctx *c,
							     struct mcs_node *pred)
{
	while (__atomic_load_n(&pred->locked, __ATOMIC_ACQUIRE))	/* the predecessor's node */
		if (spin_wait(c))
			/* Given up: this CPU's node stays marked and locked,
			 * never reused, for it is still in the lock's queue:
			 * released, or reused for another lock, it would let
			 * whoever queued behind it in while the lock is held.
			 * spin_lock_init() of the lock, or the next run, frees it. */
			return -1;
	__atomic_store_n(&pred->lock, 0, __ATOMIC_RELEASE);	/* it goes back to its CPU */
	return 0;
}

/* Uncontended, the predecessor (the lock's tail: a released node) is free
 * at once and recycled here; each path has its own recycling store, as one
 * store after a shared test measured 0.3 cycles slower uncontended. */
static inline int clh_spin_lock_pred(struct cpu_ctx *c, uint32_t prev)
{
	struct mcs_node *pred = mcs_decode(c, prev);

	if (likely(!__atomic_load_n(&pred->locked, __ATOMIC_ACQUIRE))) {
		__atomic_store_n(&pred->lock, 0, __ATOMIC_RELEASE);	/* recycled */
		return 0;
	}
	return clh_spin_lock_contended(c, pred);
}

/* The textbook's release: one store. The node stays the lock's tail (or
 * its successor's predecessor), marked, until recycled. */
static inline void clh_spin_unlock(struct cpu_ctx *c, spinlock_t *l)
{
	struct mcs_node *nodes = mcs_nodes(c);
	int idx = mcs_node_held(c, nodes, spin_lock_key(c->hdr, l), 1);

	if (likely(idx >= 0))
		__atomic_store_n(&nodes[idx].locked, 0, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------- the acquire */

/* Both queue the same way: claim a node, ready it (mcs: not yet handed
 * the lock; clh: held until released) and swap it in as the tail (the
 * kernel's xchg_tail; a full barrier on x86). The lock was free if the
 * old tail is 0; else mcs links in behind it and spins on its own node,
 * clh spins on it (a released node: free at once). The CPU keeps the node
 * for the unlock. */
static __always_inline int queue_spin_lock(struct cpu_ctx *c, spinlock_t *l, const int clh)
{
	struct mcs_node *nodes = mcs_nodes(c);
	uint64_t key = spin_lock_key(c->hdr, l);
	int idx = mcs_node_get(nodes, key);
	uint32_t tail, prev;

	if (unlikely(idx < 0) && (idx = mcs_node_wait(c, nodes, key)) < 0)
		return -1;	/* stopped: nothing queued */
	tail = mcs_encode(c->cpu, idx);
	WRITE_ONCE(nodes[idx].locked, (uint32_t)clh);
	WRITE_ONCE(nodes[idx].next, clh ? CLH_NODE : 0);
	c->mcs_node_held = idx;
	prev = __atomic_exchange_n(&l->val, tail, __ATOMIC_SEQ_CST);
	if (!prev)
		return 0;
	if (clh)
		return clh_spin_lock_pred(c, prev);
	return mcs_spin_lock_contended(c, &nodes[idx], tail, prev);
}

static inline int mcs_spin_lock(struct cpu_ctx *c, spinlock_t *l)
{
	return queue_spin_lock(c, l, 0);
}

static inline int clh_spin_lock(struct cpu_ctx *c, spinlock_t *l)
{
	return queue_spin_lock(c, l, 1);
}

#endif
