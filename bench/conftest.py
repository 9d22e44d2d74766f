"""Shared set-up for the microbenchmarks: one CPU pinned per benchmark, one machine with a
lock of every algorithm, the helper that times a time_bench test, and the
measured clock that times a defer, loopback or arp run by its workers' own
figures.

Each time_bench round is one C loop of LOOPS ops, the same for every test,
so that pytest-benchmark's per-round times compare across tests and across
commits (--benchmark-compare); the per-op cost in TSC cycles is in
extra_info["cycles_per_op"] (and ns_per_op). A round whose thread was
switched out is rerun shorter (time_bench.clean_round), and the round's
timed value, on the measured clock, is the kept round's LOOPS ops at its
cost per op.
"""
import os
import statistics
import time

import pytest

from smpnet import Machine, _core
from smpnet.experiments.common import lockbench
from smpnet.experiments.common.lockbench import ALGOS
from smpnet.machine.tsc import tsc_hz
from smpnet.measure.time_bench import clean_round

LOOPS = 1 << 20


GIVEN = frozenset(os.sched_getaffinity(0))   # the CPUs the session was given
BENCH_CPU = min(GIVEN)


@pytest.fixture
def all_cpus():
    """Every CPU the session was given, for the benchmarks that run a
    machine on all of them (a lock benchmark's pin must be gone)."""
    assert os.sched_getaffinity(0) == GIVEN, "a benchmark left this process pinned"
    return sorted(GIVEN)


@pytest.fixture
def pinned():
    """Pin this process to BENCH_CPU for one benchmark, and give back the
    affinity it had after it: a defer or arp benchmark that follows runs on
    every CPU it was given, not on the one a lock benchmark left it."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {BENCH_CPU})
    yield BENCH_CPU
    os.sched_setaffinity(0, old)


@pytest.fixture(scope="session")
def lock_machine():
    """A one-CPU machine on BENCH_CPU with lock i initialised for ALGOS[i]."""
    with Machine(cpus=[BENCH_CPU], regions=lockbench.locks_region(len(ALGOS))) as m:
        yield m, lockbench.init_locks(m, ALGOS)


@pytest.fixture
def time_bench_op(benchmark, pinned):
    """time_bench_op(group, test, **where): benchmark one time_bench test,
    in this process, pinned to BENCH_CPU."""
    def run(group, test, **where):
        benchmark.group = group
        loops, hz = LOOPS, tsc_hz()
        per_op, dropped = [], []

        def one_round():
            # a round whose thread was switched out is rerun shorter (the
            # harness's clean_round), and the round's timed value is the kept
            # round's, as LOOPS ops at its cost per op, by the TSC (MEASURED):
            # neither the attempts thrown out nor the switch are in it
            kept = clean_round(lambda n: _core.time_bench_round(test, n, **where), loops)
            per_op.append(kept.per_op)
            dropped.append(kept.dropped)
            MEASURED.advance(kept.per_op * loops / hz)

        benchmark.pedantic(one_round, rounds=10, warmup_rounds=1, iterations=1)
        med = statistics.median(per_op[-10:] if benchmark.enabled else per_op)  # not the warm-up
        benchmark.extra_info.update(test=test, loops=loops, cycles_per_op=med,
                                    ns_per_op=med * 1e9 / tsc_hz(),
                                    dropped_rounds=sum(dropped[-10:]))
        assert med > 0
        return med
    return run


class MeasuredClock:
    """A pytest-benchmark timer (`@pytest.mark.benchmark(timer=...)`) that
    reads only what the workers measured.

    A defer, loopback or arp round is one Machine.run(), which forks its
    workers and sets up its segment: no setup= keeps that out of a wall
    clock's reading. So the round reports the seconds its workers measured
    with the TSC (advance()), and this clock moves by exactly those: the
    round's timed value is the measured work, and the fork, the set-up and
    the Python around them are not in it.

    Every reading also moves the clock on by TICK (1 ps), so that it always
    advances: pytest-benchmark's timer-precision probe (used outside pedantic
    mode) loops until two readings differ. A pedantic round reads the clock
    twice, so its timed value is the measured seconds + 1 ps: below 1e-6 of
    the smallest figure timed here (ARP's immediate first ping, ~1 us).
    """
    TICK = 1e-12

    def __init__(self, name="measured_clock"):
        self.__name__ = name     # pytest-benchmark's JSON names the timer by it
        self._now = 0.0

    def __call__(self):
        now = self._now
        self._now += self.TICK
        return now

    def advance(self, seconds):
        """Move the clock on by a round's measured seconds."""
        if not seconds > 0:   # nothing measured: a broken run, not a fast one
            raise ValueError(f"a round measured {seconds!r} s: no measured work to time")
        self._now += seconds


MEASURED = MeasuredClock()


def pytest_collection_modifyitems(items):
    """Every benchmark that uses measured_rounds is timed by MEASURED, not by
    a wall clock: the marker is pytest-benchmark's way of choosing a test's
    timer, read when its benchmark fixture is made."""
    for item in items:
        if {"measured_rounds", "time_bench_op"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.benchmark(timer=MEASURED))


@pytest.fixture
def measured_rounds(benchmark, request):
    """measured_rounds(one_run, rounds, warmup_rounds=1) -> the timed rounds' results.

    one_run() does one whole run and returns (result, measured seconds); the
    seconds become the round's timed value (MEASURED). The warm-up rounds run
    first and are left out both of pytest-benchmark's statistics (pedantic
    mode drops them) and of the results returned, from which the tests take
    their extra_info. Each result gets "wall_s", the whole run's wall-clock
    seconds (fork and set-up included), for comparison with the timed value.
    """
    marker = request.node.get_closest_marker("benchmark")
    assert marker is not None and marker.kwargs.get("timer") is MEASURED, \
        "a measured benchmark must be timed by MEASURED"

    def run(one_run, rounds, warmup_rounds=1):
        assert warmup_rounds >= 1, "the first round (imports, page faults) is a warm-up"
        results = []

        def one_round():
            t0 = time.perf_counter()
            result, seconds = one_run()
            wall = time.perf_counter() - t0
            MEASURED.advance(seconds)
            results.append(dict(result, wall_s=wall))

        benchmark.pedantic(one_round, rounds=rounds, warmup_rounds=warmup_rounds,
                           iterations=1)
        # --benchmark-disable runs the target once, with no warm-up
        return results[warmup_rounds:] if benchmark.enabled else results
    return run
