/* 5337824f4dc4 "net: annotate accesses to queue->trans_start" (Linux 5.17)
 * added txq_trans_cond_update() "to avoid dirtying a cache line": a
 * driver stamping its queue's trans_start (the TX watchdog's "last sent")
 * on every transmit writes jiffies only when it changed. Where it counts:
 * CPUs that each transmit on a ring of their own (its producer lock
 * theirs alone) and share the netdev queue the stamp is on, as drivers
 * whose XDP rings share the stack's queues ("Avoid transmit queue timeout
 * since we share it with the slow path"): every transmit first reads the
 * queue's state, which lies on the stamp's line. Where every CPU also
 * takes one ring's lock, its hand-overs cost hundreds of cycles and hide
 * the stamp's.
 *
 *   smpnet-bench ab examples/txq_trans_start.c
 *
 * Each check holds the rings to the ops and the stamp to the run's jiffies. */
#include <smpnet.h>

#define RING_SIZE	256

/* include/linux/ptr_ring.h's producer side, its fields as it lays them */
struct ptr_ring {
	int			producer ____cacheline_aligned_in_smp;
	spinlock_t		producer_lock;
	unsigned long		produced;
	void			*queue[RING_SIZE];
};

/* the fields of include/linux/netdevice.h's struct netdev_queue the two
 * use: its write-mostly line, trans_start beside the state every transmit
 * reads */
struct netdev_queue {
	spinlock_t		_xmit_lock ____cacheline_aligned_in_smp;
	int			xmit_lock_owner;
	unsigned long		trans_start;
	unsigned long		state;
};

/* include/linux/netdevice.h: __QUEUE_STATE_DRV_XOFF, _STACK_XOFF, _FROZEN */
#define QUEUE_STATE_ANY_XOFF_OR_FROZEN	((1UL << 0) | (1UL << 1) | (1UL << 2))

static inline bool netif_xmit_frozen_or_stopped(const struct netdev_queue *txq)
{
	return READ_ONCE(txq->state) & QUEUE_STATE_ANY_XOFF_OR_FROZEN;
}

/* the queue every CPU stamps, each CPU's ring */
SMPNET_STATE(struct netdev_queue, struct ptr_ring);

/* ptr_ring_produce(): the ring's slot taken under its producer lock (the
 * consumer, which frees the slots, is left out: each op overwrites one) */
static inline int ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	spin_lock(&r->producer_lock);
	WRITE_ONCE(r->queue[r->producer++], ptr);
	if (unlikely(r->producer >= RING_SIZE))
		r->producer = 0;
	r->produced++;
	spin_unlock(&r->producer_lock);
	return 0;
}

/* before: the stamp written every time */
static inline void txq_trans_update(struct netdev_queue *txq)
{
	WRITE_ONCE(txq->trans_start, jiffies);
}

/* after: include/linux/netdevice.h's */
static inline void txq_trans_cond_update(struct netdev_queue *txq)
{
	unsigned long now = jiffies;

	if (READ_ONCE(txq->trans_start) != now)
		WRITE_ONCE(txq->trans_start, now);
}

static void rings_init(void)
{
	int cpu;

	for (cpu = 0; cpu < nr_cpus; cpu++)
		spin_lock_init(&per_cpu(cpu)->producer_lock);
}

static void check(struct netdev_queue *txq, unsigned long ops)
{
	unsigned long produced = 0;
	int cpu;

	for (cpu = 0; cpu < nr_cpus; cpu++)
		produced += per_cpu(cpu)->produced;
	expect(produced == ops, "a ring lost a transmit");
	expect(time_before_eq(READ_ONCE(txq->trans_start), jiffies), "a stamp after now");
	expect(time_after(READ_ONCE(txq->trans_start), INITIAL_JIFFIES), "no stamp");
}

SMPNET_INIT(always) { rings_init(); }
SMPNET_VARIANT(always)
{
	if (netif_xmit_frozen_or_stopped(shared))
		return;
	ptr_ring_produce(this_cpu, shared);
	txq_trans_update(shared);
}
SMPNET_CHECK(always) { check(shared, nr_ops); }

SMPNET_INIT(cond) { rings_init(); }
SMPNET_VARIANT(cond)
{
	if (netif_xmit_frozen_or_stopped(shared))
		return;
	ptr_ring_produce(this_cpu, shared);
	txq_trans_cond_update(shared);
}
SMPNET_CHECK(cond) { check(shared, nr_ops); }
