"""The contended comparison: interleaved repeated rounds, sweeps, the ranking
that says which differences are real, and text that fits a mail. Behaviour
only: no test here asserts a timing."""
import json

import pytest

from smpnet.cli import main
from smpnet.experiments import contended
from smpnet.experiments.common.lockbench import ALGOS
from smpnet.experiments.contended import lockrank
from smpnet.machine.tsc import tsc_hz
from smpnet.measure import stats
from smpnet.report import plaintext, report

N = 10   # rounds of the synthetic rows


def _row(algo, variant, samples, cpus=(0, 1), hold=0, think=0):
    fig = lockrank.summarise([{name: x for name in lockrank.FIGURES} for x in samples])
    return dict(fig, algo=algo, variant=variant, cpus=list(cpus), hold_cycles=hold,
                think_cycles=think)


def _drift(k):
    """A machine that drifts (and wobbles) from round to round: it hits
    every combination of a round alike."""
    return 1e6 * (1 + 0.05 * k + 0.03 * (-1) ** k)


def test_a_real_difference_and_a_tie_are_told_apart():
    fast = _row("tas", "plain", [1.10 * _drift(k) for k in range(N)])
    # ticket and ttas swap places round by round: the same on the median
    tie_a = _row("ticket", "plain", [_drift(k) * (1 + 0.01 * (-1) ** k) for k in range(N)])
    tie_b = _row("ttas", "plain", [_drift(k) * (1 - 0.01 * (-1) ** k) for k in range(N)])
    rows = lockrank.rank([tie_b, fast, tie_a])
    assert fast["rank"] == 1 and {tie_a["rank"], tie_b["rank"]} == {2, 3}
    versus = {d["algo"]: d for d in fast["versus"]}
    for slower in ("ticket", "ttas"):   # paired by round, the drift cancels: real
        assert versus[slower]["label"] == lockrank.REAL
        assert versus[slower]["diff_pct"] == pytest.approx(10, abs=1.5)
        assert versus[slower]["interval"][0] > 0 and versus[slower]["rounds"] == N
    second = min((tie_a, tie_b), key=lambda r: r["rank"])
    (d,) = second["versus"]
    assert d["label"] == stats.NO_MEASURABLE and d["interval"][0] <= 0 <= d["interval"][1]
    line = lockrank.ranking_line(sorted(rows, key=lambda r: r["rank"]))
    assert line.startswith("tas > ") and " ~ " in line


def test_variants_are_set_against_plain_and_too_few_rounds_give_no_verdict():
    plain = _row("ticket", "plain", [_drift(k) for k in range(N)])
    irqsave = _row("ticket", "irqsave", [0.9 * _drift(k) for k in range(N)])
    lockrank.rank([irqsave, plain])
    d = irqsave["versus_base"]
    assert d["variant"] == "plain" and d["label"] == lockrank.REAL and d["diff_pct"] < 0
    assert "versus_base" not in plain
    few = [_row("tas", "plain", [2e6, 2.1e6, 2e6]), _row("ticket", "plain", [1e6] * 3)]
    lockrank.rank(few)
    assert few[0]["versus"][0]["label"] == lockrank.TOO_FEW
    assert few[0]["versus"][0]["interval"] is None
    assert lockrank.ranking_line(few) == "tas ? ticket"
    text = "\n".join(lockrank.ranking_text(few))
    assert "too few rounds" in text


def test_each_point_is_ranked_on_its_own():
    rows = [_row("tas", "plain", [2e6] * N, hold=0), _row("ticket", "plain", [1e6] * N, hold=0),
            _row("tas", "plain", [1e6] * N, hold=1000),
            _row("ticket", "plain", [2e6] * N, hold=1000)]
    lockrank.rank(rows)
    assert [r["rank"] for r in rows] == [1, 2, 2, 1]
    assert [d["algo"] for d in rows[3]["versus"]] == ["tas"]


def test_the_rounds_order_is_a_seeded_shuffle_with_every_combo_once_a_round():
    combos = [(a, v) for a in ALGOS for v in ("plain", "irq", "irqsave")]
    a = lockrank.round_orders(combos, 20, 42, (2, 0, 0))
    assert a == lockrank.round_orders(combos, 20, 42, (2, 0, 0))   # same seed, same order
    assert all(sorted(r) == sorted(combos) for r in a) and len(a) == 20
    assert len({tuple(r) for r in a}) > 1            # shuffled anew each round
    assert a != lockrank.round_orders(combos, 20, 43, (2, 0, 0))
    assert a != lockrank.round_orders(combos, 20, 42, (2, 1000, 0))   # each point its own


def test_agreement_between_two_runs_counts_where_the_first_saw_a_real_difference():
    first = lockrank.rank([_row("tas", "plain", [2e6 + k for k in range(N)]),
                           _row("ticket", "plain", [1e6] * N),
                           _row("ttas", "plain", [1e6 + (-1) ** k for k in range(N)])])
    same = lockrank.agreement(first, first)
    assert same["real"] == 2 and same["agree"] == 2
    flipped = lockrank.rank([_row("tas", "plain", [1e6] * N),
                             _row("ticket", "plain", [2e6 + k for k in range(N)]),
                             _row("ttas", "plain", [1e6 + (-1) ** k for k in range(N)])])
    out = lockrank.agreement(first, flipped)
    assert out == {"real": 2, "agree": 0, "not_real": 1, "opposite": 1, "missing": 0}


def test_scale_past_the_selected_cpus_oversubscribes_and_says_so(capsys, allowed):
    real = allowed[:1]
    argv = ["contended", "--json", "--cpus", str(real[0]), "--algo", "ticket",
            "--variant", "plain", "--repeat", "2", "--duration", "0.003", "--rng-seed", "1",
            "--scale", "1,3", "--oversubscribe"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    by = {len(r["cpus"]): r for r in rows}
    assert sorted(by) == [1, 3]
    # 3 emulated CPUs round-robin on the one real CPU: flagged, still exclusive
    assert by[3]["cpus"] == real * 3 and by[3]["timing_valid"] is False
    assert by[1]["cpus"] == real and by[3]["mutual_exclusion"]
    assert len(by[3]["per_cpu"]) == 3


def test_every_sweep_point_is_there_with_its_rounds(capsys, allowed):
    argv = ["contended", "--json", "--algo", "tas,ticket", "--variant", "plain,irq",
            "--hold-cycles", "0,200", "--think-cycles", "0,300", "--repeat", "2",
            "--duration", "0.003", "--rng-seed", "7"]
    scale = list(range(1, len(allowed) + 1))
    argv += ["--scale", ",".join(map(str, scale))]
    assert main(argv) == 0
    env = json.loads(capsys.readouterr().out)
    p = env["params"]
    assert p["rng_seed"] == 7 and p["repeat"] == 2 and p["scale"] == scale
    assert p["hold_cycles"] == [0, 200] and p["think_cycles"] == [0, 300]
    rows = env["results"]
    points = {(len(r["cpus"]), r["hold_cycles"], r["think_cycles"], r["algo"], r["variant"])
              for r in rows}
    assert len(points) == len(rows) == len(scale) * 2 * 2 * 2 * 2
    for r in rows:
        assert r["rounds"] == 2 and r["mutual_exclusion"]
        for name in lockrank.FIGURES:
            assert len(r[f"{name}_samples"]) == 2
            lo, hi = r[f"{name}_interval"]
            assert lo <= hi
        assert "rank" in r


def test_a_result_of_before_the_sweeps_compares_as_think_time_0():
    from smpnet.report import results

    row = {"test": "spin_lock_unlock", "algo": "tas", "variant": "plain", "restore": "sti",
           "cpus": [0, 1], "contended": True, "cycles": 1.0, "acq_per_s": 1e6,
           "hold_cycles": 0}
    (r,) = results._check_rows("old.json", "contended", [row], "results").values()
    assert r.key["think_cycles"] == 0 and r.samples is None


@pytest.mark.parametrize("algo", ALGOS)
def test_mutual_exclusion_holds_with_think_time_spent_outside_the_lock(allowed, algo):
    rows, _ = contended.run_contended(allowed, [algo], ["plain", "irqsave"], duration=0.01,
                                      hold_cycles=50, think_cycles=300, repeat=2)
    assert all(r["mutual_exclusion"] and r["rounds"] == 2 for r in rows)


def test_the_think_time_is_spent_between_acquisitions(allowed):
    """A CPU thinks think_cycles after each release: it cannot take the lock
    more often than the run has think times (+1, the last cut at the deadline)."""
    duration, think_s = 0.05, 0.005
    rows, _ = contended.run_contended(allowed, ["ticket"], ["plain"], duration=duration,
                                      think_cycles=int(think_s * tsc_hz()))
    (r,) = rows
    assert r["mutual_exclusion"]
    for c in r["per_cpu"]:
        assert 1 <= c["acquisitions"] <= duration / think_s + 1


@pytest.mark.parametrize("argv, says", [
    (["--hold-cycles", "0,,100"], "empty item"),
    (["--hold-cycles", "100,100"], "listed twice"),
    (["--think-cycles", "1,x"], "not a whole number"),
    (["--hold-cycles", "-5"], "argument --hold-cycles"),
    (["--think-cycles", "10000000000", "--duration", "0.1"], "--think-cycles 10000000000 is "
                                                             "longer than the whole 0.1 s run"),
    (["--scale", "99"], "needs --oversubscribe"),
    (["--scale", "1", "--ncpus", "1"], "not with --ncpus"),
    (["--scale", "0"], "out of range"),
    (["--repeat", "0"], "out of range"),
    (["--rng-seed", "18446744073709551616"], "out of range"),
    (["--json", "--format", "email"], "choose one"),
])
def test_bad_sweeps_exit_2_with_one_line(capsys, argv, says):
    assert main(["contended"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("smpnet-bench: ") and says in err[0], err


@pytest.mark.parametrize("option", ["--think-cycles", "--repeat", "--scale", "--rng-seed"])
def test_locks_refuses_the_contended_options_without_contended(capsys, option):
    assert main(["locks", option, "1"]) == 2
    assert "for --contended runs only" in capsys.readouterr().err


def test_a_wide_table_is_laid_out_within_80_columns_when_narrow():
    rows = [("qspinlock", "irqsave", "12.34 [12.01 .. 12.99]", "1234.5 [1200.1 .. 1300.2]",
             "0.999 [0.998 .. 1.000]", 1234567.0, "a verdict that is long enough to wrap")]
    headers = ["algo", "variant", "M acq/s", "cycles/acq per CPU", "fairness (Jain)",
               "acquisitions", "verdict"]
    wide = report.table(rows, headers)
    assert max(len(ln) for ln in wide.splitlines()) > 80
    with plaintext.narrow():
        narrow = report.table(rows, headers)
    lines = narrow.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    for cell in ("qspinlock", "12.34 [12.01 .. 12.99]", "1234567.0"):
        assert cell in narrow   # whole, not cut
    # the row's name is repeated in each block
    assert sum(ln.startswith("qspinlock") for ln in lines) >= 2
    assert report.table(rows, headers) == wide   # narrow only inside


def test_render_puts_the_machine_in_two_lines_and_wraps_prose():
    facts = report.machine([0])
    text = "x" * 10 + " word" * 40 + "\n  indented " + "y " * 60
    out = plaintext.render(text, facts).splitlines()
    assert out[0].startswith("machine: ") and out[1].startswith("clock: ") and out[2] == ""
    assert max(len(ln) for ln in out) <= 80
    assert all(ln.startswith("  ") for ln in out[out.index(next(
        ln for ln in out if "indented" in ln)):])


def test_plot_draws_the_swept_run(tmp_path, capsys, allowed):
    pytest.importorskip("matplotlib")
    d = tmp_path / "pics"
    assert main(["locks", "--contended", "--algo", "tas,ticket", "--variant", "plain",
                 "--hold-cycles", "0,100", "--repeat", "2", "--duration", "0.003",
                 "--plot", str(d)]) == 0
    assert (d / "contended.png").stat().st_size > 0


def test_a_narrow_table_numbers_its_rows_when_the_repeated_name_does_not_tell_them_apart():
    rows = [("locks", f"spin_lock_unlock algo{k} " + "x" * 40, 1.5 * k, 2.5 * k, "yes" * 10)
            for k in range(3)]
    with plaintext.narrow():
        lines = report.table(rows, ["table", "row", "A", "B", "beyond noise"]).splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert lines[0].startswith("#")
    blocks = [ln for ln in lines if ln.startswith("#")]
    assert len(blocks) >= 2   # every block carries the number
    assert sum(ln.lstrip().startswith("3  locks") for ln in lines) == len(blocks)


def test_every_algorithms_lock_lies_at_the_same_page_offset(allowed):
    """The lock experiments give each lock a page of its own, at the same
    offset in it: a contended lock's cost goes with its line's place in a
    page, and two algorithms must differ by their code alone. Checked where
    the core's acquisitions land: each lock's counter, at one page offset."""
    import mmap

    from smpnet import Machine, _core
    from smpnet.experiments.common import lockbench

    algos = ["ticket", "qspinlock", "tas"]
    with Machine(cpus=allowed[:1], regions=lockbench.locks_region(len(algos))) as m:
        region = lockbench.init_locks(m, algos)
        for i in range(len(algos)):
            n, _, _, _ = _core.lock_hammer(m.segment.buf, 0, region, i,
                                           _core.LOCK_VARIANTS["plain"], 5 + i, 0, 0)
            assert n == 5 + i
        locks = m.region("locks")
        assert locks["counter"].tolist() == [5, 6, 7]
        assert len({(locks.ctypes.data + i * locks.strides[0]) % mmap.PAGESIZE
                    for i in range(len(algos))}) == 1
