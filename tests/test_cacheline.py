"""A cache line's round trip between two real CPUs, measured before each
defer run: line_round_trip_cycles(), and the warning when it moved between
runs (the hypervisor placed the vCPUs differently)."""
import pytest

from smpnet import _core
from smpnet.experiments.defer import defer_rows


def test_a_round_trip_is_measured_on_two_cpus(allowed):
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs")
    r = _core.line_round_trip_cycles(allowed[0], allowed[1], blocks=10, timeout_s=60)
    assert r["cross_cpu"] is True and r["blocks"] == 10
    assert 0 < r["min"] <= r["cycles"] <= r["max"]


def test_on_one_real_cpu_there_is_no_round_trip(allowed):
    r = _core.line_round_trip_cycles(allowed[0], allowed[0])
    assert r["cycles"] is None and r["cross_cpu"] is False


def test_bad_arguments(allowed):
    with pytest.raises(ValueError):
        _core.line_round_trip_cycles(allowed[0], allowed[0], blocks=0)
    with pytest.raises(ValueError):
        _core.line_round_trip_cycles(-1, allowed[0])


def rows_with(*samples):
    return [{"line_rtt_samples": list(s)} for s in samples]


def test_a_placement_that_moved_is_said():
    assert defer_rows.placement_warnings(rows_with([150, 160], [170, 299])) == []
    (w,) = defer_rows.placement_warnings(rows_with([150, 160], [170, 300]))
    assert "from 150 to 300 cycles" in w
    assert defer_rows.line_rtt_range(rows_with([None], [None])) is None
    assert defer_rows.placement_warnings(rows_with([None, None])) == []


def test_defer_measures_the_line_before_each_run(allowed):
    from smpnet.experiments import defer
    rows, _, _ = defer.run(allowed, ["none", "irq"], skbs=2000, repeat=2, ncpus=2,
                           oversubscribe=True)
    for r in rows:
        assert len(r["line_rtt_samples"]) == r["runs"] == 2
        cross = r["cpus"][0] != r["cpus"][1]
        assert all((x is not None) == cross for x in r["line_rtt_samples"])


def test_the_placement_split_and_the_gains_within_one_placement():
    assert defer_rows.placement_split([150, 290, None]) is None          # under twice
    assert defer_rows.placement_split([None]) is None
    assert defer_rows.placement_split([150, 300, 800]) == 300
    # pairs (irq run k, none run k): near-near, far-far, near-far (left out)
    def run(rate, line):
        return {"skbs_per_s": rate, "line_rtt_cycles": line}
    runs = {"none": [run(100, 150), run(100, 800), run(100, 150)] * 2 + [run(100, 150)] * 6,
            "irq": [run(150, 160), run(80, 820), run(100, 900)] * 2 + [run(120, 170)] * 6}
    rows = [{"strategy": "none"}, {"strategy": "irq"}]
    defer_rows.add_gains(rows, runs, split=300)
    g = rows[1]["gain_over_none_by_placement"]
    assert g["split_cycles"] == 300
    assert g["near"]["pairs"] == 8 and sorted(g["near"]["gains"]) == [20] * 6 + [50] * 2
    assert g["near"]["measured"] == 20 and g["near"]["interval"] is not None
    assert g["far"]["pairs"] == 2 and g["far"]["gains"] == [-20, -20]
    assert g["far"]["measured"] is None            # too few pairs for an interval
    assert "gain_over_none_by_placement" not in rows[0]
    rows = [{"strategy": "none"}, {"strategy": "irq"}]
    defer_rows.add_gains(rows, runs)               # no split: no such field
    assert "gain_over_none_by_placement" not in rows[1]
