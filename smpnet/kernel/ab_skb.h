/* ab_skb.h - the model's skb life cycle, lent to a user's object (`ab`).
 *
 * A file that includes smpnet/include/smpnet_skbuff.h allocates, frees and
 * defers skbs with the model's own code (skbuff.h, skb_defer.h, dev.h), not
 * a copy: the core's functions below, out of line as net/core/skbuff.c's
 * are, reached through smpnet_env.skb_ops. docs/experiments/ab.md says what
 * each does.
 */
#ifndef SMPNET_AB_SKB_H
#define SMPNET_AB_SKB_H

#include "ab.h"
#include "dev.h"

/* napi_alloc_skb(): from this CPU's cache, its slab, then the pool; NULL
 * when every skb is held */
static __attribute__((__noinline__)) struct sk_buff *ab_napi_alloc_skb(struct cpu_ctx *c,
								    unsigned int len)
{
	return napi_alloc_skb(c, c->net, len);
}

/* kfree_skb(), consume_skb(), napi_consume_skb(): an skb of this CPU's
 * back into its cache, one of another CPU's back to that CPU's slab (the
 * remote free). A free of an skb that is not live (freed already, or on a
 * defer list) is counted, not done: double_free, which the run checks. */
static __attribute__((__noinline__)) void ab_kfree_skb(struct cpu_ctx *c, struct sk_buff *skb)
{
	struct net_ctx *n = c->net;

	if (unlikely(skb->state != SKB_LIVE)) {
		n->stats->double_free++;
		return;
	}
	if (skb->alloc_cpu == (uint32_t)c->cpu)
		kfree_skb_local(c, n, skb);
	else
		kfree_skb_remote(c, n, skb);
}

static __attribute__((__noinline__)) void ab_skb_attempt_defer_free(struct cpu_ctx *c,
								 struct sk_buff *skb)
{
	skb_attempt_defer_free(c, c->net, skb);
}

static __attribute__((__noinline__)) void ab_net_rx_ipi(struct cpu_ctx *c)
{
	trigger_rx_softirq(c, IPI_NET_RX);
}

static __attribute__((__noinline__)) void ab_net_rx_action(struct cpu_ctx *c)
{
	net_rx_action(c);
}

static const struct smpnet_skb_ops ab_skb_ops = {
	.alloc = ab_napi_alloc_skb,
	.free = ab_kfree_skb,
	.defer_free = ab_skb_attempt_defer_free,
	.net_rx_ipi = ab_net_rx_ipi,
	.net_rx_action = ab_net_rx_action,
};

#endif
