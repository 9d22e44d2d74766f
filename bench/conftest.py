"""Shared set-up for the microbenchmarks: one CPU pinned per benchmark, one machine with a
lock of every algorithm, and the helper that times a time_bench test.

Each benchmark round is one C loop of LOOPS ops, the same for every test,
so that pytest-benchmark's per-round times compare across tests and across
commits (--benchmark-compare); the per-op cost in TSC cycles is in
extra_info["cycles_per_op"] (and ns_per_op).
"""
import os
import statistics

import pytest

from smpnet import Machine, _core, layout
from smpnet.lockbench import ALGOS
from smpnet.tsc import tsc_hz

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
    with Machine(cpus=[BENCH_CPU], regions=[("locks", layout.LOCK_SLOT, len(ALGOS))]) as m:
        region = m.segment.region_names.index("locks")
        for i, algo in enumerate(ALGOS):
            _core.lock_init(m.segment.buf, region, i, _core.LOCK_ALGOS[algo], i)
        yield m, region


@pytest.fixture
def time_bench_op(benchmark, pinned):
    """time_bench_op(group, test, **where): benchmark one time_bench test,
    in this process, pinned to BENCH_CPU."""
    def run(group, test, **where):
        benchmark.group = group
        loops = LOOPS
        per_op = []

        def one_round():
            cycles, _ = _core.time_bench_round(test, loops, **where)
            per_op.append(cycles / loops)

        benchmark.pedantic(one_round, rounds=10, warmup_rounds=1, iterations=1)
        med = statistics.median(per_op)
        benchmark.extra_info.update(test=test, loops=loops, cycles_per_op=med,
                                    ns_per_op=med * 1e9 / tsc_hz())
        assert med > 0
        return med
    return run
