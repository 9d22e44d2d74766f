# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""smpnet._core: the C side of smpnet.

Everything that is measured runs here, in nogil C: the loops call only the
inline functions of smpnet/kernel/*.h, never back into Python. Python code
calls in once per round (or once per run) and gets totals back.
"""
from libc.stdint cimport uint32_t, uint64_t
from posix.time cimport timespec, nanosleep

from smpnet.kernel.compiler cimport barrier
from smpnet.kernel.tsc cimport (SMPNET_HAVE_TSC, tsc_start, tsc_stop, tsc_rdtscp,
                                mono_raw_ns, mono_ns, smp_cpuid)
from smpnet.kernel.atomic cimport atomic_set, atomic_read
from smpnet.kernel.percpu cimport (smp_header, cpu_state, smp_structs, smp_struct,
                                   smp_field, per_cpu_ptr, REGION_CPU)
from smpnet.kernel.smp cimport smp_barrier_wait, cpu_idle_poll

cdef extern from "sys/prctl.h" nogil:
    int prctl(int option, unsigned long arg2, unsigned long arg3,
              unsigned long arg4, unsigned long arg5)
    enum: PR_SET_PDEATHSIG

cdef extern from *:
    """
    #ifndef SMPNET_CYTHON_VERSION
    #define SMPNET_CYTHON_VERSION "unknown"
    #endif
    """
    const char *SMPNET_CYTHON_VERSION

HAVE_TSC = bool(SMPNET_HAVE_TSC)
CYTHON_VERSION = SMPNET_CYTHON_VERSION.decode()


# ---------------------------------------------------------------- clocks

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


# ---------------------------------------------------------------- layout

def c_layout():
    """{struct: (sizeof, {field: (offset, size)})} as the C compiler laid them out."""
    cdef const smp_struct *s = smp_structs
    cdef const smp_field *f
    out = {}
    while s.name != NULL:
        fields = {}
        f = s.fields
        while f.name != NULL:
            fields[f.name.decode()] = (f.offset, f.size)
            f += 1
        out[s.name.decode()] = (s.size, fields)
        s += 1
    return out


# ---------------------------------------------------------------- machine

cdef inline smp_header *segment_header(unsigned char[::1] seg) except NULL:
    if <size_t>seg.shape[0] < sizeof(smp_header):
        raise ValueError("segment smaller than its header")
    return <smp_header *>&seg[0]


def set_pdeathsig(int sig):
    """Have the kernel send `sig` to this process when its parent dies, so a
    worker never outlives a coordinator killed with SIGKILL."""
    if prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_PDEATHSIG) failed")


def smp_stop(unsigned char[::1] seg):
    """Raise the stop flag that every spin loop polls."""
    atomic_set(&segment_header(seg).stop, 1)


def smp_stopped(unsigned char[::1] seg):
    return atomic_read(&segment_header(seg).stop) != 0


def barrier_wait(unsigned char[::1] seg, int cpu):
    """Wait at the start barrier as emulated CPU `cpu`; False if stopped first."""
    cdef smp_header *hdr = segment_header(seg)
    cdef cpu_state *cs = <cpu_state *>per_cpu_ptr(hdr, REGION_CPU, cpu)
    cdef int rc
    with nogil:
        rc = smp_barrier_wait(hdr, cs)
    return rc == 0


def idle_poll(unsigned char[::1] seg, double timeout_s):
    """Spin, polling the stop flag, until it is raised or timeout_s passes.
    Returns True if it was stopped."""
    cdef smp_header *hdr = segment_header(seg)
    cdef uint64_t timeout_ns = <uint64_t>(timeout_s * 1e9)
    with nogil:
        cpu_idle_poll(hdr, timeout_ns)
    return atomic_read(&hdr.stop) != 0


# ---------------------------------------------------------------- time_bench
#
# A time_bench test is a C function that runs its op `loops` times between
# two TSC reads and returns the cycles. The harness (smpnet/time_bench.py)
# calls one round at a time; the op itself is inlined into its loop, as
# time_bench_sample.c does, so no call or dispatch is inside the timing.

ctypedef uint64_t (*tb_loop_t)(void *ctx, uint64_t loops) noexcept nogil


cdef uint64_t tb_for_loop(void *ctx, uint64_t loops) noexcept nogil:
    # The empty loop: the overhead every other test carries.
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        barrier()
    return tsc_stop() - t0


cdef uint64_t tb_tsc_read(void *ctx, uint64_t loops) noexcept nogil:
    # The cost of one serialized TSC read: what a timestamp costs.
    cdef uint64_t i, t0 = tsc_start()
    for i in range(loops):
        tsc_start()
        barrier()
    return tsc_stop() - t0


cdef tb_loop_t TB_LOOPS[2]
TB_LOOPS[0] = tb_for_loop
TB_LOOPS[1] = tb_tsc_read
TIME_BENCH_TESTS = ("for_loop", "tsc_read")


def time_bench_round(str test, uint64_t loops):
    """Run one round of a time_bench test: (cycles, wall_ns) for `loops` ops."""
    cdef int idx
    try:
        idx = TIME_BENCH_TESTS.index(test)
    except ValueError:
        raise ValueError(f"unknown time_bench test {test!r}") from None
    cdef tb_loop_t fn = TB_LOOPS[idx]
    cdef uint64_t cycles, w0, w1
    with nogil:
        w0 = mono_ns()
        cycles = fn(NULL, loops)
        w1 = mono_ns()
    return cycles, w1 - w0
