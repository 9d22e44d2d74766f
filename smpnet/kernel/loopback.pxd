from libc.stdint cimport uint32_t, uint64_t
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.skbuff cimport net_ctx

cdef extern from "loopback.h" nogil:
    enum: LO_NETIF_RX
    enum: LO_DIRECT
    enum: LO_DIRECT_UNGUARDED
    enum: PKT_REQUEST
    enum: PKT_REPLY
    enum: PKT_ACK
    enum: STACK_BASE
    enum: NETDEV_MAX_BACKLOG

    struct net_device:
        uint32_t refcnt

    struct lo_stats:
        uint64_t xmits
        uint64_t transactions
        uint32_t overflow
        uint32_t server_pending
        uint32_t client_pending

    int loopback_send(cpu_ctx *c, net_ctx *n, int type, uint32_t len)
    void loopback_purge(cpu_ctx *c, net_ctx *n)
