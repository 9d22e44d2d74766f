"""The loopback fast path per mode: one run of PACKETS packets on every CPU per round.

    pytest bench/ --benchmark-only -k loopback
extra_info: packets per second and cycles per packet (median of the rounds).
"""
import statistics

import pytest

from smpnet.experiments import loopback

PACKETS = 400_000


@pytest.mark.parametrize("mode", loopback.MODES)
def test_loopback(benchmark, all_cpus, mode):
    cpus = all_cpus
    benchmark.group = f"loopback-{len(cpus)}cpu"   # a rate is only comparable at one CPU count
    results = []

    def one_run():
        rows, _, _ = loopback.run(cpus, [mode], packets=PACKETS, repeat=1)
        results.append(rows[0])

    benchmark.pedantic(one_run, rounds=5, warmup_rounds=1, iterations=1)
    benchmark.extra_info.update(
        packets=PACKETS, cpus=len(cpus), pps=statistics.median(r["pps"] for r in results),
        cycles_per_packet=statistics.median(r["cycles_per_packet"] for r in results),
        refcnt_atomics_per_packet=results[-1]["refcnt_atomics"])
    assert all(r["lstats_packets"] == r["packets"] for r in results)
