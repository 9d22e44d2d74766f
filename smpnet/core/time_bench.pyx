# time_bench.pyx - the time_bench tests' loops and the round that runs one.
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
