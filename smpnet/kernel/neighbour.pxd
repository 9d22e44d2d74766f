from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef extern from "neighbour.h" nogil:
    enum: NUD_NONE
    enum: PROBE_TIMER
    enum: PROBE_IMMEDIATE
    enum: NR_PROBE_MODES
    const char *const probe_mode_names[]

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

    neighbour *neigh_lookup(neigh_table *t, uint32_t ip)
    neighbour *neigh_create(neigh_table *t, uint32_t ip, uint64_t now)
    int neigh_event_send(neigh_table *t, neighbour *n, uint64_t now, uint32_t seq,
                         uint32_t size, uint64_t tstamp, neigh_out *o)
    void neigh_timer_handler(neigh_table *t, neighbour *n, uint64_t now, neigh_out *o)
    void neigh_update(neigh_table *t, neighbour *n, const uint8_t *ha, uint32_t new_state,
                      uint64_t now, neigh_out *o)
    void neigh_delete(neigh_table *t, uint32_t ip)
    void neigh_run_timers(neigh_table *t, uint64_t now, neigh_out *o)
