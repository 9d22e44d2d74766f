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
#define NETDEV_MAX_BACKLOG	1000
#define NAPI_STATE_SCHED	0x1
#define NAPI_DEFER_DEV		0x1	/* poll_list bits: the defer experiment's device */
#define NAPI_BACKLOG		0x2	/* ... and the backlog */

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
	softnet(c, c->cpu)->poll_list |= NAPI_DEFER_DEV;
	raise_softirq(c, NET_RX_SOFTIRQ);
}

/* ---------------------------------------------------------------- the backlog
 *
 * netif_rx() and process_backlog() as in 2008 (seed 002's baseline): the
 * packet goes on this CPU's input_pkt_queue with IRQs off, holding a
 * reference on the device (dev_hold: an atomic on the one shared refcnt),
 * and the backlog NAPI is scheduled with a test-and-set of NAPI_STATE_SCHED
 * when the queue was empty; net_rx_action() later dequeues, delivers with
 * netif_receive_skb() and drops the reference (dev_put). A packet is queued
 * while qlen <= netdev_max_backlog, as the kernel's test reads.
 */

/* The loopback device: its refcnt is one cache line every CPU writes
 * (netif_rx's dev_hold/dev_put); last_rx, on another, is written by every
 * loopback_xmit in every mode, as 2.6.24's `dev->last_rx = jiffies` was. */
struct net_device {
	uint32_t refcnt;
	uint32_t state;
	uint8_t  _pad0[SMP_CACHE_BYTES - 8];
	uint64_t last_rx;
	uint8_t  _pad1[SMP_CACHE_BYTES - 8];
};

/* Per-CPU counters of the loopback experiment (loopback.h fills most). */
struct lo_stats {
	uint64_t xmits;			/* packets through loopback_xmit */
	uint64_t requests;
	uint64_t replies;
	uint64_t acks;
	uint64_t delivered;		/* packets a socket received */
	uint64_t transactions;		/* request and reply round trips */
	uint64_t refcnt_atomics;	/* dev_hold + dev_put */
	uint64_t softirq_raises;	/* backlog NAPI scheduled: NET_RX raised */
	uint64_t direct;		/* netif_receive_skb() straight from loopback_xmit */
	uint64_t queued;		/* through the backlog */
	uint64_t purged;		/* left in the backlog at the end, freed */
	uint64_t stack_drops;		/* frames refused by the emulated stack */
	uint32_t max_depth;		/* lstats.depth high-water mark */
	uint32_t max_rx_nest;		/* netif_receive_skb() nested in itself */
	uint32_t stack_max;		/* bytes of emulated stack, high-water mark */
	uint32_t overflow;		/* the emulated stack overflowed (an oops) */
	uint32_t overflow_depth;	/* loopback_xmit frames on the stack then */
	uint32_t server_pending;	/* requests waiting for the server application */
	uint32_t client_pending;	/* replies waiting for the client application */
	uint32_t _pad;
};

/* The emulated kernel stack: each frame charges its bytes against
 * THREAD_SIZE. Going past it is an overflow, recorded like an oops; the
 * frame is refused instead of entered, so the worker lives to report it. */
#define STACK_BASE		2048	/* entry, syscall and socket layers below loopback_xmit */
#define XMIT_FRAME		384	/* ip_queue_xmit, dev_queue_xmit, loopback_xmit */
#define RCV_FRAME		640	/* netif_receive_skb, ip_rcv, tcp_v4_rcv, tcp_send_ack */

static inline int stack_enter(struct net_ctx *n, uint32_t frame)
{
	if (n->stack_used + frame > n->thread_size) {
		if (!n->lo->overflow) {
			n->lo->overflow = 1;
			n->lo->overflow_depth = n->lo->max_depth;
		}
		n->lo->stack_drops++;
		return -1;
	}
	n->stack_used += frame;
	if (n->stack_used > n->lo->stack_max)
		n->lo->stack_max = n->stack_used;
	return 0;
}

static inline void stack_leave(struct net_ctx *n, uint32_t frame)
{
	n->stack_used -= frame;
}

static inline void dev_hold(struct net_ctx *n)
{
	atomic_inc(&n->dev->refcnt);
	n->lo->refcnt_atomics++;
}

static inline void dev_put(struct net_ctx *n)
{
	atomic_dec_return(&n->dev->refcnt);
	n->lo->refcnt_atomics++;
}

static void proto_rcv(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb);

/* netif_receive_skb(): deliver to the protocol, on this stack. */
static void netif_receive_skb(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	if (stack_enter(n, RCV_FRAME)) {
		kfree_skb_local(c, n, skb);
		return;
	}
	if (++n->rx_nest > n->lo->max_rx_nest)
		n->lo->max_rx_nest = n->rx_nest;
	proto_rcv(c, n, skb);
	n->rx_nest--;
	stack_leave(n, RCV_FRAME);
}

static inline void backlog_enqueue(struct net_ctx *n, struct softnet_data *sd, struct sk_buff *skb)
{
	uint32_t h = skb_handle(n, skb);

	skb->next = 0;
	if (sd->input_tail)
		skb_of(n, sd->input_tail)->next = h;
	else
		sd->input_head = h;
	sd->input_tail = h;
	sd->input_qlen++;
}

static inline struct sk_buff *backlog_dequeue(struct net_ctx *n, struct softnet_data *sd)
{
	struct sk_buff *skb;

	if (!sd->input_head)
		return NULL;
	skb = skb_of(n, sd->input_head);
	sd->input_head = skb->next;
	if (!sd->input_head)
		sd->input_tail = 0;
	sd->input_qlen--;
	return skb;
}

/* netif_rx(): queue for later, on this CPU. 0, or -1 when dropped. */
static int netif_rx(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	struct softnet_data *sd = softnet(c, c->cpu);
	unsigned long flags = local_irq_save(c);

	if (sd->input_qlen <= NETDEV_MAX_BACKLOG) {
		if (!sd->input_qlen &&		/* napi_schedule(&queue->backlog) */
		    !(__atomic_fetch_or(&sd->backlog_state, NAPI_STATE_SCHED,
					__ATOMIC_SEQ_CST) & NAPI_STATE_SCHED)) {
			sd->poll_list |= NAPI_BACKLOG;
			raise_softirq(c, NET_RX_SOFTIRQ);
			n->lo->softirq_raises++;
		}
		dev_hold(n);
		backlog_enqueue(n, sd, skb);
		n->lo->queued++;
		local_irq_restore(c, flags);
		return 0;
	}
	sd->dropped++;
	local_irq_restore(c, flags);
	kfree_skb_local(c, n, skb);
	return -1;
}

/* process_backlog(): the backlog's NAPI poll. */
static int process_backlog(struct cpu_ctx *c, struct net_ctx *n, int quota)
{
	struct softnet_data *sd = softnet(c, c->cpu);
	int work = 0;

	while (work < quota) {
		struct sk_buff *skb;

		local_irq_disable(c);
		skb = backlog_dequeue(n, sd);
		if (!skb) {			/* __napi_complete() */
			sd->poll_list &= ~NAPI_BACKLOG;
			__atomic_fetch_and(&sd->backlog_state, ~NAPI_STATE_SCHED, __ATOMIC_SEQ_CST);
			local_irq_enable(c);
			break;
		}
		local_irq_enable(c);
		netif_receive_skb(c, n, skb);
		dev_put(n);
		work++;
	}
	return work;
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
		int work = 0;

		skb_defer_free_flush(c, n);
		if (!sd->poll_list)
			break;
		if (sd->poll_list & NAPI_DEFER_DEV) {
			int w = n->rings ? defer_napi_poll(c, n, DEV_RX_WEIGHT) : 0;

			if (w < DEV_RX_WEIGHT)
				sd->poll_list &= ~NAPI_DEFER_DEV;	/* napi_complete_done() */
			work += w;
		}
		if ((sd->poll_list & NAPI_BACKLOG) && n->lo)
			work += process_backlog(c, n, DEV_RX_WEIGHT);
		sd->processed += (uint32_t)work;
		budget -= work;
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
