# locks.pyx - locks in the segment, and the contended-lock loop: lock_init()
# readies a lock_slot for an algorithm, lock_hammer() takes it over and over
# on one CPU (the timed loop of contended runs and the mutual-exclusion tests).

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


cdef inline void tsc_spin(smp_header *hdr, uint64_t cycles, uint64_t deadline) noexcept nogil:
    """Spin `cycles` TSC cycles (a hold or a think time), cut at the run's
    deadline or a stop: work that takes time and touches no shared line."""
    cdef uint64_t end = tsc_read_unordered() + cycles
    if end > deadline:
        end = deadline
    while tsc_read_unordered() < end and not smp_should_stop(hdr):
        cpu_relax()


# name -> enum value, from the headers' tables (SPIN_ALGO_TABLE, SPIN_VARIANT_TABLE)
LOCK_ALGOS = c_enum(spin_algo_names, SPIN_NR_ALGOS)
LOCK_VARIANTS = c_enum(spin_variant_names, SPIN_NR_VARIANTS)
# a kernel build's two facts (kernel_build.h): the shape of its calls and its
# return, each by name; the builds (--kernel-build) the shape's name and the
# return's suffix, the inline shape with a plain return only; and the lock
# entry points, from spinlock_api_smp.h
KERNEL_SHAPES = c_enum(kernel_shape_names, KSHAPE_NR)
KERNEL_RETURNS = c_enum(kernel_return_names, KRET_NR)
KERNEL_BUILDS = {shape + ret_name: KBUILD(s, r)
                 for r, ret_name in enumerate(KERNEL_RETURNS)
                 for s, shape in enumerate(KERNEL_SHAPES) if kbuild_valid(KBUILD(s, r))}
SPIN_ENTRIES = tuple(c_enum(spin_entry_names, SPIN_NR_ENTRIES))
# whether the thunk returns (+safe-ret, +ret-thunk) are modelled (GCC on x86)
RETURN_THUNK_MODELLED = bool(RETHUNK_MODELLED)


def kernel_build_calls(int build):
    """The entry points kernel build `build` makes out-of-line calls, in
    SPIN_ENTRIES order (the rest are inline code)."""
    check_kbuild(build)
    return [name for i, name in enumerate(SPIN_ENTRIES) if kbuild_calls_of(build, i) == 1]


# qspinlock's polls of a pending -> locked hand-over before it queues (x86's)
Q_PENDING_LOOPS = _Q_PENDING_LOOPS


cdef int lock_init_checked(smp_header *hdr, spinlock_t *l, int algo,
                           uint32_t lock_id) except -1:
    """spin_lock_init() for an algorithm Python named: every lock Python
    initialises comes through here, so arch_spin_lock() never meets an
    algorithm it has no case for."""
    check_enum(algo, SPIN_NR_ALGOS, "lock algorithm")
    rc = spin_lock_init(hdr, l, algo, lock_id)
    if rc == ENOSPC:
        raise OSError(rc, f"the lock side table is full ({hdr.nr_cpus * LOCK_INFO_PER_CPU} "
                          "locks: LOCK_INFO_PER_CPU per emulated CPU)")
    if rc != 0:
        raise OSError(rc, "pthread_mutex_init failed")
    return 0


cdef lock_info *checked_lock_info(smp_header *hdr, spinlock_t *l) except NULL:
    """Lock `l`'s side-table entry, which lock_init() gave it."""
    cdef lock_info *li = lock_info_of(hdr, l)
    if li == NULL:
        raise ValueError("lock not initialised: no algorithm")
    return li


cdef int lock_algo_of(smp_header *hdr, spinlock_t *l) except -1:
    """The algorithm lock `l` was initialised for."""
    return checked_lock_info(hdr, l).algo


def lock_init(unsigned char[::1] seg, int region, int index, int algo, uint32_t lock_id):
    """Initialise lock `index` of a lock_slot region for an algorithm."""
    cdef smp_header *hdr = segment_header(seg)
    cdef lock_slot *s = checked_slot(hdr, region, index)
    lock_init_checked(hdr, &s.lock, algo, lock_id)
    s.counter = 0


def queue_nodes_reset(unsigned char[::1] seg):
    """A run's start, no worker running: every MCS/CLH node free, each
    released CLH node first taken out of its lock (mcs_nodes_reset())."""
    mcs_nodes_reset(segment_header(seg))


def lock_hammer(unsigned char[::1] seg, int cpu, int region, int index, int variant,
                uint64_t max_acquisitions, double duration_s, uint64_t hold_cycles,
                bint check=False, bint popf=False, int irq_lock=-1, uint64_t think_cycles=0,
                int kbuild=0, bint bpf_spin_lock=False):
    """Take and release one lock over and over, incrementing its counter
    inside the critical section (held `hold_cycles` TSC cycles), then
    spinning `think_cycles` TSC cycles outside it before the next acquire
    (the work a real caller does between two critical sections), until
    max_acquisitions (0: no limit) or duration_s (0: no limit) or stop.
    The entry points have the shape of kernel build `kbuild` (KERNEL_BUILDS);
    with `bpf_spin_lock` (irqsave only), the pair is bpf_spin_lock() and
    bpf_spin_unlock() instead, two calls deep (bpf_helpers.h): the
    kernel referee's contended pair.
    IRQs that arrive meanwhile run the test handler, which takes lock
    `irq_lock` of the same region if that is not -1.

    The deadline bounds the run whatever the hold time: a hold ends at it,
    and with a hold or a think time, or on an oversubscribed machine (where one acquisition
    can wait for a whole round of the scheduler), it is checked after every
    acquisition; otherwise every 16th (128th with `bpf_spin_lock`, as
    the referee's programs), to keep the TSC read out of the measured
    loop. A waiter never gives up at the deadline (a ticket or an MCS node
    cannot be given back): the lock is left free.

    Returns (acquisitions, tsc_cycles, spins, aborted by a stop).
    """
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_ctx c
    check_cpu(hdr, cpu)
    cdef lock_slot *s = checked_slot(hdr, region, index)
    cdef unsigned long flags = 0
    cdef uint64_t n = 0, t0, t1, deadline, spins0
    cdef bint aborted = False
    cdef const bpf_spin_lock_ops *helpers = NULL
    # how often the deadline is read: see above
    cdef uint64_t every = 0 if hold_cycles or think_cycles or hdr.flags & percpu.SMP_F_OVERSUBSCRIBED else 15
    if every and bpf_spin_lock:
        every = TB_PROG_OPS_C - 1     # as the referee's programs leave the lock (time_bench.h)
    if max_acquisitions == 0 and duration_s <= 0:
        raise ValueError("give max_acquisitions or duration_s")
    check_enum(variant, SPIN_NR_VARIANTS, "lock variant")
    check_kbuild(kbuild)
    if not 0 <= duration_s <= 1e6:
        raise ValueError(f"duration_s must be in [0, 1e6], got {duration_s}")
    cpu_ctx_init(&c, hdr, cpu, check, popf)
    c.kbuild = kbuild   # the entry points' shape (spinlock_api_smp.h)
    # one algorithm throughout, looked up once: the loop's wrappers read it
    # from the context, not from the side table
    c.lock_algo = lock_algo_of(hdr, &s.lock)
    if irq_lock >= 0:
        c.irq_test_lock = &checked_slot(hdr, region, irq_lock).lock
        if lock_algo_of(hdr, c.irq_test_lock) != c.lock_algo:
            raise ValueError("the IRQ's lock and the hammered lock must share an algorithm")
    if bpf_spin_lock:
        if variant != VARIANT_IRQSAVE:
            raise ValueError("bpf_spin_lock() is an irqsave pair")
        helpers = bpf_spin_lock_ops_of(c.lock_algo, check, kbuild)
    with nogil:
        spins0 = c.irq.spins
        t0 = tsc_start()
        deadline = t0 + <uint64_t>(duration_s * hdr.tsc_hz) if duration_s > 0 else <uint64_t>-1
        while True:
            if helpers != NULL:
                if helpers.lock(&c, &s.lock) != 0:
                    aborted = True
                    break
            elif spin_lock_variant(&c, &s.lock, variant, &flags) != 0:
                aborted = True
                break
            s.counter = s.counter + 1
            if hold_cycles:
                tsc_spin(hdr, hold_cycles, deadline)
            if helpers != NULL:
                helpers.unlock[popf](&c, &s.lock)
            else:
                spin_unlock_variant(&c, &s.lock, variant, flags)
            n += 1
            if n == max_acquisitions:
                break
            if think_cycles:
                # outside the lock, so the other CPUs can take it meanwhile
                tsc_spin(hdr, think_cycles, deadline)
            if (n & every) == 0:
                if tsc_read_unordered() >= deadline:
                    break
                if smp_should_stop(hdr):
                    aborted = True
                    break
        t1 = tsc_stop()
        lockdep_end(&c)
    return n, t1 - t0, c.irq.spins - spins0, bool(aborted)


# the locked RMWs atomic_hammer runs (time_bench.h's loops)
ATOMIC_OPS = {"fetch_add": TB_ATOMIC_FETCH_ADD, "cmpxchg": TB_ATOMIC_CMPXCHG,
              "xchg": TB_ATOMIC_XCHG}


def atomic_hammer(unsigned char[::1] seg, int region, int index, str op, double duration_s,
                  unsigned char[::1] line=None, size_t offset=0):
    """One locked RMW on a word every CPU shares (the low half of lock slot
    `index`'s counter; with `line`, the word `offset` bytes into that
    buffer instead: a mapped BPF array's page, the very line the kernel's
    program hammers) over and over for `duration_s`, as time_bench's
    atomic_fetch_add, cmpxchg (read, then swap in old + 1; a failure is not
    retried) and atomic_xchg tests run it on a word of their own,
    TB_PROG_OPS back to back between two reads of the clock, as the
    referee's programs: what its contended atomics measure beside the
    kernel's. Returns (ops, tsc_cycles); ops a multiple of TB_PROG_OPS."""
    cdef smp_header *hdr = segment_header(seg)
    cdef lock_slot *s = checked_slot(hdr, region, index)
    cdef uint32_t *word = <uint32_t *>&s.counter
    cdef uint64_t n, cycles, deadline
    if op not in ATOMIC_OPS:
        raise ValueError(f"no atomic op {op!r}: {', '.join(ATOMIC_OPS)}")
    if not 0 < duration_s <= 1e6:
        raise ValueError(f"duration_s must be in (0, 1e6], got {duration_s}")
    if line is not None:
        if offset % 8 or offset + 8 > <size_t>line.shape[0]:
            raise ValueError(f"offset {offset}: not an aligned word of the {line.shape[0]}-byte line")
        word = <uint32_t *>&line[offset]
    cdef int which = ATOMIC_OPS[op]
    with nogil:
        deadline = tsc_read_unordered() + <uint64_t>(duration_s * hdr.tsc_hz)
        n = tb_atomic_hammer(hdr, word, which, deadline, &cycles)
    return n, cycles
