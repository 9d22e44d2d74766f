/* loopback.h - loopback_xmit() and a tbench-like protocol on top of it.
 *
 * Modes (seed 002):
 *   netif_rx          2008's loopback: count in pcpu_lstats, netif_rx()
 *   direct            the patch: netif_receive_skb() inline while this CPU's
 *                     lstats.depth is 0, netif_rx() when it is not
 *   direct-unguarded  netif_receive_skb() inline always: the reviewer's case
 * The protocol: a client sends a request; the server's receive path may
 * ACK it from inside the receive (tcp_send_ack, a transmit nested in a
 * receive: the recursion); the server application replies; the client's
 * receive path may ACK the reply. With ack_storm the receive path ACKs
 * ACKs too, the bug the reviewer feared: a transmit in every receive.
 * Sockets are counters; a delivered packet's skb is freed at once.
 */
#ifndef SMPNET_LOOPBACK_H
#define SMPNET_LOOPBACK_H

#include "dev.h"

/* The modes above: enumerator, and its name as Python offers it. */
#define LO_MODE_TABLE(X)				\
	X(LO_NETIF_RX,		"netif_rx")		\
	X(LO_DIRECT,		"direct")		\
	X(LO_DIRECT_UNGUARDED,	"direct-unguarded")

SMP_ENUM(lo_mode, LO_MODE_TABLE, LO_NR_MODES);
enum { PKT_REQUEST = 1, PKT_REPLY = 2, PKT_ACK = 3 };
#define ACK_LEN 52

static inline struct pcpu_lstats *this_lstats(struct cpu_ctx *c)
{
	return (struct pcpu_lstats *)per_cpu_ptr(c->hdr, REGION_LSTATS, c->cpu);
}

/* loopback_xmit(): 0, or -1 if the packet was dropped. */
static int loopback_xmit(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	struct pcpu_lstats *lb_stats = this_lstats(c);
	int rc = 0;

	if (stack_enter(n, STACK_FRAME_XMIT)) {
		kfree_skb_local(c, n, skb);
		return -1;
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

/* Build a packet of `type` and transmit it; -1 if it went nowhere. */
static int loopback_send(struct cpu_ctx *c, struct net_ctx *n, int type, uint32_t len)
{
	struct sk_buff *skb = napi_alloc_skb(c, n, len);

	if (!skb)
		return -1;
	skb->cb[0] = (uint8_t)type;
	return loopback_xmit(c, n, skb);
}

/* The protocol's receive (tcp_v4_rcv's role): netif_receive_skb() calls it
 * through ptype_base, which is how a receive can transmit (an ACK) without
 * dev.h knowing this file. */
static void proto_rcv(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	int type = skb->cb[0], ack;

	switch (type) {
	case PKT_REQUEST:
		n->lo->server_pending++;
		ack = n->ack_in_rx;
		break;
	case PKT_REPLY:
		n->lo->client_pending++;
		ack = n->ack_in_rx;
		break;
	default:
		ack = n->ack_storm;	/* ACKing an ACK */
	}
	n->lo->delivered++;
	kfree_skb_local(c, n, skb);
	if (ack)
		loopback_send(c, n, PKT_ACK, ACK_LEN);	/* tcp_send_ack() */
}

/* Free what is left in this CPU's backlog (the device going down). */
static inline void loopback_purge(struct cpu_ctx *c, struct net_ctx *n)
{
	struct softnet_data *sd = softnet(c, c->cpu);
	struct sk_buff *skb;
	unsigned long flags = local_irq_save(c);

	while ((skb = backlog_dequeue(n, sd)) != NULL) {
		kfree_skb_local(c, n, skb);
		dev_put(n);
		n->lo->purged++;
	}
	sd->poll_list &= ~NAPI_BACKLOG;
	__atomic_fetch_and(&sd->backlog_state, ~NAPI_STATE_SCHED, __ATOMIC_SEQ_CST);
	local_irq_restore(c, flags);
}

/* The protocol's registration, at init. */
static inline void loopback_init(void)
{
	dev_add_pack(PTYPE_IP, proto_rcv);
}

#endif
