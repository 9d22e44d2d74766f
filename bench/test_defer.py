"""The defer-free list end to end, one run of SKBS skbs per round, per strategy.

    pytest bench/ --benchmark-only -k defer
Timed value (MEASURED, see conftest.py): the run's measured phase in seconds, as
its workers' TSCs give it: the longest of the emulated CPUs' loops (receive,
consume, defer, flush), i.e. skbs received / skbs_per_s. The fork and the
segment set-up are not in it; extra_info["wall_s"] has the whole run's wall time.
extra_info: skbs_per_s and the cycle costs of the run (medians of the timed
rounds, the warm-up left out). Nothing in a run draws a random number.
"""
import statistics

import pytest

from smpnet.experiments import defer

SKBS = 800_000


@pytest.mark.parametrize("strategy", defer.STRATEGIES)
def test_defer(benchmark, measured_rounds, all_cpus, strategy):
    benchmark.group = "defer"
    cpus = all_cpus

    def one_run():
        rows, _, _ = defer.run(cpus, [strategy], skbs=SKBS, repeat=1, ncpus=max(2, len(cpus)),
                               oversubscribe=len(cpus) < 2)
        row = rows[0]
        # one run: its rate is received over the measured phase's seconds
        return row, row["received"] / row["skbs_per_s"]

    results = measured_rounds(one_run, rounds=5)

    def med(values):
        """The median of the values a strategy has: None where it has none
        (`none` never flushes, so it has no flush_lock_cycles)."""
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    benchmark.extra_info.update(
        skbs=SKBS, timed="seconds of the measured phase (workers' TSC)",
        skbs_per_s=med(r["skbs_per_s"] for r in results),
        defer_cycles=med(r["defer_cycles"] for r in results),
        flush_lock_cycles=med(r["flush_lock_cycles"] for r in results),
        wall_s=med(r["wall_s"] for r in results))
    assert (benchmark.extra_info["flush_lock_cycles"] is None) == (strategy == "none")
    assert all(r["conserved"] for r in results)
