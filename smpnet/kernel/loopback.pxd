from libc.stdint cimport uint32_t
from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.skbuff cimport net_ctx

cdef extern from "loopback.h" nogil:
    enum: LO_NETIF_RX
    enum: LO_DIRECT
    enum: LO_DIRECT_UNGUARDED
    enum: LO_NR_MODES
    const char *const lo_mode_names[]
    enum: PKT_REQUEST
    enum: PKT_REPLY
    enum: PKT_ACK

    int loopback_send(cpu_ctx *c, net_ctx *n, int type, uint32_t len)
    void loopback_purge(cpu_ctx *c, net_ctx *n)
    void loopback_init()
