from libc.stdint cimport uint32_t, uint64_t
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.skbuff cimport net_ctx

cdef extern from "dev.h" nogil:
    enum: NETDEV_BUDGET_USECS
    enum: NET_HZ
    enum: NETDEV_MAX_BACKLOG
    enum: NETDEV_BUDGET
    enum: DEV_RX_WEIGHT
    enum: STACK_BASE
    enum: THREAD_SIZE_MAX
    enum: NR_STACK_FRAMES
    const char *const stack_frame_names[]
    const uint32_t stack_frame_bytes[]

    struct net_device:
        uint32_t refcnt

    struct lo_stats:
        uint64_t xmits
        uint64_t transactions
        uint32_t overflow
        uint32_t server_pending
        uint32_t client_pending

    void napi_schedule(cpu_ctx *c, uint32_t napi)
    void net_rx_action(cpu_ctx *c)
    void net_tick(net_ctx *n, uint64_t now)
    uint64_t net_jiffies(const net_ctx *n)
    void net_dev_init()
