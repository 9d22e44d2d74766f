/* fake_nic.h - the defer experiment's fake NIC.
 *
 * A NAPI instance on each RX CPU whose poll "receives" packets: it
 * allocates skbs (napi_alloc_skb, as a driver's RX poll does) and hands
 * them to the consumer CPUs (the socket owners) through one
 * single-producer, single-consumer ring per (RX CPU, consumer) pair. A full
 * ring ends the poll early: backpressure, not drops. It plays the part a
 * real NIC and RPS would, with nothing to wait for: the defer free list
 * (skb_defer.h) is what the experiment measures.
 */
#ifndef SMPNET_FAKE_NIC_H
#define SMPNET_FAKE_NIC_H

#include "dev.h"

#define SKB_RING_SIZE		256	/* a power of two */
#define SKB_PAYLOAD		1500
#define NAPI_FAKE_NIC		(1U << NAPI_ID_FAKE_NIC)

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

/* fake_nic_poll(): the NAPI poll. Receive up to `weight` packets, each
 * into the next consumer's ring that has room; fewer than `weight`
 * completes the poll (napi_complete_done). */
static int fake_nic_poll(struct cpu_ctx *c, struct net_ctx *n, int weight)
{
	int work = 0, tries;

	if (unlikely(!n->rings)) {	/* attached to no rings: nothing to receive into */
		softnet(c, c->cpu)->poll_list &= ~NAPI_FAKE_NIC;
		return 0;
	}
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
	if (work < weight)
		softnet(c, c->cpu)->poll_list &= ~NAPI_FAKE_NIC;
	return work;
}

/* The device's IRQ: packets have arrived, poll it in the next NET_RX. */
static inline void fake_nic_irq(struct cpu_ctx *c)
{
	napi_schedule(c, NAPI_FAKE_NIC);
}

static inline void fake_nic_init(void)
{
	netif_napi_add(NAPI_ID_FAKE_NIC, fake_nic_poll);
}

#endif
