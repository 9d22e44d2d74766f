/* dev.h - net_rx_action(), NAPI, and the defer experiment's device.
 *
 * net_rx_action() is net/core/dev.c's: a budget of netdev_budget (300)
 * packets and netdev_budget_usecs (2 ms), skb_defer_free_flush() first and
 * after every poll, NAPI polls of dev_rx_weight (64), time_squeeze counted
 * and NET_RX re-raised when the budget runs out with work left.
 *
 * The device of the defer experiment is a NAPI instance on each RX CPU
 * whose poll "receives" packets: it allocates skbs and hands them to the
 * consumer CPUs (the socket owners) through one single-producer,
 * single-consumer ring per (RX CPU, consumer) pair. A full ring ends the
 * poll early: backpressure, not drops.
 */
#ifndef SMPNET_DEV_H
#define SMPNET_DEV_H

#include "skbuff.h"

#define NETDEV_BUDGET		300
#define NETDEV_BUDGET_USECS	2000
#define DEV_RX_WEIGHT		64
#define SKB_RING_SIZE		256	/* a power of two */
#define SKB_PAYLOAD		1500

/* An SPSC ring of (generation << 32 | handle). Each side's index is on its
 * own line, with its cached copy of the other side's. */
struct skb_ring {
	uint32_t head;			/* producer: next slot to fill */
	uint32_t tail_cache;		/* producer's last view of tail */
	uint8_t  _pad0[SMP_CACHE_BYTES - 8];
	uint32_t tail;			/* consumer: next slot to take */
	uint32_t head_cache;		/* consumer's last view of head */
	uint8_t  _pad1[SMP_CACHE_BYTES - 8];
	uint64_t slot[SKB_RING_SIZE];
};

/* Control words of a defer run, shared by all its CPUs. */
struct defer_ctl {
	uint32_t rx_done;		/* RX CPUs that stopped receiving */
	uint32_t consumers_done;	/* consumers that saw the last skb */
	uint8_t  _pad[SMP_CACHE_BYTES - 8];
};

static inline struct skb_ring *ring_of(struct net_ctx *n, int rx, int consumer)
{
	return (struct skb_ring *)((char *)n->rings +
				   (size_t)(rx * n->n_consumers + consumer) * n->ring_stride);
}

static inline int ring_push(struct skb_ring *r, uint64_t v)
{
	if (r->head - r->tail_cache == SKB_RING_SIZE) {
		r->tail_cache = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (r->head - r->tail_cache == SKB_RING_SIZE)
			return 0;
	}
	r->slot[r->head & (SKB_RING_SIZE - 1)] = v;
	__atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
	return 1;
}

static inline int ring_pop(struct skb_ring *r, uint64_t *v)
{
	if (r->tail == r->head_cache) {
		r->head_cache = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		if (r->tail == r->head_cache)
			return 0;
	}
	*v = r->slot[r->tail & (SKB_RING_SIZE - 1)];
	__atomic_store_n(&r->tail, r->tail + 1, __ATOMIC_RELEASE);
	return 1;
}

/* The RX device's NAPI poll: receive up to `weight` packets. */
static inline int defer_napi_poll(struct cpu_ctx *c, struct net_ctx *n, int weight)
{
	int work = 0, tries;

	while (work < weight && n->to_send) {
		struct skb_ring *r = NULL;
		struct sk_buff *skb;

		for (tries = 0; tries < n->n_consumers; tries++) {
			struct skb_ring *cand = ring_of(n, c->cpu, (int)(n->rr++ % (uint32_t)n->n_consumers));

			if (cand->head - cand->tail_cache < SKB_RING_SIZE ||
			    cand->head - __atomic_load_n(&cand->tail, __ATOMIC_ACQUIRE) < SKB_RING_SIZE) {
				r = cand;
				break;
			}
		}
		if (!r) {
			n->stats->ring_full++;
			break;
		}
		skb = napi_alloc_skb(c, n, SKB_PAYLOAD);
		if (!skb)
			break;
		ring_push(r, ((uint64_t)skb->gen << 32) | skb_handle(n, skb));
		n->stats->rx_packets++;
		n->to_send--;
		work++;
	}
	return work;
}

static inline void napi_schedule(struct cpu_ctx *c)
{
	softnet(c, c->cpu)->poll_list |= 1;
	raise_softirq(c, NET_RX_SOFTIRQ);
}

/* net_rx_action(): the NET_RX softirq. */
static void net_rx_action(struct cpu_ctx *c)
{
	struct net_ctx *n = c->net;
	struct softnet_data *sd = softnet(c, c->cpu);
	uint64_t time_limit;
	int budget = NETDEV_BUDGET;

	if (!n)
		return;
	time_limit = tsc_read_unordered() + n->budget_tsc;
	for (;;) {
		int work;

		skb_defer_free_flush(c, n);
		if (!sd->poll_list)
			break;
		work = n->rings ? defer_napi_poll(c, n, DEV_RX_WEIGHT) : 0;
		sd->processed += (uint32_t)work;
		budget -= work;
		if (work < DEV_RX_WEIGHT)
			sd->poll_list = 0;	/* napi_complete_done() */
		if (budget <= 0 || tsc_read_unordered() > time_limit) {
			sd->time_squeeze++;
			break;
		}
	}
	if (sd->poll_list)		/* work left: run again */
		raise_softirq(c, NET_RX_SOFTIRQ);
}

/* The defer kick's IPI handler (trigger_rx_softirq()). */
static void trigger_rx_softirq(struct cpu_ctx *c, unsigned int vector)
{
	struct softnet_data *sd = softnet(c, c->cpu);

	(void)vector;
	raise_softirq(c, NET_RX_SOFTIRQ);
	__atomic_store_n(&sd->defer_ipi_scheduled, 0, __ATOMIC_RELEASE);
}

static inline void net_dev_init(void)
{
	irq_handlers[IPI_NET_RX] = trigger_rx_softirq;
	softirq_vec[NET_RX_SOFTIRQ] = net_rx_action;
}

#endif
