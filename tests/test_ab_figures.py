"""ab's verdict, pairing, control, contended and built-in figures, and the
order its rounds run in, held to answers known beforehand: made-up rounds,
no run, no timing. Each test fails if a sign, a side, a pairing or an
order in the code under it is wrong."""
import types

import numpy as np
import pytest

from smpnet.experiments.ab import figures, rounds
from smpnet.measure import stats, time_bench

HZ = 1e9
BASE = [10.0, 10.4, 9.8, 10.2, 9.6, 10.0, 10.6, 9.9, 10.1, 10.3, 9.7, 10.0]   # 6 ABBA blocks


def _row(variant, role, samples, mode="uncontended", **more):
    return dict(mode=mode, variant=variant, role=role, samples=samples, **more)


def test_the_label_is_the_intervals_side_of_zero_and_a_zero_end_is_no_difference():
    assert figures.label((-2.0, -0.1)) == figures.FASTER
    assert figures.label((0.1, 2.0)) == figures.SLOWER
    for touching in ((-1.0, 0.0), (0.0, 1.0), (-1.0, 1.0), (0.0, 0.0)):
        assert figures.label(touching) == stats.NO_MEASURABLE, touching


def test_each_variant_is_paired_against_the_baseline_and_the_control_is_its_copy():
    """Variants 3 cycles cheaper and 2 dearer than the baseline in every
    round, the A/A copy 0.5 dearer, the last variant not the control."""
    faster = [x - 3 for x in BASE]
    slower = [x + 2 for x in BASE]
    copy = [x + 0.5 for x in BASE]
    rows = [_row("base", figures.VARIANT, BASE), _row("fast", figures.VARIANT, faster),
            _row("slow", figures.VARIANT, slower), _row("base (A/A)", figures.CONTROL, copy),
            _row("built-in x", figures.BUILTIN_ROLE, [1.0] * 12)]
    fast, slow = figures.verdicts(rows, HZ)
    assert (fast["variant"], fast["baseline"]) == ("fast", "base")
    assert fast["measured"] == pytest.approx(-3) and fast["interval"] == pytest.approx([-3, -3])
    assert fast["verdict"] == figures.FASTER and fast["pairs"] == 6
    assert fast["ns"] == pytest.approx(-3.0) and fast["ns_interval"] == pytest.approx([-3, -3])
    assert slow["measured"] == pytest.approx(2) and slow["verdict"] == figures.SLOWER
    # the control: the baseline's copy against the baseline, not the baseline
    # with itself (0), not the last variant (+2)
    for v in (fast, slow):
        assert v["control"]["measured"] == pytest.approx(0.5)
        assert v["control"]["sides"] == "base twice"
    # the control is found by its role, wherever it stands
    moved = [rows[3]] + rows[:3]
    assert figures.verdicts(moved, HZ)[0]["control"]["measured"] == pytest.approx(0.5)


def test_too_few_rounds_give_no_verdict():
    rows = [_row("a", figures.VARIANT, BASE[:10]), _row("b", figures.VARIANT, BASE[:10]),
            _row("a (A/A)", figures.CONTROL, BASE[:10])]
    assert figures.verdicts(rows, HZ) == []


def test_a_contended_rounds_figures_are_its_cpus_together():
    """Two CPUs, 100 ops in 1000 cycles and 300 in 2000: a round's cost is
    3000 cycles over 400 ops, its throughput 400 ops over the longer CPU's
    2 us, its fairness Jain's index of (100, 300)."""
    per = [(100, 1000, 0), (300, 2000, 0)]
    p = {"duration_s": 0.05, "hold_cycles": 0, "think_cycles": 0}
    (row,) = figures.contended_rows(["a"], [figures.VARIANT], [0, 1], [[per] * 6], HZ, p, True)
    assert row["cycles"] == pytest.approx(7.5) and row["samples"] == [pytest.approx(7.5)] * 6
    assert row["ops_per_s"] == pytest.approx(400 / 2e-6)
    assert row["fairness"] == pytest.approx(400 ** 2 / (2 * (100 ** 2 + 300 ** 2)))
    assert row["ops_per_s_per_cpu"] == [pytest.approx(1e8), pytest.approx(1.5e8)]
    assert row["ops"] == 6 * 400 and row["cpus"] == [0, 1]


def test_the_contended_gain_is_the_variants_throughput_over_the_baselines():
    base = _row("a", figures.VARIANT, BASE, mode="contended",
                ops_per_s_samples=[100.0] * 12)
    other = _row("b", figures.VARIANT, BASE, mode="contended",
                 ops_per_s_samples=[125.0] * 12)
    aa = _row("a (A/A)", figures.CONTROL, BASE, mode="contended",
              ops_per_s_samples=[100.0] * 12)
    (v,) = figures.verdicts([base, other, aa], HZ)
    assert v["ops_per_s_gain_pct"] == pytest.approx(25.0)


def test_a_variants_ratio_over_a_built_in_is_its_cost_over_the_tests():
    twice = [2 * x for x in BASE]
    rows = figures.uncontended_rows(["a", "b", "a (A/A)"],
                                    [figures.VARIANT, figures.VARIANT, figures.CONTROL],
                                    ["spin_lock_unlock"], 0, [1000] * 4,
                                    [twice, BASE, twice, BASE], 0.3, HZ)
    assert [r["role"] for r in rows] == [figures.VARIANT, figures.VARIANT, figures.CONTROL,
                                         figures.BUILTIN_ROLE]
    ratio = rows[0]["over_builtin"]["spin_lock_unlock"]
    assert ratio["ratio"] == pytest.approx(2.0) and ratio["pairs"] == 6
    assert rows[1]["over_builtin"]["spin_lock_unlock"]["ratio"] == pytest.approx(1.0)
    assert "over_builtin" not in rows[2] and rows[3]["test"] == "spin_lock_unlock"


def test_the_uncontended_rounds_run_in_abba_order(monkeypatch):
    """Three entries, four rounds: after the warm-up, A B C, then C B A,
    and again; each entry's rounds are its own."""
    ran = []

    def ab_round(loop, n, seg, cpu, copy, **where):
        ran.append(copy)
        return 10.0 * n * (copy + 1), 1000, 0

    monkeypatch.setattr(rounds, "contain", lambda: None)   # not in pytest's own process
    monkeypatch.setattr(rounds._core, "ab_round", ab_round)
    monkeypatch.setattr(rounds, "clean_round",
                        lambda one, n: time_bench.Round(one(n)[0] / n, 0, n, 0, False))
    monkeypatch.setattr(rounds, "loop_overhead", lambda loops: 0.25)
    now = np.zeros(1, dtype=rounds.NOW)
    machine = types.SimpleNamespace(header={"stop": 0}, region=lambda name: now)
    ctx = types.SimpleNamespace(machine=machine, cpu=0, seg=None)
    where = types.SimpleNamespace(state=lambda i: {"copy": i}, check_bug=lambda: None,
                                  take_warnings=lambda i: None,
                                  objects=[types.SimpleNamespace(unit="")] * 3)
    entries = [types.SimpleNamespace(loop=i + 1) for i in range(3)]
    counts, samples, ops, empty, _, warned = rounds.uncontended(ctx, entries, where, 100, 4)
    assert ran == [0, 1, 2] + [0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0]
    assert samples == [[10.0] * 4, [20.0] * 4, [30.0] * 4]
    assert ops == [500, 500, 500] and counts == [100] * 3 and empty == 0.25
    assert warned == [None] * 3
    assert now[0]["entry"] == -1            # no entry running once the rounds end
