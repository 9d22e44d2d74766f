/* skbuff.h - sk_buff heads and their allocator.
 *
 * The pool is a fixed array of skb heads in the segment, each with a data
 * area (struct skb_data: the packet's first line and the shared info's
 * line). A head is named by its handle, index + 1 (0 is NULL), so lists
 * mean the same in every process. Allocation follows napi_alloc_skb(): a
 * per-CPU cache (struct napi_alloc_cache, 64 entries) refilled 16 at a time
 * from this CPU's slab (struct skb_slab, SLUB's kmem_cache_cpu: a freelist
 * only its CPU touches), which refills from the heads other CPUs freed
 * back to it, then from the shared pool under a lock (the node's partial
 * list); a full cache gives its newer half to the slab, a slab past
 * SLAB_CPU_MAX half of its own to the pool. Freeing a head on a CPU that
 * did not allocate it is a remote free: its shared info's dataref is
 * dropped there, and the head goes onto its own CPU's remote_free list
 * (SLUB's slow path, a cmpxchg on another CPU's line): the cost the
 * per-CPU defer list exists to avoid.
 *
 * The defer-free list, whose strategies DEFER_STRATEGY_TABLE names, is
 * skb_defer.h's.
 * Every head carries its allocating CPU, a generation bumped on each
 * allocation, and a state: freeing a free head is counted (double_free)
 * instead of corrupting the lists, so conservation can be checked.
 */
#ifndef SMPNET_SKBUFF_H
#define SMPNET_SKBUFF_H

#include "spinlock_api_smp.h"
#include "sk_buff.h"

#define SKB_FREE		0
#define SKB_LIVE		1
#define SKB_DEFERRED		2	/* on a defer list */
#define FLUSH_SAMPLES		256	/* the last flushes' lock cycles, for medians */
#define NAPI_SKB_CACHE_SIZE	64
#define NAPI_SKB_CACHE_BULK	16
#define NAPI_SKB_CACHE_HALF	(NAPI_SKB_CACHE_SIZE / 2)
#define SLAB_CPU_MAX		256	/* heads a CPU's slab keeps before it gives half back */
#define SLAB_BATCH		64	/* heads a slab takes from the pool at once */
#define FLUSH_HIST_BUCKETS	8	/* flush sizes 1, 2-3, 4-7, ..., >= 128 */
#define DEFER_SAMPLE_MASK	7	/* time 1 skb_attempt_defer_free in 8 */
#define STACK_FRAMES_MAX	168	/* net_ctx.stack_frames: dev.h checks it holds the
					 * deepest emulated stack loopback_setup() allows */

/* The strategies above: enumerator, and its name as Python offers it. */
#define DEFER_STRATEGY_TABLE(X)		\
	X(DEFER_NONE,		"none")		\
	X(DEFER_IRQSAVE,	"irqsave")	\
	X(DEFER_IRQ,		"irq")		\
	X(DEFER_BH,		"bh")		\
	X(DEFER_LLIST,		"llist")

SMP_ENUM(defer_strategy, DEFER_STRATEGY_TABLE, DEFER_NR_STRATEGIES);

/* An skb's data area: the packet's first line (written at receive, read
 * by the consumer) and the shared info (skb_shinfo()), whose dataref
 * allocation sets and every free drops: a line the freeing CPU must own. */
struct skb_data {
	uint8_t  head[SMP_CACHE_BYTES];	/* the packet's headers */
	uint32_t dataref;		/* skb_shared_info.dataref */
	uint32_t nr_frags;
	uint8_t  _pad[SMP_CACHE_BYTES - 8];
};

/* The page an skb's data was carved from (struct page, its _refcount).
 * napi_alloc_frag() cuts each skb's data from a 32 KiB page it shares
 * with SKB_FRAGS_PER_PAGE - 1 others (2 KiB frags), and every free drops
 * the page's refcount (skb_free_frag() -> page_frag_free() ->
 * put_page_testzero()): a line that 16 skbs' frees write, on whichever CPU
 * frees them. The allocator pays for its frags in bulk
 * (page_frag_cache.pagecnt_bias): one page_ref_add() a page's worth of
 * allocations. Here skb i's data lies on page i / SKB_FRAGS_PER_PAGE
 * (heads come back in any order, so a CPU's allocations do not walk one
 * page at a time as the kernel's frags do), and the page's worth is added
 * to the page of the skb whose allocation spent the bias: what is modelled
 * is the cost (an atomic on a line 16 skbs' frees share per free, one on
 * the allocating CPU per 16 allocations) and the sum (the refcounts add up
 * to the live skbs plus every CPU's bias). One page's count alone means
 * nothing and may go below zero. */
#define SKB_FRAGS_PER_PAGE	16
struct skb_page {
	int32_t  refcount;		/* page->_refcount */
	uint8_t  _pad[SMP_CACHE_BYTES - 4];
};

/* One CPU's slab of skb heads (kmem_cache_cpu): the freelist is its own;
 * remote_free, on a line of its own, is where other CPUs free its heads. */
struct skb_slab {
	uint32_t freelist;		/* handles, 0 when empty */
	uint32_t count;
	uint8_t  _pad0[SMP_CACHE_BYTES - 8];
	uint32_t remote_free;		/* an llist other CPUs push onto */
	uint8_t  _pad1[SMP_CACHE_BYTES - 4];
};

struct skb_pool {			/* the shared pool: the node's partial list */
	spinlock_t lock;
	uint32_t head;			/* free list, by handle */
	uint32_t count;
	uint32_t total;
	uint32_t _pad;
};

struct napi_alloc_cache {		/* per CPU */
	uint32_t count;
	uint32_t skb_cache[NAPI_SKB_CACHE_SIZE];	/* handles */
	uint32_t pagecnt_bias;		/* page_frag_cache.pagecnt_bias: frags paid for */
};

struct skb_stats {			/* per CPU, in shared memory */
	uint64_t allocated;
	uint64_t alloc_failed;		/* pool empty */
	uint64_t freed;			/* heads returned to a cache, by any path */
	uint64_t freed_local;		/* skb_attempt_defer_free() of a local skb */
	uint64_t deferred;		/* put on the home CPU's defer list */
	uint64_t fallback_frees;	/* home list full: freed here instead */
	uint64_t remote_frees;		/* freed on this CPU, allocated on another */
	uint64_t double_free;		/* must stay 0 */
	uint64_t stale;			/* handed an skb of another generation: must stay 0 */
	uint64_t ipis;			/* defer kicks sent */
	uint64_t flushes;
	uint64_t flushed;
	uint64_t flushes_past_half;	/* flushes of more than defer_max / 2 skbs: the cycles in
					 * which the kernel's rule kicks (one IPI each, unless
					 * the last is still in flight) */
	uint64_t flush_cycles;		/* whole flushes, timer overhead included */
	uint64_t flush_lock_cycles;	/* the locked take of the list, timer overhead included,
					 * the IRQs it took left out (flush_irq_cycles) */
	uint64_t flush_irq_cycles;	/* hard IRQs taken inside the locked take: the IPI
					 * that irq and irqsave replay as they re-enable IRQs */
	uint64_t flush_irq_replays;	/* locked takes that took any */
	uint64_t max_flush;
	uint64_t defer_cycles;		/* sampled skb_attempt_defer_free calls */
	uint64_t defer_samples;
	uint64_t received;		/* consumer: skbs taken off rings */
	uint64_t rx_packets;		/* RX: skbs handed to rings */
	uint64_t ring_full;		/* RX: polls cut short by full rings */
	uint32_t flush_hist[FLUSH_HIST_BUCKETS];
	uint32_t nr_flush_samples;	/* flushes sampled, all time */
	uint32_t flush_lock_sample[FLUSH_SAMPLES];	/* ring of the latest, in cycles */
};

/* A TCP socket of the loopback experiment's protocol (loopback.h): its
 * owner flag (lock_sock), its backlog of segments that arrived while the
 * owner held it (sk_add_backlog), the segments received and not yet ACKed,
 * and the buffer its payload is copied through. Process-private. */
enum { SK_CLIENT = 0, SK_SERVER = 1, NR_LO_SOCKS = 2 };
#define LO_BUF_BYTES	65536	/* the largest payload (--size) */
struct lo_sock {
	uint32_t owned;			/* sock_owned_by_user() */
	uint32_t unacked;		/* data bytes received since our last ACK */
	uint32_t rcv_mss;		/* the largest segment seen, up to the MSS */
	uint32_t backlog_head;		/* sk->sk_backlog: skb handles, 0 when empty */
	uint32_t backlog_tail;
	uint8_t *buf;			/* LO_BUF_BYTES: the socket's receive/send queue */
};

/* What one CPU needs to run the network model: process-private. */
struct net_ctx {
	struct sk_buff *skbs;
	uint32_t nr_skbs;
	struct skb_pool *pool;
	int cache_region;
	int stats_region;
	int strategy;			/* enum defer_strategy */
	uint32_t defer_max;		/* sysctl net.core.skb_defer_max */
	uint32_t defer_calls;		/* for sampling */
	struct skb_stats *stats;	/* this CPU's */
	struct napi_alloc_cache *cache;	/* this CPU's */
	struct skb_data *data;		/* the data areas, by skb index */
	struct skb_page *pages;		/* their pages, by skb index / SKB_FRAGS_PER_PAGE */
	struct skb_slab *slabs;		/* every CPU's */
	uint32_t slab_stride;
	/* the defer experiment's device: see fake_nic.h */
	struct skb_ring *rings;
	uint32_t ring_stride;
	int n_rx;
	int n_consumers;
	uint32_t rr;			/* next consumer, round robin */
	uint64_t to_send;		/* skbs this RX CPU still has to receive */
	uint64_t send_deadline;		/* TSC after which it stops receiving */
	uint64_t tick_cycles;		/* TSC cycles per jiffy, at NET_HZ */
	uint64_t jiffies;		/* the tick count, as this CPU last saw the TSC
					 * cross a tick (net_tick()) */
	uint64_t next_tick;		/* TSC of the next tick */
	uint64_t budget_jiffies;	/* usecs_to_jiffies(netdev_budget_usecs) */
	int netdev_budget;		/* sysctl net.core.netdev_budget */
	/* the loopback experiment: see dev.h and loopback.h */
	struct net_device *dev;
	struct lo_stats *lo;
	int lo_mode;			/* enum lo_mode */
	int lo_proto;			/* enum lo_proto: when the receive path ACKs */
	int ack_storm;			/* ... and ACKs ACKs: the bug */
	struct lo_sock sk[NR_LO_SOCKS];	/* the client's and the server's socket */
	uint64_t stack_work;		/* calibrated cycles per send and per receive */
	uint64_t stack_work_debt;	/* what past calls spun over stack_work */
	uint8_t *app_buf;		/* the applications' payload, LO_BUF_BYTES */
	uint32_t thread_size;		/* the emulated kernel stack */
	uint32_t stack_used;
	uint32_t rx_nest;		/* netif_receive_skb() calls nested now */
	uint32_t stack_depth;		/* frames on the emulated stack now */
	uint8_t stack_frames[STACK_FRAMES_MAX];	/* their kinds (dev.h's enum stack_frame),
					 * outermost first: what an oops prints */
};

static inline struct sk_buff *skb_of(struct net_ctx *n, uint32_t handle)
{
	return &n->skbs[handle - 1];
}

static inline uint32_t skb_handle(struct net_ctx *n, struct sk_buff *skb)
{
	return (uint32_t)(skb - n->skbs) + 1;
}

/* llist_add() of `skb` onto a lock-free list of handles that other CPUs
 * push onto too; its taker takes the whole list with one xchg. */
static inline void llist_add_skb(struct net_ctx *n, uint32_t *head, struct sk_buff *skb)
{
	uint32_t h = skb_handle(n, skb), first = READ_ONCE(*head);

	do {
		skb->next = first;
	} while (!__atomic_compare_exchange_n(head, &first, h, 0,
					      __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* __skb_queue_tail() on a list of handles (head, tail; 0 when empty). */
static inline void skb_list_add_tail(struct net_ctx *n, uint32_t *head, uint32_t *tail,
				     struct sk_buff *skb)
{
	uint32_t h = skb_handle(n, skb);

	skb->next = 0;
	if (*tail)
		skb_of(n, *tail)->next = h;
	else
		*head = h;
	*tail = h;
}

static inline struct softnet_data *softnet(struct cpu_ctx *c, int cpu)
{
	return (struct softnet_data *)per_cpu_ptr(c->hdr, REGION_SOFTNET, cpu);
}

/* ---------------------------------------------------------------- the allocator */

static inline struct skb_slab *slab_of(struct net_ctx *n, int cpu)
{
	return (struct skb_slab *)((char *)n->slabs + (size_t)cpu * n->slab_stride);
}

static inline struct skb_data *skb_data_of(struct net_ctx *n, const struct sk_buff *skb)
{
	return &n->data[skb - n->skbs];
}

static inline struct skb_page *skb_page_of(struct net_ctx *n, const struct sk_buff *skb)
{
	return &n->pages[(skb - n->skbs) / SKB_FRAGS_PER_PAGE];
}

/* page_frag_alloc(): this skb's frag, paid for from the CPU's bias; a page's
 * worth more (page_ref_add) when the bias is spent. */
static inline void page_frag_alloc(struct napi_alloc_cache *nc, struct skb_page *page)
{
	if (unlikely(!nc->pagecnt_bias)) {
		__atomic_fetch_add(&page->refcount, SKB_FRAGS_PER_PAGE, __ATOMIC_SEQ_CST);
		nc->pagecnt_bias = SKB_FRAGS_PER_PAGE;
	}
	nc->pagecnt_bias--;
}

/* The heads other CPUs freed back to this one: taken all at once (the
 * page freelist SLUB takes over when the CPU's own runs dry). */
static inline void slab_take_remote(struct net_ctx *n, struct skb_slab *s)
{
	uint32_t h;

	if (!READ_ONCE(s->remote_free))
		return;
	h = __atomic_exchange_n(&s->remote_free, 0, __ATOMIC_ACQUIRE);
	while (h) {
		uint32_t next = skb_of(n, h)->next;

		skb_of(n, h)->next = s->freelist;
		s->freelist = h;
		s->count++;
		h = next;
	}
}

/* Fill this CPU's slab from the shared pool, under its lock; -1 if the run
 * was stopped while waiting for it. */
static __attribute__((__noinline__)) int slab_refill(struct cpu_ctx *c, struct net_ctx *n,
						  struct skb_slab *s)
{
	struct skb_pool *p = n->pool;
	unsigned long flags;
	uint32_t want = SLAB_BATCH;

	if (spin_lock_irqsave(c, &p->lock, &flags))
		return -1;
	while (want-- && p->head) {
		uint32_t h = p->head;

		p->head = skb_of(n, h)->next;
		p->count--;
		skb_of(n, h)->next = s->freelist;
		s->freelist = h;
		s->count++;
	}
	spin_unlock_irqrestore(c, &p->lock, flags);
	return 0;
}

/* Give half of this CPU's slab to the shared pool, under its lock. */
static __attribute__((__noinline__)) int slab_spill(struct cpu_ctx *c, struct net_ctx *n,
						 struct skb_slab *s)
{
	struct skb_pool *p = n->pool;
	unsigned long flags;
	uint32_t i;

	if (spin_lock_irqsave(c, &p->lock, &flags))
		return -1;
	for (i = 0; i < SLAB_CPU_MAX / 2 && s->freelist; i++) {
		uint32_t h = s->freelist;

		s->freelist = skb_of(n, h)->next;
		s->count--;
		skb_of(n, h)->next = p->head;
		p->head = h;
		p->count++;
	}
	spin_unlock_irqrestore(c, &p->lock, flags);
	return 0;
}

/* Take up to `want` heads from this CPU's slab into its cache. */
static __attribute__((__noinline__)) void napi_cache_refill(struct cpu_ctx *c, struct net_ctx *n,
							 uint32_t want)
{
	struct skb_slab *s = slab_of(n, c->cpu);
	struct napi_alloc_cache *nc = n->cache;

	if (!s->freelist)
		slab_take_remote(n, s);
	if (!s->freelist && slab_refill(c, n, s))
		return;
	while (want-- && s->freelist) {
		uint32_t h = s->freelist;

		s->freelist = skb_of(n, h)->next;
		s->count--;
		nc->skb_cache[nc->count++] = h;
	}
}

/* napi_skb_cache_put() with a full cache: its newer half to the slab, as
 * the kernel frees skb_cache[NAPI_SKB_CACHE_HALF..]; -1 if the run was
 * stopped while waiting for the pool's lock. */
static __attribute__((__noinline__)) int napi_cache_spill(struct cpu_ctx *c, struct net_ctx *n)
{
	struct napi_alloc_cache *nc = n->cache;
	struct skb_slab *s = slab_of(n, c->cpu);
	uint32_t i;

	for (i = NAPI_SKB_CACHE_HALF; i < NAPI_SKB_CACHE_SIZE; i++) {
		uint32_t h = nc->skb_cache[i];

		skb_of(n, h)->next = s->freelist;
		s->freelist = h;
		s->count++;
	}
	nc->count = NAPI_SKB_CACHE_HALF;
	/* one spill at most: the heads are on the slab whether it works or not */
	return s->count > SLAB_CPU_MAX ? slab_spill(c, n, s) : 0;
}

/* napi_alloc_skb(): a head from this CPU's cache, or NULL if the pool is dry. */
static inline struct sk_buff *napi_alloc_skb(struct cpu_ctx *c, struct net_ctx *n, uint32_t len)
{
	struct napi_alloc_cache *nc = n->cache;
	struct sk_buff *skb;

	if (unlikely(!nc->count)) {
		napi_cache_refill(c, n, NAPI_SKB_CACHE_BULK);
		if (!nc->count) {
			n->stats->alloc_failed++;
			return NULL;
		}
	}
	skb = skb_of(n, nc->skb_cache[--nc->count]);
	skb->next = 0;
	skb->alloc_cpu = (uint32_t)c->cpu;
	skb->gen++;
	skb->state = SKB_LIVE;
	skb->len = len;
	skb->hash = skb->gen * 2654435761u;
	skb->tstamp = tsc_read_unordered();
	__builtin_memset(skb->cb, (int)(skb->gen & 0xff), sizeof(skb->cb));
	if (n->data) {		/* the packet lands, and build_skb() sets the shared info */
		struct skb_data *d = skb_data_of(n, skb);

		page_frag_alloc(nc, skb_page_of(n, skb));
		__builtin_memset(d->head, (int)(skb->gen & 0xff), sizeof(d->head));
		d->nr_frags = 0;
		__atomic_store_n(&d->dataref, 1, __ATOMIC_RELAXED);
	}
	n->stats->allocated++;
	return skb;
}

/* skb_release_data(): drop the shared info's reference, on the freeing
 * CPU, and with the last one (here, always) the data's frag: its page's
 * refcount (skb_free_frag(), put_page_testzero()). */
static inline void skb_release_data(struct net_ctx *n, struct sk_buff *skb)
{
	if (n->data) {
		__atomic_fetch_sub(&skb_data_of(n, skb)->dataref, 1, __ATOMIC_ACQ_REL);
		__atomic_fetch_sub(&skb_page_of(n, skb)->refcount, 1, __ATOMIC_ACQ_REL);
	}
}

/* napi_consume_skb() / __kfree_skb(): the head back into this CPU's cache.
 * Takes a live skb, or one coming off a defer list. */
static inline void kfree_skb_local(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	struct napi_alloc_cache *nc = n->cache;

	if (unlikely(skb->state == SKB_FREE)) {
		n->stats->double_free++;
		return;
	}
	skb_release_data(n, skb);
	skb->state = SKB_FREE;
	n->stats->freed++;
	/* napi_skb_cache_put(): in, then the newer half out once the cache is
	 * full (a stopped run's failed spill to the pool loses nothing) */
	nc->skb_cache[nc->count++] = skb_handle(n, skb);
	if (unlikely(nc->count == NAPI_SKB_CACHE_SIZE))
		napi_cache_spill(c, n);
}

/* kfree_skb() of a head another CPU allocated: the remote free. The
 * shared info's line comes over for its dataref, and the head goes back
 * to its own CPU's slab through that slab's remote_free list, a cmpxchg on
 * a line that CPU owns (SLUB's __slab_free() slow path). */
static inline void kfree_skb_remote(struct cpu_ctx *c, struct net_ctx *n, struct sk_buff *skb)
{
	struct skb_slab *home = slab_of(n, (int)skb->alloc_cpu);

	skb_release_data(n, skb);
	skb->state = SKB_FREE;
	n->stats->freed++;
	n->stats->remote_frees++;
	llist_add_skb(n, &home->remote_free, skb);
	(void)c;
}

#endif
