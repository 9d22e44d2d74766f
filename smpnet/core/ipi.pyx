# ipi.pyx - what an IPI costs on this machine, the way the kernel pays it.
#
# skb_attempt_defer_free() kicks the owner with smp_call_function_single_async()
# (kernel/smp.c): it queues a csd on the target's call_single_queue and, if
# that queue was empty, sends one IPI (an APIC ICR write: a VM exit in many
# guests) and returns without waiting. The target takes the interrupt:
# entry, generic_smp_call_function_single_interrupt() running the csd's
# function (trigger_rx_softirq), exit. The sender never waits for any of it.
#
# Both halves are measured here, apart, on two real CPUs, with a peer
# thread of this process spinning in user space on the target CPU:
#
# - the send: tgkill() of a signal the peer has blocked (queued, no kick)
#   against tgkill() of one it has not (queued, and since the peer is
#   running on another CPU, signal_wake_up() -> kick_process() ->
#   smp_send_reschedule(): one asynchronous IPI, the same ICR write with
#   another vector). Timed in pairs, in alternating order; the paired
#   difference is what the kick adds to the sender: the IPI's send. No
#   wake-up is in it (the peer is running: try_to_wake_up() returns at its
#   state check) and no waiting (the sender returns before the peer's
#   handler runs).
# - the target's entry, handler and exit: membarrier(PRIVATE_EXPEDITED)
#   sends an IPI to every CPU running this process's threads and waits for
#   them; the peer, reading the TSC in a tight loop, sees the interrupt as
#   a gap in its readings: entry, the IPI's handler (the csd queue's flush
#   and an smp_mb()), exit. The longest gap of each round is its sample.
# - the round trip, reported: membarrier with the peer spinning (one IPI,
#   waited for) against membarrier with the peer asleep (no CPU to IPI: the
#   system call's floor).
#
# Plain C threads, nogil: no Python in either loop. Every wait has the
# run's deadline. With one real CPU (sender and target the same) there is
# no cross-CPU IPI to measure, and nothing is measured (cross_cpu False).

cdef extern from "<signal.h>" nogil:
    int SIGRTMIN
    ctypedef struct sigset_t:
        pass
    ctypedef struct siginfo_t:
        pass
    struct sigaction_t "sigaction":
        void (*sa_handler)(int) noexcept nogil
        sigset_t sa_mask
        int sa_flags
    int sigaction(int sig, const sigaction_t *act, sigaction_t *old)
    int sigemptyset(sigset_t *s)
    int sigaddset(sigset_t *s, int sig)
    int pthread_sigmask(int how, const sigset_t *s, sigset_t *old)
    int sigtimedwait(const sigset_t *s, siginfo_t *info, const timespec *t)
    enum: SIG_BLOCK, SIG_UNBLOCK

cdef extern from "<sys/syscall.h>" nogil:
    enum: SYS_tgkill, SYS_gettid, SYS_membarrier

cdef extern from *:
    """
    #include <linux/membarrier.h>
    """
    enum: MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED

cdef extern from "<unistd.h>" nogil:
    int getpid()

cdef enum:
    IPI_PAUSE_NS = 20000            # between rounds: the last IPI's exit is over
    IPI_SLEEP_NS = 100000000        # the sleeping peer's FUTEX_WAIT timeout: 100 ms
    IPI_SETTLE_NS = 1000000         # after the peer says it sleeps: it is off its CPU
    PEER_SPIN = 0                   # the peer's phases
    PEER_SLEEP = 1


cdef struct ipi_pair:
    int cpu[2]              # the real CPUs: [0] the peer's (the target), [1] the sender's
    int ran_on[2]           # where each thread found itself (sched_getcpu), -1: unknown
    int pin_err             # errno of a failed sched_setaffinity, 0 if none
    int sig_floor           # the signal the peer blocks: queued, no kick
    int sig_kick            # the signal it takes: queued, and a kick
    long peer_tid
    uint32_t ready          # the peer is pinned and has its mask
    uint32_t phase          # PEER_SPIN or PEER_SLEEP
    uint32_t asleep         # the peer is in its sleeping phase
    uint32_t sleep_word     # futex word of the sleeping phase
    uint32_t round          # the sender's round; the peer follows it
    uint32_t acked          # the last round the peer saw
    uint32_t stop
    uint64_t deadline_ns    # CLOCK_MONOTONIC
    uint32_t rounds
    bint membarrier_ok      # membarrier(PRIVATE_EXPEDITED) registered
    int err                 # errno of a failed tgkill, 0 if none
    uint32_t done           # rounds completed, each phase
    uint64_t *gap           # per round (rounds + 1): the peer's longest gap between two TSC reads
    uint64_t *floor         # membarrier, the peer asleep
    uint64_t *trip          # membarrier, the peer spinning
    uint64_t *queued        # tgkill of the blocked signal
    uint64_t *kicked        # tgkill of the taken one


cdef uint32_t ipi_handled = 0   # the peer's handler of sig_kick counts here

cdef void ipi_on_kick(int sig) noexcept nogil:
    atomic_inc(&ipi_handled)


cdef inline bint ipi_wait_step(ipi_pair *p) noexcept nogil:
    return pair_wait_step(&p.stop, p.deadline_ns, False)


cdef inline bint ipi_pin(ipi_pair *p, int side) noexcept nogil:
    return pair_pin(p.cpu[side], &p.ran_on[side], &p.pin_err, &p.stop)


cdef void *ipi_peer(void *arg) noexcept nogil:
    """On the target CPU: spin reading the TSC, keeping the longest gap of
    each round (an interrupt taken there), or sleep while the sender
    measures the floor."""
    cdef ipi_pair *p = <ipi_pair *>arg
    cdef sigset_t floor_set, kick_set
    cdef timespec zero, ts
    cdef uint64_t last, t, g, longest = 0
    cdef uint32_t mine = 0, r
    zero.tv_sec = zero.tv_nsec = 0
    ts.tv_sec = 0
    ts.tv_nsec = IPI_SLEEP_NS
    p.peer_tid = syscall(SYS_gettid)
    sigemptyset(&floor_set)
    sigaddset(&floor_set, p.sig_floor)
    pthread_sigmask(SIG_BLOCK, &floor_set, NULL)
    # the kick is taken whatever mask the caller's thread passed on
    sigemptyset(&kick_set)
    sigaddset(&kick_set, p.sig_kick)
    pthread_sigmask(SIG_UNBLOCK, &kick_set, NULL)
    if not ipi_pin(p, 0):
        return NULL
    atomic_set(&p.ready, 1)
    last = tsc_read_unordered()
    while not atomic_read(&p.stop):
        if atomic_read(&p.phase) == PEER_SLEEP:
            atomic_set(&p.asleep, 1)
            syscall(SYS_futex, &p.sleep_word, FUTEX_WAIT, 0, &ts, NULL, 0)
            atomic_set(&p.asleep, 0)
            last = tsc_read_unordered()
            continue
        t = tsc_read_unordered()
        g = t - last
        last = t
        r = atomic_read(&p.round)
        if r != mine:
            # the round is over: its longest gap is final. Drain the blocked
            # signals queued so far (RLIMIT_SIGPENDING), then follow the sender.
            if mine <= p.rounds:
                p.gap[mine] = longest
            while sigtimedwait(&floor_set, NULL, &zero) > 0:
                pass
            mine = r
            longest = 0
            atomic_set(&p.acked, r)
            last = tsc_read_unordered()
        elif g > longest:
            longest = g
    while sigtimedwait(&floor_set, NULL, &zero) > 0:
        pass
    return NULL


cdef inline bint ipi_next_round(ipi_pair *p) noexcept nogil:
    """End the sender's round: the peer publishes its gap and acknowledges;
    then pause, so that the next IPI finds the peer back in its loop."""
    cdef uint32_t r = p.round + 1
    cdef uint64_t t
    atomic_set(&p.round, r)
    while atomic_read(&p.acked) != r:
        if not ipi_wait_step(p):
            return False
    t = mono_ns()
    while mono_ns() - t < IPI_PAUSE_NS:
        if not ipi_wait_step(p):
            return False
    return True


cdef inline uint64_t ipi_timed_membarrier() noexcept nogil:
    cdef uint64_t t0 = tsc_start()
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)
    return tsc_stop() - t0


cdef inline uint64_t ipi_timed_tgkill(ipi_pair *p, int sig) noexcept nogil:
    cdef uint64_t t0 = tsc_start()
    cdef long rc = syscall(SYS_tgkill, getpid(), p.peer_tid, sig)
    cdef uint64_t t1 = tsc_stop()
    if rc != 0:
        p.err = errno
        atomic_set(&p.stop, 1)
    return t1 - t0


cdef void *ipi_sender(void *arg) noexcept nogil:
    """On the sending CPU: the floor (peer asleep), the round trips and the
    target's gaps (peer spinning), then the paired sends."""
    cdef ipi_pair *p = <ipi_pair *>arg
    cdef uint32_t i, h
    cdef uint64_t a, b, t
    if not ipi_pin(p, 1):
        return NULL
    while not atomic_read(&p.ready):
        if not ipi_wait_step(p):
            return NULL
    if p.membarrier_ok:
        # the floor: the peer asleep, no other CPU runs this process
        atomic_set(&p.phase, PEER_SLEEP)
        while not atomic_read(&p.asleep):
            if not ipi_wait_step(p):
                return NULL
        t = mono_ns()
        while mono_ns() - t < IPI_SETTLE_NS:
            if not ipi_wait_step(p):
                return NULL
        for i in range(p.rounds):
            p.floor[i] = ipi_timed_membarrier()
            if not ipi_wait_step(p):
                return NULL
        atomic_set(&p.phase, PEER_SPIN)
        atomic_set(&p.sleep_word, 1)
        syscall(SYS_futex, &p.sleep_word, FUTEX_WAKE, 1, NULL, NULL, 0)
        if not ipi_next_round(p):
            return NULL
        # the round trips: one IPI to the spinning peer each, waited for
        for i in range(p.rounds):
            p.trip[i] = ipi_timed_membarrier()
            if not ipi_next_round(p):
                return NULL
    # the sends, in pairs, the order alternating
    for i in range(p.rounds):
        h = atomic_read(&ipi_handled)
        if i & 1:
            b = ipi_timed_tgkill(p, p.sig_kick)
            a = ipi_timed_tgkill(p, p.sig_floor)
        else:
            a = ipi_timed_tgkill(p, p.sig_floor)
            b = ipi_timed_tgkill(p, p.sig_kick)
        p.queued[i], p.kicked[i] = a, b
        while atomic_read(&ipi_handled) == h:      # the peer took it
            if not ipi_wait_step(p):
                return NULL
        if not ipi_next_round(p):
            return NULL
        p.done = i + 1
    atomic_set(&p.stop, 1)
    return NULL


cdef list ipi_samples(uint64_t *a, uint32_t n):
    return [a[i] for i in range(n)]


def ipi_paired_sends(queued, kicked):
    """The send's samples: each round's kicked less queued tgkill, the two
    rounds of each order averaged (the first call of a round pays for the
    signal's lines the peer's drain took: alternating the order cancels that
    in a mean, not in a median of single rounds)."""
    d = [<double>b - <double>a for a, b in zip(queued, kicked)]
    return [(d[k] + d[k + 1]) / 2 for k in range(0, len(d) - 1, 2)]


cdef void ipi_release(void *arg) noexcept nogil:
    """Wake the peer if it sleeps (pair_run, once stop is set)."""
    cdef ipi_pair *p = <ipi_pair *>arg
    atomic_set(&p.sleep_word, 1)
    syscall(SYS_futex, &p.sleep_word, FUTEX_WAKE, 1, NULL, NULL, 0)


def ipi_cycles(int sender_cpu, int target_cpu, uint32_t rounds=500, double timeout_s=10.0):
    """TSC cycles an IPI costs, measured on real CPU `sender_cpu` sending to
    real CPU `target_cpu` (see the head of core/ipi.pyx for how). Returns
    {"cross_cpu", "sender_cpu", "target_cpu", "rounds", "complete",
    "membarrier" (available here), and the samples, one per round:
    "send" (tgkill with a kick less tgkill without, paired, the two orders'
    rounds averaged: rounds // 2 of them), "queued",
    "kicked", "entry" (the target's longest gap in a round trip's round),
    "round_trip" (membarrier, the peer spinning), "floor" (membarrier, the
    peer asleep)}; the last three empty without membarrier. With one real
    CPU (sender_cpu == target_cpu) nothing is measured: cross_cpu False and
    every list empty. Each sample includes the timer's own cost
    (timer_overhead()). OSError if a CPU cannot be used or a signal cannot
    be sent; RuntimeError if the rounds did not finish within timeout_s."""
    cdef ipi_pair p
    cdef int rc
    cdef sigaction_t act, old
    cdef uint64_t *buf
    cdef int cpu   # typed: Cython 3.3 infers a loop over a tuple of ints wrongly
    out = {"cross_cpu": sender_cpu != target_cpu, "sender_cpu": sender_cpu,
           "target_cpu": target_cpu, "rounds": rounds, "complete": True, "membarrier": False,
           "send": [], "queued": [], "kicked": [], "entry": [], "round_trip": [], "floor": []}
    if rounds < 1 or rounds > 100000:
        raise ValueError("rounds must be 1 to 100000")
    for cpu in (sender_cpu, target_cpu):
        if not 0 <= cpu < CPU_SETSIZE:
            raise ValueError(f"no real CPU {cpu}")
    if not 0 < timeout_s <= 3600:
        raise ValueError(f"timeout_s must be in (0, 3600], got {timeout_s}")
    if sender_cpu == target_cpu:
        return out
    memset(&p, 0, sizeof(p))
    p.cpu[0], p.cpu[1] = target_cpu, sender_cpu
    p.ran_on[0] = p.ran_on[1] = -1
    p.rounds = rounds
    p.sig_floor, p.sig_kick = SIGRTMIN, SIGRTMIN + 1
    p.membarrier_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0
    buf = <uint64_t *>malloc((5 * rounds + 1) * sizeof(uint64_t))
    if buf == NULL:
        raise MemoryError()
    memset(buf, 0, (5 * rounds + 1) * sizeof(uint64_t))
    p.floor, p.trip, p.queued, p.kicked = buf, buf + rounds, buf + 2 * rounds, buf + 3 * rounds
    p.gap = buf + 4 * rounds    # round 0 is the floor's, rounds 1.. the round trips'
    memset(&act, 0, sizeof(act))
    act.sa_handler = ipi_on_kick
    sigemptyset(&act.sa_mask)
    if sigaction(p.sig_kick, &act, &old) != 0:
        free(buf)
        raise OSError(errno, "sigaction failed")
    try:
        with nogil:
            p.deadline_ns = mono_ns() + <uint64_t>(timeout_s * 1e9)
            rc = pair_run(ipi_peer, ipi_sender, &p, &p.stop, ipi_release)
        if rc:
            raise pair_run_error(rc)
        if p.pin_err:
            raise OSError(p.pin_err, f"cannot run on real CPU {target_cpu} and {sender_cpu}")
        if p.err == EAGAIN:
            raise OSError(p.err, "tgkill to the peer thread failed: this user's queued signals "
                                 "are at their limit (RLIMIT_SIGPENDING, ulimit -i)")
        if p.err:
            raise OSError(p.err, "tgkill to the peer thread failed")
        if p.done == 0:
            raise RuntimeError(f"no IPI's send was measured within {timeout_s} s")
        n = p.done
        queued, kicked = ipi_samples(p.queued, n), ipi_samples(p.kicked, n)
        out.update(complete=n == rounds, cross_cpu=p.ran_on[0] != p.ran_on[1],
                   queued=queued, kicked=kicked,
                   send=ipi_paired_sends(queued, kicked))
        if p.membarrier_ok:
            out.update(membarrier=True, floor=ipi_samples(p.floor, rounds),
                       round_trip=ipi_samples(p.trip, rounds), entry=ipi_samples(p.gap + 1, rounds))
    finally:
        sigaction(p.sig_kick, &old, NULL)
        free(buf)
    return out
