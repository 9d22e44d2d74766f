# cpu.pyx - the IRQ model's test handlers, and Cpu: one emulated CPU driven
# from Python, call by call, for tests and teaching.
#
# The test IRQ (vector IRQ_TEST) and the test softirq (HI_SOFTIRQ) take
# c.irq_test_lock, if one is set, the way a driver's handler takes its
# lock: that is how a test provokes the checker's inversion reports.

cdef void irq_test_handler(cpu_ctx *c, unsigned int vector) noexcept nogil:
    if c.irq_test_lock != NULL:
        if spin_lock(c, c.irq_test_lock) == 0:
            spin_unlock(c, c.irq_test_lock)


cdef void softirq_test_action(cpu_ctx *c) noexcept nogil:
    irq_test_handler(c, 0)

irq_handlers[IRQ_TEST] = irq_test_handler
softirq_vec[HI_SOFTIRQ] = softirq_test_action

IRQ_VECTORS = {"test": IRQ_TEST, "net_rx": IPI_NET_RX}
SOFTIRQS = {"hi": HI_SOFTIRQ, "net_rx": NET_RX_SOFTIRQ}
# the checker's report kinds, in irq_cpustat.bugs[] order (LOCKDEP_BUG_TABLE)
LOCKDEP_BUGS = tuple(c_enum(percpu.lockdep_bug_names, percpu.LOCKDEP_NR_BUGS))


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
                 double timeout=5.0, int kbuild=0):
        """`kbuild`: the kernel build its lock entry points and local_bh_enable()
        follow (KERNEL_BUILDS)."""
        check_kbuild(kbuild)
        if not 0 < timeout <= 3600:
            raise ValueError(f"timeout must be in (0, 3600] s, got {timeout}")
        self.timeout = timeout
        self.view = seg
        self.seg = seg
        hdr = segment_header(self.view)
        check_cpu(hdr, cpu)
        cpu_ctx_init(&self.c, hdr, cpu, check, popf)
        self.c.kbuild = kbuild
        self.lock_region = lock_region

    cdef spinlock_t *_lock(self, int index) except NULL:
        if self.lock_region < 0:
            raise ValueError("this Cpu was made without a lock region")
        cdef spinlock_t *l = &checked_slot(self.c.hdr, self.lock_region, index).lock
        lock_algo_of(self.c.hdr, l)     # raises if it was never initialised
        return l

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
        self.c.irq_test_lock = NULL if index is None else self._lock(index)

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
        check_enum(variant, SPIN_NR_VARIANTS, "lock variant")
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
        """Release lock `index`. An MCS unlock can wait too, for a waiter
        that has queued behind it to link in: that wait gives up at this
        Cpu's `timeout`, leaving the lock to lock_init()."""
        cdef spinlock_t *l = self._lock(index)
        check_enum(variant, SPIN_NR_VARIANTS, "lock variant")
        self.c.spin_deadline = tsc_read_unordered() + <uint64_t>(self.timeout * self.c.hdr.tsc_hz)
        spin_unlock_variant(&self.c, l, variant, flags)
        self.c.spin_deadline = 0

    @property
    def cpu(self):
        return self.c.cpu

    @property
    def preempt_count(self):
        return self.c.irq.preempt_count

    @property
    def lock_info_searches(self):
        """How many times this CPU searched the lock side table for the lock
        it was taking or releasing (once per change of lock: the entry found
        is kept, as a kernel caller keeps its lock's address)."""
        return self.c.lock_info_searches

    def set_ipi_costs(self, uint64_t send_cycles=0, uint64_t entry_cycles=0):
        """What IPIs cost on this CPU: each one it sends spins `send_cycles`
        and returns (the send alone, as smp_call_function_single_async():
        ipi_cycles()'s send; timed into the sender's ipi_send_cycles); each
        hard IRQ it takes spins `entry_cycles` for its entry, handling and
        exit (ipi_cycles()'s entry). 0: nothing."""
        self.c.ipi_send_cost = send_cycles
        self.c.irq_entry_cycles = entry_cycles

    # the network model
    def attach_net(self, regions, int strategy, uint32_t defer_max, int netdev_budget=0):
        """Run the network model on this CPU: regions is the
        (skb, pool, cache, stats) tuple of region indices from net_init;
        netdev_budget: net_rx_action()'s budget (0: the sysctl's default)."""
        net_ctx_setup(&self.n, &self.c, regions, strategy, defer_max)
        if netdev_budget < 0:
            raise ValueError("netdev_budget must be positive (0: the default)")
        if netdev_budget:
            self.n.netdev_budget = netdev_budget
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
        cdef sk_buff *skb = skbuff.napi_alloc_skb(&self.c, n, 1500)
        self._end()
        return 0 if skb == NULL else skbuff.skb_handle(n, skb)

    cdef sk_buff *_skb(self, uint32_t handle) except NULL:
        cdef net_ctx *n = self._net()
        if handle == 0 or handle > n.nr_skbs:
            raise ValueError(f"no skb {handle}")
        return skbuff.skb_of(n, handle)

    def skb_attempt_defer_free(self, uint32_t handle):
        cdef sk_buff *skb = self._skb(handle)
        self._begin()
        skb_defer.skb_attempt_defer_free(&self.c, &self.n, skb)
        self._end()

    def kfree_skb(self, uint32_t handle):
        cdef sk_buff *skb = self._skb(handle)
        self._begin()
        skbuff.kfree_skb_local(&self.c, &self.n, skb)
        self._end()

    def skb_defer_free_flush(self):
        """Called from wherever the caller stands (IRQs off: a wrong call site)."""
        self._net()
        self._begin()
        skb_defer.skb_defer_free_flush(&self.c, &self.n)
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
        fake_nic.fake_nic_irq(&self.c)

    def attach_loopback(self, int dev_region, int lo_region, str mode, str proto="ack-every",
                        bint ack_storm=False, uint32_t thread_size=16384):
        """Run the loopback device and protocol on this CPU (after attach_net)."""
        self._net()
        if mode not in LOOPBACK_MODES:
            raise ValueError(f"no loopback mode {mode!r}")
        if proto not in LOOPBACK_PROTOS:
            raise ValueError(f"no loopback protocol {proto!r}")
        loopback_setup(&self.n, &self.c, dev_region, lo_region, LOOPBACK_MODES[mode],
                       LOOPBACK_PROTOS[proto], ack_storm, thread_size)

    def loopback_send(self, str type, uint32_t size=100, bint bh=True, str to=None):
        """Send one packet to socket `to` ("client" or "server"; by default
        the peer its type goes to: a request to the server, a reply or an
        ACK to the client); with bh, inside dev_queue_xmit's BH section, so
        the NET_RX softirq it raised runs at the end, as the kernel's would."""
        cdef net_ctx *n = self._net()
        cdef int rc, sk
        if n.lo == NULL:
            raise ValueError("attach_loopback() first")
        if type not in PACKET_TYPES:
            raise ValueError(f"no packet type {type!r}")
        if to is None:
            to = "server" if type == "request" else "client"
        if to not in ("client", "server"):
            raise ValueError(f"no socket {to!r}: client or server")
        sk = SK_SERVER if to == "server" else SK_CLIENT
        self._begin()
        if bh:
            rc = loopback.dev_queue_xmit(&self.c, n, PACKET_TYPES[type], sk, size, 1)
        else:
            rc = loopback.loopback_send(&self.c, n, PACKET_TYPES[type], sk, size)
        self._end()
        return rc == 0

    def tcp_sendmsg(self, str sock, str type, uint32_t size=100):
        """The application on socket `sock` ("client" or "server") sends one
        data segment of `type`: lock_sock, dev_queue_xmit, release_sock."""
        cdef net_ctx *n = self._net()
        cdef int rc
        if n.lo == NULL:
            raise ValueError("attach_loopback() first")
        if type not in ("request", "reply"):
            raise ValueError(f"no data segment type {type!r}: request or reply")
        if sock not in ("client", "server"):
            raise ValueError(f"no socket {sock!r}: client or server")
        self._begin()
        rc = loopback.tcp_sendmsg(&self.c, n, SK_SERVER if sock == "server" else SK_CLIENT,
                                  PACKET_TYPES[type], size)
        self._end()
        return rc == 0

    def loopback_purge(self):
        if self._net().lo == NULL:
            raise ValueError("attach_loopback() first")
        loopback.loopback_purge(&self.c, &self.n)

    def net_rx_action(self):
        """One run of net_rx_action() in softirq context, as __do_softirq
        would call it (no restart: a re-raised NET_RX stays pending)."""
        self._net()
        self._begin()
        self.c.irq.preempt_count += 0x100      # SOFTIRQ_OFFSET
        dev.net_rx_action(&self.c)
        self.c.irq.preempt_count -= 0x100
        self._end()
