"""Microbenchmarks of the timing primitives every other figure rests on.

    pytest bench/ --benchmark-only
Each benchmark round is one C loop of `loops` ops (time_bench_round); the
per-op cost in TSC cycles is in extra_info["cycles_per_op"].
"""
import statistics

import pytest

from smpnet import _core
from smpnet.time_bench import calibrate_loops
from smpnet.tsc import tsc_hz


@pytest.mark.parametrize("test", ["for_loop", "tsc_read"])
def test_timer(benchmark, test):
    benchmark.group = "timer"
    loops = calibrate_loops(test, min_time=0.005)
    per_op = []

    def one_round():
        cycles, _ = _core.time_bench_round(test, loops)
        per_op.append(cycles / loops)

    benchmark.pedantic(one_round, rounds=10, warmup_rounds=1, iterations=1)
    med = statistics.median(per_op)
    benchmark.extra_info.update(test=test, loops=loops, cycles_per_op=med,
                                ns_per_op=med * 1e9 / tsc_hz())
    assert med > 0
