/* skb_defer_free.c - a change that frees skbs, on smpnet's own skb life
 * cycle (smpnet_skbuff.h): where a socket's CPU frees an skb that another
 * CPU allocated.
 *
 *   kfree: the consumer frees it where it is, as before Linux 5.19
 *          (tcp_recvmsg()'s __kfree_skb()): the remote free, its shared
 *          info's and its page's lines pulled over, the head back to the
 *          allocating CPU's slab through a cmpxchg on that CPU's line.
 *   defer: skb_attempt_defer_free() (68822bdf76f1, "net: generalize skb
 *          freeing deferral to per-cpu lists", 5.19): onto the allocating
 *          CPU's defer list, freed there by its next net_rx_action(),
 *          kicked with an IPI at half the list (sysctl skb_defer_max 64).
 *          The list is locked as the newest kernel locks it (llist);
 *          SMPNET_SKB_DEFER(irq) would make it seed 003's.
 *
 * CPU 0 is the RX CPU: each op is one NAPI poll's worth of skbs,
 * napi_alloc_skb() from its cache, handed to the consumers (every other
 * CPU, 64 at most) round robin, with BHs off, then NET_RX, which flushes
 * its defer list (the kernel's net_rx_action() flushes before each poll:
 * the same work, in another order). A consumer takes what it was handed
 * and frees it: the unit of work is an skb freed. Uncontended, one CPU
 * allocates and frees its own skbs, and both variants free them locally
 * at once.
 *
 *   smpnet-bench ab examples/skb_defer_free.c
 */
#include <smpnet.h>
#include <smpnet_skbuff.h>

#define NAPI_POLL_WEIGHT	16	/* skbs an RX op receives */
#define RING_SIZE		256	/* each consumer's queue: sk_receive_queue's role */

SMPNET_ROLES(rx, consumer);
SMPNET_UNIT(skb);

struct skb_ring {			/* one producer, one consumer */
	unsigned int head ____cacheline_aligned_in_smp;	/* the RX CPU's */
	unsigned int tail ____cacheline_aligned_in_smp;	/* the consumer's */
	struct sk_buff *slot[RING_SIZE];
};

struct shared {
	unsigned long consumers;	/* a bit per consumer CPU, once it ran */
	struct skb_ring ring[64];	/* by consumer CPU */
};

struct pcpu {
	int next;			/* the RX CPU's next consumer */
};

SMPNET_STATE(struct shared, struct pcpu);

/* The RX CPU's NAPI poll: skbs allocated here, each queued to a consumer
 * that has room, or none allocated while every queue is full. */
static void rx_poll(struct shared *s, struct pcpu *me)
{
	unsigned long consumers = READ_ONCE(s->consumers);

	if (!consumers)
		return;
	for (int i = 0; i < NAPI_POLL_WEIGHT; i++) {
		struct skb_ring *r;
		struct sk_buff *skb;
		int cpu = me->next;

		do {		/* the next consumer, in CPU order */
			cpu = (cpu + 1) % nr_cpus;
		} while (!(consumers & (1ul << cpu)));
		me->next = cpu;
		r = &s->ring[cpu];
		if (r->head - smp_load_acquire(&r->tail) == RING_SIZE)
			return;
		skb = napi_alloc_skb(NULL, 1500);
		if (!skb)
			return;
		skb->cb[0] = (u8)skb->len;	/* the driver and GRO write the skb */
		r->slot[r->head % RING_SIZE] = skb;
		smp_store_release(&r->head, r->head + 1);
	}
}

/* The poll with BHs off, then NET_RX (raised, run at local_bh_enable()):
 * this CPU's defer list flushed */
static void net_rx(struct shared *s, struct pcpu *me)
{
	local_bh_disable();
	raise_softirq(NET_RX_SOFTIRQ);
	rx_poll(s, me);
	local_bh_enable();
}

/* The consumer: what it was handed, read and freed with `free` (a
 * constant: inlined) */
static __always_inline void consume(struct shared *s, void (*free)(struct sk_buff *skb))
{
	struct skb_ring *r = &s->ring[smp_processor_id()];
	unsigned int tail = r->tail, head = smp_load_acquire(&r->head);

	if (unlikely(!(READ_ONCE(s->consumers) & (1ul << smp_processor_id()))))
		__atomic_fetch_or(&s->consumers, 1ul << smp_processor_id(), __ATOMIC_RELAXED);
	for (; tail != head; tail++) {
		struct sk_buff *skb = r->slot[tail % RING_SIZE];

		BUG_ON(skb->cb[0] != (u8)skb->len);	/* the packet, read */
		free(skb);
		SMPNET_WORK(1);
	}
	smp_store_release(&r->tail, tail);
}

/* a ring and a bit of `consumers` a CPU */
static void cpus_fit(void)
{
	expect(nr_cpus <= 64, "64 CPUs at most: a ring and a bit each");
}
SMPNET_INIT(kfree) { cpus_fit(); }
SMPNET_INIT(defer) { cpus_fit(); }

SMPNET_VARIANT(kfree)
{
	if (role == rx)
		net_rx(shared, this_cpu);
	else
		consume(shared, kfree_skb);
}

SMPNET_VARIANT(defer)
{
	if (role == rx)
		net_rx(shared, this_cpu);
	else
		consume(shared, skb_attempt_defer_free);
}
