# clock.pyx - the TSC and the clocks it is calibrated against (tsc.h).

HAVE_TSC = bool(SMPNET_HAVE_TSC)


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


cdef extern from "<sys/syscall.h>" nogil:
    enum: SYS_getppid

cdef extern from "<unistd.h>" nogil:
    long syscall(long number, ...)


def syscall_cycles(uint32_t loops=20000):
    """TSC cycles of one real kernel entry and exit on this CPU: a getppid
    system call (nothing to do inside, so the entry, the exit and their
    mitigations are what is timed), the median of 11 rounds of `loops`.
    What the model charges a hard IRQ's entry and exit (irq_entry_cost)."""
    cdef uint64_t d[11]
    cdef uint64_t t
    cdef uint32_t k
    cdef int i
    if loops < 1:
        raise ValueError("loops must be at least 1")
    with nogil:
        for i in range(11):
            t = tsc_start()
            for k in range(loops):
                syscall(SYS_getppid)
            d[i] = tsc_stop() - t
    return sorted(d[i] for i in range(11))[5] / loops
