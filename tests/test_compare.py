"""smpnet-bench compare on every result every subcommand writes, twice, and
under other conditions (malformed input: test_compare_input.py; the verdict
on results made to order: test_compare_verdict.py)."""
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from compare_helpers import _compare_json, _one_line_exit_2, _write
from smpnet import experiments, run_all
from smpnet.cli import main
from smpnet.report import report
from smpnet.report import results as results_module

PY = [sys.executable, "-m", "smpnet"]
ENVELOPE_KEYS = {"schema", "smpnet", "command", "machine", "params", "results", "verdicts",
                 "warnings"}
TWO_CPUS = len(os.sched_getaffinity(0)) >= 2
ONE_CPU_PAIR = [] if TWO_CPUS else ["--ncpus", "2", "--oversubscribe"]
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

# name -> (argv, tables its compare rows come in, tables judged by their samples)
# tiny parameters; --repeat 3 / 3 rounds / 5 trials so every sampled table has a verdict
RUNS = {
    "info": (["info"], {"info"}, set()),
    "locks": (["locks", "--rounds", "3", "--loops", "2000", "--algo", "qspinlock,ticket",
               "--variant", "plain,irqsave"], {"locks"}, {"locks"}),
    "contended": (["locks", "--contended", "--duration", "0.02", "--repeat", "3", "--algo",
                   "ticket", "--variant", "plain,irq"], {"locks"}, {"locks"}),
    "defer": (["defer", "--duration", "0.05", "--repeat", "3"] + ONE_CPU_PAIR,
              {"defer"}, {"defer"}),
    "loopback": (["loopback", "--duration", "0.03", "--repeat", "3", "--scaling"],
                 {"loopback"}, {"loopback"}),
    "arp": (["arp", "--trials", "5"] + ONE_CPU_PAIR, {"arp"}, {"arp"}),
    "contended-command": (["contended", "--duration", "0.02", "--repeat", "3", "--algo",
                           "tas", "--variant", "plain", "--hold-cycles", "0,100"],
                          {"contended"}, {"contended"}),
    "null": (["null", "--rounds", "12", "--loops", "2000"], {"null"}, {"null"}),
    # without the referee (2.9 s of a run's 3.7 here): its rows are sampled rows
    # as the rest, and reach compare in `all`'s kernel stage
    "kernel": (["kernel", "--cpus", "0", "--transactions", "200", "--rounds", "3", "--trials",
                "3", "--no-referee"], {"kernel"}, {"kernel"}),
    "ab": (["ab", EXAMPLES + "/aa.c", "--loops", "2000", "--rounds", "3", "--duration", "0.01",
            "--repeat", "3"] + ONE_CPU_PAIR, {"ab"}, {"ab"}),
}
# the stages of `all` that run here, and those whose rows carry per-run samples
ALL_TABLES = {e.name for e in run_all.stages() if TWO_CPUS or e.min_cpus < 2}
ALL_SAMPLED = {e.name for e in run_all.stages() if e.metric.samples} & ALL_TABLES


def _run(argv, out):
    """One run in this process (the command line's own path is test_cli's
    and `all`'s matter; a child would add 0.3 s of start-up a run)."""
    text, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
        rc = main(argv + ["--output", str(out)])
    assert rc == 0, err.getvalue()
    out.with_suffix(".txt").write_text(text.getvalue())   # the text report, for the width test
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory, all_quick):
    """{name: (path of run 1, path of run 2)}: each command twice, `all --quick` once
    (the session's, conftest.all_quick); the second run of each, and `all`, print
    their text --format email."""
    d = tmp_path_factory.mktemp("compare")
    out = {}
    for name, (argv, _, _) in RUNS.items():
        out[name] = tuple(_run(argv + ["--format", "email"] * (k == 2), d / f"{name}-{k}.json")
                          for k in (1, 2))
    rc, a, text, _ = all_quick
    assert rc == 0, text.read_text()
    out["all"] = (a, a)
    return out


@pytest.mark.parametrize("name", list(RUNS) + ["all"])
def test_format_email_fits_80_columns_with_the_machine_on_top(results, name):
    """Every experiment's text and `all`'s, as a patch review mails it."""
    text = results[name][1].with_suffix(".txt").read_text()
    lines = text.splitlines()
    assert lines[0].startswith("machine: ") and lines[1].startswith("clock: TSC")
    too_wide = [ln for ln in lines if len(ln) > 80]
    assert not too_wide, too_wide
    assert len(lines) > 4   # a report, not just the facts




def _source_rows(path):
    """(table, row) pairs of a result, stage by stage for `all`."""
    env = json.loads(open(path).read())
    if env["command"] == "all":
        return [(s["stage"], r) for s in env["results"] for r in s["results"]]
    return [(env["command"], r) for r in env["results"]]


# ------------------------------------------------------------------ every command's result

@pytest.mark.parametrize("name", list(RUNS) + ["all"])
def test_a_result_compared_with_itself(capsys, results, name):
    a, _ = results[name]
    env = _compare_json(capsys, a, a)
    assert set(env) == ENVELOPE_KEYS and env["command"] == "compare" and env["schema"] == report.SCHEMA
    assert env["params"] == {"a": str(a), "b": str(a),
                             "command": "all" if name == "all" else RUNS[name][0][0]}
    # a load or placement warning in the result reaches compare's, and its rows are not judged
    warned = [w for w in json.loads(a.read_text())["warnings"]
              if any(phrase in w for _, phrase in results_module.CONDITION_WARNINGS)]
    assert len(env["warnings"]) == len(warned)
    assert all(any(w in n for n in env["warnings"]) for w in warned)
    judged = "not comparable" if warned else "bootstrap"
    rows = env["results"]
    tables = ALL_TABLES if name == "all" else RUNS[name][1]
    assert {r["table"] for r in rows} == tables
    # every row of the result with a value is compared, each once
    source = [(t, r) for t, r in _source_rows(a) if t in tables]
    assert len(rows) == len(source)
    keys = [(r["table"], json.dumps(r["key"], sort_keys=True)) for r in rows]
    assert len(set(keys)) == len(keys)
    sampled = ALL_SAMPLED if name == "all" else RUNS[name][2]
    for r in rows:
        assert r["a"] == r["b"]
        assert r["ratio"] == 1.0 if r["a"] != 0 else r["ratio"] is None
        assert r["significant"] is not True
        if r["table"] in sampled:
            assert r["significant"] is (None if warned else False), r
            assert r["judged_by"] == judged, r
    if name in ("contended", "all"):
        contended = [r for r in rows if r["metric"] == "acq_per_s"]
        # judged by the rounds' samples (acq_per_s_samples)
        assert contended and all(r["judged_by"] == judged for r in contended)
        assert all(isinstance(r["key"]["cpus"], list) for r in contended)


@pytest.mark.parametrize("name", list(RUNS))
def test_a_result_compared_with_a_second_run(capsys, results, name):
    a, b = results[name]
    self_keys = {(r["table"], json.dumps(r["key"])) for r in _compare_json(capsys, a, a)["results"]}
    rows = _compare_json(capsys, a, b)["results"]
    assert {(r["table"], json.dumps(r["key"])) for r in rows} == self_keys
    for r in rows:
        if r["ratio"] is not None:
            assert r["ratio"] == pytest.approx(r["b"] / r["a"])
        assert r["significant"] in (True, False, None)
        assert r["judged_by"] in ("bootstrap", "range", "not comparable", None)
        assert (r["judged_by"] in (None, "not comparable")) == (r["significant"] is None)
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "beyond noise" in text and f"A = {a}" in text


def test_scaling_and_contended_rows_by_cpu_count_stay_apart(capsys, results):
    rows = _compare_json(capsys, *results["all"])["results"]
    loop = [(r["key"]["mode"], r["key"]["cpus"]) for r in rows if r["table"] == "loopback"]
    cont = [tuple(r["key"]["cpus"]) + (r["key"]["algo"],)
            for r in rows if r["table"] == "contended"]
    ncpu = len(os.sched_getaffinity(0))
    assert {c for _, c in loop} == set(range(1, ncpu + 1))
    # every mode at every CPU count; at the verdict's, netif_rx's A/A control
    # and, calibrated by the kernel stage, the raw model's netif_rx and direct
    modes = len(experiments.get("loopback").plan([0], True).mode)
    assert len(set(loop)) == len(loop) == modes * ncpu + 3
    assert [k for k in loop if k[0] == "netif_rx (A/A)"] == [("netif_rx (A/A)", ncpu)]
    assert {len(c) - 1 for c in cont} == set(range(1, ncpu + 1))
    assert len(set(cont)) == len(cont)


def test_the_testers_command_line(results, tmp_path):
    # smpnet-bench all --quick --json > a.json; cp a.json b.json; compare a.json b.json
    a, _ = results["all"]
    (tmp_path / "a.json").write_bytes(a.read_bytes())
    (tmp_path / "b.json").write_bytes(a.read_bytes())
    p = subprocess.run(PY + ["compare", "a.json", "b.json"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "contended" in p.stdout


def _quiet(path, tmp_path):
    """A copy of a result without its warnings: a load warning (the machine
    is shared) would make compare say so and judge nothing."""
    env = json.loads(path.read_text())
    env["warnings"] = []
    return _write(tmp_path / f"quiet-{path.name}", env)


def test_all_stages_match_by_name_not_position(capsys, results, tmp_path):
    a = _quiet(results["all"][0], tmp_path)
    env = json.loads(a.read_text())
    env["results"] = [s for s in reversed(env["results"]) if s["stage"] != "info"]
    b = tmp_path / "b.json"
    b.write_text(json.dumps(env))
    out = _compare_json(capsys, a, b)
    assert {r["table"] for r in out["results"]} == ALL_TABLES - {"info"}
    assert all(r["ratio"] == 1.0 for r in out["results"] if r["a"])
    assert out["warnings"] == [f"2 rows of {a} have no match in {b}"]


def test_a_row_missing_in_one_file_is_left_out_and_said(capsys, results, tmp_path):
    a = _quiet(results["locks"][0], tmp_path)
    env = json.loads(a.read_text())
    dropped = env["results"].pop(1)
    b = tmp_path / "b.json"
    b.write_text(json.dumps(env))
    out = _compare_json(capsys, a, b)
    compared = {json.dumps(r["key"]) for r in out["results"]}
    assert len(out["results"]) == len(env["results"])
    assert json.dumps({k: dropped[k] for k in experiments.get("locks").metric.keys}) not in compared
    assert out["warnings"] == [f"1 row of {a} has no match in {b}"]
    assert main(["compare", str(a), str(b)]) == 0
    assert "Not compared" in capsys.readouterr().out


def test_a_null_value_on_one_side_is_left_out(capsys, results, tmp_path):
    a, _ = results["arp"]
    env = json.loads(a.read_text())
    env["results"][0]["first_ms"] = None          # as when no ping was answered
    b = tmp_path / "b.json"
    b.write_text(json.dumps(env))
    out = _compare_json(capsys, a, b)
    assert len(out["results"]) == len(env["results"]) - 1
    assert any("without a value" in w for w in out["warnings"])   # after any load note
    for r in env["results"]:                       # arp --peer-down: nothing measured at all
        r["first_ms"] = None
    b.write_text(json.dumps(env))
    _one_line_exit_2(capsys, ["compare", str(b), str(b)],
                     f"the {len(env['results'])} rows they share have no value to compare")


def test_suite_and_contended_locks_results_do_not_compare(capsys, results):
    _one_line_exit_2(capsys, ["compare", str(results["locks"][0]), str(results["contended"][0])],
                     "cannot compare", "(contended rows)")


def test_results_of_two_commands_do_not_compare(capsys, results):
    _one_line_exit_2(capsys, ["compare", str(results["info"][0]), str(results["arp"][0])],
                     "cannot compare", "info", "arp")


def test_no_row_in_common_is_bad_input(capsys, results, tmp_path):
    env = json.loads(results["info"][0].read_text())
    for r in env["results"]:
        r["test"] += "_renamed"
    b = tmp_path / "b.json"
    b.write_text(json.dumps(env))
    _one_line_exit_2(capsys, ["compare", str(results["info"][0]), str(b)], "no result rows")


def test_every_experiment_has_a_compare_run_above():
    """compare is tried on a result of every experiment in the registry."""
    assert {argv[0] for argv, _, _ in RUNS.values()} == set(experiments.BY_NAME)


# ------------------------------------------------------------------ conditions

def test_rows_run_under_other_conditions_are_named_and_not_judged(capsys, results, tmp_path):
    """Another calibration profile: that table's rows are not judged, and
    the warning names both profiles; a load warning in either input,
    another CPU model or another smpnet (its model): no row is judged, and
    the warning reaches compare's."""
    a = _quiet(results["all"][0], tmp_path)
    env = json.loads(a.read_text())
    stage = next(s for s in env["results"] if s["stage"] == "loopback")
    stage["params"]["calibration"] = {"tcp_rr": {"same-cpu": {"cycles": 45436.0}}}
    b = _write(tmp_path / "b.json", env)
    out = _compare_json(capsys, a, b)
    loop = [r for r in out["results"] if r["table"] == "loopback"]
    assert loop and all(r["judged_by"] == "not comparable" and r["significant"] is None
                        for r in loop)
    assert all(r["judged_by"] != "not comparable" for r in out["results"]
               if r["table"] != "loopback")
    (w,) = [w for w in out["warnings"] if "calibration" in w]
    assert w.startswith(f"the loopback rows not judged ({len(loop)}): loopback: another "
                        "calibration profile") and "45,436 cycles per TCP transaction" in w
    for change, says in ((lambda e: e["warnings"].append(
                              "competing load during the run: other processes used 50 % of "
                              "CPUs 0-1; its figures are less reliable"), "warns of load"),
                         (lambda e: e["machine"].update(cpu_model="Other CPU"),
                          "another machine: cpu model"),
                         (lambda e: e["machine"].update(smpnet="0.0.1"), "another smpnet")):
        env = json.loads(a.read_text())
        change(env)
        c = _write(tmp_path / "c.json", env)
        out = _compare_json(capsys, a, c)
        assert all(r["significant"] is None for r in out["results"])
        assert any(w.startswith(f"every row not judged ({len(out['results'])})") and says in w
                   for w in out["warnings"])


def test_a_known_shift_is_still_found(capsys, results, tmp_path):
    """The same result with one row's samples and value shifted by 30 %:
    that row, and only that one, is beyond noise. The row's samples are
    made tight first (within 1 % of its value): a run's own rounds on a
    busy machine can spread wider than 30 % over 3 samples, and then no
    shift would be beyond them (CI saw it)."""
    env = json.loads(_quiet(results["locks"][0], tmp_path).read_text())
    row = next(r for r in env["results"] if r["test"] == "spin_lock_unlock")
    row["samples"] = [row["cycles"] * f for f in (0.99, 1.0, 1.01)]
    row["cycles_min"], row["cycles_max"] = min(row["samples"]), max(row["samples"])
    a = _write(tmp_path / "a.json", env)
    row["samples"] = [s * 1.3 for s in row["samples"]]
    for k in ("cycles", "cycles_min", "cycles_max"):
        row[k] *= 1.3
    b = _write(tmp_path / "b.json", env)
    out = _compare_json(capsys, a, b)
    beyond = [r for r in out["results"] if r["significant"]]
    assert [r["key"]["test"] for r in beyond] == ["spin_lock_unlock"] * len(beyond)
    assert beyond and all(r["ratio"] == pytest.approx(1.3) for r in beyond)
