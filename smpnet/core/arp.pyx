# arp.pyx - ARP resolution (seed 000): Neigh, one neighbour entry on an
# injected clock for tests, and the experiment's two hosts on a shared link.

# name -> enum value, from neighbour.h's PROBE_MODE_TABLE
PROBE_MODES = c_enum(neighbour.probe_mode_names, neighbour.NR_PROBE_MODES)
UNRES_QLEN_BYTES = 212992   # net.ipv4.neigh.default.unres_qlen_bytes (SK_WMEM_MAX)


cdef int parms_init(neighbour.neigh_parms *p, uint32_t hz, int probe, uint32_t queue_len_bytes) except -1:
    """The kernel's neighbour defaults (net.ipv4.neigh.default.*), in jiffies at `hz`."""
    if hz not in (100, 250, 300, 1000):
        raise ValueError(f"HZ must be 100, 250, 300 or 1000, got {hz}")
    check_enum(probe, neighbour.NR_PROBE_MODES, "probe mode")
    p.hz = hz
    p.probe_mode = probe
    p.ucast_probes = 3
    p.app_probes = 0
    p.mcast_probes = 3
    p.retrans_time = hz                 # 1 s
    p.base_reachable_time = 30 * hz
    p.delay_first_probe_time = 5 * hz
    p.gc_stale_time = 60 * hz
    p.queue_len_bytes = queue_len_bytes
    return 0



def neigh_parms_defaults():
    """The model's neighbour defaults, as parms_init() sets them, in the
    units of net.ipv4.neigh.default.* (times at HZ 1000: a jiffy a ms)."""
    cdef neighbour.neigh_parms p
    parms_init(&p, 1000, neighbour.PROBE_IMMEDIATE, UNRES_QLEN_BYTES)
    return {"ucast_solicit": p.ucast_probes, "app_solicit": p.app_probes,
            "mcast_solicit": p.mcast_probes, "retrans_time_ms": p.retrans_time,
            "base_reachable_time_ms": p.base_reachable_time,
            "delay_first_probe_time": p.delay_first_probe_time // 1000,
            "gc_stale_time": p.gc_stale_time // 1000}

cdef struct sink:
    # what the state machine sent, for Neigh's callers: counts and the last seqs
    uint32_t xmitted[64]
    uint32_t nxmit
    uint32_t errored[64]
    uint32_t nerr


cdef void sink_xmit(void *arg, neighbour.neighbour *n, uint32_t seq, uint32_t size,
                    uint64_t tstamp) noexcept nogil:
    cdef sink *s = <sink *>arg
    s.xmitted[s.nxmit % 64] = seq
    s.nxmit += 1


cdef void sink_error(void *arg, uint32_t seq) noexcept nogil:
    cdef sink *s = <sink *>arg
    s.errored[s.nerr % 64] = seq
    s.nerr += 1


cdef class Neigh:
    """One neighbour entry's state machine on an injected clock ("now", in
    jiffies): for tests and teaching. The entry is the seed's peer,
    192.168.20.108; nothing here waits or reads a clock."""
    cdef neighbour.neigh_table t
    cdef neighbour.neigh_out out
    cdef sink s

    def __init__(self, uint32_t hz=100, str probe="immediate",
                 uint32_t queue_len_bytes=UNRES_QLEN_BYTES):
        if probe not in PROBE_MODES:
            raise ValueError(f"no probe mode {probe!r}")
        memset(&self.t, 0, sizeof(self.t))
        memset(&self.s, 0, sizeof(self.s))
        parms_init(&self.t.parms, hz, PROBE_MODES[probe], queue_len_bytes)
        self.out.solicit = NULL
        self.out.xmit = sink_xmit
        self.out.error = sink_error
        self.out.arg = &self.s

    cdef neighbour.neighbour *_n(self, uint64_t now):
        return neighbour.neigh_create(&self.t, link.HOST_B_IP, now)

    def event_send(self, uint64_t now, uint32_t seq=0, uint32_t size=link.PING_SIZE):
        """neigh_event_send(): 0 sent now, 1 queued, -1 dropped."""
        return neighbour.neigh_event_send(&self.t, self._n(now), now, seq, size, 0, &self.out)

    def tick(self, uint64_t now):
        """The timer wheel at jiffy `now`: run the entry's timer if it is due."""
        neighbour.neigh_run_timers(&self.t, now, &self.out)

    def arp_reply(self, uint64_t now):
        """The peer answered: neigh_update(REACHABLE), queued packets go out."""
        cdef uint8_t ha[8]
        memset(ha, 0xbb, 8)
        neighbour.neigh_update(&self.t, self._n(now), ha, 0x02, now, &self.out)

    def delete(self):
        """`arp -d`."""
        neighbour.neigh_delete(&self.t, link.HOST_B_IP)

    cdef neighbour.neighbour *_entry(self):
        return neighbour.neigh_lookup(&self.t, link.HOST_B_IP)

    @property
    def state(self):
        cdef neighbour.neighbour *n = self._entry()
        return 0 if n == NULL else n.nud_state

    @property
    def probes(self):
        cdef neighbour.neighbour *n = self._entry()
        return 0 if n == NULL else n.probes

    @property
    def timer(self):
        """The armed expiry in jiffies, or 0."""
        cdef neighbour.neighbour *n = self._entry()
        return 0 if n == NULL else n.timer

    @property
    def queued(self):
        cdef neighbour.neighbour *n = self._entry()
        if n == NULL:
            return 0, 0
        return n.arpq_len, n.arpq_bytes

    @property
    def stats(self):
        cdef neighbour.neigh_stats *st = &self.t.stats
        return {"solicits": st.solicits, "unres_discards": st.unres_discards,
                "failed": st.failed, "resolved": st.resolved, "sent": st.sent,
                "first_solicit_jiffies": st.first_solicit_jiffies,
                "last_solicit_jiffies": st.last_solicit_jiffies}

    @property
    def xmitted(self):
        return [self.s.xmitted[i] for i in range(min(self.s.nxmit, 64))]

    @property
    def errored(self):
        return [self.s.errored[i] for i in range(min(self.s.nerr, 64))]


def arp_ping_run(unsigned char[::1] seg, int cpu, int link_region, int results_region,
                 int neigh_region, int ctl_region, uint32_t hz, str probe, uint32_t trials,
                 uint32_t count, uint64_t seed, bint at_tick=False, double wire_arp_us=0,
                 double wire_echo_us=0):
    """Host A: `trials` times, `arp -d` the peer, wait for the next tick
    boundary and then a random part of a tick (a person's typing is not in
    phase with the timer wheel), or with `at_tick` nothing more (ping woken
    by a tick-driven scheduler runs just after the tick), then
    `ping -c count`: each echo request waits for its reply (or error)
    before the next, except with the peer down, when all go at once and wait
    together for resolution to fail. wire_arp_us, wire_echo_us: the
    calibrated cost of an ARP frame's and an echo frame's trip, spent by
    its receiver (link_wire_delay). Returns its TSC cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef link.host_a h
    cdef link.arp_ctl *ctl
    cdef uint64_t t0, t1, until, limit, x = seed | 1
    cdef uint32_t trial, k, i
    cdef bint peer_down
    check_cpu(hdr, cpu)
    if probe not in PROBE_MODES:
        raise ValueError(f"no probe mode {probe!r}")
    if trials < 1 or count < 1:
        raise ValueError("trials and count must be at least 1")
    if <object>trials * <object>count > 0xffffffff:   # Python ints: no wrap-around
        raise ValueError("trials * count must fit in 32 bits")
    check_region(hdr, link_region, sizeof(link.link_ring), 2)
    check_array(hdr, results_region, sizeof(link.ping_result), trials * count)
    check_region(hdr, neigh_region, sizeof(neighbour.neigh_table), 1)
    check_region(hdr, ctl_region, sizeof(link.arp_ctl), 1)
    memset(&h, 0, sizeof(h))
    h.tbl = <neighbour.neigh_table *>per_cpu_ptr(hdr, neigh_region, 0)
    memset(h.tbl, 0, sizeof(neighbour.neigh_table))
    parms_init(&h.tbl.parms, hz, PROBE_MODES[probe], UNRES_QLEN_BYTES)
    h.tx = <link.link_ring *>per_cpu_ptr(hdr, link_region, 0)
    h.rx = <link.link_ring *>per_cpu_ptr(hdr, link_region, 1)
    h.results = <link.ping_result *>per_cpu_ptr(hdr, results_region, 0)
    h.nr_results = trials * count
    h.tick_cycles = hdr.tsc_hz / hz
    wire_costs(h.wire, hdr.tsc_hz, wire_arp_us, wire_echo_us)
    h.out.solicit = link.host_a_solicit
    h.out.xmit = link.host_a_xmit
    h.out.error = link.host_a_error
    h.out.arg = &h
    ctl = <link.arp_ctl *>per_cpu_ptr(hdr, ctl_region, 0)
    ctl.a_tick_cycles = h.tick_cycles     # for the row: the jiffy host A's timers ran on
    peer_down = ctl.peer_down != 0
    limit = <uint64_t>(10.0 * hdr.tsc_hz)       # no reply in 10 s: a timeout
    with nogil:
        t0 = tsc_start()
        h.boot_tsc = t0
        h.last_jiffies = link.host_a_jiffies(&h, t0)
        for trial in range(trials):
            if smp_should_stop(hdr):
                break
            neighbour.neigh_delete(h.tbl, link.HOST_B_IP)
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
            # the ping starts at a random phase of a tick, counted from the
            # next tick boundary (not from now): trial k of two runs with
            # one RNG seed starts at the same phase, so the probe modes'
            # trials pair (experiments/arp.py)
            t1 = tsc_read_unordered() - h.boot_tsc
            until = h.boot_tsc + <uint64_t>(
                (<uint64_t>(t1 / h.tick_cycles) + 1 + (0 if at_tick else (x % 1000000) * 1e-6))
                * h.tick_cycles)
            while tsc_read_unordered() < until:
                link.host_a_poll(&h)
            if peer_down:
                for k in range(count):
                    link.host_a_ping(&h, trial * count + k)
            for k in range(count):
                i = trial * count + k
                if not peer_down:
                    link.host_a_ping(&h, i)
                while h.results[i].status == link.PING_PENDING and not smp_should_stop(hdr):
                    link.host_a_poll(&h)
                    if tsc_read_unordered() - h.results[i].tstamp > limit:
                        h.results[i].status = link.PING_TIMEOUT
                    smp_spin_wait(hdr)  # pause; yield if host B shares this CPU
        t1 = tsc_stop()
        atomic_set(&ctl.done, 1)
    return t1 - t0


cdef void wire_costs(uint64_t *wire, double tsc_hz, double arp_us, double echo_us) except *:
    """link_wire_delay()'s costs, by frame type, in TSC cycles."""
    if not (0 <= arp_us <= 1e6 and 0 <= echo_us <= 1e6):
        raise ValueError(f"wire costs must be 0 to 1e6 us, got {arp_us}, {echo_us}")
    memset(wire, 0, link.NR_FRAME_TYPES * sizeof(uint64_t))
    wire[link.FRAME_ARP_REQUEST] = wire[link.FRAME_ARP_REPLY] = <uint64_t>(arp_us * 1e-6 * tsc_hz)
    wire[link.FRAME_ECHO] = wire[link.FRAME_ECHO_REPLY] = <uint64_t>(echo_us * 1e-6 * tsc_hz)


def arp_responder_run(unsigned char[::1] seg, int cpu, int link_region, int ctl_region,
                      uint32_t hz, double wire_arp_us=0, double wire_echo_us=0):
    """Host B: answer ARP requests (learning A) and echo requests until
    host A is done, each after its calibrated wire cost (see arp_ping_run).
    Returns the frames it handled."""
    cdef smp_header *hdr = segment_header(seg)
    cdef neighbour.neigh_table tbl
    cdef link.arp_ctl *ctl
    cdef link.link_ring *rx
    cdef link.link_ring *tx
    cdef uint64_t handled = 0, boot
    cdef double tick
    cdef uint64_t wire[link.NR_FRAME_TYPES]
    cdef int k
    check_cpu(hdr, cpu)
    check_region(hdr, link_region, sizeof(link.link_ring), 2)
    check_region(hdr, ctl_region, sizeof(link.arp_ctl), 1)
    memset(&tbl, 0, sizeof(tbl))
    parms_init(&tbl.parms, hz, neighbour.PROBE_IMMEDIATE, UNRES_QLEN_BYTES)
    rx = <link.link_ring *>per_cpu_ptr(hdr, link_region, 0)
    tx = <link.link_ring *>per_cpu_ptr(hdr, link_region, 1)
    ctl = <link.arp_ctl *>per_cpu_ptr(hdr, ctl_region, 0)
    tick = hdr.tsc_hz / hz
    wire_costs(wire, hdr.tsc_hz, wire_arp_us, wire_echo_us)
    with nogil:
        boot = tsc_read_unordered()
        while not smp_should_stop(hdr) and not atomic_read(&ctl.done):
            k = link.host_b_poll(rx, tx, ctl, &tbl,
                              1000 + <uint64_t>((tsc_read_unordered() - boot) / tick), wire)
            handled += k
            if k == 0:
                smp_spin_wait(hdr)
    return handled
