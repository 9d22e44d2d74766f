"""The loopback fast path per mode: one run of PACKETS packets on every CPU per round.

    pytest bench/ --benchmark-only -k loopback
Timed value (MEASURED, see conftest.py): the run's measured phase in seconds, as
its workers' TSCs give it: the longest of the CPUs' loopback loops, i.e.
packets / pps. The fork and the segment set-up are not in it; extra_info["wall_s"]
has the whole run's wall time. extra_info: packets per second and cycles per
packet (medians of the timed rounds, the warm-up left out). Nothing in a run
draws a random number.
"""
import os
import statistics

import pytest

from smpnet.experiments import loopback

PACKETS = 400_000


# One CPU, and every CPU given. On two CPUs the run's time swings between two
# levels from run to run (docs/benchmarks.md: the shared refcnt line's
# transfers depend on where the host puts the vCPUs), too wide for a
# regression threshold; one CPU has no transfer and keeps a tight one.
CPU_COUNTS = sorted({1, len(os.sched_getaffinity(0))})


@pytest.mark.parametrize("ncpus", CPU_COUNTS, ids=lambda n: "one_cpu" if n == 1 else "all_cpus")
@pytest.mark.parametrize("mode", loopback.MODES)
def test_loopback(benchmark, measured_rounds, all_cpus, mode, ncpus):
    cpus = all_cpus[:ncpus]
    benchmark.group = f"loopback-{len(cpus)}cpu"   # a rate is only comparable at one CPU count

    def one_run():
        rows, _, _ = loopback.run(cpus, [mode], packets=PACKETS, repeat=1)
        row = rows[0]
        # one run: its rate is its packets over the measured phase's seconds
        return row, row["packets"] / row["pps"]

    results = measured_rounds(one_run, rounds=5)
    med = statistics.median
    benchmark.extra_info.update(
        packets=PACKETS, cpus=len(cpus), timed="seconds of the measured phase (workers' TSC)",
        pps=med(r["pps"] for r in results),
        cycles_per_packet=med(r["cycles_per_packet"] for r in results),
        refcnt_atomics_per_packet=results[-1]["refcnt_atomics"],
        wall_s=med(r["wall_s"] for r in results))
    assert all(r["lstats_packets"] == r["packets"] for r in results)
