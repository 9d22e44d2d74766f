from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef extern from "link.h" nogil:
    enum: NUD_NONE
    enum: PROBE_TIMER
    enum: PROBE_IMMEDIATE
    enum: PING_PENDING
    enum: PING_OK
    enum: PING_ERROR
    enum: PING_TIMEOUT
    enum: PING_SIZE
    enum: HOST_A_IP
    enum: HOST_B_IP

    struct neigh_parms:
        uint32_t hz
        uint32_t probe_mode
        uint32_t ucast_probes
        uint32_t app_probes
        uint32_t mcast_probes
        uint32_t retrans_time
        uint32_t base_reachable_time
        uint32_t delay_first_probe_time
        uint32_t gc_stale_time
        uint32_t queue_len_bytes

    struct neigh_stats:
        uint64_t solicits
        uint64_t unres_discards
        uint64_t failed
        uint64_t resolved
        uint64_t sent
        uint64_t last_solicit_jiffies
        uint64_t first_solicit_jiffies

    struct neighbour:
        uint32_t ip
        uint32_t nud_state
        uint8_t ha[8]
        uint32_t probes
        uint32_t arpq_len
        uint32_t arpq_bytes
        uint64_t timer

    struct neigh_table:
        neighbour tbl[16]
        neigh_parms parms
        neigh_stats stats

    struct neigh_out:
        void (*solicit)(void *arg, neighbour *n) noexcept nogil
        void (*xmit)(void *arg, neighbour *n, uint32_t seq, uint32_t size,
                     uint64_t tstamp) noexcept nogil
        void (*error)(void *arg, uint32_t seq) noexcept nogil
        void *arg

    struct link_ring:
        uint32_t head

    struct ping_result:
        uint64_t tstamp
        uint64_t rtt
        uint32_t status

    struct arp_ctl:
        uint32_t done
        uint32_t peer_down

    struct host_a:
        neigh_table *tbl
        link_ring *tx
        link_ring *rx
        ping_result *results
        uint32_t nr_results
        uint64_t boot_tsc
        double tick_cycles
        uint64_t last_jiffies
        neigh_out out

    neighbour *neigh_lookup(neigh_table *t, uint32_t ip)
    neighbour *neigh_create(neigh_table *t, uint32_t ip, uint64_t now)
    int neigh_event_send(neigh_table *t, neighbour *n, uint64_t now, uint32_t seq,
                         uint32_t size, uint64_t tstamp, neigh_out *o)
    void neigh_timer_handler(neigh_table *t, neighbour *n, uint64_t now, neigh_out *o)
    void neigh_update(neigh_table *t, neighbour *n, const uint8_t *ha, uint32_t new_state,
                      uint64_t now, neigh_out *o)
    void neigh_delete(neigh_table *t, uint32_t ip)
    void neigh_run_timers(neigh_table *t, uint64_t now, neigh_out *o)

    void host_a_solicit(void *arg, neighbour *n)
    void host_a_xmit(void *arg, neighbour *n, uint32_t seq, uint32_t size, uint64_t tstamp)
    void host_a_error(void *arg, uint32_t seq)
    uint64_t host_a_jiffies(host_a *h, uint64_t tsc)
    void host_a_poll(host_a *h)
    void host_a_ping(host_a *h, uint32_t seq)
    int host_b_poll(link_ring *rx, link_ring *tx, arp_ctl *ctl, neigh_table *tbl, uint64_t now)
    const uint8_t HOST_B_MAC[8]
