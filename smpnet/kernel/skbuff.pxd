from libc.stdint cimport uint8_t, int32_t, uint32_t, uint64_t
from smpnet.kernel.percpu cimport softnet_data
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.spinlock_types cimport spinlock_t
from smpnet.kernel.sk_buff cimport sk_buff

cdef extern from "skbuff.h" nogil:
    enum: DEFER_IRQSAVE
    enum: DEFER_IRQ
    enum: DEFER_BH
    enum: DEFER_LLIST
    enum: DEFER_NR_STRATEGIES
    const char *const defer_strategy_names[]
    enum: SKB_FREE
    enum: SKB_LIVE
    enum: SKB_DEFERRED
    enum: FLUSH_SAMPLES
    enum: NAPI_SKB_CACHE_SIZE
    enum: SKB_FRAGS_PER_PAGE
    enum: FLUSH_HIST_BUCKETS
    enum: DEFER_SAMPLE_MASK

    enum: SK_CLIENT
    enum: SK_SERVER
    enum: LO_BUF_BYTES

    struct lo_sock:
        uint32_t owned
        uint32_t rcv_mss
        uint8_t *buf

    struct skb_data:
        uint8_t head[64]
        uint32_t dataref

    struct skb_page:
        int32_t refcount

    struct skb_slab:
        uint32_t freelist
        uint32_t count
        uint32_t remote_free

    struct skb_pool:
        spinlock_t lock
        uint32_t head
        uint32_t count
        uint32_t total

    struct napi_alloc_cache:
        uint32_t count

    struct skb_stats:
        uint64_t alloc_failed
        uint64_t received
        uint64_t stale
        uint64_t defer_cycles
        uint64_t defer_samples

    # the experiments' parts are pointers to their headers' structs
    # (fake_nic.h's rings, dev.h's device, its lo_stats): void * here, so
    # that this .pxd, like skbuff.h, needs none of them
    struct net_ctx:
        sk_buff *skbs
        uint32_t nr_skbs
        skb_pool *pool
        int cache_region
        int stats_region
        int strategy
        uint32_t defer_max
        uint32_t defer_calls
        skb_stats *stats
        napi_alloc_cache *cache
        skb_data *data
        skb_page *pages
        skb_slab *slabs
        uint32_t slab_stride
        void *rings
        uint32_t ring_stride
        int n_rx
        int n_consumers
        uint32_t rr
        uint64_t to_send
        uint64_t send_deadline
        uint64_t tick_cycles
        uint64_t jiffies
        uint64_t next_tick
        uint64_t budget_jiffies
        int netdev_budget
        void *dev
        void *lo
        int lo_mode
        int lo_proto
        int ack_storm
        lo_sock sk[2]
        uint64_t stack_work
        uint64_t stack_work_debt
        uint8_t *app_buf
        uint32_t thread_size
        uint32_t stack_used
        uint32_t stack_depth

    sk_buff *skb_of(net_ctx *n, uint32_t handle)
    uint32_t skb_handle(net_ctx *n, sk_buff *skb)
    softnet_data *softnet(cpu_ctx *c, int cpu)
    sk_buff *napi_alloc_skb(cpu_ctx *c, net_ctx *n, uint32_t len)
    void kfree_skb_local(cpu_ctx *c, net_ctx *n, sk_buff *skb)
    void kfree_skb_remote(cpu_ctx *c, net_ctx *n, sk_buff *skb)
    skb_data *skb_data_of(net_ctx *n, const sk_buff *skb)
