# loopback.pyx - the loopback experiment's loop (seed 002): a tbench-like
# client and server on one CPU, every packet through loopback_xmit().

from libc.stdlib cimport calloc, free

# name -> enum value, from loopback.h's LO_MODE_TABLE
LOOPBACK_MODES = c_enum(loopback.lo_mode_names, loopback.LO_NR_MODES)
LOOPBACK_PROTOS = c_enum(loopback.lo_proto_names, loopback.LO_NR_PROTOS)
XMIT_RECURSION_LIMIT = loopback.XMIT_RECURSION_LIMIT
LO_MSS = loopback.LO_MSS
PACKET_TYPES = {"request": loopback.PKT_REQUEST, "reply": loopback.PKT_REPLY, "ack": loopback.PKT_ACK}
NETDEV_MAX_BACKLOG = dev.NETDEV_MAX_BACKLOG
# the emulated stack's frame kinds, name -> enum value (dev.h's STACK_FRAME_TABLE;
# "none", 0, is no frame), their bytes, and the bytes below the first
STACK_FRAMES = c_enum(dev.stack_frame_names, dev.NR_STACK_FRAMES)
STACK_FRAME_BYTES = {name: dev.stack_frame_bytes[k] for name, k in STACK_FRAMES.items()
                     if k}
STACK_BASE = dev.STACK_BASE

loopback.loopback_init()   # the protocol's receive, in ptype_base


cdef int loopback_setup(net_ctx *n, cpu_ctx *c, int dev_region, int lo_region, int mode,
                        int proto, bint ack_storm, uint32_t thread_size,
                        uint64_t stack_work=0) except -1:
    """Add the loopback device and protocol to a net_ctx. With stack_work
    (cycles per send and per receive), the sockets get their buffers:
    loopback_teardown() frees them."""
    cdef smp_header *hdr = c.hdr
    cdef int i
    check_region(hdr, dev_region, sizeof(dev.net_device), 1)
    check_region(hdr, lo_region, sizeof(dev.lo_stats), hdr.nr_cpus)
    check_enum(mode, loopback.LO_NR_MODES, "loopback mode")
    check_enum(proto, loopback.LO_NR_PROTOS, "loopback protocol")
    if not dev.STACK_BASE < thread_size <= dev.THREAD_SIZE_MAX:
        # the emulated recursion is real C recursion: keep it far from the real stack's end
        # (and net_ctx.stack_frames holds THREAD_SIZE_MAX's frames)
        raise ValueError(f"thread_size must be {dev.STACK_BASE + 1} to {dev.THREAD_SIZE_MAX} "
                         f"bytes, got {thread_size}")
    n.dev = per_cpu_ptr(hdr, dev_region, 0)
    n.lo = per_cpu_ptr(hdr, lo_region, c.cpu)
    n.lo_mode = mode
    n.lo_proto = proto
    n.ack_storm = ack_storm
    n.thread_size = thread_size
    n.stack_used = dev.STACK_BASE
    n.stack_depth = 0
    memset(n.sk, 0, sizeof(n.sk))
    for i in range(2):
        n.sk[i].rcv_mss = loopback.TCP_MSS_DEFAULT
    n.stack_work = 0
    n.stack_work_debt = 0
    n.app_buf = NULL
    if stack_work:
        # one allocation: the applications' buffer, then each socket's
        n.app_buf = <uint8_t *>calloc(3, skbuff.LO_BUF_BYTES)
        if n.app_buf == NULL:
            raise MemoryError("the sockets' buffers")
        for i in range(2):
            n.sk[i].buf = n.app_buf + (i + 1) * skbuff.LO_BUF_BYTES
        n.stack_work = stack_work
    return 0


cdef void loopback_teardown(net_ctx *n) noexcept:
    free(n.app_buf)
    n.app_buf = NULL
    n.stack_work = 0


def loopback_run(unsigned char[::1] seg, int cpu, regions, int dev_region, int lo_region,
                 int mode, int proto, bint ack_storm, uint32_t size, uint64_t packets,
                 double duration_s, uint32_t thread_size, uint64_t stack_work=0,
                 bint check=False):
    """One CPU's tbench-like client and server over loopback until it has
    sent `packets` packets (0: no limit) or duration_s passed, or its
    emulated stack overflowed. Each send goes through tcp_sendmsg() and
    dev_queue_xmit's BH section, whose local_bh_enable() runs the NET_RX
    softirq; each send and receive does `stack_work` cycles of calibrated
    work. Returns its TSC cycles."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    cdef net_ctx n
    cdef dev.lo_stats *lo
    cdef uint64_t t0, t1, deadline, now
    cdef int rounds
    check_cpu(hdr, cpu)
    if packets == 0 and duration_s <= 0:
        raise ValueError("give packets or duration_s")
    if not 0 <= duration_s <= 1e6:
        raise ValueError(f"duration_s must be in [0, 1e6], got {duration_s}")
    if size < 1 or size > 65535:
        raise ValueError(f"size must be 1 to 65535 bytes, got {size}")
    # every mode is 2.6.24's (the seed's kernel, with or without its patch):
    # local_irq_restore() was a popf until Linux 5.12
    cpu_ctx_init(&c, hdr, cpu, check, True)
    net_ctx_setup(&n, &c, regions, skbuff.DEFER_IRQ, 64)
    c.lock_algo = lock_algo_of(hdr, &n.pool.lock)   # net_init's, for every lock
    loopback_setup(&n, &c, dev_region, lo_region, mode, proto, ack_storm, thread_size,
                   stack_work)
    lo = <dev.lo_stats *>n.lo
    c.net = &n
    try:
        with nogil:
            t0 = tsc_start()
            deadline = t0 + <uint64_t>(duration_s * hdr.tsc_hz) if duration_s > 0 else <uint64_t>-1
            while not smp_should_stop(hdr) and not lo.overflow:
                if packets and lo.xmits >= packets:
                    break
                now = tsc_read_unordered()
                dev.net_tick(&n, now)           # the timer tick, as this CPU sees it
                if now >= deadline:
                    break
                if n.stats.alloc_failed:        # the pool is dry: nothing more can be sent
                    break
                loopback.tcp_sendmsg(&c, &n, SK_CLIENT, loopback.PKT_REQUEST, size)
                while lo.server_pending and not lo.overflow:  # the server application
                    lo.server_pending -= 1
                    loopback.tcp_recvmsg(&n, SK_SERVER, size)
                    loopback.tcp_sendmsg(&c, &n, SK_SERVER, loopback.PKT_REPLY, size)
                while lo.client_pending:                      # the client reads replies
                    lo.client_pending -= 1
                    loopback.tcp_recvmsg(&n, SK_CLIENT, size)
                    lo.transactions += 1
            # what is still queued runs a few more softirq rounds, then the
            # device goes down (an ACK storm never drains by itself)
            rounds = 0
            while c.irq.softirq_pending and rounds < 10 and not lo.overflow and not ack_storm:
                local_bh_disable(&c)
                local_bh_enable(&c)
                rounds += 1
            loopback.loopback_purge(&c, &n)
            t1 = tsc_stop()
            lockdep_end(&c)
    finally:
        loopback_teardown(&n)
    return t1 - t0
