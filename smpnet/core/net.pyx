# net.pyx - the network model on a CPU (net_ctx), and the defer experiment's
# two loops: an RX CPU whose fake NIC receives skbs into rings, and a
# consumer CPU that frees them with skb_attempt_defer_free() (seed 003).

dev.net_dev_init()         # the NET_RX softirq, the defer kick's IPI, the backlog's poll
fake_nic.fake_nic_init()   # the fake NIC's NAPI poll

# name -> enum value, from skbuff.h's DEFER_STRATEGY_TABLE
DEFER_STRATEGIES = c_enum(skbuff.defer_strategy_names, skbuff.DEFER_NR_STRATEGIES)


cdef int net_ctx_setup(net_ctx *n, cpu_ctx *c, regions, int strategy,
                       uint32_t defer_max) except -1:
    """Fill a net_ctx for CPU c from the (skb, data, page, pool, cache, slab,
    stats) regions (net.NET_REGIONS)."""
    cdef smp_header *hdr = c.hdr
    skb_r, data_r, page_r, pool_r, cache_r, slab_r, stats_r = regions
    check_array(hdr, skb_r, sizeof(sk_buff), 1)
    check_array(hdr, data_r, sizeof(skbuff.skb_data), hdr.regions[skb_r].count)
    check_array(hdr, page_r, sizeof(skbuff.skb_page),
                (hdr.regions[skb_r].count + skbuff.SKB_FRAGS_PER_PAGE - 1) // skbuff.SKB_FRAGS_PER_PAGE)
    check_region(hdr, pool_r, sizeof(skbuff.skb_pool), 1)
    check_region(hdr, cache_r, sizeof(skbuff.napi_alloc_cache), hdr.nr_cpus)
    check_region(hdr, slab_r, sizeof(skbuff.skb_slab), hdr.nr_cpus)
    check_region(hdr, stats_r, sizeof(skbuff.skb_stats), hdr.nr_cpus)
    check_enum(strategy, skbuff.DEFER_NR_STRATEGIES, "defer strategy")
    if defer_max < 1:
        raise ValueError("defer_max must be at least 1")
    memset(n, 0, sizeof(net_ctx))
    n.skbs = <sk_buff *>per_cpu_ptr(hdr, skb_r, 0)
    n.nr_skbs = hdr.regions[skb_r].count
    n.data = <skbuff.skb_data *>per_cpu_ptr(hdr, data_r, 0)
    n.pages = <skbuff.skb_page *>per_cpu_ptr(hdr, page_r, 0)
    n.slabs = <skbuff.skb_slab *>per_cpu_ptr(hdr, slab_r, 0)
    n.slab_stride = hdr.regions[slab_r].stride
    n.pool = <skbuff.skb_pool *>per_cpu_ptr(hdr, pool_r, 0)
    n.cache_region = cache_r
    n.stats_region = stats_r
    n.cache = <skbuff.napi_alloc_cache *>per_cpu_ptr(hdr, cache_r, c.cpu)
    n.stats = <skbuff.skb_stats *>per_cpu_ptr(hdr, stats_r, c.cpu)
    n.strategy = strategy
    n.defer_max = defer_max
    n.tick_cycles = max(<uint64_t>(hdr.tsc_hz / dev.NET_HZ), <uint64_t>1)
    n.next_tick = 0
    dev.net_tick(n, tsc_read_unordered())      # jiffies from now on
    # usecs_to_jiffies() rounds up: 2 ms is one jiffy at HZ=250
    n.budget_jiffies = (dev.NETDEV_BUDGET_USECS * dev.NET_HZ + 999999) // 1000000
    n.netdev_budget = dev.NETDEV_BUDGET
    return 0


def net_init(unsigned char[::1] seg, regions, int lock_algo):
    """Put every skb in the shared pool, empty the caches and slabs, zero
    the stats, and reset each CPU's defer list and defer_lock (for
    `lock_algo`)."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef uint32_t i
    cdef int cpu
    cdef softnet_data *sd
    check_enum(lock_algo, SPIN_NR_ALGOS, "lock algorithm")
    cpu_ctx_init(&c, hdr, 0, 0, 0)
    net_ctx_setup(&n, &c, regions, 0, 1)
    skb_r, data_r, page_r, pool_r, cache_r, slab_r, stats_r = regions
    memset(n.pages, 0, hdr.regions[page_r].count * hdr.regions[page_r].stride)
    for i in range(n.nr_skbs):
        n.skbs[i].next = i + 2 if i + 1 < n.nr_skbs else 0
        n.skbs[i].state = skbuff.SKB_FREE
    lock_init_checked(hdr, &n.pool.lock, lock_algo, 0xfffffffe)
    n.pool.head = 1 if n.nr_skbs else 0
    n.pool.count = n.nr_skbs
    n.pool.total = n.nr_skbs
    for cpu in range(<int>hdr.nr_cpus):
        memset(per_cpu_ptr(hdr, cache_r, cpu), 0, hdr.regions[cache_r].stride)
        memset(per_cpu_ptr(hdr, slab_r, cpu), 0, hdr.regions[slab_r].stride)
        memset(per_cpu_ptr(hdr, stats_r, cpu), 0, hdr.regions[stats_r].stride)
        sd = skbuff.softnet(&c, cpu)
        # line 0, the owner's: counters, poll list, backlog, xmit_recursion
        memset(sd, 0, <size_t>(<char *>&sd.defer_lock - <char *>sd))
        # lines 1 and 2: both kernel versions' defer fields (percpu.h)
        memset(&sd.defer_count, 0, sizeof(softnet_data) - <size_t>(<char *>&sd.defer_count - <char *>sd))
        lock_init_checked(hdr, &sd.defer_lock, lock_algo, 0x80000000u + cpu)


cdef fake_nic.defer_ctl *defer_setup(cpu_ctx *c, net_ctx *n, smp_header *hdr, int cpu, regions,
                                     int strategy, uint32_t defer_max, int ring_region,
                                     int n_rx, int n_consumers, int ctl_region,
                                     bint check, bint popf, int kbuild) except NULL:
    """What both sides of a defer run need: the CPU (its lock entry points
    shaped as kernel build `kbuild` makes them), its network model with the
    fake NIC's rings, and the run's control words."""
    check_kbuild(kbuild)
    cpu_ctx_init(c, hdr, cpu, check, popf)
    c.kbuild = kbuild
    net_ctx_setup(n, c, regions, strategy, defer_max)
    # the run's one lock algorithm (net_init's), as the kernel's build has one
    c.lock_algo = lock_algo_of(hdr, &n.pool.lock)
    setup_rings(n, hdr, ring_region, n_rx, n_consumers)
    check_region(hdr, ctl_region, sizeof(fake_nic.defer_ctl), 1)
    c.net = n
    return <fake_nic.defer_ctl *>per_cpu_ptr(hdr, ctl_region, 0)


def defer_rx_run(unsigned char[::1] seg, int cpu, regions, int ring_region, int strategy,
                 uint32_t defer_max, int n_rx, int n_consumers, int ctl_region,
                 uint64_t skbs, double duration_s, bint check=False, bint popf=False,
                 uint64_t irq_entry_cycles=0, int kbuild=0):
    """An RX CPU of the defer experiment: NAPI polls receive skbs (allocate
    them here) into the consumers' rings until `skbs` were received or
    duration_s passed; net_rx_action flushes what consumers defer back; ends
    with a last flush once every consumer is done. Each IPI it takes costs
    irq_entry_cycles (ipi_cycles()'s entry). Returns its TSC cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef fake_nic.defer_ctl *ctl
    cdef uint64_t t0, t1, now
    cdef bint sending_done = False
    check_cpu(hdr, cpu)
    if cpu >= n_rx:
        raise ValueError(f"CPU {cpu} is not an RX CPU")
    if not 0 <= duration_s <= 1e6:
        raise ValueError(f"duration_s must be in [0, 1e6], got {duration_s}")
    ctl = defer_setup(&c, &n, hdr, cpu, regions, strategy, defer_max, ring_region,
                      n_rx, n_consumers, ctl_region, check, popf, kbuild)
    c.irq_entry_cycles = irq_entry_cycles   # the defer kick's entry on this CPU
    n.to_send = skbs if skbs else <uint64_t>-1
    with nogil:
        t0 = tsc_start()
        n.send_deadline = t0 + <uint64_t>(duration_s * hdr.tsc_hz) if duration_s > 0 else <uint64_t>-1
        while not smp_should_stop(hdr):
            if n.to_send:
                now = tsc_read_unordered()
                dev.net_tick(&n, now)       # the timer tick, as this CPU sees it
                if now >= n.send_deadline:
                    n.to_send = 0
            if n.to_send:
                fake_nic.fake_nic_irq(&c)   # the device's IRQ
            elif not sending_done:
                sending_done = True
                atomic_inc(&ctl.rx_done)
            if c.irq.softirq_pending:
                do_softirq(&c)              # irq_exit: net_rx_action
            irq_poll(&c)                    # defer kicks
            if sending_done:
                if atomic_read(&ctl.consumers_done) == <uint32_t>n_consumers:
                    local_bh_disable(&c)    # the flush runs where net_rx_action would
                    skb_defer.skb_defer_free_flush(&c, &n)  # the last deferred skbs come home
                    local_bh_enable(&c)
                    break
                smp_spin_wait(hdr)
        t1 = tsc_stop()
        lockdep_end(&c)
    return t1 - t0


def defer_consumer_run(unsigned char[::1] seg, int cpu, regions, int ring_region, int strategy,
                       uint32_t defer_max, int n_rx, int n_consumers, int ctl_region,
                       uint32_t batch, bint check=False, bint popf=False,
                       uint64_t ipi_send_cycles=0, int kbuild=0):
    """A consumer CPU (the socket owner): take skbs off its rings, `batch` at
    a time from each, read them, and free them with skb_attempt_defer_free()
    (1 call in 8 timed, less an IPI's send); ends when every RX CPU is done and its rings are
    empty. Each defer kick costs it ipi_send_cycles (ipi_cycles()'s send:
    what sending an IPI costs on this machine, no waiting), timed. Returns its TSC
    cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef fake_nic.defer_ctl *ctl
    cdef fake_nic.skb_ring *r
    cdef sk_buff *skb
    cdef uint64_t t0, t1, v, ts, ipi, got, sink = 0
    cdef uint32_t k
    cdef int rx, me = cpu - n_rx
    check_cpu(hdr, cpu)
    if me < 0 or me >= n_consumers:
        raise ValueError(f"CPU {cpu} is not a consumer")
    if batch < 1:
        raise ValueError("batch must be at least 1")
    ctl = defer_setup(&c, &n, hdr, cpu, regions, strategy, defer_max, ring_region,
                      n_rx, n_consumers, ctl_region, check, popf, kbuild)
    c.ipi_send_cost = ipi_send_cycles     # the defer kick's send, on this CPU
    with nogil:
        t0 = tsc_start()
        while not smp_should_stop(hdr):
            got = 0
            for rx in range(n_rx):
                r = fake_nic.ring_of(&n, rx, me)
                k = 0
                while k < batch and fake_nic.ring_pop(r, &v):
                    k += 1
                    skb = skbuff.skb_of(&n, <uint32_t>v)
                    if skb.gen != <uint32_t>(v >> 32) or skb.state != skbuff.SKB_LIVE:
                        n.stats.stale += 1
                        continue
                    # the receiver reads the packet: its head and first line
                    sink += skb.hash + skbuff.skb_data_of(&n, skb).head[0]
                    n.stats.received += 1
                    if (n.defer_calls & skbuff.DEFER_SAMPLE_MASK) == 0:
                        # less the IPI's send, when this call sent one: it
                        # is timed on its own (ipi_send_cycles), and its
                        # thousands of cycles (in a guest) would swamp the defer
                        ipi = c.irq.ipi_send_cycles
                        ts = tsc_start()
                        skb_defer.skb_attempt_defer_free(&c, &n, skb)
                        n.stats.defer_cycles += tsc_stop() - ts - (c.irq.ipi_send_cycles - ipi)
                        n.stats.defer_samples += 1
                    else:
                        skb_defer.skb_attempt_defer_free(&c, &n, skb)
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
    check_region(hdr, ring_region, sizeof(fake_nic.skb_ring), <uint32_t>(n_rx * n_consumers))
    n.rings = <fake_nic.skb_ring *>per_cpu_ptr(hdr, ring_region, 0)
    n.ring_stride = hdr.regions[ring_region].stride
    n.n_rx = n_rx
    n.n_consumers = n_consumers
    return 0


cdef bint rings_empty(net_ctx *n, int me) noexcept nogil:
    cdef int rx
    cdef fake_nic.skb_ring *r
    for rx in range(n.n_rx):
        r = fake_nic.ring_of(n, rx, me)
        if atomic_read(&r.tail) != atomic_read(&r.head):
            return False
    return True


# The net.core sysctls the model fixes, as dev.h has them (the kernel
# experiment prints them beside the host's); skb_defer_max is the defer
# experiment's default (--defer-max), 64 as before late 2025.
NET_CORE_MODEL = {"netdev_max_backlog": dev.NETDEV_MAX_BACKLOG, "netdev_budget": dev.NETDEV_BUDGET,
                  "dev_weight": dev.DEV_RX_WEIGHT, "skb_defer_max": 64}
