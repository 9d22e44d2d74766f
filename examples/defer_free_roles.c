/* defer_free_roles.c - a producer/consumer change, with CPU roles: an skb
 * freed on a CPU other than the one that allocated it is deferred to that
 * CPU's list and freed there when it flushes (net/core/skbuff.c,
 * skb_attempt_defer_free(); net/core/dev.c, skb_defer_free_flush()).
 *
 *   locked: the list under sd->defer_lock, as 931e93bdf8ca (Linux 6.4) left
 *           it: the producer's spin_lock_bh(), the consumer's spin_lock()
 *           (BHs are already off in net_rx_action()).
 *   llist:  an atomic count and llist_add() for the producer, one
 *           llist_del_all() for the consumer, as 844c9db7f7f5 ("net: use
 *           llist for sd->defer_list", Linux 6.18).
 *
 * CPU 0 is the consumer (the CPU that allocated the skbs and flushes its
 * list), every other CPU a producer (a socket's CPU, freeing what it was
 * given). The unit of work is an skb freed, counted where it is freed:
 * cycles per skb of every CPU together, end to end. A freed skb goes back to
 * the producer it came from (its pool: an llist only it takes from), the
 * same way in both variants, so that the change is the defer list alone.
 * No IPI is sent: the consumer flushes whenever it runs (ab raises no IRQs).
 *
 *   smpnet-bench ab examples/defer_free_roles.c
 */
#include <smpnet.h>

#define NR_SKBS		256	/* skbs in each producer's pool */
#define DEFER_MAX	64	/* net.core.skb_defer_max */

SMPNET_ROLES(consumer, producer);
SMPNET_UNIT(skb);

struct sk_buff {
	struct sk_buff *next;		/* the locked list's link */
	struct llist_node ll_node;	/* the llist's */
	struct llist_node pool;		/* its producer's pool */
	int cpu;			/* that producer */
	int on_list;			/* the check's: where it was found */
};

struct shared {
	/* the consumer's softnet_data: the locked list's fields, then the llist's */
	spinlock_t defer_lock ____cacheline_aligned_in_smp;
	int defer_count;
	struct sk_buff *defer_list;
	atomic_t defer_llcount ____cacheline_aligned_in_smp;
	struct llist_head defer_llist;
};

struct pcpu {
	struct llist_head pool;
	struct sk_buff skbs[NR_SKBS];
};

SMPNET_STATE(struct shared, struct pcpu);

/* Every CPU's pool full, the consumer's list empty. */
static void pools_init(struct shared *sd)
{
	spin_lock_init(&sd->defer_lock);
	init_llist_head(&sd->defer_llist);
	for (int cpu = 0; cpu < nr_cpus; cpu++) {
		struct pcpu *p = per_cpu(cpu);

		init_llist_head(&p->pool);
		for (int i = 0; i < NR_SKBS; i++) {
			p->skbs[i].cpu = cpu;
			llist_add(&p->skbs[i].pool, &p->pool);
		}
	}
}

/* The producer's skb: the next in its pool, or NULL while all are deferred. */
static struct sk_buff *skb_get(struct pcpu *mine)
{
	struct llist_node *n = llist_del_first(&mine->pool);

	return n ? llist_entry(n, struct sk_buff, pool) : NULL;
}

/* __kfree_skb() here: back to its producer's pool, an skb freed. */
static void skb_free(struct sk_buff *skb)
{
	llist_add(&skb->pool, &per_cpu(skb->cpu)->pool);
	SMPNET_WORK(1);
}

SMPNET_INIT(locked) { pools_init(shared); }

SMPNET_VARIANT(locked)
{
	struct sk_buff *skb;

	if (role == consumer) {			/* skb_defer_free_flush() */
		if (!READ_ONCE(shared->defer_list))
			return;
		local_bh_disable();
		spin_lock(&shared->defer_lock);
		skb = shared->defer_list;
		shared->defer_list = NULL;
		shared->defer_count = 0;
		spin_unlock(&shared->defer_lock);
		local_bh_enable();
		while (skb) {
			struct sk_buff *next = skb->next;

			skb_free(skb);
			skb = next;
		}
		return;
	}
	skb = skb_get(this_cpu);		/* skb_attempt_defer_free() */
	if (!skb)
		return;
	if (READ_ONCE(shared->defer_count) >= DEFER_MAX) {
		skb_free(skb);			/* nodefer: freed here */
		return;
	}
	spin_lock_bh(&shared->defer_lock);
	WRITE_ONCE(shared->defer_count, shared->defer_count + 1);
	skb->next = shared->defer_list;
	WRITE_ONCE(shared->defer_list, skb);
	spin_unlock_bh(&shared->defer_lock);
}

SMPNET_INIT(llist) { pools_init(shared); }

SMPNET_VARIANT(llist)
{
	struct sk_buff *skb, *next;

	if (role == consumer) {			/* skb_defer_free_flush() */
		struct llist_node *list;

		if (llist_empty(&shared->defer_llist))
			return;
		local_bh_disable();
		atomic_set(&shared->defer_llcount, 0);
		list = llist_del_all(&shared->defer_llist);
		local_bh_enable();
		llist_for_each_entry_safe(skb, next, list, ll_node)
			skb_free(skb);
		return;
	}
	skb = skb_get(this_cpu);		/* skb_attempt_defer_free() */
	if (!skb)
		return;
	if (atomic_inc_return(&shared->defer_llcount) >= DEFER_MAX) {
		skb_free(skb);			/* nodefer: freed here */
		return;
	}
	llist_add(&skb->ll_node, &shared->defer_llist);
}

/* Conservation: every skb once, in its pool or on the consumer's list. */
static void every_skb_once(struct shared *sd, int locked)
{
	struct sk_buff *skb;
	struct llist_node *n;
	long seen = 0;

	for (int cpu = 0; cpu < nr_cpus; cpu++)
		for (n = per_cpu(cpu)->pool.first; n; n = n->next, seen++) {
			skb = llist_entry(n, struct sk_buff, pool);
			expect(skb->cpu == cpu, "an skb in another producer's pool");
			expect(!skb->on_list++, "an skb in two places");
		}
	if (locked) {
		for (skb = sd->defer_list; skb; skb = skb->next, seen++)
			expect(!skb->on_list++, "an skb in two places");
	} else {
		for (n = sd->defer_llist.first; n; n = n->next, seen++)
			expect(!llist_entry(n, struct sk_buff, ll_node)->on_list++,
			       "an skb in two places");
	}
	expect(seen == (long)nr_cpus * NR_SKBS, "an skb lost");
	for (int cpu = 0; cpu < nr_cpus; cpu++)
		for (int i = 0; i < NR_SKBS; i++)
			per_cpu(cpu)->skbs[i].on_list = 0;
}

SMPNET_CHECK(locked) { every_skb_once(shared, 1); }
SMPNET_CHECK(llist) { every_skb_once(shared, 0); }
