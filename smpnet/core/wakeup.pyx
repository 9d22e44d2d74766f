# wakeup.pyx - what a real cross-CPU wake-up costs the waker, on this machine.
#
# An IPI's sender pays for waking its target (send_ipi() in irqflags.h
# charges it); this measures that cost, once per run, for real: two threads
# pinned to two real CPUs, the sleeper in FUTEX_WAIT on a word of a
# MAP_SHARED page (shared memory, as the segment the workers share), the
# waker setting the word and calling FUTEX_WAKE. Ping-pong: the sleeper
# announces each round before it sleeps and acknowledges each wake, and the
# waker pauses after the announcement so that the sleeper is in the kernel,
# asleep, when the wake comes. Only wakes that woke someone (FUTEX_WAKE
# returned 1) are timed; one that found nobody asleep yet (0) is counted as
# missed and the pause doubles. The kernel's side of a wake-up is all there:
# the futex lookup, try_to_wake_up, the remote enqueue and, when the target
# CPU is idle and not polling, the reschedule IPI (an APIC write; a VM exit
# in a guest).
#
# Plain C threads, nogil: no Python in either loop. Every wait has a
# deadline (the sleeper's FUTEX_WAIT a 10 ms timeout, every spin the run's
# deadline), so a thread that never wakes cannot hang the caller. With one
# real CPU (waker and sleeper the same), the waits yield instead of
# spinning, and the wake is a same-CPU wake-up: no IPI (cross_cpu False).

cdef extern from "<sys/syscall.h>" nogil:
    enum: SYS_futex

cdef extern from "<linux/futex.h>" nogil:
    enum: FUTEX_WAIT
    enum: FUTEX_WAKE

cdef extern from "<sys/mman.h>" nogil:
    void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void *addr, size_t length)
    void *MAP_FAILED
    enum: PROT_READ, PROT_WRITE, MAP_SHARED, MAP_ANONYMOUS

cdef extern from "<sched.h>" nogil:
    ctypedef struct cpu_set_t:
        pass
    void CPU_ZERO(cpu_set_t *s)
    void CPU_SET(int cpu, cpu_set_t *s)
    int sched_setaffinity(int pid, size_t size, const cpu_set_t *mask)
    int sched_getcpu()
    int sched_yield()
    enum: CPU_SETSIZE

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_t:
        pass
    ctypedef struct pthread_attr_t:
        pass
    int pthread_create(pthread_t *t, const pthread_attr_t *attr,
                       void *(*start)(void *) noexcept nogil, void *arg)
    int pthread_join(pthread_t t, void **ret)

cdef enum:
    WAKE_PAUSE_NS = 20000           # the first pause before a wake: 20 us
    WAKE_PAUSE_MAX_NS = 2000000     # doubled after each miss, up to 2 ms
    WAKE_SLEEP_NS = 10000000        # the sleeper's FUTEX_WAIT timeout: 10 ms


cdef struct wake_pair:
    uint32_t *word          # the futex word (on a MAP_SHARED page)
    uint32_t armed          # the round the sleeper is about to sleep for
    uint32_t acked          # the round the sleeper woke for
    uint32_t stop           # either thread gives up: past the deadline, or pinning failed
    int cpu[2]              # the real CPUs: [0] the sleeper's, [1] the waker's
    int ran_on[2]           # where each thread found itself (sched_getcpu), -1: unknown
    int pin_err             # errno of a failed sched_setaffinity, 0 if none
    bint same_cpu           # one real CPU: wait by yielding
    uint64_t deadline_ns    # CLOCK_MONOTONIC
    uint32_t rounds         # timed wakes wanted
    uint32_t woken          # timed wakes done (FUTEX_WAKE returned 1)
    uint32_t missed         # wakes that found nobody asleep (FUTEX_WAKE returned 0)
    uint64_t *cycles        # rounds of them


# Shared by the measuring thread pairs here and in ipi.pyx, each with its
# own record: its stop flag, deadline, CPUs and pinning error.

cdef inline bint pair_wait_step(uint32_t *stop, uint64_t deadline_ns, bint same_cpu) noexcept nogil:
    """One step of a wait: pause (or yield on one CPU); False once the
    deadline passed or the other side gave up (and then *stop is set)."""
    if same_cpu:
        sched_yield()
    else:
        cpu_relax()
    if atomic_read(stop) or mono_ns() >= deadline_ns:
        atomic_set(stop, 1)
        return False
    return True


cdef inline bint pair_pin(int cpu, int *ran_on, int *pin_err, uint32_t *stop) noexcept nogil:
    """Pin the calling thread to real CPU `cpu` and say where it runs; on
    failure, the errno in *pin_err and *stop set."""
    cdef cpu_set_t s
    CPU_ZERO(&s)
    CPU_SET(cpu, &s)
    if sched_setaffinity(0, sizeof(s), &s) != 0:   # 0: this thread
        pin_err[0] = errno
        atomic_set(stop, 1)
        return False
    ran_on[0] = sched_getcpu()
    return True


ctypedef void *(*pair_thread)(void *) noexcept nogil


cdef int pair_run(pair_thread waiter, pair_thread measurer, void *arg, uint32_t *stop,
                  void (*release)(void *) noexcept nogil) noexcept nogil:
    """Start `waiter` (the thread that is woken, kicked or answered) and
    `measurer` on `arg`, wait for the measurer to finish, then set *stop,
    call `release` (to wake a waiter that sleeps; may be NULL) and wait for
    the waiter. Returns 0, or pthread_create's error (the other thread, if
    started, is stopped and joined)."""
    cdef pthread_t th[2]
    cdef int rc0, rc1
    rc0 = pthread_create(&th[0], NULL, waiter, arg)
    rc1 = pthread_create(&th[1], NULL, measurer, arg) if rc0 == 0 else 0
    if rc1 != 0:
        atomic_set(stop, 1)
    if rc0 == 0 and rc1 == 0:
        pthread_join(th[1], NULL)
    if rc0 == 0:
        atomic_set(stop, 1)
        if release != NULL:
            release(arg)
        pthread_join(th[0], NULL)
    return rc0 or rc1


def pair_run_error(int rc):
    """The OSError for pair_run()'s pthread_create error `rc`, naming the
    limit behind EAGAIN (the kernel's answer when this user's processes and
    threads are at RLIMIT_NPROC, or the system at kernel.threads-max)."""
    if rc == EAGAIN:
        return OSError(rc, "pthread_create failed: this user's processes and threads are at "
                           "their limit (ulimit -u) or the system's (kernel.threads-max)")
    return OSError(rc, "pthread_create failed")


cdef inline bint wake_wait_step(wake_pair *p) noexcept nogil:
    return pair_wait_step(&p.stop, p.deadline_ns, p.same_cpu)


cdef inline bint wake_pin(wake_pair *p, int side) noexcept nogil:
    return pair_pin(p.cpu[side], &p.ran_on[side], &p.pin_err, &p.stop)


cdef void *wake_sleeper(void *arg) noexcept nogil:
    """Round after round: clear the word, announce the round, sleep until the
    word is set, acknowledge."""
    cdef wake_pair *p = <wake_pair *>arg
    cdef timespec ts
    cdef uint32_t r = 0
    ts.tv_sec = 0
    ts.tv_nsec = WAKE_SLEEP_NS
    if not wake_pin(p, 0):
        return NULL
    while not atomic_read(&p.stop):
        r += 1
        atomic_set(p.word, 0)
        atomic_set(&p.armed, r)
        while atomic_read(p.word) == 0:
            if atomic_read(&p.stop) or mono_ns() >= p.deadline_ns:
                atomic_set(&p.stop, 1)
                return NULL
            syscall(SYS_futex, p.word, FUTEX_WAIT, 0, &ts, NULL, 0)
        atomic_set(&p.acked, r)
    return NULL


cdef void *wake_waker(void *arg) noexcept nogil:
    """Wait for the sleeper's announcement, pause, set the word and wake it:
    time the FUTEX_WAKE when it woke the sleeper; then wait for the
    acknowledgement."""
    cdef wake_pair *p = <wake_pair *>arg
    cdef uint64_t pause_ns = WAKE_PAUSE_NS, t, t0, t1
    cdef uint32_t r = 0
    cdef long n
    if not wake_pin(p, 1):
        return NULL
    while p.woken < p.rounds:
        r += 1
        while atomic_read(&p.armed) != r:
            if not wake_wait_step(p):
                return NULL
        t = mono_ns()
        while mono_ns() - t < pause_ns:     # the sleeper enters the kernel and sleeps
            if not wake_wait_step(p):
                return NULL
        atomic_set(p.word, 1)
        t0 = tsc_start()
        n = syscall(SYS_futex, p.word, FUTEX_WAKE, 1, NULL, NULL, 0)
        t1 = tsc_stop()
        if n == 1:
            p.cycles[p.woken] = t1 - t0
            p.woken += 1
        else:
            p.missed += 1
            pause_ns = min(2 * pause_ns, <uint64_t>WAKE_PAUSE_MAX_NS)
        while atomic_read(&p.acked) != r:
            if not wake_wait_step(p):
                return NULL
    atomic_set(&p.stop, 1)
    return NULL


cdef void wake_release(void *arg) noexcept nogil:
    """Wake the sleeper for good (pair_run, once stop is set)."""
    cdef wake_pair *p = <wake_pair *>arg
    atomic_set(p.word, 1)
    syscall(SYS_futex, p.word, FUTEX_WAKE, 1, NULL, NULL, 0)


def futex_wake_cycles(int waker_cpu, int sleeper_cpu, uint32_t rounds=1000,
                      double timeout_s=5.0):
    """TSC cycles a real wake-up costs the waker: FUTEX_WAKE of a thread
    asleep in FUTEX_WAIT, the waker pinned to real CPU `waker_cpu`, the
    sleeper to `sleeper_cpu`, `rounds` timed wakes that each woke the sleeper.
    Returns {"cycles" (the median), "min", "max", "samples", "rounds",
    "woken", "missed", "waker_cpu", "sleeper_cpu", "cross_cpu" (the two
    threads ran on two real CPUs: a remote wake-up, whose path sends the
    reschedule IPI unless the target CPU was polling), "complete"
    (all rounds done before timeout_s)}. Each sample includes the timer's
    own cost (timer_overhead(), tens of cycles). OSError if a CPU cannot be
    used; RuntimeError if no wake woke the sleeper within timeout_s."""
    cdef wake_pair p
    cdef int rc
    cdef int cpu   # typed: Cython 3.3 infers a loop over a tuple of ints wrongly
    cdef uint32_t i
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    for cpu in (waker_cpu, sleeper_cpu):
        if not 0 <= cpu < CPU_SETSIZE:
            raise ValueError(f"no real CPU {cpu}")
    if not 0 < timeout_s <= 3600:
        raise ValueError(f"timeout_s must be in (0, 3600], got {timeout_s}")
    memset(&p, 0, sizeof(p))
    p.word = <uint32_t *>mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)
    if p.word == MAP_FAILED:
        raise OSError(errno, "mmap failed")
    p.cycles = <uint64_t *>malloc(rounds * sizeof(uint64_t))
    if p.cycles == NULL:
        munmap(p.word, 4096)
        raise MemoryError()
    p.cpu[0], p.cpu[1] = sleeper_cpu, waker_cpu
    p.ran_on[0] = p.ran_on[1] = -1
    p.same_cpu = sleeper_cpu == waker_cpu
    p.rounds = rounds
    try:
        with nogil:
            p.deadline_ns = mono_ns() + <uint64_t>(timeout_s * 1e9)
            rc = pair_run(wake_sleeper, wake_waker, &p, &p.stop, wake_release)
        if rc:
            raise pair_run_error(rc)
        if p.pin_err:
            raise OSError(p.pin_err, f"cannot run on real CPU {sleeper_cpu} and {waker_cpu}")
        if p.woken == 0:
            raise RuntimeError(f"no FUTEX_WAKE woke the sleeper within {timeout_s} s "
                               f"({p.missed} found nobody asleep)")
        samples = sorted(p.cycles[i] for i in range(p.woken))
    finally:
        free(p.cycles)
        munmap(p.word, 4096)
    n = len(samples)
    return {"cycles": (samples[(n - 1) // 2] + samples[n // 2]) / 2, "min": samples[0],
            "max": samples[n - 1], "samples": samples, "rounds": rounds, "woken": p.woken,
            "missed": p.missed, "waker_cpu": waker_cpu, "sleeper_cpu": sleeper_cpu,
            "cross_cpu": p.ran_on[0] != p.ran_on[1], "complete": p.woken == rounds}
