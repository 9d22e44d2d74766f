# ab.pyx - a user's variants (`smpnet-bench ab FILE.c`), run by the core.
#
# The user's object (smpnet/include/smpnet.h, compiled at run time) holds
# each variant's loops, with the op inlined; Python hands the core their
# addresses, and the core calls them here under nogil with an smpnet_env:
# the emulated CPU and its variant's copy of the file's state. The object
# was built from the same headers with the same flags and has told its
# SMPNET_ABI_HASH, which the caller compared with AB_ABI_HASH below; the
# build options it was compiled for (its smpnet_build_info) set up the CPU.

AB_ABI_HASH = ab.SMPNET_ABI_HASH
AB_MAX_VARIANTS = ab.SMPNET_AB_MAX_VARIANTS
AB_NAME = ab.SMPNET_AB_NAME
AB_MAX_ROLES = ab.SMPNET_AB_MAX_ROLES


cdef int ab_env_init(ab.smpnet_env *e, cpu_ctx *c, net_ctx *n, unsigned char[::1] seg,
                     int cpu, int copy, int shared_region, int percpu_region,
                     uintptr_t build_info, int pcpu_area_region, net_regions,
                     int net_strategy) except -1:
    """e: emulated CPU `cpu` on copy `copy` of the state: record `copy` of
    the shared region, its block of the per-CPU one (the region's records
    over the copies, the shared region's count: each copy's block whole
    pages, experiments/ab/rounds.py) and records copy * nr_cpus .. of the
    object's per-CPU section's (every object has one); the CPU set
    up as the object was built (its lock algorithm, checker, restore mode
    and kernel build, read from `build_info`). With `net_regions` (the
    object takes the model's skbs, smpnet_skbuff.h) the CPU's network model
    is `n`, on those regions, deferring frees with `net_strategy`."""
    cdef smp_header *hdr = segment_header(seg)
    cdef int region   # typed: Cython 3.3 infers a loop over a tuple of ints wrongly
    check_cpu(hdr, cpu)
    for region in (shared_region, percpu_region):
        if region < percpu.REGION_NR_BUILTIN or <uint32_t>region >= hdr.nr_regions:
            raise ValueError(f"no state region {region} in this segment")
    if copy < 0 or <uint32_t>copy >= hdr.regions[shared_region].count:
        raise IndexError(f"no state copy {copy}")
    cdef uint64_t per_copy = hdr.regions[percpu_region].count // hdr.regions[shared_region].count
    if per_copy < hdr.nr_cpus:
        raise IndexError(f"no per-CPU state for copy {copy}")
    if (pcpu_area_region < percpu.REGION_NR_BUILTIN
            or <uint32_t>pcpu_area_region >= hdr.nr_regions
            or <uint64_t>(copy + 1) * hdr.nr_cpus > hdr.regions[pcpu_area_region].count):
        raise ValueError(f"no per-CPU section region {pcpu_area_region} for copy {copy}")
    if build_info == 0:
        raise ValueError("no build info")
    cdef const ab.smpnet_build_info *b = <const ab.smpnet_build_info *>build_info
    check_enum(b.algo, SPIN_NR_ALGOS, "lock algorithm")
    check_kbuild(b.kbuild)
    cpu_ctx_init(c, hdr, cpu, b.check, b.popf)
    c.lock_algo = b.algo
    c.kbuild = b.kbuild
    memset(e, 0, sizeof(ab.smpnet_env))
    e.c = c
    e.shared = per_cpu_ptr(hdr, shared_region, copy)
    e.percpu = <char *>per_cpu_ptr(hdr, percpu_region, copy * per_copy)
    e.percpu_stride = hdr.regions[percpu_region].stride
    e.pcpu_area = <char *>per_cpu_ptr(hdr, pcpu_area_region, copy * hdr.nr_cpus)
    e.pcpu_area_stride = hdr.regions[pcpu_area_region].stride
    e.cpu = cpu
    e.nr_cpus = hdr.nr_cpus
    e.deadline = <uint64_t>-1      # a hold() outside a contended run: its whole length
    if net_regions is not None:
        net_ctx_setup(n, c, net_regions, net_strategy, NET_CORE_MODEL["skb_defer_max"])
        c.net = n
        e.skb_ops = &ab_skb.ab_skb_ops
    return 0


def ab_round(uintptr_t loop, uint64_t loops, unsigned char[::1] seg, int cpu, int copy,
             int shared_region, int percpu_region, uintptr_t build_info,
             int pcpu_area_region, net_regions=None, int net_strategy=0):
    """One round of a user variant's loop: (cycles, wall_ns, units of work
    counted by SMPNET_WORK) for `loops` ops (each op every role in turn)."""
    cdef ab.smpnet_env e
    cdef cpu_ctx c
    cdef net_ctx net
    if loop == 0:
        raise ValueError("no loop")
    ab_env_init(&e, &c, &net, seg, cpu, copy, shared_region, percpu_region, build_info,
                pcpu_area_region, net_regions, net_strategy)
    cdef ab.smpnet_loop_fn fn = <ab.smpnet_loop_fn>loop
    cdef uint64_t cycles, w0, w1
    with nogil:
        w0 = mono_ns()
        cycles = fn(&e, loops)
        w1 = mono_ns()
        lockdep_end(&c)
    return cycles, w1 - w0, e.work


def ab_contended(uintptr_t contended, double duration_s, unsigned char[::1] seg, int cpu,
                 int copy, int shared_region, int percpu_region, uintptr_t build_info,
                 int pcpu_area_region, uint64_t hold_cycles=0, uint64_t think_cycles=0,
                 int role=0, net_regions=None, int net_strategy=0):
    """A user variant on this CPU for duration_s, as every CPU of the run
    does at once, in CPU role `role` (SMPNET_ROLES; 0 without): (ops,
    tsc_cycles, spins, aborted by a stop, units of work counted)."""
    cdef ab.smpnet_env e
    cdef cpu_ctx c
    cdef net_ctx net
    cdef uint64_t n = 0, t0, t1, spins0
    cdef int stopped
    if contended == 0:
        raise ValueError("no loop")
    if not 0 < duration_s <= 1e6:
        raise ValueError(f"duration_s must be in (0, 1e6], got {duration_s}")
    if not 0 <= role < AB_MAX_ROLES:
        raise ValueError(f"no CPU role {role}")
    ab_env_init(&e, &c, &net, seg, cpu, copy, shared_region, percpu_region, build_info,
                pcpu_area_region, net_regions, net_strategy)
    e.hold_cycles = hold_cycles
    e.think_cycles = think_cycles
    e.role = role
    cdef ab.smpnet_contended_fn fn = <ab.smpnet_contended_fn>contended
    cdef double hz = c.hdr.tsc_hz
    with nogil:
        spins0 = c.irq.spins
        t0 = tsc_start()
        e.deadline = t0 + <uint64_t>(duration_s * hz)
        stopped = fn(&e, e.deadline, &n)
        t1 = tsc_stop()
        if c.net != NULL:
            # the model's skbs: the kick pending here and the skbs deferred
            # to this CPU are freed in this round's account, untimed (what
            # another CPU defers after this falls to a later round)
            irq_poll(&c)
            skb_defer.skb_defer_free_flush(&c, &net)
        lockdep_end(&c)
    return n, t1 - t0, c.irq.spins - spins0, bool(stopped), e.work


def ab_init(uintptr_t init, unsigned char[::1] seg, int copy, int shared_region,
            int percpu_region, uintptr_t build_info, int pcpu_area_region, net_regions=None,
            int net_strategy=0):
    """A variant's SMPNET_INIT on its copy of the state, as CPU 0: 0 or an errno."""
    cdef ab.smpnet_env e
    cdef cpu_ctx c
    cdef net_ctx net
    ab_env_init(&e, &c, &net, seg, 0, copy, shared_region, percpu_region, build_info,
                pcpu_area_region, net_regions, net_strategy)
    e.lock_ids = copy << 8   # a report names a lock by its copy, then its place in the init
    cdef ab.smpnet_init_fn fn = <ab.smpnet_init_fn>init
    cdef int rc
    with nogil:
        rc = fn(&e)
    return rc


def ab_check(uintptr_t check_fn, unsigned char[::1] seg, int copy, int shared_region,
             int percpu_region, uintptr_t build_info, uint64_t ops, int pcpu_area_region,
             net_regions=None, int net_strategy=0):
    """A variant's SMPNET_CHECK on its copy, `ops` ops done on every CPU:
    None, or the message it failed with."""
    cdef ab.smpnet_env e
    cdef cpu_ctx c
    cdef net_ctx net
    ab_env_init(&e, &c, &net, seg, 0, copy, shared_region, percpu_region, build_info,
                pcpu_area_region, net_regions, net_strategy)
    e.ops = ops
    cdef ab.smpnet_check_fn fn = <ab.smpnet_check_fn>check_fn
    cdef const char *msg
    with nogil:
        msg = fn(&e)
    return None if msg == NULL else msg.decode(errors="replace")


cdef extern from *:
    """
    #ifdef NDEBUG
    #define SMPNET_BUILT_NDEBUG 1
    #else
    #define SMPNET_BUILT_NDEBUG 0
    #endif
    """
    int SMPNET_BUILT_NDEBUG

# built with SMPNET_DEBUG=1 (setup.py): a user's file is then built the same way
CORE_DEBUG = not SMPNET_BUILT_NDEBUG
