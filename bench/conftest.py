"""Shared set-up for the microbenchmarks: one pinned CPU, one machine with a
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


@pytest.fixture(scope="session")
def bench_cpu():
    """Pin the benchmarking process to one CPU for the whole session."""
    old = os.sched_getaffinity(0)
    cpu = min(old)
    os.sched_setaffinity(0, {cpu})
    yield cpu
    os.sched_setaffinity(0, old)


@pytest.fixture(scope="session")
def lock_machine(bench_cpu):
    """A one-CPU machine with lock i initialised for ALGOS[i]."""
    with Machine(cpus=[bench_cpu], regions=[("locks", layout.LOCK_SLOT, len(ALGOS))]) as m:
        region = m.segment.region_names.index("locks")
        for i, algo in enumerate(ALGOS):
            _core.lock_init(m.segment.buf, region, i, _core.LOCK_ALGOS[algo], i)
        yield m, region


@pytest.fixture
def time_bench_op(benchmark):
    """time_bench_op(group, test, **where): benchmark one time_bench test."""
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
