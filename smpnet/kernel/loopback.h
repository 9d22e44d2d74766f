/* loopback.h - loopback_xmit() and a TCP-like protocol on top of it.
 *
 * Modes (seed 002):
 *   netif_rx               2008's loopback: count in pcpu_lstats, netif_rx()
 *   direct                 the patch: netif_receive_skb() inline while this
 *                          CPU's lstats.depth is 0, netif_rx() when it is not
 *   direct-unguarded       netif_receive_skb() inline always: the reviewer's case
 *   direct-xmit-recursion  a hypothetical: direct delivery bounded as stacked
 *                          devices' transmits are, by the per-CPU
 *                          softnet_data.xmit.recursion counter, dropped beyond
 *                          XMIT_RECURSION_LIMIT (dev_xmit_recursion(), which
 *                          guards __dev_queue_xmit(), not loopback's receive).
 *                          The kernel's answer was to keep netif_rx: today's
 *                          loopback_xmit() still calls __netif_rx()
 * Protocols (when the receive path transmits an ACK):
 *   tbench     2.6.24's TCP under tbench: delayed ACKs (a pure ACK at once
 *              only when more than one full-sized segment, rcv_mss bytes,
 *              is unACKed, as __tcp_ack_snd_check() tests; otherwise it
 *              rides on the next data segment), messages cut into LO_MSS
 *              segments, and data for a socket its owner holds (lock_sock,
 *              as in sendmsg) goes to the socket's backlog, processed at
 *              release_sock(): a request/response of messages up to one
 *              segment never ACKs from a receive; larger ones do
 *   ack-every  a pure ACK for every data segment, sent from inside the
 *              receive (tcp_send_ack): the recursion stress
 *   no-ack     no ACKs at all
 * With ack_storm the receive path ACKs ACKs too, the bug the reviewer
 * feared: a transmit in every receive.
 *
 * The applications: a client sends a request; the server reads it and
 * replies; the client reads the reply. Each send and each receive does the
 * calibrated stack work (stack_work cycles: a copy of the payload through
 * the socket's buffer, then a TSC-timed spin for the rest), standing for
 * what the model does not execute in detail: TCP state, copies, wake-ups.
 */
#ifndef SMPNET_LOOPBACK_H
#define SMPNET_LOOPBACK_H

#include "dev.h"

/* The modes above: enumerator, and its name as Python offers it. */
#define LO_MODE_TABLE(X)						\
	X(LO_NETIF_RX,			"netif_rx")			\
	X(LO_DIRECT,			"direct")			\
	X(LO_DIRECT_UNGUARDED,		"direct-unguarded")		\
	X(LO_DIRECT_XMIT_RECURSION,	"direct-xmit-recursion")

SMP_ENUM(lo_mode, LO_MODE_TABLE, LO_NR_MODES);

/* The protocols above. */
#define LO_PROTO_TABLE(X)			\
	X(LO_PROTO_TBENCH,	"tbench")	\
	X(LO_PROTO_ACK_EVERY,	"ack-every")	\
	X(LO_PROTO_NO_ACK,	"no-ack")

SMP_ENUM(lo_proto, LO_PROTO_TABLE, LO_NR_PROTOS);

#define XMIT_RECURSION_LIMIT	8	/* include/linux/netdevice.h */
#define LO_MSS			16384	/* 2.6.24's loopback: MTU 16436 less the headers */
#define TCP_MSS_DEFAULT		536	/* rcv_mss before a segment has been measured */
#define STACK_WORK_DEBT_MAX	16	/* calls' work a spin's overshoot may carry */
enum { PKT_REQUEST = 1, PKT_REPLY = 2, PKT_ACK = 3 };
#define ACK_LEN 52

/* loopback_xmit(): 0, or -1 if the packet was dropped. */
static int loopback_xmit(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	struct pcpu_lstats *lb_stats = this_lstats(c);
	struct softnet_data *sd;
	int rc = 0;

	if (stack_enter(n, STACK_FRAME_XMIT)) {
		kfree_skb_local(c, n, skb);
		return -1;
	}
	if (n->lo_mode == LO_DIRECT_XMIT_RECURSION) {
		/* __dev_queue_xmit() on a queueless device, before the driver
		 * runs: dev_xmit_recursion() reads the per-CPU counter; past the
		 * limit the packet is dropped ("Dead loop on virtual device"),
		 * uncounted by lstats, which also ends a loop */
		sd = softnet(c, c->cpu);
		if (unlikely(sd->xmit_recursion > XMIT_RECURSION_LIMIT)) {
			n->lo->recursion_drops++;
			kfree_skb_local(c, n, skb);
			stack_leave(n, STACK_FRAME_XMIT);
			return -1;
		}
	}
	WRITE_ONCE(n->dev->last_rx, n->lo->xmits);	/* dev->last_rx = jiffies */
	lb_stats->bytes += skb->len;
	lb_stats->packets++;
	n->lo->xmits++;
	if (skb->cb[0] == PKT_REQUEST)
		n->lo->requests++;
	else if (skb->cb[0] == PKT_REPLY)
		n->lo->replies++;
	else
		n->lo->acks++;
	switch (n->lo_mode) {
	case LO_NETIF_RX:
		rc = netif_rx(c, n, skb);
		break;
	case LO_DIRECT:
		/* the patch: not in case of recursion, or we risk stack overflow */
		if (lb_stats->depth++ == 0) {
			n->lo->direct++;
			netif_receive_skb(c, n, skb);
		} else {
			rc = netif_rx(c, n, skb);
		}
		if ((uint32_t)lb_stats->depth > n->lo->max_depth)
			n->lo->max_depth = (uint32_t)lb_stats->depth;
		lb_stats->depth--;
		break;
	case LO_DIRECT_XMIT_RECURSION:	/* below the limit: checked above */
		sd = softnet(c, c->cpu);
		sd->xmit_recursion++;
		if (sd->xmit_recursion > n->lo->max_depth)
			n->lo->max_depth = sd->xmit_recursion;
		n->lo->direct++;
		netif_receive_skb(c, n, skb);
		sd->xmit_recursion--;
		break;
	default:	/* the last, tested on its path only: loopback_setup() takes no other mode */
		BUG_UNLESS(n->lo_mode == LO_DIRECT_UNGUARDED);
		lb_stats->depth++;
		if ((uint32_t)lb_stats->depth > n->lo->max_depth)
			n->lo->max_depth = (uint32_t)lb_stats->depth;
		n->lo->direct++;
		netif_receive_skb(c, n, skb);
		lb_stats->depth--;
	}
	stack_leave(n, STACK_FRAME_XMIT);
	return rc;
}

/* A new packet of `type` for socket `to`; `last`: the message's last
 * segment (PSH). NULL if the pool is dry. */
static inline struct sk_buff *lo_alloc_skb(struct cpu_ctx *c, struct net_ctx *n, int type,
					   int to, uint32_t len, int last)
{
	struct sk_buff *skb = napi_alloc_skb(c, n, len);

	if (skb) {
		skb->cb[0] = (uint8_t)type;
		skb->cb[1] = (uint8_t)to;
		skb->cb[2] = (uint8_t)last;
	}
	return skb;
}

/* dev_queue_xmit() of a new packet of `type` for socket `to`: BHs off
 * around the transmit, and turning them back on runs the NET_RX softirq
 * that netif_rx() raised (unless this is already softirq context).
 * -1 if the packet went nowhere. */
static int dev_queue_xmit(struct cpu_ctx *c, struct net_ctx *n, int type, int to, uint32_t len,
			  int last)
{
	struct sk_buff *skb = lo_alloc_skb(c, n, type, to, len, last);
	int rc;

	if (!skb)
		return -1;
	local_bh_disable(c);
	rc = loopback_xmit(c, n, skb);
	local_bh_enable(c);
	return rc;
}

/* The calibrated stack work of one send or receive on `sk`: copy the
 * payload through the socket's buffer, then spin on the TSC until
 * stack_work cycles have passed since the copy began. A spin ends past its
 * mark (the last TSC read, an interrupt), by some 5 % here: the excess is
 * carried as a debt that the next calls spin less by, so that on average a
 * call takes stack_work, and in all never less. None when uncalibrated
 * (stack_work 0): the model's own cost alone. */
static inline void stack_work(struct net_ctx *n, struct lo_sock *sk, uint32_t len, int send)
{
	uint64_t t0, t, want;

	if (!n->stack_work)
		return;
	want = n->stack_work > n->stack_work_debt ? n->stack_work - n->stack_work_debt : 0;
	t0 = tsc_read_unordered();
	if (send)
		__builtin_memcpy(sk->buf, n->app_buf, len);
	else
		__builtin_memcpy(n->app_buf, sk->buf, len);
	barrier();		/* the copy is the work: keep it */
	while ((t = tsc_read_unordered()) - t0 < want)
		;	/* no pause: this is work, and a pause would overshoot it */
	n->stack_work_debt += t - t0;		/* >= want, so the debt stays >= 0 */
	n->stack_work_debt -= n->stack_work;
	/* an interrupt inside a spin (microseconds) is paid back, as the
	 * kernel's measured transactions include theirs; a preemption
	 * (milliseconds) is not work, and is not: the debt stops at
	 * STACK_WORK_DEBT_MAX calls' work */
	if (n->stack_work_debt > STACK_WORK_DEBT_MAX * n->stack_work)
		n->stack_work_debt = STACK_WORK_DEBT_MAX * n->stack_work;
	n->lo->stack_work_cycles += t - t0;
}

static inline int peer(int sk)
{
	return sk == SK_CLIENT ? SK_SERVER : SK_CLIENT;
}

/* tcp_v4_do_rcv() for socket `to`: a data segment for the application,
 * or an ACK; then the ACK the protocol owes, if any (tcp_send_ack(), a
 * transmit nested in this receive). */
static void tcp_v4_do_rcv(struct cpu_ctx *c, struct net_ctx *n, int to, struct sk_buff *skb)
{
	struct lo_sock *sk = &n->sk[to];
	int type = skb->cb[0], last = skb->cb[2], ack;
	uint32_t len = skb->len;

	n->lo->delivered++;
	kfree_skb_local(c, n, skb);
	if (type == PKT_ACK) {
		ack = n->ack_storm;	/* ACKing an ACK: the bug */
	} else {
		if (last && type == PKT_REQUEST)	/* a whole message for the application */
			n->lo->server_pending++;
		else if (last)
			n->lo->client_pending++;
		if (len >= sk->rcv_mss)			/* tcp_measure_rcv_mss() */
			sk->rcv_mss = len < LO_MSS ? len : LO_MSS;
		sk->unacked += len;
		switch (n->lo_proto) {
		case LO_PROTO_TBENCH:	/* delayed, unless more than a full segment waits */
			ack = sk->unacked > sk->rcv_mss;
			break;
		case LO_PROTO_ACK_EVERY:
			ack = 1;
			break;
		default:
			ack = 0;
		}
	}
	if (ack) {
		sk->unacked = 0;
		dev_queue_xmit(c, n, PKT_ACK, peer(to), ACK_LEN, 1);
	}
}

/* The protocol's receive (tcp_v4_rcv's role): netif_receive_skb() calls it
 * through ptype_base, which is how a receive can transmit (an ACK) without
 * dev.h knowing this file. Under tbench's TCP, a segment for a socket its
 * owner holds waits on the socket's backlog (sk_add_backlog). */
static void proto_rcv(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	int to = skb->cb[1];
	struct lo_sock *sk = &n->sk[to];

	if (n->lo_proto == LO_PROTO_TBENCH && sk->owned) {
		skb_list_add_tail(n, &sk->backlog_head, &sk->backlog_tail, skb);
		n->lo->sk_backlogged++;
		return;
	}
	tcp_v4_do_rcv(c, n, to, skb);
}

/* release_sock(): process the backlog the owner's time let build up, still
 * as its owner (what arrives meanwhile joins the backlog), then let go. */
static void release_sock(struct cpu_ctx *c, struct net_ctx *n, int to)
{
	struct lo_sock *sk = &n->sk[to];

	while (sk->backlog_head) {
		uint32_t h = sk->backlog_head;

		sk->backlog_head = sk->backlog_tail = 0;
		while (h) {
			struct sk_buff *skb = skb_of(n, h);

			h = skb->next;
			tcp_v4_do_rcv(c, n, to, skb);
		}
	}
	sk->owned = 0;
}

/* tcp_sendmsg(): a message of `type` from socket `from` to its peer, in
 * segments of at most LO_MSS, under the socket's ownership; each carries
 * the ACK of what `from` received (the piggyback). -1 if a segment went
 * nowhere. */
static int tcp_sendmsg(struct cpu_ctx *c, struct net_ctx *n, int from, int type, uint32_t len)
{
	struct lo_sock *sk = &n->sk[from];
	uint32_t left = len;
	int rc = 0;

	sk->owned = 1;			/* lock_sock() */
	stack_work(n, sk, len, 1);
	do {
		uint32_t seg = left < LO_MSS ? left : LO_MSS;

		sk->unacked = 0;
		left -= seg;
		rc |= dev_queue_xmit(c, n, type, peer(from), seg, left == 0);
	} while (left);
	release_sock(c, n, from);
	return rc;
}

/* tcp_recvmsg(): the application takes one segment's payload off `to`. */
static inline void tcp_recvmsg(struct net_ctx *n, int to, uint32_t len)
{
	stack_work(n, &n->sk[to], len, 0);
}

/* Build a one-segment packet of `type` for socket `to` and hand it
 * straight to loopback_xmit(), outside dev_queue_xmit's BH section (tests). */
static int loopback_send(struct cpu_ctx *c, struct net_ctx *n, int type, int to, uint32_t len)
{
	struct sk_buff *skb = lo_alloc_skb(c, n, type, to, len, 1);

	return skb ? loopback_xmit(c, n, skb) : -1;
}

/* Free what is left in this CPU's backlog and sockets (the device going down). */
static inline void loopback_purge(struct cpu_ctx *c, struct net_ctx *n)
{
	struct softnet_data *sd = softnet(c, c->cpu);
	struct sk_buff *skb;
	unsigned long flags = local_irq_save(c);
	int i;

	while ((skb = backlog_dequeue(n, sd)) != NULL) {
		kfree_skb_local(c, n, skb);
		dev_put(n);
		n->lo->purged++;
	}
	sd->poll_list &= ~NAPI_BACKLOG;
	__atomic_fetch_and(&sd->backlog_state, ~NAPI_STATE_SCHED, __ATOMIC_SEQ_CST);
	local_irq_restore(c, flags);
	for (i = 0; i < NR_LO_SOCKS; i++) {
		uint32_t h = n->sk[i].backlog_head;

		while (h) {
			skb = skb_of(n, h);
			h = skb->next;
			kfree_skb_local(c, n, skb);
			n->lo->purged++;
		}
		n->sk[i].backlog_head = n->sk[i].backlog_tail = 0;
		n->sk[i].owned = 0;
	}
}

/* The protocol's registration, at init. */
static inline void loopback_init(void)
{
	dev_add_pack(PTYPE_IP, proto_rcv);
}

#endif
