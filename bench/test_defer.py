"""The defer-free list end to end, one run of SKBS skbs per round, per strategy.

    pytest bench/ --benchmark-only -k defer
extra_info: skbs_per_s (median of the rounds) and the cycle costs of the run.
"""
import statistics

import pytest

from smpnet.experiments import defer

SKBS = 200_000


@pytest.mark.parametrize("strategy", defer.STRATEGIES)
def test_defer(benchmark, all_cpus, strategy):
    benchmark.group = "defer"
    cpus = all_cpus
    results = []

    def one_run():
        rows, _, _ = defer.run(cpus, [strategy], skbs=SKBS, repeat=1, ncpus=max(2, len(cpus)),
                            oversubscribe=len(cpus) < 2)
        results.append(rows[0])

    benchmark.pedantic(one_run, rounds=5, warmup_rounds=1, iterations=1)
    rates = [r["skbs_per_s"] for r in results]
    benchmark.extra_info.update(
        skbs=SKBS, skbs_per_s=statistics.median(rates),
        defer_cycles=statistics.median(r["defer_cycles"] for r in results),
        flush_lock_cycles=statistics.median(r["flush_lock_cycles"] for r in results))
    assert all(r["conserved"] for r in results)
