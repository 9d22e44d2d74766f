/* smpnet_skbuff.h - smpnet's own skb life cycle in a user's `ab` file, after
 * smpnet.h: the model's skbs allocated, freed and deferred by the model's
 * own code (not a copy), by the kernel's names. Docs: docs/experiments/ab.md.
 *
 * napi_alloc_skb() takes a head from this CPU's cache (refilled from its
 * slab, then the shared pool under its lock); kfree_skb() and its kin put
 * an skb of this CPU back in its cache and free another CPU's remotely
 * (SLUB's remote free: a cmpxchg on that CPU's line); skb_attempt_defer_free()
 * puts another CPU's skb on that CPU's defer list, which its NET_RX softirq
 * (net_rx_action(): raise_softirq(NET_RX_SOFTIRQ), then local_bh_enable()
 * or do_softirq()) flushes, kicked with the defer IPI at half the list. The
 * list is locked as the kernel named by SMPNET_SKB_DEFER(strategy) locks it
 * (none, irqsave, irq, bh, llist; llist unless the file says). Each is a
 * call into smpnet's core, out of line as net/core/skbuff.c's functions
 * are: an indirect call where the kernel's is direct.
 *
 * A file that includes this has struct sk_buff, the model's: leave `next`,
 * `gen` and `state` alone (the model's list link, a handle, and its
 * bookkeeping).
 */
#ifndef SMPNET_SKBUFF_USER_H
#define SMPNET_SKBUFF_USER_H

#include "sk_buff.h"

_Static_assert(sizeof(struct sk_buff) == 64, "the model's sk_buff is one cache line");

struct napi_struct;

static int smpnet_uses_skbs_ = 1;
/* the defer list's locking, by the name of the kernel that locks it so */
#define SMPNET_SKB_DEFER(strategy)	static const char *smpnet_skb_defer_ = #strategy

#define smpnet_skb_ops_	(smpnet_env->skb_ops)
#define smpnet_skb_(skb)	((struct smpnet_model_sk_buff *)(skb))

/* NULL when every skb of the run's pool is held */
static __always_inline struct sk_buff *napi_alloc_skb(struct napi_struct *napi, unsigned int len)
{
	(void)napi;
	return (struct sk_buff *)smpnet_skb_ops_->alloc(smpnet_cpu, len);
}

/* NULL is nothing to free, as the kernel's */
static __always_inline void kfree_skb(struct sk_buff *skb)
{
	if (likely(skb))
		smpnet_skb_ops_->free(smpnet_cpu, smpnet_skb_(skb));
}

static __always_inline void consume_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

static __always_inline void __kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

static __always_inline void napi_consume_skb(struct sk_buff *skb, int budget)
{
	(void)budget;
	kfree_skb(skb);
}

static __always_inline void skb_attempt_defer_free(struct sk_buff *skb)
{
	smpnet_skb_ops_->defer_free(smpnet_cpu, smpnet_skb_(skb));
}

/* The NET_RX softirq: raised here, run at local_bh_enable(), at an
 * interrupt's end, or at do_softirq(), as the kernel runs it */
#define raise_softirq(nr)	raise_softirq(smpnet_cpu, (nr))
#define do_softirq()		do_softirq(smpnet_cpu)

/* The defer kick and NET_RX run the core's handlers (dev.h's
 * trigger_rx_softirq() and net_rx_action()) from this object's IRQ and
 * softirq entry, whose tables are the object's own. */
static void smpnet_net_rx_ipi(struct smpnet_model_cpu_ctx *c, unsigned int vector)
{
	(void)vector;
	smpnet_skb_ops_->net_rx_ipi(c);
}

static void smpnet_net_rx_action(struct smpnet_model_cpu_ctx *c)
{
	smpnet_skb_ops_->net_rx_action(c);
}

__attribute__((constructor)) static void smpnet_skb_handlers(void)
{
	irq_handlers[IPI_NET_RX] = smpnet_net_rx_ipi;
	softirq_vec[NET_RX_SOFTIRQ] = smpnet_net_rx_action;
}

#endif
