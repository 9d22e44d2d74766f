"""The time_bench harness: one op, N times in a C loop, several rounds.

Modelled on the kernel's time_bench (prototype-kernel) and pyperf: the op is
inlined in its C loop between two TSC reads; a warm-up round runs first and
is thrown away; then `rounds` rounds, each giving per-op cycles; the result
is the median with min and max, plus the empty loop's cost (for_loop) timed
the same way, so a reader can see how much of a figure is loop overhead.
Every benchmark in smpnet, from the CLI or bench/, runs these C loops with
this calibration. `interleaved` measures several tests together, one round
of each per pass, so that drift (frequency, a neighbour's load) reaches
every test alike and round k of one test pairs with round k of another;
`null` interleaves its two sides in its own ABBA order, so it calls the
rounds (time_bench_round) itself. A round whose thread was switched out
during it (another task ran on its CPU) is thrown out and rerun, shorter
(clean_round); the result counts the attempts dropped.
"""
import resource
import statistics
from dataclasses import dataclass, field

from .. import _core
from ..errors import BadInput
from ..machine.workers import heartbeat
from ..machine.tsc import tsc_hz as _tsc_hz

MIN_ROUND_S = 0.01  # loops are calibrated so that one round lasts at least this
# A round during which its thread was switched out is rerun, with half the
# ops each time (down to MIN_LOOPS), up to this many attempts in all.
MAX_ATTEMPTS = 8
MIN_LOOPS = 1000

# The time_bench_sample suite, same names, same order, with the variant each
# lock test exercises (None: not a lock test): the rows of the core's one
# table of time_bench tests (smpnet/core/time_bench.pyx) that are in the
# kernel's suite. spin_lock_unlock_bh is smpnet's addition, last, so the
# kernel's order stays intact; tsc_read, ref_spin_lock_unlock and
# spin_lock_unlock_irqsave_nopushf (irqsave's control: all of it but the
# pushf; pop) are smpnet's instruments, not in it.
SUITE = _core.TIME_BENCH_SUITE
# the suite's tests on no lock that the kernel build shapes (their rows name it)
BUILT = _core.TIME_BENCH_BUILT
TEST_OF_VARIANT = {v: t for t, v in SUITE if v}


@dataclass
class BenchResult:
    test: str
    loops: int
    rounds: int
    cycles: float        # per op, median over rounds
    cycles_min: float
    cycles_max: float
    ns: float            # per op, from cycles and tsc_hz
    ns_min: float
    ns_max: float
    overhead_cycles: float  # the empty loop, per iteration (median)
    tsc_hz: float
    wall_s: float        # CLOCK_MONOTONIC time of the measured rounds
    samples: list = field(default_factory=list)  # per-op cycles of each round
    dropped: int = 0     # attempts thrown out: the thread was switched out during them
    spoiled: int = 0     # rounds kept although every attempt was switched out
    no_clean_round: bool = False  # every round spoiled: the figure holds other tasks' time


def tests():
    """The names of the time_bench tests compiled into smpnet._core."""
    return list(_core.TIME_BENCH_NAMES)


def calibrate(one_round, min_time=MIN_ROUND_S, start=1000, limit=1 << 34):
    """Smallest power-of-two multiple of `start` loops whose round lasts
    min_time; one_round(loops) -> (cycles, wall_ns) runs one."""
    loops = start
    while loops < limit:
        _, wall_ns = one_round(loops)
        heartbeat()
        if wall_ns >= min_time * 1e9:
            return loops
        loops *= 2
    return loops


def calibrate_loops(test, min_time=MIN_ROUND_S, start=1000, limit=1 << 34, **where):
    """calibrate() for a time_bench test."""
    return calibrate(lambda n: _core.time_bench_round(test, n, **where), min_time, start, limit)


def context_switches():
    """This thread's context switches so far, voluntary and not. A round in
    which the count moved was switched out: its cycles hold another task's
    time (a busy neighbour on the CPU, a page fault that slept). What the
    hypervisor takes from the vCPU (steal) is not seen here."""
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_nvcsw + r.ru_nivcsw


@dataclass
class Round:
    """One kept round: its per-op cycles, wall time and ops, the attempts
    thrown out before it, and whether it was switched out all the same (the
    last attempt is kept then)."""
    per_op: float
    wall_ns: int
    loops: int
    dropped: int
    spoiled: bool


def clean_round(one_round, loops):
    """one_round(loops) -> (cycles, wall_ns), run until an attempt is not
    switched out (context_switches), each attempt after a spoiled one with
    half the ops (a short round fits between two preemptions where a long
    one cannot), MAX_ATTEMPTS in all."""
    n, dropped = loops, 0
    while True:
        before = context_switches()
        cycles, wall_ns = one_round(n)
        clean = context_switches() == before
        heartbeat()   # an attempt thrown out is work done all the same
        if clean or dropped + 1 >= MAX_ATTEMPTS:
            return Round(cycles / n, wall_ns, n, dropped, not clean)
        dropped += 1
        n = max(min(MIN_LOOPS, loops), n // 2)


def round_counts(kept):
    """What a list of kept Rounds threw out, as rows carry it:
    {dropped_rounds: attempts dropped, spoiled_rounds: rounds kept switched
    out, no_clean_round: every one of them was}."""
    spoiled = sum(r.spoiled for r in kept)
    return {"dropped_rounds": sum(r.dropped for r in kept), "spoiled_rounds": spoiled,
            "no_clean_round": bool(kept) and spoiled == len(kept)}


def pass_order(n, r):
    """The order of n tests in round r: forwards on even rounds, backwards on
    odd ones (A B .. B A), so that a linear drift adds alike to each over two."""
    return range(n) if r % 2 == 0 else reversed(range(n))


def _check(tests, loops, rounds, warmup):
    for test in tests:
        if test not in _core.TIME_BENCH_NAMES:
            raise BadInput(f"unknown time_bench test {test!r} "
                           f"(known: {', '.join(_core.TIME_BENCH_NAMES)})")
    if loops is not None and loops <= 0:
        raise BadInput(f"loops must be positive, got {loops}")
    if rounds <= 0:
        raise BadInput(f"rounds must be positive, got {rounds}")
    if warmup < 0:
        raise BadInput(f"warmup must be zero or more, got {warmup}")


def _result(test, loops, rounds, overhead, hz):
    samples = [r.per_op for r in rounds]
    counts = round_counts(rounds)
    med, lo, hi = statistics.median(samples), min(samples), max(samples)
    return BenchResult(
        test=test, loops=loops, rounds=len(samples),
        cycles=med, cycles_min=lo, cycles_max=hi,
        ns=med * 1e9 / hz, ns_min=lo * 1e9 / hz, ns_max=hi * 1e9 / hz,
        overhead_cycles=overhead, tsc_hz=hz, wall_s=sum(r.wall_ns for r in rounds) / 1e9,
        samples=samples, dropped=counts["dropped_rounds"], spoiled=counts["spoiled_rounds"],
        no_clean_round=counts["no_clean_round"],
    )


def loop_overhead(loops, rounds=3):
    """The empty loop's cost per iteration (median of up to 3 rounds)."""
    return statistics.median(_core.time_bench_round("for_loop", loops)[0] / loops
                             for _ in range(max(1, min(rounds, 3))))


def time_bench(test, loops=None, rounds=5, warmup=1, min_time=MIN_ROUND_S, **where):
    """Measure one test; see the module docstring.

    `where` is passed to _core.time_bench_round for the tests that run on an
    emulated CPU: seg, cpu, lock_region, lock_index, check, popf.
    """
    _check([test], loops, rounds, warmup)
    if loops is None:
        loops = calibrate_loops(test, min_time, **where)
    hz = _tsc_hz()
    for _ in range(warmup):
        _core.time_bench_round(test, loops, **where)
    kept = [clean_round(lambda n: _core.time_bench_round(test, n, **where), loops)
            for _ in range(rounds)]
    return _result(test, loops, kept, loop_overhead(loops, rounds), hz)


def interleaved(entries, loops=None, rounds=10, warmup=1, min_time=MIN_ROUND_S, progress=None):
    """Measure several tests together: `entries` is a list of (test, where),
    `where` as for time_bench. Each entry is calibrated on its own and
    warmed up; then every measured round runs each entry once, in the
    entries' order on even rounds and in reverse on odd ones (A B .. B A),
    so a linear drift adds alike to every entry over two rounds and
    samples[k] of one entry pairs with samples[k] of another, measured
    within one pass. Returns a BenchResult per entry, in order.

    progress(n, total, what), if given, hears of the calibration and then
    of each round."""
    _check([t for t, _ in entries], loops, rounds, warmup)
    total = rounds + 1
    if progress:
        progress(0, total, f"calibrating and warming up {len(entries)} tests")
    counts = [loops or calibrate_loops(test, min_time, **where) for test, where in entries]
    hz = _tsc_hz()
    for _ in range(warmup):
        for (test, where), n in zip(entries, counts):
            _core.time_bench_round(test, n, **where)
    kept = [[] for _ in entries]
    for r in range(rounds):
        if progress:
            progress(r + 1, total, f"round {r + 1} of {rounds} ({len(entries)} tests)")
        for i in pass_order(len(entries), r):
            test, where = entries[i]
            kept[i].append(clean_round(
                lambda n, test=test, where=where: _core.time_bench_round(test, n, **where),
                counts[i]))
    overhead = loop_overhead(max(counts), rounds)
    return [_result(test, n, k, overhead, hz) for (test, _), n, k in zip(entries, counts, kept)]
