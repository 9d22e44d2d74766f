"""smpnet-bench compare on input it must refuse: every malformed file one
line and exit code 2, never a traceback, whatever JSON it is given."""
import copy
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compare_helpers import _locks_row, _one_line_exit_2, _write
from smpnet import jsonfile
from smpnet.cli import main
from smpnet.report import compare

PY = [sys.executable, "-m", "smpnet"]


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
