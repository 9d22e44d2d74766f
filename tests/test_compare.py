"""smpnet-bench compare: every result every subcommand writes, and every
malformed input one line and exit code 2."""
import copy
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smpnet import experiments, jsonfile, run_all
from smpnet.cli import main
from smpnet.report import compare, report
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
    # one CPU: the referee's contended rows (10 s a run at 3 rounds) are not compare's matter
    "kernel": (["kernel", "--cpus", "0", "--transactions", "200", "--rounds", "3", "--trials",
                "3", "--referee-rounds", "6"], {"kernel"}, {"kernel"}),
    "ab": (["ab", EXAMPLES + "/aa.c", "--loops", "2000", "--rounds", "3", "--duration", "0.01",
            "--repeat", "3"] + ONE_CPU_PAIR, {"ab"}, {"ab"}),
}
# the stages of `all` that run here, and those whose rows carry per-run samples
ALL_TABLES = {e.name for e in run_all.stages() if TWO_CPUS or e.min_cpus < 2}
ALL_SAMPLED = {e.name for e in run_all.stages() if e.metric.samples} & ALL_TABLES


def _run(argv, out, cwd):
    p = subprocess.run(PY + argv + ["--output", str(out)], capture_output=True, text=True,
                       cwd=cwd, timeout=300)
    assert p.returncode == 0, p.stderr
    out.with_suffix(".txt").write_text(p.stdout)   # the text report, for the width test
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory, all_quick):
    """{name: (path of run 1, path of run 2)}: each command twice, `all --quick` once
    (the session's, conftest.all_quick); the second run of each, and `all`, print
    their text --format email."""
    d = tmp_path_factory.mktemp("compare")
    out = {}
    for name, (argv, _, _) in RUNS.items():
        out[name] = tuple(_run(argv + ["--format", "email"] * (k == 2), d / f"{name}-{k}.json",
                               d) for k in (1, 2))
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


def _compare_json(capsys, a, b):
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--json"]) == 0
    text = capsys.readouterr().out

    def no_constant(c):
        raise AssertionError(f"compare --json wrote {c}")
    return json.loads(text, parse_constant=no_constant)


def _source_rows(path):
    """(table, row) pairs of a result, stage by stage for `all`."""
    env = json.loads(open(path).read())
    if env["command"] == "all":
        return [(s["stage"], r) for s in env["results"] for r in s["results"]]
    return [(env["command"], r) for r in env["results"]]


def _one_line_exit_2(capsys, argv, *expect):
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("smpnet-bench: "), captured.err
    for e in expect:
        assert e in lines[0], lines[0]
    return lines[0]


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


# ------------------------------------------------------------------ the verdict itself

def _info_like(tmp_path, name, rows):
    p = tmp_path / name
    p.write_text(json.dumps({"schema": 2, "command": "info", "results": rows}))
    return p


def _locks_row(samples, test="t"):
    return {"test": test, "algo": None, "variant": None, "restore": "sti", "contended": False,
            "cycles": sorted(samples)[len(samples) // 2], "samples": samples,
            "cycles_min": min(samples), "cycles_max": max(samples)}


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


# ------------------------------------------------------------------ malformed input

def _good_info():
    return {"schema": 2, "command": "info", "results": [
        {"test": "for_loop", "cycles": 1.0, "cycles_min": 0.9, "cycles_max": 1.1}]}


def _row(**fields):
    env = _good_info()
    env["results"][0].update(fields)
    return env


def _drop(env, field):
    env = copy.deepcopy(env)
    del env[field]
    return env


def _all(*stages):
    return {"schema": 2, "command": "all", "results": list(stages)}


def _arp(first_ms):
    return {"schema": 2, "command": "arp", "results": [
        {"probe": "timer", "hz": 100, "first_ms": first_ms, "first_samples_ms": [1.0]}]}


def _locks_env(**fields):
    row = dict(_locks_row([1.0, 2.0, 3.0]), **fields)
    return {"schema": 2, "command": "locks", "results": [row]}


# name -> (file content: bytes or a JSON-able value, words the message has)
MALFORMED = {
    "binary": (bytes(range(256)) * 4, "not JSON"),
    "empty": (b"", "not JSON"),
    "not_json": (b"{not json", "not JSON"),
    "bom_utf16": ("{}".encode("utf-16"), "not JSON"),
    "deeply_nested": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "deeply_nested_in_a_row": (
        b'{"schema": 2, "command": "info", "results": [{"test": ' + b"[" * 50_000
        + b"]" * 50_000 + b', "cycles": 1}]}', "nested too deeply"),
    "5000_digit_number": (b'{"schema": 2, "command": "info", "results": [{"test": "x", '
                          b'"cycles": ' + b"9" * 5000 + b"}]}", "digits"),
    "a_list": ([1, 2], "not an smpnet-bench result"),
    "a_string": ("info", "not an smpnet-bench result"),
    "no_schema": (_drop(_good_info(), "schema"), "no schema"),
    "no_command": (_drop(_good_info(), "command"), "no schema or command"),
    "no_results": (_drop(_good_info(), "results"), "no results"),
    "other_schema": (dict(_good_info(), schema=4), "schema 4, this smpnet reads schemas 1, 2, 3"),
    "schema_true": (dict(_good_info(), schema=True), "schema true/false, this smpnet reads"),
    "schema_a_list": (dict(_good_info(), schema=[1]), "schema"),
    "command_a_list": (dict(_good_info(), command=["info"]), "command is a list"),
    "command_null": (dict(_good_info(), command=None), "command is null"),
    "command_unknown": (dict(_good_info(), command="compare"), "compare reads results of"),
    "results_an_object": (dict(_good_info(), results={"test": "x"}), "results is an object"),
    "results_a_string": (dict(_good_info(), results="rows"), "results is a string"),
    "results_null": (dict(_good_info(), results=None), "results is null"),
    "row_a_list": (dict(_good_info(), results=[["for_loop", 1.0]]), "results[0] is a list"),
    "row_a_number": (dict(_good_info(), results=[7]), "results[0] is a number"),
    "row_without_key": (dict(_good_info(), results=[{"cycles": 1.0}]), "results[0]: no 'test'"),
    "row_without_value": (dict(_good_info(), results=[{"test": "x"}]), "no 'cycles'"),
    "key_an_object": (_row(test={"a": 1}), "test is an object"),
    "key_a_nested_list": (_row(test=[[1]]), "test is a list"),
    "key_a_lone_surrogate": (_row(test="\ud800"), "test is a string that is not text"),
    "key_nan": (_row(test=float("nan")), "test is NaN"),
    "value_a_string": (_row(cycles="1.0"), "cycles is a string"),
    "value_a_bool": (_row(cycles=True), "cycles is true/false"),
    "value_a_list": (_row(cycles=[1.0]), "cycles is a list"),
    "value_nan": (_row(cycles=float("nan")), "cycles is NaN or infinite"),
    "value_infinity": (_row(cycles=float("inf")), "cycles is NaN or infinite"),
    "value_1e999": (b'{"schema": 2, "command": "info", "results": [{"test": "x", '
                    b'"cycles": 1e999}]}', "NaN or infinite"),
    "value_beyond_a_float": (_row(cycles=10 ** 400), "too large for a float"),
    "min_a_string": (_row(cycles_min="low"), "cycles_min is a string"),
    "min_above_max": (_row(cycles_min=1.2, cycles_max=0.8), "cycles_min 1.2 is above cycles_max 0.8"),
    "value_negative": (_row(cycles=-5.0), "cycles -5.0 is negative (a cost or a rate)"),
    "min_negative": (_row(cycles_min=-0.1), "cycles_min -0.1 is negative"),
    "samples_a_string": (_locks_env(samples="1,2,3"), "samples is not a list"),
    "samples_with_a_bool": (_locks_env(samples=[1.0, True, 2.0]), "samples is not a list"),
    "samples_with_null": (_locks_env(samples=[1.0, None]), "samples is not a list"),
    "contended_a_string": (_locks_env(contended="no"), "contended is a string"),
    "contended_missing": (dict(_locks_env(), results=[
        {k: v for k, v in _locks_row([1.0]).items() if k != "contended"}]), "no 'contended'"),
    "arp_first_ms_a_list": (_arp([1.0]), "first_ms is a list"),
    "arp_median_a_string": (_arp({"median": "1", "min": 1, "max": 1}), "first_ms.median"),
    "duplicate_rows": (dict(_good_info(), results=_good_info()["results"] * 2),
                       "results[1]: same key as results[0]"),
    "all_stage_a_list": (_all([]), "results[0] is a list"),
    "all_stage_without_name": (_all({"results": []}), "no stage name"),
    "all_stage_name_a_number": (_all({"stage": 3, "results": []}), "no stage name"),
    "all_stage_results_missing": (_all({"stage": "info"}), "stage 'info' has no results"),
    "all_stage_results_an_object": (_all({"stage": "info", "results": {}}), "results is an object"),
    "all_stage_twice": (_all({"stage": "info", "results": []}, {"stage": "info", "results": []}),
                        "appears twice"),
    "all_unknown_stage_twice": (_all({"stage": "x", "results": []}, {"stage": "x", "results": []}),
                                "appears twice"),
    "all_stage_with_a_bad_row": (_all({"stage": "info", "results": [{"cycles": 1}]}),
                                 "stage 'info' results[0]: no 'test'"),
}


def _write(path, content):
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_input_is_one_line_and_exit_2(capsys, tmp_path, name):
    content, words = MALFORMED[name]
    good = _write(tmp_path / "good.json", _good_info())
    bad = _write(tmp_path / f"{name}.json", content)
    for argv in (["compare", str(good), str(bad)], ["compare", str(bad), str(good), "--json"]):
        line = _one_line_exit_2(capsys, argv, f"{name}.json", words)
        assert "Traceback" not in line


@pytest.mark.parametrize("name", ["binary", "deeply_nested", "5000_digit_number", "no_results",
                                  "results_an_object", "row_without_key", "value_a_string",
                                  "command_a_list", "all_stage_twice"])
def test_malformed_input_from_the_command_line(tmp_path, name):
    _write(tmp_path / "good.json", _good_info())
    _write(tmp_path / "bad.json", MALFORMED[name][0])
    p = subprocess.run(PY + ["compare", "good.json", "bad.json"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "bad.json" in p.stderr


def test_dev_zero_is_refused_after_a_bounded_read(tmp_path):
    _write(tmp_path / "good.json", _good_info())
    p = subprocess.run(PY + ["compare", "good.json", "/dev/zero"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [
        "smpnet-bench: /dev/zero: larger than 64 MiB, the most smpnet reads of a file"]


def test_a_file_over_the_bound_is_refused(capsys, tmp_path, monkeypatch):
    good = _write(tmp_path / "good.json", _good_info())
    monkeypatch.setattr(jsonfile, "MAX_BYTES", good.stat().st_size - 1)
    _one_line_exit_2(capsys, ["compare", str(good), str(good)], "good.json", "larger than")
    monkeypatch.setattr(jsonfile, "MAX_BYTES", good.stat().st_size)
    assert main(["compare", str(good), str(good)]) == 0


@pytest.mark.parametrize("which", ["missing", "directory"])
def test_unreadable_files(capsys, tmp_path, which):
    good = _write(tmp_path / "good.json", _good_info())
    bad = tmp_path / "missing.json" if which == "missing" else tmp_path
    _one_line_exit_2(capsys, ["compare", str(good), str(bad)], str(bad), "cannot read")


def test_a_path_with_a_newline_is_still_one_line(capsys, tmp_path):
    good = _write(tmp_path / "good.json", _good_info())
    bad = _write(tmp_path / "two\nlines.json", [1])
    _one_line_exit_2(capsys, ["compare", str(good), str(bad)], "not an smpnet-bench result")


# ------------------------------------------------------------------ property: never a traceback

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=12)
BASES = {
    "info": _good_info(),
    "locks": _locks_env(),
    "arp": {"schema": 2, "command": "arp", "results": [
        {"probe": "timer", "hz": 100, "first_ms": {"min": 1.0, "median": 2.0, "max": 3.0},
         "first_samples_ms": [1.0, 2.0, 3.0]}]},
    "all": _all({"stage": "info", "results": _good_info()["results"]},
                {"stage": "contended", "results": [
                    {"test": "t", "algo": "tas", "variant": "plain", "cpus": [0, 1],
                     "acq_per_s": 5.0}]}),
}


def _rows_of(env):
    if env["command"] == "all":
        return [r for s in env["results"] for r in s["results"]]
    return env["results"]


def _assert_clean(capsys, argv):
    capsys.readouterr()
    rc = main(argv)   # anything but a SmpnetError would raise out of here
    captured = capsys.readouterr()
    if rc == 0:
        if "--json" in argv:
            json.loads(captured.out, parse_constant=lambda c: pytest.fail(f"wrote {c}"))
        assert captured.err == ""
    else:
        assert rc == 2 and captured.out == ""
        assert len(captured.err.strip().splitlines()) == 1
    return rc


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.sampled_from(sorted(BASES)), field=st.text(max_size=12) | st.sampled_from(
    ["test", "cycles", "cycles_min", "cycles_max", "samples", "algo", "contended", "cpus",
     "acq_per_s", "first_ms", "first_samples_ms", "probe", "hz", "restore", "variant"]),
    value=JSONISH, as_json=st.booleans())
def test_any_json_value_in_a_row_field_never_gives_a_traceback(
        capsys, tmp_path_factory, base, field, value, as_json):
    d = tmp_path_factory.mktemp("prop", numbered=True)
    env = copy.deepcopy(BASES[base])
    for row in _rows_of(env):
        row[field] = value
    a = _write(d / "a.json", BASES[base])
    b = _write(d / "b.json", env)
    for argv in (["compare", str(a), str(b)], ["compare", str(b), str(b)]):
        _assert_clean(capsys, argv + (["--json"] if as_json else []))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["schema", "command", "results", "machine"]), value=JSONISH,
       whole=JSONISH)
def test_any_json_envelope_never_gives_a_traceback(capsys, tmp_path_factory, key, value, whole):
    d = tmp_path_factory.mktemp("prop", numbered=True)
    a = _write(d / "a.json", _good_info())
    b = _write(d / "b.json", dict(_good_info(), **{key: value}))
    c = _write(d / "c.json", whole)
    _assert_clean(capsys, ["compare", str(a), str(b), "--json"])
    assert _assert_clean(capsys, ["compare", str(a), str(c)]) == 2


def test_ratio_of_the_same_finite_values_is_exactly_one():
    for v in (1, 3.0, 1e-300, 1e300, -2.5, 10 ** 300):
        assert compare._ratio(v, v) == 1.0
    assert compare._ratio(0, 1) is None and compare._ratio(1e-300, 1e300) is None
    assert compare._ratio(3, 10 ** 400) is None          # OverflowError inside
    assert compare._ratio(1e-300, 10 ** 300) is None     # inf
    assert compare._ratio(2, 1) == 0.5


def test_a_fifo_is_read_to_its_end_and_one_with_no_writer_is_refused(capsys, tmp_path,
                                                                     monkeypatch):
    import threading

    good = _write(tmp_path / "good.json", _good_info())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(good.read_bytes()))
    writer.start()
    assert main(["compare", str(fifo), str(good), "--json"]) == 0
    writer.join()
    assert json.loads(capsys.readouterr().out)["results"]
    monkeypatch.setattr(jsonfile, "READ_TIMEOUT_S", 0.2)  # the open used to block for ever
    _one_line_exit_2(capsys, ["compare", str(fifo), str(good)], "fifo", "nothing came through")


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
