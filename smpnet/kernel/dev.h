/* dev.h - net_rx_action(), NAPI, the backlog and the receive path, as
 * net/core/dev.c has them.
 *
 * net_rx_action() is net/core/dev.c's: a budget of netdev_budget (300)
 * packets and netdev_budget_usecs (2 ms, in jiffies at NET_HZ), each
 * scheduled NAPI instance polled once per pass with dev_rx_weight (64),
 * skb_defer_free_flush() before every poll, a repoll list, and
 * time_squeeze counted only when the budget or the time runs out.
 *
 * This file knows no device and no protocol. Each NAPI instance has a bit
 * in softnet_data.poll_list and a poll function registered at init in
 * napi_poll_vec (netif_napi_add's role); netif_receive_skb() hands packets
 * to the handler registered in ptype_base (dev_add_pack's role). Both are
 * tables of function pointers, as the kernel's napi->poll and ptype lists
 * and softirq_vec are, so the headers of devices (fake_nic.h) and
 * protocols (loopback.h) include this one and this one includes neither.
 */
#ifndef SMPNET_DEV_H
#define SMPNET_DEV_H

#include "skb_defer.h"

#define NETDEV_BUDGET		300
#define NETDEV_BUDGET_USECS	2000
#define NET_HZ			250	/* the tick net_rx_action()'s time limit counts in */
#define DEV_RX_WEIGHT		64
#define NETDEV_MAX_BACKLOG	1000
#define NAPI_STATE_SCHED	0x1

/* The NAPI instances, by their bit in poll_list: fixed, so that they are
 * polled in this order whatever order they were registered in. */
enum napi_id {
	NAPI_ID_FAKE_NIC = 0,	/* fake_nic.h: the defer experiment's device */
	NAPI_ID_BACKLOG = 1,	/* the backlog, this file's */
	NR_NAPI_IDS = 2,
};
#define NAPI_BACKLOG		(1U << NAPI_ID_BACKLOG)

/* A NAPI poll: receive up to `weight` packets, return how many; one that
 * returns fewer has completed (cleared its poll_list bit, napi_complete_done). */
typedef int (*napi_poll_t)(struct cpu_ctx *c, struct net_ctx *n, int weight);
static napi_poll_t napi_poll_vec[NR_NAPI_IDS];

static inline void netif_napi_add(enum napi_id id, napi_poll_t poll)
{
	napi_poll_vec[id] = poll;
}

/* napi_schedule(): poll instance `napi` (its poll_list bit) in the next NET_RX. */
static inline void napi_schedule(struct cpu_ctx *c, uint32_t napi)
{
	softnet(c, c->cpu)->poll_list |= napi;
	raise_softirq(c, NET_RX_SOFTIRQ);
}

/* The protocols netif_receive_skb() delivers to, registered at init
 * (dev_add_pack). Every packet on the emulated wire is IPv4 (the loopback
 * experiment's tbench-like TCP), so the table has one row; a packet whose
 * protocol has no handler is dropped, as the kernel's are, and counted in
 * softnet_data.dropped. */
enum { PTYPE_IP = 0, NR_PTYPES = 1 };
typedef void (*packet_rcv_t)(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb);
static packet_rcv_t ptype_base[NR_PTYPES];

static inline void dev_add_pack(int type, packet_rcv_t func)
{
	ptype_base[type] = func;
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

/* The frames of the emulated kernel stack, by kind: each kind charges the
 * bytes of the kernel functions it stands for, and is named by the one of
 * them that charges it here (stack_enter()'s caller). 0 is no frame. */
#define STACK_FRAME_TABLE(X)							\
	X(STACK_FRAME_NONE,	"none")						\
	X(STACK_FRAME_XMIT,	"loopback_xmit")	/* ip_queue_xmit, dev_queue_xmit, loopback_xmit */ \
	X(STACK_FRAME_RCV,	"netif_receive_skb")	/* netif_receive_skb, ip_rcv, tcp_v4_rcv, tcp_send_ack */

SMP_ENUM(stack_frame, STACK_FRAME_TABLE, NR_STACK_FRAMES);

#define STACK_BASE		2048	/* entry, syscall and socket layers below loopback_xmit */
#define XMIT_FRAME		384	/* ip_queue_xmit, dev_queue_xmit, loopback_xmit */
#define RCV_FRAME		640	/* netif_receive_skb, ip_rcv, tcp_v4_rcv, tcp_send_ack */
#define THREAD_SIZE_MAX		65536	/* the largest emulated stack loopback_setup() takes */
#define OOPS_TRACE		64	/* frames an oops keeps, innermost first */

static const uint32_t stack_frame_bytes[NR_STACK_FRAMES] = {
	[STACK_FRAME_XMIT] = XMIT_FRAME,
	[STACK_FRAME_RCV] = RCV_FRAME,
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
	uint64_t sk_backlogged;		/* segments for a user-owned socket: to its backlog */
	uint64_t recursion_drops;	/* dropped by dev_xmit_recursion() */
	uint64_t stack_work_cycles;	/* spent in the calibrated stack work */
	uint32_t max_depth;		/* lstats.depth high-water mark */
	uint32_t max_rx_nest;		/* netif_receive_skb() nested in itself */
	uint32_t stack_max;		/* bytes of emulated stack, high-water mark */
	uint32_t overflow;		/* the emulated stack overflowed (an oops) */
	uint32_t overflow_depth;	/* loopback_xmit frames on the stack then */
	uint32_t server_pending;	/* requests waiting for the server application */
	uint32_t client_pending;	/* replies waiting for the client application */
	/* The oops: what was on the emulated stack at the first overflow, so
	 * that the report prints the call chain the model recorded. */
	uint32_t oops_frames;		/* frames on the stack then (all, not only those kept) */
	uint8_t  oops_refused;		/* the frame refused, enum stack_frame; 0: no oops */
	uint8_t  _pad[63];
	uint8_t  oops_trace[OOPS_TRACE];	/* their kinds, innermost first; the top
					 * OOPS_TRACE when there were more */
};

/* The emulated kernel stack: each frame charges its bytes against
 * THREAD_SIZE, and its kind goes on net_ctx.stack_frames (one store and an
 * index increment; the array holds as many frames of the smallest kind as
 * THREAD_SIZE_MAX does). Going past THREAD_SIZE is an overflow, recorded
 * like an oops, with the frames on the stack then; the frame is refused
 * instead of entered, so the worker lives to report it. */
_Static_assert(XMIT_FRAME <= RCV_FRAME, "stack_frames[] is sized by XMIT_FRAME, the smallest");
_Static_assert(sizeof(((struct net_ctx *)0)->stack_frames) >= (THREAD_SIZE_MAX - STACK_BASE) / XMIT_FRAME,
	       "stack_frames[] must hold a full THREAD_SIZE_MAX of the smallest frames");

static void __attribute__((cold, __noinline__)) stack_oops(struct net_ctx *n, enum stack_frame refused)
{
	uint32_t i, kept = n->stack_depth < OOPS_TRACE ? n->stack_depth : OOPS_TRACE;

	n->lo->overflow = 1;
	n->lo->overflow_depth = n->lo->max_depth;
	n->lo->oops_frames = n->stack_depth;
	n->lo->oops_refused = (uint8_t)refused;
	for (i = 0; i < kept; i++)
		n->lo->oops_trace[i] = n->stack_frames[n->stack_depth - 1 - i];
}

static inline int stack_enter(struct net_ctx *n, enum stack_frame kind)
{
	uint32_t frame = stack_frame_bytes[kind];

	if (n->stack_used + frame > n->thread_size) {
		if (!n->lo->overflow)
			stack_oops(n, kind);
		n->lo->stack_drops++;
		return -1;
	}
	n->stack_used += frame;
	n->stack_frames[n->stack_depth++] = (uint8_t)kind;
	if (n->stack_used > n->lo->stack_max)
		n->lo->stack_max = n->stack_used;
	return 0;
}

static inline void stack_leave(struct net_ctx *n, enum stack_frame kind)
{
	n->stack_used -= stack_frame_bytes[kind];
	n->stack_depth--;
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

/* netif_receive_skb(): deliver to the protocol, on this stack. */
static void netif_receive_skb(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	packet_rcv_t deliver = ptype_base[PTYPE_IP];

	if (unlikely(!deliver)) {
		softnet(c, c->cpu)->dropped++;
		kfree_skb_local(c, n, skb);
		return;
	}
	if (stack_enter(n, STACK_FRAME_RCV)) {
		kfree_skb_local(c, n, skb);
		return;
	}
	if (++n->rx_nest > n->lo->max_rx_nest)
		n->lo->max_rx_nest = n->rx_nest;
	deliver(c, n, skb);
	n->rx_nest--;
	stack_leave(n, STACK_FRAME_RCV);
}

static inline void backlog_enqueue(struct net_ctx *n, struct softnet_data *sd, struct sk_buff *skb)
{
	skb_list_add_tail(n, &sd->input_head, &sd->input_tail, skb);
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
			/* 2.6.24's __napi_schedule() saved and restored the
			 * flags again, inside netif_rx()'s own save */
			unsigned long nested = local_irq_save(c);

			sd->poll_list |= NAPI_BACKLOG;
			raise_softirq(c, NET_RX_SOFTIRQ);
			n->lo->softirq_raises++;
			local_irq_restore(c, nested);
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

	if (!n->lo)		/* no loopback on this CPU: nothing can be queued */
		return 0;
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

/* The tick: the timer interrupt's jiffies++ (kernel/time/timekeeping.c's
 * do_timer()), which user space cannot take. This CPU's driver loop, where
 * it reads the TSC anyway, calls this with that reading, and jiffies
 * becomes the TSC's count of NET_HZ ticks when one has passed: a divide
 * once a tick, not on every read. So jiffies stands still inside one
 * net_rx_action() pass, whose netdev_budget_usecs limit then never trips:
 * a pass ends by its packet budget (300) alone, where the kernel's tick
 * would also cut one that ran past 2 ms. */
static inline void net_tick(struct net_ctx *n, uint64_t now)
{
	if (unlikely(now >= n->next_tick)) {
		n->jiffies = now / n->tick_cycles;
		n->next_tick = (n->jiffies + 1) * n->tick_cycles;
	}
}

/* jiffies, as net_rx_action() reads them: a variable, as the kernel's
 * (a load; the model read the TSC and divided until 2026-12-04). */
static inline uint64_t net_jiffies(const struct net_ctx *n)
{
	return READ_ONCE(n->jiffies);
}

/* net_rx_action(): the NET_RX softirq, as net/core/dev.c runs it since
 * 4.x. It takes the poll list (list_splice_init, IRQs off) and polls each
 * instance on it once, in order, flushing the defer list before each
 * poll; an instance that used its whole weight goes on the repoll list.
 * When the list is empty it starts over if more was scheduled meanwhile;
 * a time squeeze is counted only when the budget (netdev_budget) or the
 * time (netdev_budget_usecs, in jiffies) runs out. What is left, and the
 * repoll list, go back on the poll list, and NET_RX is raised again. */
static void net_rx_action(struct cpu_ctx *c)
{
	struct net_ctx *n = c->net;
	struct softnet_data *sd = softnet(c, c->cpu);
	uint64_t time_limit;
	int budget = n ? n->netdev_budget : 0;
	uint32_t list, repoll = 0;

	if (!n)
		return;
	time_limit = net_jiffies(n) + n->budget_jiffies;
start:
	local_irq_disable(c);
	list = sd->poll_list;		/* list_splice_init(&sd->poll_list, &list) */
	sd->poll_list = 0;
	local_irq_enable(c);
	for (;;) {
		int id, work;

		skb_defer_free_flush(c, n);
		if (!list) {
			if (!repoll) {
				if (READ_ONCE(sd->poll_list))	/* scheduled while we polled */
					goto start;
				return;
			}
			break;
		}
		id = __builtin_ctz(list);	/* list_first_entry() */
		list &= list - 1;
		if (unlikely(!napi_poll_vec[id]))
			__builtin_trap();	/* scheduled, never added: the kernel would oops too */
		work = napi_poll_vec[id](c, n, DEV_RX_WEIGHT);
		if (work == DEV_RX_WEIGHT)	/* napi_poll(): not done, poll it again later */
			repoll |= 1U << id;
		sd->processed += (uint32_t)work;
		budget -= work;
		if (unlikely(budget <= 0 || net_jiffies(n) >= time_limit)) {
			sd->time_squeeze++;
			break;
		}
	}
	local_irq_disable(c);
	sd->poll_list |= list | repoll;
	if (sd->poll_list)
		raise_softirq(c, NET_RX_SOFTIRQ);
	local_irq_enable(c);
}

/* The defer kick's IPI handler (trigger_rx_softirq()). */
static void trigger_rx_softirq(struct cpu_ctx *c, unsigned int vector)
{
	struct softnet_data *sd = softnet(c, c->cpu);

	(void)vector;
	raise_softirq(c, NET_RX_SOFTIRQ);
	/* a CPU without the network model has no defer list to have kicked */
	if (c->net)
		__atomic_store_n(defer_ipi_scheduled_of(c->net, sd), 0, __ATOMIC_RELEASE);
}

/* net_dev_init(): the NET_RX softirq, the defer kick's IPI and the backlog's poll. */
static inline void net_dev_init(void)
{
	irq_handlers[IPI_NET_RX] = trigger_rx_softirq;
	softirq_vec[NET_RX_SOFTIRQ] = net_rx_action;
	netif_napi_add(NAPI_ID_BACKLOG, process_backlog);
}

#endif
