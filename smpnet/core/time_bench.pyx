# time_bench.pyx - the time_bench tests' loops and the round that runs one.
#
# A time_bench test is a loop function that runs its op `loops` times
# between two TSC reads and returns the cycles. The harness
# (smpnet/time_bench.py) calls one round at a time; each op is inlined in
# its own loop, as in time_bench_sample.c, so no call or dispatch is inside
# the timing. The lock tests' loops are C (time_bench.h): one compiled loop
# per (variant, algorithm, checker, restore mode), chosen before the round
# from the lock's algorithm and the CPU's flags, so no switch on the
# algorithm and no checker test runs inside the timing (see reference.h
# for the hand-written baseline).

cdef struct tb_ctx:
    cpu_ctx c
    spinlock_t *lock
    lock_info *li           # the lock's side-table entry: its algorithm, its mutex
    uint32_t word
    uint32_t sink           # where a test's results go, so that they are used

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


cdef uint64_t tb_local_IRQ_disable_enable(tb_ctx *t, uint64_t loops) noexcept nogil:
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        local_irq_disable(&t.c)
        local_irq_enable(&t.c)
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


cdef uint64_t tb_atomic_fetch_add_unrolled(tb_ctx *t, uint64_t loops) noexcept nogil:
    # the referee's BPF_ADD | BPF_FETCH, back to back (time_bench.h)
    return tb_atomics_unrolled(&t.word, loops, TB_ATOMIC_FETCH_ADD)


cdef uint64_t tb_cmpxchg_unrolled(tb_ctx *t, uint64_t loops) noexcept nogil:
    # the referee's read and BPF_CMPXCHG, back to back: cmpxchg's op unrolled
    return tb_atomics_unrolled(&t.word, loops, TB_ATOMIC_CMPXCHG)


cdef uint64_t tb_atomic_xchg_unrolled(tb_ctx *t, uint64_t loops) noexcept nogil:
    # the referee's BPF_XCHG, back to back: a constant swapped in
    return tb_atomics_unrolled(&t.word, loops, TB_ATOMIC_XCHG)


cdef uint64_t tb_this_cpu_inc(tb_ctx *t, uint64_t loops) noexcept nogil:
    # the referee's per-CPU map value + 1, unrolled as its program, on this
    # CPU's pcpu_lstats.packets: a per-CPU variable of the segment (time_bench.h)
    return tb_this_cpu_inc_unrolled(&t.c, loops)


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
    # the hand-written C baseline for spin_lock_unlock on this lock's
    # algorithm (reference.h)
    return ref_spin_lock_unlock(&t.c.irq.preempt_count, t.lock, t.li, loops)


# ---------------------------------------------------------------- the table
#
# The time_bench tests, one row each: the one list that TB_LOOPS,
# TIME_BENCH_NAMES/NEEDS/TESTS and TIME_BENCH_SUITE (and so
# smpnet.time_bench.SUITE) derive from. In time_bench_sample.c's order,
# smpnet's additions after the kernel's. Columns: the name, the loop, what it
# runs on, the lock variant it measures (-1: none), and whether it is in the
# kernel's suite (not: smpnet's instruments, the timestamp, the
# hand-written C baseline and the irqsave control). A lock test's loop is NULL: its variant's
# loops are time_bench.h's, one per algorithm, checker and restore mode;
# so are an IRQ test's whose op tests the checker or the restore mode
# (its `op`, one loop per checker and restore mode).

cdef enum tb_needs:
    TB_NEEDS_NOTHING = 0    # a plain C loop
    TB_NEEDS_CPU = 1        # an emulated CPU's IRQ state or per-CPU data: seg, cpu
    TB_NEEDS_LOCK = 2       # ... and a lock_slot: lock_region, lock_index

cdef enum:
    TB_MAX_TESTS = 32

cdef tb_loop_t TB_LOOPS[TB_MAX_TESTS]
cdef list tb_rows = []


cdef int tb_test(str name, tb_loop_t loop, tb_needs needs, int variant, bint suite,
                 int op=-1) except -1:
    if len(tb_rows) == TB_MAX_TESTS:
        raise RuntimeError("more time_bench tests than TB_MAX_TESTS")
    if loop == NULL:
        # time_bench.h has its loop for every combination: a lock test's per
        # algorithm, checker, restore mode and kernel build; an IRQ test's
        # (`op`) per checker, restore mode and kernel build
        for algo in range(SPIN_NR_ALGOS if needs == TB_NEEDS_LOCK else 1):
            for mode in range(4 * KBUILD_NR):
                if not kbuild_valid(mode >> 2):
                    continue
                if (tb_cpu_loop_of(op, (mode >> 1) & 1, mode & 1, mode >> 2)
                        if needs != TB_NEEDS_LOCK else
                        tb_lock_loop_of(variant, algo, (mode >> 1) & 1, mode & 1,
                                        mode >> 2)) == NULL:
                    raise RuntimeError(f"time_bench.h has no {name!r} loop for mode {mode}")
    TB_LOOPS[len(tb_rows)] = loop
    tb_rows.append((name, needs, variant, suite, op))
    return 0


tb_test("for_loop", tb_for_loop, TB_NEEDS_NOTHING, -1, True)
tb_test("spin_lock_unlock", NULL, TB_NEEDS_LOCK, VARIANT_PLAIN, True)
tb_test("spin_lock_unlock_irqsave", NULL, TB_NEEDS_LOCK,
        VARIANT_IRQSAVE, True)
tb_test("irqsave_before_lock", NULL, TB_NEEDS_LOCK,
        VARIANT_IRQSAVE_BEFORE_LOCK, True)
tb_test("spin_lock_unlock_irq", NULL, TB_NEEDS_LOCK, VARIANT_IRQ, True)
tb_test("simple_irq_disable_before_lock", NULL, TB_NEEDS_LOCK,
        VARIANT_IRQ_DISABLE_BEFORE_LOCK, True)
tb_test("local_BH_disable_enable", NULL, TB_NEEDS_CPU, -1, True, TB_OP_LOCAL_BH_DISABLE_ENABLE)
tb_test("local_IRQ_disable_enable", tb_local_IRQ_disable_enable, TB_NEEDS_CPU, -1, True)
tb_test("local_irq_save_restore", NULL, TB_NEEDS_CPU, -1, True,
        TB_OP_LOCAL_IRQ_SAVE_RESTORE)
tb_test("preempt_disable_enable", tb_preempt_disable_enable, TB_NEEDS_CPU, -1, True)
tb_test("cmpxchg", tb_cmpxchg, TB_NEEDS_NOTHING, -1, True)
tb_test("this_cpu_cmpxchg", tb_this_cpu_cmpxchg, TB_NEEDS_NOTHING, -1, True)
tb_test("function_call_cost", tb_function_call_cost, TB_NEEDS_NOTHING, -1, True)
tb_test("func_ptr_call_cost", tb_func_ptr_call_cost, TB_NEEDS_NOTHING, -1, True)
tb_test("spin_lock_unlock_bh", NULL, TB_NEEDS_LOCK, VARIANT_BH, True)
tb_test("tsc_read", tb_tsc_read, TB_NEEDS_NOTHING, -1, False)
tb_test("ref_spin_lock_unlock", tb_ref_spin_lock_unlock, TB_NEEDS_LOCK, -1, False)
# the control for irqsave - irq: irqsave's every instruction but the pushf; pop
tb_test("spin_lock_unlock_irqsave_nopushf", NULL, TB_NEEDS_LOCK, TB_VARIANT_IRQSAVE_NOPUSHF, False)
# the model's side of the kernel referee's atomics and per-CPU increment (kernel/referee.py)
tb_test("atomic_fetch_add_unrolled", tb_atomic_fetch_add_unrolled, TB_NEEDS_NOTHING, -1, False)
tb_test("cmpxchg_unrolled", tb_cmpxchg_unrolled, TB_NEEDS_NOTHING, -1, False)
tb_test("atomic_xchg_unrolled", tb_atomic_xchg_unrolled, TB_NEEDS_NOTHING, -1, False)
tb_test("this_cpu_inc", tb_this_cpu_inc, TB_NEEDS_CPU, -1, False)
tb_test("function_calls_unrolled", NULL, TB_NEEDS_CPU, -1, False, TB_OP_CALLS_EMPTY)
tb_test("irq_save_restore_calls", NULL, TB_NEEDS_CPU, -1, False, TB_OP_CALLS_IRQ_SAVE_RESTORE)
# the referee's lock pair: bpf_spin_lock() + bpf_spin_unlock() (bpf_helpers.h)
tb_test("bpf_spin_lock_pair", NULL, TB_NEEDS_LOCK, TB_VARIANT_BPF_SPIN_LOCK, False)

# ops in one iteration of an _unrolled test's loop (the referee's)
TB_UNROLL = TB_UNROLL_C
TB_PROG_OPS = TB_PROG_OPS_C     # the referee's UNROLL; the contended loops' clock reads

# (name, needs: 0 nothing, 1 a CPU's IRQ state, 2 a lock too), in table order
TIME_BENCH_TESTS = tuple((name, needs) for name, needs, _, _, _ in tb_rows)
TIME_BENCH_NAMES = tuple(name for name, _ in TIME_BENCH_TESTS)
TIME_BENCH_NEEDS = dict(TIME_BENCH_TESTS)
# the tests on no lock whose loop the kernel build shapes (local_bh_enable(), a call in x86 builds)
TIME_BENCH_BUILT = tuple(name for name, _, _, _, op in tb_rows
                         if op == TB_OP_LOCAL_BH_DISABLE_ENABLE)
# the kernel suite, in order: (name, the lock variant it measures or None)
TIME_BENCH_SUITE = tuple((name, {v: k for k, v in LOCK_VARIANTS.items()}.get(variant))
                         for name, _, variant, suite, _ in tb_rows if suite)


def time_bench_round(str test, uint64_t loops, seg=None, int cpu=0, int lock_region=-1,
                     int lock_index=0, bint check=False, bint popf=False, int kbuild=0,
                     bint irqs_off=False):
    """Run one round of a time_bench test: (cycles, wall_ns) for `loops` ops.

    Tests of the IRQ model and of per-CPU data need `seg` and `cpu` (whose
    irq_cpustat or pcpu_lstats they use); lock tests also a lock_slot
    region and index. Both run with the
    lock entry points and local_bh_enable() of kernel build `kbuild`
    (KERNEL_BUILDS); `irqs_off`: inside local_irq_save() and
    local_irq_restore(), untimed (the referee's lock pair with IRQs off).
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
    t.li = NULL
    t.c.irq = NULL
    needs = TIME_BENCH_NEEDS[test]
    if needs:
        if seg is None:
            raise ValueError(f"time_bench test {test!r} needs a machine segment")
        view = seg
        hdr = segment_header(view)
        check_cpu(hdr, cpu)
        cpu_ctx_init(&t.c, hdr, cpu, check, popf)
        check_kbuild(kbuild)
        t.c.kbuild = kbuild
        if needs == TB_NEEDS_LOCK:
            t.lock = &checked_slot(hdr, lock_region, lock_index).lock
            t.li = checked_lock_info(hdr, t.lock)
            if t.li.algo >= SPIN_NR_ALGOS:
                raise ValueError(f"lock {lock_index} has no algorithm ({t.li.algo})")
            t.c.lock_algo = t.li.algo
    cdef tb_loop_t fn = TB_LOOPS[idx]
    cdef tb_lock_loop_t lock_fn = NULL
    if fn == NULL and needs == TB_NEEDS_LOCK:
        # a lock test: its loop for this lock's algorithm and this CPU's
        # checker and restore mode, chosen here, once
        lock_fn = tb_lock_loop_of(tb_rows[idx][2], <int>t.li.algo, check, popf, kbuild)
        if lock_fn == NULL:
            raise ValueError(f"no {test!r} loop for lock algorithm {t.li.algo}")
    elif fn == NULL:
        lock_fn = tb_cpu_loop_of(tb_rows[idx][4], check, popf, kbuild)
    cdef uint64_t cycles, w0, w1
    cdef bint has_cpu = needs != 0
    cdef unsigned long outer = 0
    if irqs_off and not has_cpu:
        raise ValueError(f"time_bench test {test!r} has no IRQ state to turn off")
    with nogil:
        if irqs_off:
            outer = local_irq_save(&t.c)
        w0 = mono_ns()
        if lock_fn != NULL:
            cycles = lock_fn(&t.c, t.lock, loops)
        else:
            cycles = fn(&t, loops)
        w1 = mono_ns()
        if irqs_off:
            local_irq_restore(&t.c, outer)
        if has_cpu:
            lockdep_end(&t.c)
    return cycles, w1 - w0
