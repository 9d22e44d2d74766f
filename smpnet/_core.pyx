# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""smpnet._core: the C side of smpnet.

Everything that is measured runs here, in nogil C: the loops call only the
inline functions of smpnet/kernel/*.h, never back into Python. Python code
calls in once per round (or once per run) and gets totals back.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memset
from posix.time cimport timespec, nanosleep

from smpnet.kernel.compiler cimport barrier, cpu_relax
from smpnet.kernel.tsc cimport (SMPNET_HAVE_TSC, tsc_start, tsc_stop, tsc_rdtscp, tsc_read_unordered,
                                mono_raw_ns, mono_ns, smp_cpuid)
from smpnet.kernel.atomic cimport (atomic_set, atomic_read, atomic_cmpxchg, this_cpu_cmpxchg,
                                   atomic_inc)
from smpnet.kernel cimport skbuff as N
from smpnet.kernel.skbuff cimport net_ctx, sk_buff, softnet_data
from smpnet.kernel cimport loopback as L
from smpnet.kernel cimport neighbour as A
from smpnet.kernel.compiler cimport SMP_CACHE_BYTES
from smpnet.kernel.percpu cimport (smp_header, cpu_state, irq_cpustat, smp_structs,
                                   smp_struct, smp_field, per_cpu_ptr, REGION_CPU, REGION_IRQ)
from smpnet.kernel cimport percpu as P
from smpnet.kernel.smp cimport (cpu_ctx, cpu_ctx_init, smp_barrier_wait, cpu_idle_poll, spinlock,
                                smp_should_stop, smp_spin_wait)
from smpnet.kernel.irqflags cimport (IRQ_TEST, IPI_NET_RX, HI_SOFTIRQ, NET_RX_SOFTIRQ,
                                     NR_SOFTIRQS, NR_IRQ_VECTORS, do_softirq,
                                     irq_handlers, softirq_vec,
                                     preempt_disable, preempt_enable,
                                     local_irq_disable, local_irq_enable, local_irq_save,
                                     local_irq_restore, local_bh_disable, local_bh_enable,
                                     raise_softirq, irq_poll, send_ipi, irqs_disabled)
from smpnet.kernel.spinlock cimport (spinlock_t, spin_lock, spin_unlock, spin_lock_bh,
                                     spin_unlock_bh, spin_lock_irq, spin_unlock_irq,
                                     spin_lock_irqsave, spin_unlock_irqrestore,
                                     spin_lock_variant, spin_unlock_variant, spin_lock_init,
                                     lockdep_end, SPIN_TAS, SPIN_TTAS, SPIN_TICKET,
                                     SPIN_QSPINLOCK, SPIN_PTHREAD, VARIANT_PLAIN, VARIANT_BH,
                                     VARIANT_IRQ, VARIANT_IRQSAVE, VARIANT_IRQSAVE_BEFORE_LOCK,
                                     VARIANT_IRQ_DISABLE_BEFORE_LOCK)

cdef extern from "sys/prctl.h" nogil:
    int prctl(int option, unsigned long arg2, unsigned long arg3,
              unsigned long arg4, unsigned long arg5)
    enum: PR_SET_PDEATHSIG

cdef extern from *:
    """
    #ifndef SMPNET_CYTHON_VERSION
    #define SMPNET_CYTHON_VERSION "unknown"
    #endif
    """
    const char *SMPNET_CYTHON_VERSION

cdef extern from "time_bench.h" nogil:
    void tb_empty_function()
    void (*tb_function_ptr)()

cdef extern from "reference.h" nogil:
    uint64_t ref_spin_lock_unlock(uint32_t *preempt_count, uint32_t *lock, uint64_t loops)

cdef extern from "spinlock_types.h" nogil:
    struct lock_slot:
        spinlock_t lock
        uint64_t counter


HAVE_TSC = bool(SMPNET_HAVE_TSC)
CYTHON_VERSION = SMPNET_CYTHON_VERSION.decode()


# ---------------------------------------------------------------- clocks

def read_tsc():
    """One serialized TSC read (lfence; rdtsc; lfence)."""
    return tsc_start()


def read_tscp():
    """(tsc, aux) from rdtscp; Linux sets aux to (node << 12) | cpu."""
    cdef uint32_t aux = 0
    cdef uint64_t t = tsc_rdtscp(&aux)
    return t, aux


def cpuid(uint32_t leaf, uint32_t sub=0):
    """(eax, ebx, ecx, edx) of CPUID leaf/subleaf, or None where there is none."""
    cdef uint32_t r[4]
    if not smp_cpuid(leaf, sub, r):
        return None
    return (r[0], r[1], r[2], r[3])


def tsc_calibrate(uint64_t window_ns):
    """TSC ticks against CLOCK_MONOTONIC_RAW over one sleeping window.

    Each end reads the raw clock on both sides of the TSC read; returns
    (tsc_delta, ns_delta, ns_uncertainty), the uncertainty being how long
    those bracketing reads took (a preemption there shows up in it).
    """
    cdef timespec ts
    cdef uint64_t a0, b0, t0, a1, b1, t1
    ts.tv_sec = window_ns // 1000000000
    ts.tv_nsec = window_ns % 1000000000
    with nogil:
        a0 = mono_raw_ns()
        t0 = tsc_start()
        b0 = mono_raw_ns()
        nanosleep(&ts, NULL)
        a1 = mono_raw_ns()
        t1 = tsc_start()
        b1 = mono_raw_ns()
    return t1 - t0, (a1 + b1) // 2 - (a0 + b0) // 2, (b0 - a0) + (b1 - a1)


# ---------------------------------------------------------------- layout

def c_layout():
    """{struct: (sizeof, {field: (offset, size)})} as the C compiler laid them out."""
    cdef const smp_struct *s = smp_structs
    cdef const smp_field *f
    out = {}
    while s.name != NULL:
        fields = {}
        f = s.fields
        while f.name != NULL:
            fields[f.name.decode()] = (f.offset, f.size)
            f += 1
        out[s.name.decode()] = (s.size, fields)
        s += 1
    return out


def c_constants():
    """The headers' constants that smpnet/layout.py repeats, for verify()."""
    return {
        "SMPNET_MAGIC": P.SMPNET_MAGIC, "SMPNET_LAYOUT_VERSION": P.SMPNET_LAYOUT_VERSION,
        "SMPNET_MAX_REGIONS": P.SMPNET_MAX_REGIONS, "SMPNET_REGION_NAME": P.SMPNET_REGION_NAME,
        "SMP_F_OVERSUBSCRIBED": P.SMP_F_OVERSUBSCRIBED, "SMP_CACHE_BYTES": SMP_CACHE_BYTES,
        "CPU_OFFLINE": P.CPU_OFFLINE, "CPU_ONLINE": P.CPU_ONLINE,
        "CPU_RUNNING": P.CPU_RUNNING, "CPU_DONE": P.CPU_DONE,
        "LOCKDEP_NR_BUGS": P.LOCKDEP_NR_BUGS, "MAX_NODES": P.MAX_NODES,
        "REGION_CPU": P.REGION_CPU, "REGION_SOFTNET": P.REGION_SOFTNET,
        "REGION_LSTATS": P.REGION_LSTATS, "REGION_IRQ": P.REGION_IRQ,
        "REGION_QNODES": P.REGION_QNODES, "REGION_NR_BUILTIN": P.REGION_NR_BUILTIN,
        "NAPI_SKB_CACHE_SIZE": N.NAPI_SKB_CACHE_SIZE, "FLUSH_HIST_BUCKETS": N.FLUSH_HIST_BUCKETS,
        "SKB_RING_SIZE": N.SKB_RING_SIZE, "SKB_FREE": N.SKB_FREE, "SKB_LIVE": N.SKB_LIVE,
        "SKB_DEFERRED": N.SKB_DEFERRED, "FLUSH_SAMPLES": N.FLUSH_SAMPLES,
    }


# ---------------------------------------------------------------- machine

cdef inline smp_header *segment_header(unsigned char[::1] seg) except NULL:
    # Python-side callers only: raises on a buffer too small to be a segment
    if <size_t>seg.shape[0] < sizeof(smp_header):
        raise ValueError("segment smaller than its header")
    return <smp_header *>&seg[0]


def set_pdeathsig(int sig):
    """Have the kernel send `sig` to this process when its parent dies, so a
    worker never outlives a coordinator killed with SIGKILL."""
    if prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_PDEATHSIG) failed")


def smp_stop(unsigned char[::1] seg):
    """Raise the stop flag that every spin loop polls."""
    atomic_set(&segment_header(seg).stop, 1)


cdef inline int check_cpu(smp_header *hdr, int cpu) except -1:
    if cpu < 0 or <uint32_t>cpu >= hdr.nr_cpus:
        raise ValueError(f"no CPU {cpu} in this segment ({hdr.nr_cpus} CPUs)")
    return 0


def barrier_wait(unsigned char[::1] seg, int cpu):
    """Wait at the start barrier as emulated CPU `cpu`; False if stopped first."""
    cdef smp_header *hdr = segment_header(seg)
    check_cpu(hdr, cpu)
    cdef cpu_state *cs = <cpu_state *>per_cpu_ptr(hdr, REGION_CPU, cpu)
    cdef int rc
    with nogil:
        rc = smp_barrier_wait(hdr, cs)
    return rc == 0


def idle_poll(unsigned char[::1] seg, double timeout_s):
    """Spin, polling the stop flag, until it is raised or timeout_s passes.
    Returns True if it was stopped."""
    cdef smp_header *hdr = segment_header(seg)
    if not 0 <= timeout_s <= 1e6:
        raise ValueError(f"timeout_s must be in [0, 1e6], got {timeout_s}")
    cdef uint64_t timeout_ns = <uint64_t>(timeout_s * 1e9)
    with nogil:
        cpu_idle_poll(hdr, timeout_ns)
    return atomic_read(&hdr.stop) != 0



# ---------------------------------------------------------------- IRQ model
#
# The test IRQ (vector IRQ_TEST) and the test softirq (HI_SOFTIRQ) take
# c.irq_test_lock, if one is set, the way a driver's handler takes its
# lock: that is how a test provokes the checker's inversion reports.

cdef void irq_test_handler(cpu_ctx *c, unsigned int vector) noexcept nogil:
    if c.irq_test_lock != NULL:
        if spin_lock(c, <spinlock_t *>c.irq_test_lock) == 0:
            spin_unlock(c, <spinlock_t *>c.irq_test_lock)


cdef void softirq_test_action(cpu_ctx *c) noexcept nogil:
    irq_test_handler(c, 0)

irq_handlers[IRQ_TEST] = irq_test_handler
softirq_vec[HI_SOFTIRQ] = softirq_test_action
N.net_dev_init()   # the NET_RX softirq and the defer kick's IPI


cdef inline lock_slot *slot_ptr(smp_header *hdr, int region, int index) noexcept nogil:
    return <lock_slot *>per_cpu_ptr(hdr, region, index)


cdef lock_slot *checked_slot(smp_header *hdr, int region, int index) except NULL:
    """Lock `index` of region `region`, after checking that it is one."""
    if region < 0 or <uint32_t>region >= hdr.nr_regions:
        raise ValueError(f"no region {region} in this segment")
    if hdr.regions[region].stride < sizeof(lock_slot):
        raise ValueError(f"region {region} does not hold locks")
    if index < 0 or <uint32_t>index >= hdr.regions[region].count:
        raise IndexError(f"no lock {index} in region {region}")
    return slot_ptr(hdr, region, index)


cdef int check_region(smp_header *hdr, int region, size_t record, uint32_t count) except -1:
    """Region `region` exists, has records of at least `record` bytes, and
    at least `count` of them: what a C loop will index it with."""
    if region < 0 or <uint32_t>region >= hdr.nr_regions:
        raise ValueError(f"no region {region} in this segment")
    if hdr.regions[region].stride < record:
        raise ValueError(f"region {region}: records of {hdr.regions[region].stride} bytes, "
                         f"{record} needed")
    if hdr.regions[region].count < count:
        raise ValueError(f"region {region}: {hdr.regions[region].count} records, {count} needed")
    return 0


cdef int check_array(smp_header *hdr, int region, size_t record, uint32_t count) except -1:
    """Like check_region, for a region C indexes as an array: its stride
    must be the struct's size exactly."""
    check_region(hdr, region, record, count)
    if hdr.regions[region].stride != record:
        raise ValueError(f"region {region}: stride {hdr.regions[region].stride}, "
                         f"C indexes it by {record}")
    return 0


cdef int net_ctx_setup(net_ctx *n, cpu_ctx *c, regions, int strategy,
                       uint32_t defer_max) except -1:
    """Fill a net_ctx for CPU c from the (skb, pool, cache, stats) regions."""
    cdef smp_header *hdr = c.hdr
    skb_r, pool_r, cache_r, stats_r = regions
    check_array(hdr, skb_r, sizeof(sk_buff), 1)
    check_region(hdr, pool_r, sizeof(N.skb_pool), 1)
    check_region(hdr, cache_r, sizeof(N.napi_alloc_cache), hdr.nr_cpus)
    check_region(hdr, stats_r, sizeof(N.skb_stats), hdr.nr_cpus)
    if strategy < N.DEFER_IRQSAVE or strategy > N.DEFER_LLIST:
        raise ValueError(f"no defer strategy {strategy}")
    if defer_max < 1:
        raise ValueError("defer_max must be at least 1")
    memset(n, 0, sizeof(net_ctx))
    n.skbs = <sk_buff *>per_cpu_ptr(hdr, skb_r, 0)
    n.nr_skbs = hdr.regions[skb_r].count
    n.pool = <N.skb_pool *>per_cpu_ptr(hdr, pool_r, 0)
    n.cache_region = cache_r
    n.stats_region = stats_r
    n.cache = <N.napi_alloc_cache *>per_cpu_ptr(hdr, cache_r, c.cpu)
    n.stats = <N.skb_stats *>per_cpu_ptr(hdr, stats_r, c.cpu)
    n.strategy = strategy
    n.defer_max = defer_max
    n.budget_tsc = <uint64_t>(N.NETDEV_BUDGET_USECS * 1e-6 * hdr.tsc_hz)
    return 0


def net_init(unsigned char[::1] seg, regions, int lock_algo):
    """Put every skb in the shared pool, empty the caches, zero the stats,
    and reset each CPU's defer list and defer_lock (for `lock_algo`)."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef uint32_t i
    cdef int cpu
    cdef softnet_data *sd
    cpu_ctx_init(&c, hdr, 0, 0, 0)
    net_ctx_setup(&n, &c, regions, 0, 1)
    skb_r, pool_r, cache_r, stats_r = regions
    for i in range(n.nr_skbs):
        n.skbs[i].next = i + 2 if i + 1 < n.nr_skbs else 0
        n.skbs[i].state = N.SKB_FREE
    if spin_lock_init(&n.pool.lock, lock_algo, 0xfffffffe) != 0:
        raise OSError("pthread_mutex_init failed")
    n.pool.head = 1 if n.nr_skbs else 0
    n.pool.count = n.nr_skbs
    n.pool.total = n.nr_skbs
    for cpu in range(hdr.nr_cpus):
        memset(per_cpu_ptr(hdr, cache_r, cpu), 0, hdr.regions[cache_r].stride)
        memset(per_cpu_ptr(hdr, stats_r, cpu), 0, hdr.regions[stats_r].stride)
        sd = N.softnet(&c, cpu)
        memset(sd, 0, 16)   # processed, time_squeeze, dropped, poll_list
        sd.defer_list = 0
        sd.defer_count = 0
        sd.defer_ipi_scheduled = 0
        sd.poll_list = 0
        if spin_lock_init(&sd.defer_lock, lock_algo, 0x80000000u + cpu) != 0:
            raise OSError("pthread_mutex_init failed")


def defer_rx_run(unsigned char[::1] seg, int cpu, regions, int ring_region, int strategy,
                 uint32_t defer_max, int n_rx, int n_consumers, int ctl_region,
                 uint64_t skbs, double duration_s, bint check=False, bint popf=False):
    """An RX CPU of the defer experiment: NAPI polls receive skbs (allocate
    them here) into the consumers' rings until `skbs` were received or
    duration_s passed; net_rx_action flushes what consumers defer back; ends
    with a last flush once every consumer is done. Returns its TSC cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef N.defer_ctl *ctl
    cdef uint64_t t0, t1
    cdef bint sending_done = False
    check_cpu(hdr, cpu)
    if cpu >= n_rx:
        raise ValueError(f"CPU {cpu} is not an RX CPU")
    if not 0 <= duration_s <= 1e6:
        raise ValueError(f"duration_s must be in [0, 1e6], got {duration_s}")
    cpu_ctx_init(&c, hdr, cpu, check, popf)
    net_ctx_setup(&n, &c, regions, strategy, defer_max)
    setup_rings(&n, hdr, ring_region, n_rx, n_consumers)
    check_region(hdr, ctl_region, sizeof(N.defer_ctl), 1)
    ctl = <N.defer_ctl *>per_cpu_ptr(hdr, ctl_region, 0)
    c.net = &n
    n.to_send = skbs if skbs else <uint64_t>-1
    with nogil:
        t0 = tsc_start()
        n.send_deadline = t0 + <uint64_t>(duration_s * hdr.tsc_hz) if duration_s > 0 else <uint64_t>-1
        while not smp_should_stop(hdr):
            if n.to_send and tsc_read_unordered() >= n.send_deadline:
                n.to_send = 0
            if n.to_send:
                N.napi_schedule(&c)         # the device's IRQ
            elif not sending_done:
                sending_done = True
                atomic_inc(&ctl.rx_done)
            if c.irq.softirq_pending:
                do_softirq(&c)              # irq_exit: net_rx_action
            irq_poll(&c)                    # defer kicks
            if sending_done:
                if atomic_read(&ctl.consumers_done) == <uint32_t>n_consumers:
                    local_bh_disable(&c)    # the flush runs where net_rx_action would
                    N.skb_defer_free_flush(&c, &n)  # the last deferred skbs come home
                    local_bh_enable(&c)
                    break
                smp_spin_wait(hdr)
        t1 = tsc_stop()
        lockdep_end(&c)
    return t1 - t0


def defer_consumer_run(unsigned char[::1] seg, int cpu, regions, int ring_region, int strategy,
                       uint32_t defer_max, int n_rx, int n_consumers, int ctl_region,
                       uint32_t batch, bint check=False, bint popf=False):
    """A consumer CPU (the socket owner): take skbs off its rings, `batch` at
    a time from each, read them, and free them with skb_attempt_defer_free()
    (1 call in 8 timed); ends when every RX CPU is done and its rings are
    empty. Returns its TSC cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef N.defer_ctl *ctl
    cdef N.skb_ring *r
    cdef sk_buff *skb
    cdef uint64_t t0, t1, v, ts, got, sink = 0
    cdef uint32_t k
    cdef int rx, me = cpu - n_rx
    check_cpu(hdr, cpu)
    if me < 0 or me >= n_consumers:
        raise ValueError(f"CPU {cpu} is not a consumer")
    if batch < 1:
        raise ValueError("batch must be at least 1")
    cpu_ctx_init(&c, hdr, cpu, check, popf)
    net_ctx_setup(&n, &c, regions, strategy, defer_max)
    setup_rings(&n, hdr, ring_region, n_rx, n_consumers)
    check_region(hdr, ctl_region, sizeof(N.defer_ctl), 1)
    ctl = <N.defer_ctl *>per_cpu_ptr(hdr, ctl_region, 0)
    c.net = &n
    with nogil:
        t0 = tsc_start()
        while not smp_should_stop(hdr):
            got = 0
            for rx in range(n_rx):
                r = N.ring_of(&n, rx, me)
                k = 0
                while k < batch and N.ring_pop(r, &v):
                    k += 1
                    skb = N.skb_of(&n, <uint32_t>v)
                    if skb.gen != <uint32_t>(v >> 32) or skb.state != N.SKB_LIVE:
                        n.stats.stale += 1
                        continue
                    sink += skb.hash            # the receiver reads the packet
                    n.stats.received += 1
                    if (n.defer_calls & N.DEFER_SAMPLE_MASK) == 0:
                        ts = tsc_start()
                        N.skb_attempt_defer_free(&c, &n, skb)
                        n.stats.defer_cycles += tsc_stop() - ts
                        n.stats.defer_samples += 1
                    else:
                        N.skb_attempt_defer_free(&c, &n, skb)
                    n.defer_calls += 1
                got += k
            irq_poll(&c)
            if got == 0:
                if atomic_read(&ctl.rx_done) == <uint32_t>n_rx and rings_empty(&n, me):
                    break
                smp_spin_wait(hdr)
        t1 = tsc_stop()
        atomic_inc(&ctl.consumers_done)
        lockdep_end(&c)
    return t1 - t0, sink


cdef int setup_rings(net_ctx *n, smp_header *hdr, int ring_region, int n_rx,
                     int n_consumers) except -1:
    if n_rx < 1 or n_consumers < 1 or n_rx + n_consumers != <int>hdr.nr_cpus:
        raise ValueError("every CPU must be an RX CPU or a consumer")
    check_region(hdr, ring_region, sizeof(N.skb_ring), <uint32_t>(n_rx * n_consumers))
    n.rings = <N.skb_ring *>per_cpu_ptr(hdr, ring_region, 0)
    n.ring_stride = hdr.regions[ring_region].stride
    n.n_rx = n_rx
    n.n_consumers = n_consumers
    return 0


cdef bint rings_empty(net_ctx *n, int me) noexcept nogil:
    cdef int rx
    cdef N.skb_ring *r
    for rx in range(n.n_rx):
        r = N.ring_of(n, rx, me)
        if atomic_read(&r.tail) != atomic_read(&r.head):
            return False
    return True


cdef int loopback_setup(net_ctx *n, cpu_ctx *c, int dev_region, int lo_region, int mode,
                        bint ack_in_rx, bint ack_storm, uint32_t thread_size) except -1:
    """Add the loopback device and protocol to a net_ctx."""
    cdef smp_header *hdr = c.hdr
    check_region(hdr, dev_region, sizeof(L.net_device), 1)
    check_region(hdr, lo_region, sizeof(L.lo_stats), hdr.nr_cpus)
    if mode < L.LO_NETIF_RX or mode > L.LO_DIRECT_UNGUARDED:
        raise ValueError(f"no loopback mode {mode}")
    if not L.STACK_BASE < thread_size <= 65536:
        # the emulated recursion is real C recursion: keep it far from the real stack's end
        raise ValueError(f"thread_size must be {L.STACK_BASE + 1} to 65536 bytes, got {thread_size}")
    n.dev = per_cpu_ptr(hdr, dev_region, 0)
    n.lo = per_cpu_ptr(hdr, lo_region, c.cpu)
    n.lo_mode = mode
    n.ack_in_rx = ack_in_rx
    n.ack_storm = ack_storm
    n.thread_size = thread_size
    n.stack_used = L.STACK_BASE
    return 0


def loopback_run(unsigned char[::1] seg, int cpu, regions, int dev_region, int lo_region,
                 int mode, bint ack_in_rx, bint ack_storm, uint32_t size, uint64_t packets,
                 double duration_s, uint32_t thread_size, bint check=False):
    """One CPU's tbench-like client and server over loopback until it has
    sent `packets` packets (0: no limit) or duration_s passed, or its
    emulated stack overflowed. Each send goes through dev_queue_xmit's BH
    section, whose local_bh_enable() runs the NET_RX softirq. Returns its
    TSC cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef L.lo_stats *lo
    cdef uint64_t t0, t1, deadline
    cdef int rounds
    check_cpu(hdr, cpu)
    if packets == 0 and duration_s <= 0:
        raise ValueError("give packets or duration_s")
    if not 0 <= duration_s <= 1e6:
        raise ValueError(f"duration_s must be in [0, 1e6], got {duration_s}")
    if size < 1 or size > 65535:
        raise ValueError(f"size must be 1 to 65535 bytes, got {size}")
    cpu_ctx_init(&c, hdr, cpu, check, False)
    net_ctx_setup(&n, &c, regions, N.DEFER_IRQ, 64)
    loopback_setup(&n, &c, dev_region, lo_region, mode, ack_in_rx, ack_storm, thread_size)
    lo = <L.lo_stats *>n.lo
    c.net = &n
    with nogil:
        t0 = tsc_start()
        deadline = t0 + <uint64_t>(duration_s * hdr.tsc_hz) if duration_s > 0 else <uint64_t>-1
        while not smp_should_stop(hdr) and not lo.overflow:
            if packets and lo.xmits >= packets:
                break
            if tsc_read_unordered() >= deadline:
                break
            if n.stats.alloc_failed:        # the pool is dry: nothing more can be sent
                break
            xmit_bh(&c, &n, L.PKT_REQUEST, size)          # the client
            while lo.server_pending and not lo.overflow:  # the server application
                lo.server_pending -= 1
                xmit_bh(&c, &n, L.PKT_REPLY, size)
            while lo.client_pending:                      # the client reads replies
                lo.client_pending -= 1
                lo.transactions += 1
        # what is still queued runs a few more softirq rounds, then the
        # device goes down (an ACK storm never drains by itself)
        rounds = 0
        while c.irq.softirq_pending and rounds < 10 and not lo.overflow and not ack_storm:
            local_bh_disable(&c)
            local_bh_enable(&c)
            rounds += 1
        L.loopback_purge(&c, &n)
        t1 = tsc_stop()
        lockdep_end(&c)
    return t1 - t0


cdef inline int xmit_bh(cpu_ctx *c, net_ctx *n, int type, uint32_t size) noexcept nogil:
    # dev_queue_xmit(): BHs off around the transmit; turning them back on
    # runs the NET_RX softirq that netif_rx() raised
    cdef int rc
    local_bh_disable(c)
    rc = L.loopback_send(c, n, type, size)
    local_bh_enable(c)
    return rc


# ---------------------------------------------------------------- ARP (seed 000)

PROBE_MODES = {"timer": A.PROBE_TIMER, "immediate": A.PROBE_IMMEDIATE}
UNRES_QLEN_BYTES = 212992   # net.ipv4.neigh.default.unres_qlen_bytes (SK_WMEM_MAX)


cdef int parms_init(A.neigh_parms *p, uint32_t hz, int probe, uint32_t queue_len_bytes) except -1:
    """The kernel's neighbour defaults (net.ipv4.neigh.default.*), in jiffies at `hz`."""
    if hz not in (100, 250, 300, 1000):
        raise ValueError(f"HZ must be 100, 250, 300 or 1000, got {hz}")
    if probe not in (A.PROBE_TIMER, A.PROBE_IMMEDIATE):
        raise ValueError(f"no probe mode {probe}")
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


cdef struct sink:
    # what the state machine sent, for Neigh's callers: counts and the last seqs
    uint32_t xmitted[64]
    uint32_t nxmit
    uint32_t errored[64]
    uint32_t nerr


cdef void sink_xmit(void *arg, A.neighbour *n, uint32_t seq, uint32_t size,
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
    cdef A.neigh_table t
    cdef A.neigh_out out
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

    cdef A.neighbour *_n(self, uint64_t now):
        return A.neigh_create(&self.t, A.HOST_B_IP, now)

    def event_send(self, uint64_t now, uint32_t seq=0, uint32_t size=A.PING_SIZE):
        """neigh_event_send(): 0 sent now, 1 queued, -1 dropped."""
        return A.neigh_event_send(&self.t, self._n(now), now, seq, size, 0, &self.out)

    def tick(self, uint64_t now):
        """The timer wheel at jiffy `now`: run the entry's timer if it is due."""
        A.neigh_run_timers(&self.t, now, &self.out)

    def arp_reply(self, uint64_t now):
        """The peer answered: neigh_update(REACHABLE), queued packets go out."""
        cdef uint8_t ha[8]
        memset(ha, 0xbb, 8)
        A.neigh_update(&self.t, self._n(now), ha, 0x02, now, &self.out)

    def delete(self):
        """`arp -d`."""
        A.neigh_delete(&self.t, A.HOST_B_IP)

    cdef A.neighbour *_entry(self):
        return A.neigh_lookup(&self.t, A.HOST_B_IP)

    @property
    def state(self):
        cdef A.neighbour *n = self._entry()
        return 0 if n == NULL else n.nud_state

    @property
    def probes(self):
        cdef A.neighbour *n = self._entry()
        return 0 if n == NULL else n.probes

    @property
    def timer(self):
        """The armed expiry in jiffies, or 0."""
        cdef A.neighbour *n = self._entry()
        return 0 if n == NULL else n.timer

    @property
    def queued(self):
        cdef A.neighbour *n = self._entry()
        if n == NULL:
            return 0, 0
        return n.arpq_len, n.arpq_bytes

    @property
    def stats(self):
        cdef A.neigh_stats *st = &self.t.stats
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
                 uint32_t count, uint64_t seed):
    """Host A: `trials` times, `arp -d` the peer, wait a random part of a
    tick (a person's typing is not in phase with the timer wheel), then
    `ping -c count`: each echo request waits for its reply (or error)
    before the next, except with the peer down, when all go at once and wait
    together for resolution to fail. Returns its TSC cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef A.host_a h
    cdef A.arp_ctl *ctl
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
    check_region(hdr, link_region, sizeof(A.link_ring), 2)
    check_array(hdr, results_region, sizeof(A.ping_result), trials * count)
    check_region(hdr, neigh_region, sizeof(A.neigh_table), 1)
    check_region(hdr, ctl_region, sizeof(A.arp_ctl), 1)
    memset(&h, 0, sizeof(h))
    h.tbl = <A.neigh_table *>per_cpu_ptr(hdr, neigh_region, 0)
    memset(h.tbl, 0, sizeof(A.neigh_table))
    parms_init(&h.tbl.parms, hz, PROBE_MODES[probe], UNRES_QLEN_BYTES)
    h.tx = <A.link_ring *>per_cpu_ptr(hdr, link_region, 0)
    h.rx = <A.link_ring *>per_cpu_ptr(hdr, link_region, 1)
    h.results = <A.ping_result *>per_cpu_ptr(hdr, results_region, 0)
    h.nr_results = trials * count
    h.tick_cycles = hdr.tsc_hz / hz
    h.out.solicit = A.host_a_solicit
    h.out.xmit = A.host_a_xmit
    h.out.error = A.host_a_error
    h.out.arg = &h
    ctl = <A.arp_ctl *>per_cpu_ptr(hdr, ctl_region, 0)
    peer_down = ctl.peer_down != 0
    limit = <uint64_t>(10.0 * hdr.tsc_hz)       # no reply in 10 s: a timeout
    with nogil:
        t0 = tsc_start()
        h.boot_tsc = t0
        h.last_jiffies = A.host_a_jiffies(&h, t0)
        for trial in range(trials):
            if smp_should_stop(hdr):
                break
            A.neigh_delete(h.tbl, A.HOST_B_IP)
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
            until = tsc_read_unordered() + <uint64_t>((x % 1000000) * 1e-6 * h.tick_cycles)
            while tsc_read_unordered() < until:
                A.host_a_poll(&h)
            if peer_down:
                for k in range(count):
                    A.host_a_ping(&h, trial * count + k)
            for k in range(count):
                i = trial * count + k
                if not peer_down:
                    A.host_a_ping(&h, i)
                while h.results[i].status == A.PING_PENDING and not smp_should_stop(hdr):
                    A.host_a_poll(&h)
                    if tsc_read_unordered() - h.results[i].tstamp > limit:
                        h.results[i].status = A.PING_TIMEOUT
                    smp_spin_wait(hdr)  # pause; yield if host B shares this CPU
        t1 = tsc_stop()
        atomic_set(&ctl.done, 1)
    return t1 - t0


def arp_responder_run(unsigned char[::1] seg, int cpu, int link_region, int ctl_region,
                      uint32_t hz):
    """Host B: answer ARP requests (learning A) and echo requests until
    host A is done. Returns the frames it handled."""
    cdef smp_header *hdr = segment_header(seg)
    cdef A.neigh_table tbl
    cdef A.arp_ctl *ctl
    cdef A.link_ring *rx
    cdef A.link_ring *tx
    cdef uint64_t handled = 0, boot
    cdef double tick
    cdef int k
    check_cpu(hdr, cpu)
    check_region(hdr, link_region, sizeof(A.link_ring), 2)
    check_region(hdr, ctl_region, sizeof(A.arp_ctl), 1)
    memset(&tbl, 0, sizeof(tbl))
    parms_init(&tbl.parms, hz, A.PROBE_IMMEDIATE, UNRES_QLEN_BYTES)
    rx = <A.link_ring *>per_cpu_ptr(hdr, link_region, 0)
    tx = <A.link_ring *>per_cpu_ptr(hdr, link_region, 1)
    ctl = <A.arp_ctl *>per_cpu_ptr(hdr, ctl_region, 0)
    tick = hdr.tsc_hz / hz
    with nogil:
        boot = tsc_read_unordered()
        while not smp_should_stop(hdr) and not atomic_read(&ctl.done):
            k = A.host_b_poll(rx, tx, ctl, &tbl,
                              1000 + <uint64_t>((tsc_read_unordered() - boot) / tick))
            handled += k
            if k == 0:
                smp_spin_wait(hdr)
    return handled


def timer_overhead():
    """Median cycles of an empty tsc_start()..tsc_stop() region: what each
    timed section in the network model carries on top of its work."""
    cdef uint64_t d[101]
    cdef uint64_t t
    cdef int i
    with nogil:
        for i in range(101):
            t = tsc_start()
            d[i] = tsc_stop() - t
    return sorted(d[i] for i in range(101))[50]


cdef class Cpu:
    """One emulated CPU's IRQ model and locks, driven from Python.

    For tests and teaching: each method is one kernel call on this CPU's
    shared state. Measured loops never come through here.
    """
    cdef cpu_ctx c
    cdef object seg
    cdef int lock_region
    cdef unsigned char[::1] view
    cdef net_ctx n
    cdef public double timeout

    def __init__(self, seg, int cpu, bint check=False, bint popf=False, int lock_region=-1,
                 double timeout=5.0):
        if not 0 < timeout <= 3600:
            raise ValueError(f"timeout must be in (0, 3600] s, got {timeout}")
        self.timeout = timeout
        self.view = seg
        self.seg = seg
        hdr = segment_header(self.view)
        check_cpu(hdr, cpu)
        cpu_ctx_init(&self.c, hdr, cpu, check, popf)
        self.lock_region = lock_region

    cdef spinlock_t *_lock(self, int index) except NULL:
        if self.lock_region < 0:
            raise ValueError("this Cpu was made without a lock region")
        return &checked_slot(self.c.hdr, self.lock_region, index).lock

    # interrupts
    def local_irq_disable(self): local_irq_disable(&self.c)
    def local_irq_enable(self): local_irq_enable(&self.c)
    def local_irq_save(self): return local_irq_save(&self.c)
    def local_irq_restore(self, unsigned long flags): local_irq_restore(&self.c, flags)
    def irqs_disabled(self): return bool(irqs_disabled(&self.c))
    def irq_poll(self): irq_poll(&self.c)
    def send_ipi(self, int target, unsigned int vector=IRQ_TEST):
        check_cpu(self.c.hdr, target)
        if vector >= NR_IRQ_VECTORS:
            raise ValueError(f"no IRQ vector {vector} (0..{NR_IRQ_VECTORS - 1})")
        send_ipi(&self.c, target, vector)
    def raise_softirq(self, unsigned int nr):
        if nr >= NR_SOFTIRQS:
            raise ValueError(f"no softirq {nr} (0..{NR_SOFTIRQS - 1})")
        raise_softirq(&self.c, nr)
    def local_bh_disable(self): local_bh_disable(&self.c)
    def local_bh_enable(self): local_bh_enable(&self.c)
    def preempt_disable(self): preempt_disable(&self.c)
    def preempt_enable(self): preempt_enable(&self.c)
    def lockdep_end(self): lockdep_end(&self.c)

    def set_irq_test_lock(self, index):
        """Have the test IRQ handler take lock `index` (None: no lock)."""
        self.c.irq_test_lock = NULL if index is None else <spinlock *>self._lock(index)

    # locks
    def spin_lock(self, int index, int variant=0, double timeout=5.0):
        """Take lock `index` with a variant (LOCK_VARIANTS); returns the saved
        flags (irqsave forms) or 0. RuntimeError if the run was stopped or the
        lock was not free within `timeout` seconds (nothing else would end
        the wait of a CPU driven from Python: a lock this same CPU holds
        would otherwise spin forever). A ticket or qspinlock whose waiter
        gave up while queued needs lock_init() before it is used again."""
        cdef unsigned long flags = 0
        cdef spinlock_t *l = self._lock(index)
        cdef int rc
        if variant < 0 or variant > VARIANT_IRQ_DISABLE_BEFORE_LOCK:
            raise ValueError(f"no lock variant {variant}")
        if not 0 < timeout <= 3600:
            raise ValueError(f"timeout must be in (0, 3600] s, got {timeout}")
        self.c.spin_deadline = tsc_read_unordered() + <uint64_t>(timeout * self.c.hdr.tsc_hz)
        with nogil:
            rc = spin_lock_variant(&self.c, l, variant, &flags)
        self.c.spin_deadline = 0
        if rc != 0:
            raise RuntimeError("lock acquisition aborted: the run was stopped, "
                               "or the lock stayed held past the timeout")
        return flags

    def spin_unlock(self, int index, int variant=0, unsigned long flags=0):
        if variant < 0 or variant > VARIANT_IRQ_DISABLE_BEFORE_LOCK:
            raise ValueError(f"no lock variant {variant}")
        spin_unlock_variant(&self.c, self._lock(index), variant, flags)

    @property
    def cpu(self):
        return self.c.cpu

    @property
    def preempt_count(self):
        return self.c.irq.preempt_count

    # the network model
    def attach_net(self, regions, int strategy, uint32_t defer_max):
        """Run the network model on this CPU: regions is the
        (skb, pool, cache, stats) tuple of region indices from net_init."""
        net_ctx_setup(&self.n, &self.c, regions, strategy, defer_max)
        self.c.net = &self.n

    cdef net_ctx *_net(self) except NULL:
        if self.c.net == NULL:
            raise ValueError("attach_net() first")
        return &self.n

    cdef void _begin(self):
        # a CPU driven from Python has no stop flag raised for it: bound
        # every lock wait of the call instead (see spin_lock)
        self.c.spin_deadline = tsc_read_unordered() + <uint64_t>(self.timeout * self.c.hdr.tsc_hz)

    cdef int _end(self) except -1:
        cdef bint late = tsc_read_unordered() > self.c.spin_deadline
        self.c.spin_deadline = 0
        if late:
            raise RuntimeError("a lock stayed held past the timeout (the call gave up)")
        return 0

    def napi_alloc_skb(self):
        """Allocate an skb on this CPU; its handle (index + 1), 0 if the pool is dry."""
        cdef net_ctx *n = self._net()
        self._begin()
        cdef sk_buff *skb = N.napi_alloc_skb(&self.c, n, 1500)
        self._end()
        return 0 if skb == NULL else N.skb_handle(n, skb)

    cdef sk_buff *_skb(self, uint32_t handle) except NULL:
        cdef net_ctx *n = self._net()
        if handle == 0 or handle > n.nr_skbs:
            raise ValueError(f"no skb {handle}")
        return N.skb_of(n, handle)

    def skb_attempt_defer_free(self, uint32_t handle):
        cdef sk_buff *skb = self._skb(handle)
        self._begin()
        N.skb_attempt_defer_free(&self.c, &self.n, skb)
        self._end()

    def kfree_skb(self, uint32_t handle):
        cdef sk_buff *skb = self._skb(handle)
        self._begin()
        N.kfree_skb_local(&self.c, &self.n, skb)
        self._end()

    def skb_defer_free_flush(self):
        """Called from wherever the caller stands (IRQs off: a wrong call site)."""
        self._net()
        self._begin()
        N.skb_defer_free_flush(&self.c, &self.n)
        self._end()

    def attach_rings(self, int ring_region, int n_rx, int n_consumers):
        """Give this (RX) CPU the defer experiment's device: rings to consumers."""
        self._net()
        setup_rings(&self.n, self.c.hdr, ring_region, n_rx, n_consumers)

    def napi_schedule(self, uint64_t packets):
        """The device has `packets` to receive: schedule its NAPI poll."""
        if self._net().rings == NULL:
            raise ValueError("attach_rings() first")
        self.n.to_send = packets
        N.napi_schedule(&self.c)

    def attach_loopback(self, int dev_region, int lo_region, str mode, bint ack_in_rx=True,
                        bint ack_storm=False, uint32_t thread_size=16384):
        """Run the loopback device and protocol on this CPU (after attach_net)."""
        self._net()
        if mode not in LOOPBACK_MODES:
            raise ValueError(f"no loopback mode {mode!r}")
        loopback_setup(&self.n, &self.c, dev_region, lo_region, LOOPBACK_MODES[mode],
                       ack_in_rx, ack_storm, thread_size)

    def loopback_send(self, str type, uint32_t size=100, bint bh=True):
        """Send one packet; with bh, inside dev_queue_xmit's BH section, so
        the NET_RX softirq it raised runs at the end, as the kernel's would."""
        cdef net_ctx *n = self._net()
        cdef int rc
        if n.lo == NULL:
            raise ValueError("attach_loopback() first")
        if type not in PACKET_TYPES:
            raise ValueError(f"no packet type {type!r}")
        self._begin()
        if bh:
            rc = xmit_bh(&self.c, n, PACKET_TYPES[type], size)
        else:
            rc = L.loopback_send(&self.c, n, PACKET_TYPES[type], size)
        self._end()
        return rc == 0

    def loopback_purge(self):
        if self._net().lo == NULL:
            raise ValueError("attach_loopback() first")
        L.loopback_purge(&self.c, &self.n)

    def net_rx_action(self):
        """One run of net_rx_action() in softirq context, as __do_softirq
        would call it (no restart: a re-raised NET_RX stays pending)."""
        self._net()
        self._begin()
        self.c.irq.preempt_count += 0x100      # SOFTIRQ_OFFSET
        N.net_rx_action(&self.c)
        self.c.irq.preempt_count -= 0x100
        self._end()


# The C enums, by name: the one place Python learns their values.
LOCK_ALGOS = {"tas": SPIN_TAS, "ttas": SPIN_TTAS, "ticket": SPIN_TICKET,
              "qspinlock": SPIN_QSPINLOCK, "pthread": SPIN_PTHREAD}
LOCK_VARIANTS = {"plain": VARIANT_PLAIN, "bh": VARIANT_BH, "irq": VARIANT_IRQ,
                 "irqsave": VARIANT_IRQSAVE, "irqsave_before_lock": VARIANT_IRQSAVE_BEFORE_LOCK,
                 "irq_disable_before_lock": VARIANT_IRQ_DISABLE_BEFORE_LOCK}
IRQ_VECTORS = {"test": IRQ_TEST, "net_rx": IPI_NET_RX}
DEFER_STRATEGIES = {"irqsave": N.DEFER_IRQSAVE, "irq": N.DEFER_IRQ, "bh": N.DEFER_BH,
                    "llist": N.DEFER_LLIST}
LOOPBACK_MODES = {"netif_rx": L.LO_NETIF_RX, "direct": L.LO_DIRECT,
                  "direct-unguarded": L.LO_DIRECT_UNGUARDED}
PACKET_TYPES = {"request": L.PKT_REQUEST, "reply": L.PKT_REPLY, "ack": L.PKT_ACK}
NETDEV_MAX_BACKLOG = L.NETDEV_MAX_BACKLOG
SOFTIRQS = {"hi": HI_SOFTIRQ, "net_rx": NET_RX_SOFTIRQ}


def lock_init(unsigned char[::1] seg, int region, int index, int algo, uint32_t lock_id):
    """Initialise lock `index` of a lock_slot region for an algorithm."""
    cdef lock_slot *s = checked_slot(segment_header(seg), region, index)
    if algo < 0 or algo > SPIN_PTHREAD:
        raise ValueError(f"no lock algorithm {algo}")
    s.counter = 0
    rc = spin_lock_init(&s.lock, algo, lock_id)
    if rc != 0:
        raise OSError(rc, "pthread_mutex_init failed")


def lock_hammer(unsigned char[::1] seg, int cpu, int region, int index, int variant,
                uint64_t max_acquisitions, double duration_s, uint64_t hold_cycles,
                bint check=False, bint popf=False, int irq_lock=-1):
    """Take and release one lock over and over, incrementing its counter
    inside the critical section (held `hold_cycles` TSC cycles), until
    max_acquisitions (0: no limit) or duration_s (0: no limit) or stop.
    IRQs that arrive meanwhile run the test handler, which takes lock
    `irq_lock` of the same region if that is not -1.

    The deadline bounds the run whatever the hold time: a hold ends at it,
    and with a hold, or on an oversubscribed machine (where one acquisition
    can wait for a whole round of the scheduler), it is checked after every
    acquisition; otherwise every 16th, to keep the TSC read out of the
    measured loop. A waiter never gives up at the deadline (a ticket or an
    MCS node cannot be given back): the lock is left free.

    Returns (acquisitions, tsc_cycles, spins, aborted by a stop).
    """
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    check_cpu(hdr, cpu)
    cdef lock_slot *s = checked_slot(hdr, region, index)
    cdef unsigned long flags = 0
    cdef uint64_t n = 0, t0, t1, deadline, spins0, hold_end, now = 0
    cdef bint aborted = False
    # how often the deadline is read: see above
    cdef uint64_t every = 0 if hold_cycles or hdr.flags & P.SMP_F_OVERSUBSCRIBED else 15
    if max_acquisitions == 0 and duration_s <= 0:
        raise ValueError("give max_acquisitions or duration_s")
    if variant < 0 or variant > VARIANT_IRQ_DISABLE_BEFORE_LOCK:
        raise ValueError(f"no lock variant {variant}")
    if not 0 <= duration_s <= 1e6:
        raise ValueError(f"duration_s must be in [0, 1e6], got {duration_s}")
    cpu_ctx_init(&c, hdr, cpu, check, popf)
    if irq_lock >= 0:
        c.irq_test_lock = <spinlock *>&checked_slot(hdr, region, irq_lock).lock
    with nogil:
        spins0 = c.irq.spins
        t0 = tsc_start()
        deadline = t0 + <uint64_t>(duration_s * hdr.tsc_hz) if duration_s > 0 else <uint64_t>-1
        while True:
            if spin_lock_variant(&c, &s.lock, variant, &flags) != 0:
                aborted = True
                break
            s.counter = s.counter + 1
            if hold_cycles:
                hold_end = tsc_read_unordered() + hold_cycles
                if hold_end > deadline:
                    hold_end = deadline
                now = tsc_read_unordered()
                while now < hold_end and not smp_should_stop(hdr):
                    cpu_relax()
                    now = tsc_read_unordered()
            spin_unlock_variant(&c, &s.lock, variant, flags)
            n += 1
            if n == max_acquisitions:
                break
            if (n & every) == 0:
                if tsc_read_unordered() >= deadline:
                    break
                if smp_should_stop(hdr):
                    aborted = True
                    break
        t1 = tsc_stop()
        lockdep_end(&c)
    return n, t1 - t0, c.irq.spins - spins0, bool(aborted)


# ---------------------------------------------------------------- time_bench
#
# A time_bench test is a loop function that runs its op `loops` times
# between two TSC reads and returns the cycles. The harness
# (smpnet/time_bench.py) calls one round at a time; each op is inlined in
# its own loop, as in time_bench_sample.c, so no call or dispatch is inside
# the timing (the lock algorithm is a switch on lock->algo, as a one-line
# inline: see reference.h for the baseline without it).

cdef struct tb_ctx:
    cpu_ctx c
    spinlock_t *lock
    uint32_t word

ctypedef uint64_t (*tb_loop_t)(tb_ctx *t, uint64_t loops) noexcept nogil


cdef uint64_t tb_for_loop(tb_ctx *t, uint64_t loops) noexcept nogil:
    # the empty loop: the overhead every other test carries
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        barrier()
    return tsc_stop() - t0


cdef uint64_t tb_tsc_read(tb_ctx *t, uint64_t loops) noexcept nogil:
    # what one serialized timestamp costs
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        tsc_start()
        barrier()
    return tsc_stop() - t0


cdef uint64_t tb_spin_lock_unlock(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        if spin_lock(&t.c, t.lock):
            break
        spin_unlock(&t.c, t.lock)
    return tsc_stop() - t0


cdef uint64_t tb_spin_lock_unlock_irqsave(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    cdef unsigned long flags
    for i in range(loops):
        if spin_lock_irqsave(&t.c, t.lock, &flags):
            break
        spin_unlock_irqrestore(&t.c, t.lock, flags)
    return tsc_stop() - t0


cdef uint64_t tb_irqsave_before_lock(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    cdef unsigned long flags
    for i in range(loops):
        flags = local_irq_save(&t.c)
        if spin_lock(&t.c, t.lock):
            break
        spin_unlock(&t.c, t.lock)
        local_irq_restore(&t.c, flags)
    return tsc_stop() - t0


cdef uint64_t tb_spin_lock_unlock_irq(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        if spin_lock_irq(&t.c, t.lock):
            break
        spin_unlock_irq(&t.c, t.lock)
    return tsc_stop() - t0


cdef uint64_t tb_simple_irq_disable_before_lock(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        local_irq_disable(&t.c)
        if spin_lock(&t.c, t.lock):
            break
        spin_unlock(&t.c, t.lock)
        local_irq_enable(&t.c)
    return tsc_stop() - t0


cdef uint64_t tb_spin_lock_unlock_bh(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        if spin_lock_bh(&t.c, t.lock):
            break
        spin_unlock_bh(&t.c, t.lock)
    return tsc_stop() - t0


cdef uint64_t tb_local_BH_disable_enable(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        local_bh_disable(&t.c)
        local_bh_enable(&t.c)
    return tsc_stop() - t0


cdef uint64_t tb_local_IRQ_disable_enable(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        local_irq_disable(&t.c)
        local_irq_enable(&t.c)
    return tsc_stop() - t0


cdef uint64_t tb_local_irq_save_restore(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    cdef unsigned long flags
    for i in range(loops):
        flags = local_irq_save(&t.c)
        local_irq_restore(&t.c, flags)
    return tsc_stop() - t0


cdef uint64_t tb_preempt_disable_enable(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        preempt_disable(&t.c)
        preempt_enable(&t.c)
    return tsc_stop() - t0


cdef uint64_t tb_cmpxchg(tb_ctx *t, uint64_t loops) noexcept nogil:
    # a successful lock cmpxchg on a line this CPU owns
    cdef uint64_t i, t0 = tsc_start()
    cdef uint32_t old
    for i in range(loops):
        old = t.word
        atomic_cmpxchg(&t.word, old, old + 1)
    return tsc_stop() - t0


cdef uint64_t tb_this_cpu_cmpxchg(tb_ctx *t, uint64_t loops) noexcept nogil:
    # the same without the lock prefix: atomic against this CPU only
    cdef uint64_t i, t0 = tsc_start()
    cdef uint32_t old
    for i in range(loops):
        old = t.word
        this_cpu_cmpxchg(&t.word, old, old + 1)
    return tsc_stop() - t0


cdef uint64_t tb_function_call_cost(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        tb_empty_function()
    return tsc_stop() - t0


cdef uint64_t tb_func_ptr_call_cost(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        tb_function_ptr()
    return tsc_stop() - t0


cdef uint64_t tb_ref_spin_lock_unlock(tb_ctx *t, uint64_t loops) noexcept nogil:
    # the hand-written C baseline for spin_lock_unlock (reference.h)
    return ref_spin_lock_unlock(&t.c.irq.preempt_count, &t.lock.val, loops)


# name -> (loop, needs: 0 nothing, 1 a CPU's IRQ state, 2 a lock too)
cdef tb_loop_t TB_LOOPS[17]
TB_LOOPS[0] = tb_for_loop
TB_LOOPS[1] = tb_spin_lock_unlock
TB_LOOPS[2] = tb_spin_lock_unlock_irqsave
TB_LOOPS[3] = tb_irqsave_before_lock
TB_LOOPS[4] = tb_spin_lock_unlock_irq
TB_LOOPS[5] = tb_simple_irq_disable_before_lock
TB_LOOPS[6] = tb_local_BH_disable_enable
TB_LOOPS[7] = tb_local_IRQ_disable_enable
TB_LOOPS[8] = tb_local_irq_save_restore
TB_LOOPS[9] = tb_preempt_disable_enable
TB_LOOPS[10] = tb_cmpxchg
TB_LOOPS[11] = tb_this_cpu_cmpxchg
TB_LOOPS[12] = tb_function_call_cost
TB_LOOPS[13] = tb_func_ptr_call_cost
TB_LOOPS[14] = tb_spin_lock_unlock_bh
TB_LOOPS[15] = tb_tsc_read
TB_LOOPS[16] = tb_ref_spin_lock_unlock

TIME_BENCH_TESTS = (
    ("for_loop", 0), ("spin_lock_unlock", 2), ("spin_lock_unlock_irqsave", 2),
    ("irqsave_before_lock", 2), ("spin_lock_unlock_irq", 2),
    ("simple_irq_disable_before_lock", 2), ("local_BH_disable_enable", 1),
    ("local_IRQ_disable_enable", 1), ("local_irq_save_restore", 1),
    ("preempt_disable_enable", 1), ("cmpxchg", 0), ("this_cpu_cmpxchg", 0),
    ("function_call_cost", 0), ("func_ptr_call_cost", 0),
    ("spin_lock_unlock_bh", 2), ("tsc_read", 0), ("ref_spin_lock_unlock", 2),
)
TIME_BENCH_NAMES = tuple(n for n, _ in TIME_BENCH_TESTS)
TIME_BENCH_NEEDS = dict(TIME_BENCH_TESTS)


def time_bench_round(str test, uint64_t loops, seg=None, int cpu=0, int lock_region=-1,
                     int lock_index=0, bint check=False, bint popf=False):
    """Run one round of a time_bench test: (cycles, wall_ns) for `loops` ops.

    Tests of the IRQ model need `seg` and `cpu` (whose irq_cpustat they
    use); lock tests also a lock_slot region and index.
    """
    cdef int idx
    try:
        idx = TIME_BENCH_NAMES.index(test)
    except ValueError:
        raise ValueError(f"unknown time_bench test {test!r}") from None
    cdef tb_ctx t
    cdef unsigned char[::1] view
    cdef smp_header *hdr
    t.word = 0
    t.lock = NULL
    t.c.irq = NULL
    needs = TIME_BENCH_NEEDS[test]
    if needs:
        if seg is None:
            raise ValueError(f"time_bench test {test!r} needs a machine segment")
        view = seg
        hdr = segment_header(view)
        check_cpu(hdr, cpu)
        cpu_ctx_init(&t.c, hdr, cpu, check, popf)
        if needs == 2:
            t.lock = &checked_slot(hdr, lock_region, lock_index).lock
    cdef tb_loop_t fn = TB_LOOPS[idx]
    cdef uint64_t cycles, w0, w1
    cdef bint has_cpu = needs != 0
    with nogil:
        w0 = mono_ns()
        cycles = fn(&t, loops)
        w1 = mono_ns()
        if has_cpu:
            lockdep_end(&t.c)
    return cycles, w1 - w0
