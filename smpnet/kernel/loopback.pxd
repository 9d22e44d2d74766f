from libc.stdint cimport uint32_t
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.skbuff cimport net_ctx

cdef extern from "loopback.h" nogil:
    enum: LO_NETIF_RX
    enum: LO_DIRECT
    enum: LO_DIRECT_UNGUARDED
    enum: LO_DIRECT_XMIT_RECURSION
    enum: LO_NR_MODES
    const char *const lo_mode_names[]
    enum: LO_PROTO_TBENCH
    enum: LO_PROTO_ACK_EVERY
    enum: LO_PROTO_NO_ACK
    enum: LO_NR_PROTOS
    const char *const lo_proto_names[]
    enum: XMIT_RECURSION_LIMIT
    enum: PKT_REQUEST
    enum: PKT_REPLY
    enum: PKT_ACK

    int loopback_send(cpu_ctx *c, net_ctx *n, int type, int to, uint32_t len)
    int dev_queue_xmit(cpu_ctx *c, net_ctx *n, int type, int to, uint32_t len, int last)
    enum: TCP_MSS_DEFAULT
    enum: LO_MSS
    int tcp_sendmsg(cpu_ctx *c, net_ctx *n, int sk, int type, uint32_t len)
    void tcp_recvmsg(net_ctx *n, int sk, uint32_t len)
    void loopback_purge(cpu_ctx *c, net_ctx *n)
    void loopback_init()
