"""The timing primitives every other figure rests on: pytest bench/ --benchmark-only"""
import pytest


@pytest.mark.parametrize("test", ["for_loop", "tsc_read"])
def test_timer(time_bench_op, test):
    time_bench_op("timer", test)
