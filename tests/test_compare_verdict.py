"""smpnet-bench compare's verdict on results made to order: a real
difference beyond the noise, ranges, the noise between several runs a side."""
import json

import pytest

from compare_helpers import _compare_json, _locks_row, _one_line_exit_2, _write
from smpnet.cli import main
from smpnet.report import compare

# ------------------------------------------------------------------ the verdict itself

def _info_like(tmp_path, name, rows):
    p = tmp_path / name
    p.write_text(json.dumps({"schema": 2, "command": "info", "results": rows}))
    return p


def _locks(tmp_path, name, rows):
    p = tmp_path / name
    p.write_text(json.dumps({"schema": 2, "command": "locks", "results": rows}))
    return p


def test_a_real_difference_is_beyond_noise(capsys, tmp_path):
    a = _locks(tmp_path, "a.json", [_locks_row([10.0, 10.1, 9.9, 10.05, 9.95])])
    b = _locks(tmp_path, "b.json", [_locks_row([20.0, 20.1, 19.9, 20.05, 19.95])])
    [r] = _compare_json(capsys, a, b)["results"]
    assert r["significant"] is True and r["judged_by"] == "bootstrap"
    assert r["ratio"] == pytest.approx(2.0)
    # by ranges, without samples
    a = _info_like(tmp_path, "ia.json", [{"test": "x", "cycles": 1, "cycles_min": 0.9,
                                          "cycles_max": 1.1}])
    b = _info_like(tmp_path, "ib.json", [{"test": "x", "cycles": 2, "cycles_min": 1.9,
                                          "cycles_max": 2.1}])
    [r] = _compare_json(capsys, a, b)["results"]
    assert r["significant"] is True and r["judged_by"] == "range"


@pytest.mark.parametrize("a, b, beyond", [
    ((1.0, 0.9, 1.1), (2.0, 1.9, 2.1), True),       # B above A
    ((2.0, 1.9, 2.1), (1.0, 0.9, 1.1), True),       # B below A: a fall is found as a rise is
    ((1.0, 0.9, 1.1), (1.05, 1.0, 1.2), False),     # the ranges overlap
    ((1.05, 1.0, 1.2), (1.0, 0.9, 1.1), False)])
def test_ranges_judge_a_fall_as_they_judge_a_rise(capsys, tmp_path, a, b, beyond):
    rows = [[{"test": "x", "cycles": v, "cycles_min": lo, "cycles_max": hi}]
            for v, lo, hi in (a, b)]
    [r] = _compare_json(capsys, _info_like(tmp_path, "ia.json", rows[0]),
                        _info_like(tmp_path, "ib.json", rows[1]))["results"]
    assert r["judged_by"] == "range" and r["significant"] is beyond
    assert r["ratio"] == pytest.approx(b[0] / a[0])


def test_one_run_a_side_has_no_noise_to_judge(capsys, tmp_path):
    a = _locks(tmp_path, "a.json", [_locks_row([10.0])])
    b = _locks(tmp_path, "b.json", [_locks_row([20.0])])
    [r] = _compare_json(capsys, a, b)["results"]
    assert r["significant"] is None and r["judged_by"] is None and r["ratio"] == 2.0


def test_long_sample_lists_are_thinned_not_refused(capsys, tmp_path):
    n = 20 * compare.MAX_BOOTSTRAP
    a = _locks(tmp_path, "a.json", [_locks_row([10.0 + (i % 7) / 10 for i in range(n)])])
    b = _locks(tmp_path, "b.json", [_locks_row([30.0 + (i % 7) / 10 for i in range(n)])])
    [r] = _compare_json(capsys, a, b)["results"]
    assert r["significant"] is True and r["judged_by"] == "bootstrap"
    assert len(compare._thin(list(range(n)))) == compare.MAX_BOOTSTRAP


@pytest.mark.parametrize("va, vb", [(0, 5), (1e-300, 1e300), (0.0, 0.0)])
def test_an_undefined_ratio_is_null_never_nan_or_infinity(capsys, tmp_path, va, vb):
    a = _info_like(tmp_path, "a.json", [{"test": "x", "cycles": va}])
    b = _info_like(tmp_path, "b.json", [{"test": "x", "cycles": vb}])
    [r] = _compare_json(capsys, a, b)["results"]   # parse_constant refuses NaN/Infinity
    assert r["ratio"] is None and r["significant"] is None
    assert main(["compare", str(a), str(b)]) == 0
    assert "unknown" in capsys.readouterr().out





# ------------------------------------------------------------------ the noise between runs

def test_several_results_a_side_are_judged_between_runs(capsys, tmp_path):
    """A1 A2 A3 -- B1 B2 B3: each row's value per run, the runs' spread the
    noise; the same three against themselves is no difference, three 10 %
    dearer is one; `--vs` is the same as `--`; a single B against three A
    is judged by A's spread."""
    runs = [10.0, 10.1, 9.9]
    a = [_locks(tmp_path, f"a{i}.json", [_locks_row([v] * 6)]) for i, v in enumerate(runs)]
    b = [_locks(tmp_path, f"b{i}.json", [_locks_row([v * 1.1] * 6)]) for i, v in enumerate(runs)]

    def judged(*argv):
        capsys.readouterr()
        assert main(["compare", *map(str, argv), "--json"]) == 0
        [r] = json.loads(capsys.readouterr().out)["results"]
        assert r["judged_by"] == "runs"
        return r

    same = judged(*a, "--", *a)
    assert same["significant"] is False and same["ratio"] == 1.0
    dearer = judged(*a, "--", *b)
    assert dearer["significant"] is True and dearer["ratio"] == pytest.approx(1.1)
    assert dearer["a"] == 10.0 and dearer["b"] == pytest.approx(11.0)   # the runs' medians
    assert judged(*a, "--vs", *b) == dearer
    assert judged(*a, "--", b[0])["significant"] is True
    assert judged(*a, "--", a[1])["significant"] is False
    capsys.readouterr()
    assert main(["compare", *map(str, a), "--", *map(str, b), "--json"]) == 0
    params = json.loads(capsys.readouterr().out)["params"]
    assert params["a"] == [str(x) for x in a] and params["b"] == [str(x) for x in b]


def test_three_results_without_a_separator_are_one_clear_line(capsys, tmp_path):
    a = [_locks(tmp_path, f"a{i}.json", [_locks_row([1.0, 2.0, 3.0])]) for i in range(3)]
    _one_line_exit_2(capsys, ["compare", *map(str, a)], "A1.json A2.json -- B1.json")


def test_a_warning_in_any_run_of_a_side_reaches_the_warnings(capsys, tmp_path):
    """Pooled sides are held to the conditions as single results are: a
    load warning in A2 leaves every row unjudged and names A2."""
    rows = [_locks_row([10.0, 10.1, 9.9])]
    a1, b = (_locks(tmp_path, n, rows) for n in ("a1.json", "b.json"))
    a2 = _write(tmp_path / "a2.json", {"schema": 2, "command": "locks", "results": rows,
                                       "warnings": ["competing load during the run: x"]})
    capsys.readouterr()
    assert main(["compare", str(a1), str(a2), "--", str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["judged_by"] for r in out["results"]] == ["not comparable"]
    assert any("a2.json warns of load" in w for w in out["warnings"])


def test_a_row_not_in_every_run_of_a_side_is_left_out_and_said(capsys, tmp_path):
    a1 = _locks(tmp_path, "a1.json", [_locks_row([1.0, 2.0, 3.0]), _locks_row([1.0], "u")])
    a2 = _locks(tmp_path, "a2.json", [_locks_row([1.0, 2.0, 3.0])])
    capsys.readouterr()
    assert main(["compare", str(a1), str(a2), "--", str(a1), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["key"]["test"] for r in out["results"]] == ["t"]
    assert any("1 row of" in w and "a1.json is not in every result of its side" in w
               for w in out["warnings"])


def test_a_side_of_two_commands_is_bad_input(capsys, tmp_path):
    a = _locks(tmp_path, "a.json", [_locks_row([1.0, 2.0, 3.0])])
    i = _info_like(tmp_path, "i.json", [{"test": "x", "cycles": 1.0}])
    _one_line_exit_2(capsys, ["compare", str(a), str(i), "--", str(a)], "one side's results")


def test_the_text_says_what_noise_each_judgement_held(capsys, tmp_path):
    a = _locks(tmp_path, "a.json", [_locks_row([1.0, 1.1, 0.9], "s"), _locks_row([1.0, 1.1], "u")])
    b = _locks(tmp_path, "b.json", [_locks_row([1.0, 1.1, 0.9], "s"), _locks_row([1.0, 1.1], "u")])
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert (f"Noise of 1 row judged {compare.JUDGED_BY['bootstrap']}.\n"
            f"Noise of 1 row judged {compare.JUDGED_BY['range']}.") in out
    a2 = _locks(tmp_path, "a2.json", [_locks_row([1.05, 1.2, 0.9], "s"), _locks_row([1.1, 1.2], "u")])
    assert main(["compare", str(a), str(a2), "--", str(b)]) == 0
    assert f"Noise of 2 rows judged {compare.JUDGED_BY['runs']}." in capsys.readouterr().out


def test_one_file_twice_on_a_side_is_refused(capsys, tmp_path):
    """Two copies of a run have no spread: every difference would be 'beyond noise'."""
    a = _locks(tmp_path, "a.json", [_locks_row([1.0, 1.1, 0.9])])
    b = _locks(tmp_path, "b.json", [_locks_row([1.0, 1.1, 0.9])])
    _one_line_exit_2(capsys, ["compare", str(a), str(tmp_path / "." / "a.json"), "--", str(b)],
                     "a.json twice on one side")


def test_a_side_whose_runs_do_not_spread_is_not_judged(capsys, tmp_path):
    """Runs of identical values (copies under other names) give no spread
    to judge by: unknown, not a difference of any size called real."""
    a = [_locks(tmp_path, f"a{i}.json", [_locks_row([10.0] * 6)]) for i in range(2)]
    b = _locks(tmp_path, "b.json", [_locks_row([10.01] * 6)])
    capsys.readouterr()
    assert main(["compare", *map(str, a), "--", str(b), "--json"]) == 0
    [r] = json.loads(capsys.readouterr().out)["results"]
    assert r["significant"] is None and r["judged_by"] is None


def test_vs_given_twice_or_beside_the_separator_keeps_every_file(capsys, tmp_path):
    a = [_locks(tmp_path, f"a{i}.json", [_locks_row([v] * 6)]) for i, v in enumerate((10, 10.1))]
    b = [_locks(tmp_path, f"b{i}.json", [_locks_row([v] * 6)]) for i, v in enumerate((11, 11.1))]
    for argv in ([a[0], a[1], "--vs", b[0], "--", b[1]], [a[0], a[1], "--vs", b[0], "--vs", b[1]]):
        capsys.readouterr()
        assert main(["compare", *map(str, argv), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["params"]["b"] == [str(x) for x in b]


def test_values_near_a_floats_limit_give_no_infinity_and_no_warning(capsys, tmp_path):
    a = [_locks(tmp_path, f"a{i}.json", [_locks_row([v] * 6)]) for i, v in enumerate((1.7e308, 1e308))]
    b = _locks(tmp_path, "b.json", [_locks_row([1.5e308] * 6)])
    capsys.readouterr()
    assert main(["compare", *map(str, a), "--", str(b), "--json"]) == 0
    captured = capsys.readouterr()
    [r] = json.loads(captured.out)["results"]
    assert r["a"] == pytest.approx(1.35e308) and captured.err == ""
