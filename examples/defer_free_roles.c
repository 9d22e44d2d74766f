/* defer_free_roles.c - a producer/consumer change, with CPU roles: an skb
 * freed on a CPU other than the one that allocated it is deferred to that
 * CPU's softnet_data and freed there when it flushes (net/core/skbuff.c,
 * skb_attempt_defer_free(); net/core/dev.c, skb_defer_free_flush()).
 *
 *   locked: the list under sd->defer_lock as seed 003 left it (Linux 6.2,
 *           3176eb82681e): the producer's spin_lock_irqsave(), and the
 *           consumer's skb_defer_free_flush() pasted from the seed's patch
 *           (../shared/seeds/003), its spin_lock_irq() and all.
 *   llist:  an atomic count and llist_add() for the producer, one
 *           llist_del_all() for the consumer, after 844c9db7f7f5 ("net: use
 *           llist for sd->defer_list", Linux 6.18; written here from its
 *           description, not pasted).
 *
 * CPU 0 is the consumer (the CPU that allocated the skbs: skb->alloc_cpu,
 * and flushes its list), every other CPU a producer (a socket's CPU,
 * freeing what it was given); --roles may place them otherwise (the
 * consumer says where it runs). On one CPU, the kernel frees an skb of its
 * own CPU at once (nodefer): uncontended, the variants differ in the flush's
 * look at an empty list alone. softnet_data is per-CPU as the kernel
 * declares it (DEFINE_PER_CPU_ALIGNED, per_cpu(), this_cpu_ptr()). The unit
 * of work is an skb freed, counted where it is freed: cycles per skb of
 * every CPU together, end to end. A freed skb goes back to the producer it
 * came from (its pool: an llist only it takes from), the same way in both
 * variants, so that the change is the defer list alone. No IPI is sent: the
 * consumer flushes whenever it runs (ab raises no IRQs).
 *
 *   smpnet-bench ab examples/defer_free_roles.c
 */
#include <smpnet.h>

#define NR_SKBS		256	/* skbs in each producer's pool */

SMPNET_ROLES(consumer, producer);
SMPNET_UNIT(skb);

struct sk_buff {
	struct sk_buff		*next;		/* the locked list's link */
	struct llist_node	ll_node;	/* the llist's */
	int			alloc_cpu;
	/* smpnet's: the producer's pool it returns to, and the check's mark */
	struct llist_node	pool;
	int			producer;
	int			on_list;
};

/* the fields of include/linux/netdevice.h's the two use */
struct softnet_data {
	/* Linux 6.2: the locked list */
	spinlock_t		defer_lock ____cacheline_aligned_in_smp;
	int			defer_count;
	struct sk_buff		*defer_list;
	/* Linux 6.18: the llist */
	atomic_t		defer_llcount ____cacheline_aligned_in_smp;
	struct llist_head	defer_llist;
};

static DEFINE_PER_CPU_ALIGNED(struct softnet_data, softnet_data);
static unsigned int sysctl_skb_defer_max = 64;

struct pcpu {
	struct llist_head pool;
	struct sk_buff skbs[NR_SKBS];
};

struct shared {
	int consumer;	/* the consumer's CPU + 1, once it has run: the skbs' alloc_cpu */
};

SMPNET_STATE(struct shared, struct pcpu);

/* __kfree_skb() and napi_consume_skb() here: back to its producer's pool,
 * an skb freed. */
static void __kfree_skb(struct sk_buff *skb)
{
	llist_add(&skb->pool, &per_cpu(skb->producer)->pool);
	SMPNET_WORK(1);
}
#define napi_consume_skb(skb, budget)	__kfree_skb(skb)

/* net/core/dev.c, Linux 6.2: seed 003's patch, its after side, as it is */
static void skb_defer_free_flush(struct softnet_data *sd)
{
	struct sk_buff *skb, *next;

	/* Paired with WRITE_ONCE() in skb_attempt_defer_free() */
	if (!READ_ONCE(sd->defer_list))
		return;

	spin_lock_irq(&sd->defer_lock);
	skb = sd->defer_list;
	sd->defer_list = NULL;
	sd->defer_count = 0;
	spin_unlock_irq(&sd->defer_lock);

	while (skb != NULL) {
		next = skb->next;
		napi_consume_skb(skb, 1);
		skb = next;
	}
}

/* Every CPU's pool full, its skbs allocated on CPU 0; every list empty. */
static void pools_init(void)
{
	for (int cpu = 0; cpu < nr_cpus; cpu++) {
		struct pcpu *p = per_cpu(cpu);

		spin_lock_init(&per_cpu(softnet_data, cpu).defer_lock);
		init_llist_head(&per_cpu(softnet_data, cpu).defer_llist);
		init_llist_head(&p->pool);
		for (int i = 0; i < NR_SKBS; i++) {
			p->skbs[i].producer = cpu;
			llist_add(&p->skbs[i].pool, &p->pool);
		}
	}
}

/* skb_attempt_defer_free()'s start: the producer's next skb (from its
 * pool; allocated, as far as the skb knows, on the consumer's CPU), or
 * NULL while all are deferred or when its first test frees it here, at
 * once (an skb of this CPU, or of a consumer that has not run yet) */
static struct sk_buff *skb_to_defer(struct shared *s, struct pcpu *mine)
{
	struct llist_node *n = llist_del_first(&mine->pool);
	struct sk_buff *skb;

	if (!n)
		return NULL;
	skb = llist_entry(n, struct sk_buff, pool);
	skb->alloc_cpu = READ_ONCE(s->consumer) - 1;
	if (skb->alloc_cpu < 0 || skb->alloc_cpu == raw_smp_processor_id()) {
		__kfree_skb(skb);
		return NULL;
	}
	return skb;
}

/* The consumer: net_rx_action(), BHs off, flushes this CPU's list with
 * `flush` (a constant: inlined, no indirect call); where it runs, said
 * once, for the producers' skbs */
static __always_inline void net_rx_action(struct shared *s,
					  void (*flush)(struct softnet_data *sd))
{
	if (unlikely(!READ_ONCE(s->consumer)))
		WRITE_ONCE(s->consumer, smp_processor_id() + 1);
	local_bh_disable();
	flush(this_cpu_ptr(&softnet_data));
	local_bh_enable();
}

SMPNET_INIT(locked) { pools_init(); }

SMPNET_VARIANT(locked)
{
	struct sk_buff *skb;
	struct softnet_data *sd;
	unsigned long flags;

	if (role == consumer) {
		net_rx_action(shared, skb_defer_free_flush);
		return;
	}
	skb = skb_to_defer(shared, this_cpu);	/* skb_attempt_defer_free(), 6.2 */
	if (!skb)
		return;
	sd = &per_cpu(softnet_data, skb->alloc_cpu);
	if ((unsigned int)READ_ONCE(sd->defer_count) >= READ_ONCE(sysctl_skb_defer_max)) {
		__kfree_skb(skb);		/* nodefer: freed here */
		return;
	}
	spin_lock_irqsave(&sd->defer_lock, flags);
	WRITE_ONCE(sd->defer_count, sd->defer_count + 1);
	skb->next = sd->defer_list;
	WRITE_ONCE(sd->defer_list, skb);
	spin_unlock_irqrestore(&sd->defer_lock, flags);
}

/* skb_defer_free_flush() with the llist, after 844c9db7f7f5 */
static void skb_defer_free_flush_llist(struct softnet_data *sd)
{
	struct sk_buff *skb, *next;
	struct llist_node *list;

	if (llist_empty(&sd->defer_llist))
		return;
	/* the list taken, then the count reset: reset first, a flush stopped
	 * between the two (its vCPU descheduled, as runs here saw) while 64
	 * frees came in left the count at the limit and the list empty, and
	 * every later free a nodefer */
	list = llist_del_all(&sd->defer_llist);
	atomic_set(&sd->defer_llcount, 0);
	llist_for_each_entry_safe(skb, next, list, ll_node)
		napi_consume_skb(skb, 1);
}

SMPNET_INIT(llist) { pools_init(); }

SMPNET_VARIANT(llist)
{
	struct sk_buff *skb;
	struct softnet_data *sd;

	if (role == consumer) {
		net_rx_action(shared, skb_defer_free_flush_llist);
		return;
	}
	skb = skb_to_defer(shared, this_cpu);	/* skb_attempt_defer_free(), 6.18 */
	if (!skb)
		return;
	sd = &per_cpu(softnet_data, skb->alloc_cpu);
	if (atomic_inc_return(&sd->defer_llcount) >= (int)READ_ONCE(sysctl_skb_defer_max)) {
		__kfree_skb(skb);		/* nodefer: freed here */
		return;
	}
	llist_add(&skb->ll_node, &sd->defer_llist);
}

/* Conservation: every skb once, in its pool or on the consumer's list. */
static void every_skb_once(struct shared *s, int locked)
{
	struct softnet_data *sd = &per_cpu(softnet_data, s->consumer ? s->consumer - 1 : 0);
	struct sk_buff *skb;
	struct llist_node *n;
	long seen = 0;

	for (int cpu = 0; cpu < nr_cpus; cpu++)
		for (n = per_cpu(cpu)->pool.first; n; n = n->next, seen++) {
			skb = llist_entry(n, struct sk_buff, pool);
			expect(skb->producer == cpu, "an skb in another producer's pool");
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
