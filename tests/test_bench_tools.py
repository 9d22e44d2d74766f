"""The benchmarks' own tools, without timing anything: bench/conftest.py's measured
clock (a round's timed value is exactly the seconds its run measured, the warm-up
left out) and bench/spread.py's arithmetic and bad-input exit."""
import importlib.util
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pytest_benchmark.timers import compute_timer_precision

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name, path):
    # bench/ is no package and its conftest must not become this session's:
    # load each file as a plain module under its own name
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_conftest = _load("bench_conftest", BENCH / "conftest.py")
spread = _load("bench_spread", BENCH / "spread.py")


# ------------------------------------------------------------ the measured clock

def test_measured_clock_moves_by_what_it_is_given_and_a_tick():
    clock = bench_conftest.MeasuredClock()
    for seconds in (0.25, 1.5e-6, 0.024):
        start = clock()
        clock.advance(seconds)
        end = clock()
        assert end - start == pytest.approx(seconds + clock.TICK, rel=1e-9, abs=0)
    a, b = clock(), clock()
    assert b - a == pytest.approx(clock.TICK, rel=1e-3)


def test_measured_clock_lets_the_precision_probe_end():
    # pytest-benchmark's probe loops until two readings differ: it must find the tick
    assert compute_timer_precision(bench_conftest.MeasuredClock()) == pytest.approx(
        bench_conftest.MeasuredClock.TICK, rel=1e-3)


@pytest.mark.parametrize("seconds", [0.0, -1.0, math.nan])
def test_measured_clock_refuses_a_round_that_measured_nothing(seconds):
    clock = bench_conftest.MeasuredClock()
    with pytest.raises(ValueError, match="no measured work"):
        clock.advance(seconds)


MEASURED_TEST = """
import time

def test_measured(benchmark, measured_rounds):
    seconds = iter([9.0, 0.25, 0.5, 0.125])   # the first round is the warm-up

    def one_run():
        time.sleep(0.01)                      # a wall clock would see this, not 0.25
        return {"n": 1}, next(seconds)

    results = measured_rounds(one_run, rounds=3)
    benchmark.extra_info["results"] = results
"""


def _run_measured(tmp_path, *args):
    (tmp_path / "conftest.py").write_text((BENCH / "conftest.py").read_text())
    (tmp_path / "test_measured.py").write_text(textwrap.dedent(MEASURED_TEST))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"),
                        str(tmp_path), f"--benchmark-json={out}", *args],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())["benchmarks"]


def test_a_measured_round_is_timed_by_its_measured_seconds_without_the_warmup(tmp_path):
    [b] = _run_measured(tmp_path)
    tick = bench_conftest.MeasuredClock.TICK
    assert b["stats"]["rounds"] == 3
    assert sorted(b["stats"]["data"]) == pytest.approx([0.125 + tick, 0.25 + tick, 0.5 + tick],
                                                       rel=1e-9)
    assert b["stats"]["median"] == pytest.approx(0.25, rel=1e-9)
    results = b["extra_info"]["results"]
    assert [r["n"] for r in results] == [1, 1, 1]      # three timed rounds, no warm-up
    assert all(r["wall_s"] > 0 for r in results)


# ------------------------------------------------------------ spread.py

def test_spread_arithmetic():
    rng, mad = spread.spread([1.0, 1.1, 1.05])
    assert rng == pytest.approx(10.0)
    assert mad == pytest.approx(0.05 / 1.05 * 100)
    assert spread.spread([2.0]) == (None, None)


def _bench_json(path, medians):
    path.write_text(json.dumps({"benchmarks": [
        {"group": g, "name": n, "fullname": f"bench/test_x.py::{n}", "stats": {"median": m}}
        for (g, n), m in medians.items()]}))
    return str(path)


def test_spread_report(tmp_path, capsys):
    files = [_bench_json(tmp_path / f"run{k}.json", {("defer", "a"): a, ("defer", "b"): b,
                                                     ("arp", "c"): 1e-6})
             for k, (a, b) in enumerate([(1.0, 2.0), (1.2, 2.02), (1.1, 2.01)])]
    assert spread.main(files) == 0
    out = capsys.readouterr().out.splitlines()
    row_a = next(ln for ln in out if ln.split()[:2] == ["defer", "a"])
    assert row_a.split()[2:] == ["3", "1.1", "20.00%", "9.09%"]
    largest = out[out.index("largest spread per group (max/min - 1; that benchmark's MAD):") + 1:]
    assert largest[0].split()[:2] == ["arp", "0.00"]
    assert largest[1].split()[:2] == ["defer", "20.00"] and largest[1].endswith(", a)")


@pytest.mark.parametrize("content, why", [
    (None, "No such file or directory"),
    ("not json", "not JSON"),
    ('{"machine_info": {}}', "not a pytest-benchmark JSON"),
    ('{"benchmarks": [{"name": "x"}]}', "not a pytest-benchmark JSON"),
    ('{"benchmarks": [{"fullname": "x", "stats": {"median": 0}}]}', "not a positive time"),
])
def test_spread_bad_input_one_line_and_exit_2(tmp_path, capsys, content, why):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = _bench_json(tmp_path / "good.json", {("g", "a"): 1.0})
    assert spread.main([good, str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"spread.py: {bad}") and why in err[0]


def test_spread_needs_two_files(tmp_path, capsys):
    assert spread.main([_bench_json(tmp_path / "one.json", {("g", "a"): 1.0})]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "two or more" in line
