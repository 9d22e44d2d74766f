from libc.stdint cimport uint8_t, uint32_t, uint64_t
from smpnet.kernel.neighbour cimport neighbour, neigh_table, neigh_out

cdef extern from "link.h" nogil:
    enum: PING_PENDING
    enum: PING_OK
    enum: PING_ERROR
    enum: PING_TIMEOUT
    enum: PING_SIZE
    enum: HOST_A_IP
    enum: HOST_B_IP
    enum: FRAME_ARP_REQUEST
    enum: FRAME_ARP_REPLY
    enum: FRAME_ECHO
    enum: FRAME_ECHO_REPLY
    enum: NR_FRAME_TYPES

    struct link_ring:
        uint32_t head

    struct ping_result:
        uint64_t tstamp
        uint64_t rtt
        uint32_t status

    struct arp_ctl:
        uint32_t done
        uint32_t peer_down
        double a_tick_cycles

    struct host_a:
        neigh_table *tbl
        link_ring *tx
        link_ring *rx
        ping_result *results
        uint32_t nr_results
        uint64_t boot_tsc
        double tick_cycles
        uint64_t last_jiffies
        uint64_t wire[5]
        neigh_out out

    void host_a_solicit(void *arg, neighbour *n)
    void host_a_xmit(void *arg, neighbour *n, uint32_t seq, uint32_t size, uint64_t tstamp)
    void host_a_error(void *arg, uint32_t seq)
    uint64_t host_a_jiffies(host_a *h, uint64_t tsc)
    void host_a_poll(host_a *h)
    void host_a_ping(host_a *h, uint32_t seq)
    int host_b_poll(link_ring *rx, link_ring *tx, arp_ctl *ctl, neigh_table *tbl, uint64_t now,
                    const uint64_t *wire)
    const uint8_t HOST_B_MAC[8]
