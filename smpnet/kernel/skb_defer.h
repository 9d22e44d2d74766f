/* skb_defer.h - the per-CPU defer-free list: skb_attempt_defer_free() and
 * skb_defer_free_flush(), net/core's, on skbuff.h's heads, with the lock
 * strategy of seed 003's history selectable per run:
 *   none     before 5.19         the consumer frees the skb itself: a remote free
 *   irqsave  5.19 (2022)         producer irqsave, flush irqsave
 *   irq      seed 003 (Jan 2023) producer irqsave, flush irq
 *   bh       931e93bdf8ca (2023) producer bh,      flush bh
 *   llist    844c9db7f7f5 (2025) atomic count + lock-free llist_add, llist_del_all
 */
#ifndef SMPNET_SKB_DEFER_H
#define SMPNET_SKB_DEFER_H

#include "skbuff.h"

static inline void defer_lock_producer(struct cpu_ctx *c, struct softnet_data *sd,
				       int strategy, unsigned long *flags)
{
	if (strategy == DEFER_BH)
		spin_lock_bh(c, &sd->defer_lock);
	else
		spin_lock_irqsave(c, &sd->defer_lock, flags);
}

static inline void defer_unlock_producer(struct cpu_ctx *c, struct softnet_data *sd,
					 int strategy, unsigned long flags)
{
	if (strategy == DEFER_BH)
		spin_unlock_bh(c, &sd->defer_lock);
	else
		spin_unlock_irqrestore(c, &sd->defer_lock, flags);
}

/* The defer fields of the kernel version a strategy models (percpu.h):
 * the list head the flush checks, and the one-IPI-in-flight flag. */
static inline uint32_t *defer_list_of(const struct net_ctx *n, struct softnet_data *sd)
{
	return n->strategy == DEFER_LLIST ? &sd->defer_llist : &sd->defer_list;
}

static inline uint32_t *defer_ipi_scheduled_of(const struct net_ctx *n, struct softnet_data *sd)
{
	return n->strategy == DEFER_LLIST ? &sd->defer_llist_ipi_scheduled
					  : &sd->defer_ipi_scheduled;
}

/* skb_attempt_defer_free(): free a remote CPU's skb on that CPU, later. */
static inline void skb_attempt_defer_free(struct cpu_ctx *c, struct net_ctx *n,
					  struct sk_buff *skb)
{
	int cpu = (int)skb->alloc_cpu;
	struct softnet_data *sd;
	uint32_t defer_max = n->defer_max, count, h;
	unsigned long flags = 0;
	int kick;

	if (unlikely(skb->state != SKB_LIVE)) {	/* freed or queued already */
		n->stats->double_free++;
		return;
	}
	if (unlikely((uint32_t)cpu >= c->hdr->nr_cpus))	/* the kernel's WARN_ON_ONCE */
		goto nodefer;
	if (cpu == c->cpu) {
		n->stats->freed_local++;
		kfree_skb_local(c, n, skb);
		return;
	}
	if (n->strategy == DEFER_NONE) {	/* before 5.19: free it here */
		kfree_skb_remote(c, n, skb);
		return;
	}
	sd = softnet(c, cpu);
	h = skb_handle(n, skb);
	if (n->strategy == DEFER_LLIST) {
		count = (uint32_t)atomic_long_inc_return(&sd->defer_llist_count);
		if (count >= defer_max)
			goto nodefer;
		skb->state = SKB_DEFERRED;
		llist_add_skb(n, &sd->defer_llist, skb);
		kick = (count - 1) == (defer_max >> 1);
	} else {
		if (READ_ONCE(sd->defer_count) >= defer_max)
			goto nodefer;
		defer_lock_producer(c, sd, n->strategy, &flags);
		/* send an IPI every time the queue reaches half capacity */
		kick = sd->defer_count == (defer_max >> 1);
		WRITE_ONCE(sd->defer_count, sd->defer_count + 1);
		skb->state = SKB_DEFERRED;
		skb->next = sd->defer_list;
		WRITE_ONCE(sd->defer_list, h);
		defer_unlock_producer(c, sd, n->strategy, flags);
	}
	n->stats->deferred++;
	/* one IPI in flight at most: defer_ipi_scheduled, set by cmpxchg */
	if (unlikely(kick) && !atomic_cmpxchg(defer_ipi_scheduled_of(n, sd), 0, 1)) {
		send_ipi(c, cpu, IPI_NET_RX);
		n->stats->ipis++;
	}
	return;
nodefer:
	n->stats->fallback_frees++;
	if ((uint32_t)cpu < c->hdr->nr_cpus)
		kfree_skb_remote(c, n, skb);
	else
		kfree_skb_local(c, n, skb);	/* a head of no CPU's: keep it here */
}

static inline void flush_hist_add(struct skb_stats *st, uint32_t nr)
{
	int b = 0;

	while (nr > 1 && b < FLUSH_HIST_BUCKETS - 1) {
		nr >>= 1;
		b++;
	}
	st->flush_hist[b]++;
}

/* The locked list taken whole: skb_defer_free_flush()'s body between its
 * lock and unlock, whichever way the strategy locks. */
static inline uint32_t defer_list_take(struct softnet_data *sd)
{
	uint32_t h = sd->defer_list;

	sd->defer_list = 0;
	sd->defer_count = 0;
	return h;
}

/* skb_defer_free_flush(): run by the owner in net_rx_action(), in softirq
 * context. The bh strategy takes a plain spin_lock there, as 931e93bdf8ca
 * does: BHs are already off. */
static inline void skb_defer_free_flush(struct cpu_ctx *c, struct net_ctx *n)
{
	struct softnet_data *sd = softnet(c, c->cpu);
	unsigned long flags;
	uint64_t t0, t1, t2, irq0, replay;
	uint32_t h, nr = 0;

	/* paired with the WRITE_ONCE() in skb_attempt_defer_free() */
	if (!READ_ONCE(*defer_list_of(n, sd)))
		return;
	/* net_ctx_setup() takes no other strategy; checked here, out of the timing */
	BUG_UNLESS((unsigned int)n->strategy < DEFER_NR_STRATEGIES);
	irq0 = c->irq->irq_cycles;
	t0 = tsc_start();
	switch (n->strategy) {
	case DEFER_LLIST:
		atomic_long_set(&sd->defer_llist_count, 0);
		h = atomic_xchg(&sd->defer_llist, 0);	/* llist_del_all() */
		break;
	case DEFER_IRQSAVE:
		if (spin_lock_irqsave(c, &sd->defer_lock, &flags))
			return;
		h = defer_list_take(sd);
		spin_unlock_irqrestore(c, &sd->defer_lock, flags);
		break;
	case DEFER_IRQ:
		if (spin_lock_irq(c, &sd->defer_lock))
			return;
		h = defer_list_take(sd);
		spin_unlock_irq(c, &sd->defer_lock);
		break;
	case DEFER_NONE:	/* nothing is ever deferred */
		return;
	default:	/* DEFER_BH, the one left: checked above */
		if (spin_lock(c, &sd->defer_lock))
			return;
		h = defer_list_take(sd);
		spin_unlock(c, &sd->defer_lock);
	}
	t1 = tsc_stop();
	/* the unlock of irq and irqsave re-enables IRQs and takes the pending
	 * IPI there, inside t0..t1: its handling is its own figure, not the
	 * lock's (irq_replay() times it) */
	replay = c->irq->irq_cycles - irq0;
	if (replay) {
		n->stats->flush_irq_cycles += replay;
		n->stats->flush_irq_replays++;
	}
	t1 -= replay;
	while (h) {
		struct sk_buff *skb = skb_of(n, h);

		h = skb->next;
		kfree_skb_local(c, n, skb);
		nr++;
	}
	t2 = tsc_read_unordered();	/* the flush's end: one serialising pair is enough */
	n->stats->flushes++;
	n->stats->flushed += nr;
	if (nr > (n->defer_max >> 1))
		n->stats->flushes_past_half++;
	n->stats->flush_lock_cycles += t1 - t0;
	n->stats->flush_lock_sample[n->stats->nr_flush_samples++ % FLUSH_SAMPLES] =
		(uint32_t)(t1 - t0 < 0xffffffffu ? t1 - t0 : 0xffffffffu);
	n->stats->flush_cycles += t2 - t0;
	if (nr > n->stats->max_flush)
		n->stats->max_flush = nr;
	flush_hist_add(n->stats, nr);
}

#endif
