"""ARP resolution per probe mode: one run of TRIALS `arp -d; ping -c 3` per round.

    pytest bench/ --benchmark-only -k arp
extra_info: the first ping's median and p99, the later pings' median (ms), and the
tick; the issue's targets read off them: timer-mode first pings spread over
(0, 1/HZ] with the median near half a tick; immediate-mode first pings within 3x
the later pings' median.
"""
import statistics

import pytest

from smpnet.experiments import arp

TRIALS = 50
RNG_SEED = 20261201   # the random moments within a tick: the same in every round


@pytest.mark.parametrize("probe", arp.PROBES)
def test_arp(benchmark, all_cpus, probe):
    benchmark.group = "arp"
    cpus = all_cpus
    rows = []

    def one_run():
        r, _, _, _ = arp.run(cpus, [probe], hz=100, trials=TRIALS, ncpus=2,
                             oversubscribe=len(cpus) < 2, rng_seed=RNG_SEED)
        rows.append(r[0])

    benchmark.pedantic(one_run, rounds=3, warmup_rounds=0, iterations=1)
    benchmark.extra_info.update(
        hz=100, tick_ms=10.0, trials=TRIALS,
        first_median_ms=statistics.median(r["first_ms"]["median"] for r in rows),
        first_p99_ms=statistics.median(r["first_ms"]["p99"] for r in rows),
        later_median_ms=statistics.median(r["later_ms"]["median"] for r in rows))
    assert all(r["replies"] == TRIALS * 3 for r in rows)
