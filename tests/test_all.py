"""smpnet-bench all and compare."""
import json
import os
import re
import subprocess
import sys

import pytest

from smpnet import run_all
from smpnet.cli import main
from smpnet.measure import stats

STAGES = [e.name for e in run_all.stages()]   # the registry's, in its order


@pytest.fixture(scope="module")
def quick_run(all_quick):
    """The one `all --quick --plot` of the session (conftest.all_quick)."""
    rc, out, _, plots = all_quick
    return rc, json.loads(out.read_text()), plots


def test_all_quick_has_every_stage_and_a_verdict_per_seed(quick_run, allowed):
    rc, env, _ = quick_run
    assert rc == 0 and env["command"] == "all" and env["schema"] == 3
    assert [s["stage"] for s in env["results"]] == STAGES
    for stage in env["results"]:
        assert "params" in stage and "results" in stage
        if stage["stage"] in ("defer", "arp") and len(allowed) < 2:
            assert stage["skipped"]
        else:
            assert stage["results"], stage["stage"]
    assert [v["seed"] for v in env["verdicts"]] == ["000", "002", "003"]
    for v in env["verdicts"]:
        assert v["original_machine"] and v["reference"]
        if v["verdict"] != "not measured":
            # the label is the one the rule gives its interval (and size)
            assert v["verdict"] == stats.verdict(v["interval"], v.get("size")), v["seed"]
            # the size against the seed's (where the seed's has one in this unit:
            # 002's cycles have none), what kind of verdict, its A/A control
            if v["seed"] == "002":
                assert "size" not in v and v["unit"] == "cycles saved per transaction"
            else:
                assert v["size_ratio"][0] == pytest.approx(v["measured"] / v["size"])
            assert v["kind"] in ("measured", "model") and v["pairs"] >= stats.MIN_SAMPLES
            assert v["control"]["verdict"] == stats.equivalence(v["control"]["interval"])
    expected = {"000": "model", "002": "measured", "003": "measured"}
    assert all(v["kind"] == expected[v["seed"]] for v in env["verdicts"]
               if v["verdict"] != "not measured")


def test_a_row_says_its_verdict_once_and_its_control_in_a_word_of_its_own():
    """The verdict table, from made-up verdicts: each row's verdict, and its
    A/A control as passed or FAILED with what it found, never one of the
    verdicts' words (a "no measurable difference" control beside a
    "reproduced" row read as the row contradicting the lines under it)."""
    def verdict(seed, label, control):
        return {"seed": seed, "original_machine": "m", "measured": 1.0, "interval": [0.5, 1.5],
                "unit": "ms", "verdict": label, "kind": "measured",
                "control": {"verdict": control, "reliable": control == stats.NO_MEASURABLE}}
    rows = run_all.verdict_text([verdict("000", stats.REPRODUCED, stats.NO_MEASURABLE),
                                 verdict("002", stats.NO_MEASURABLE, "faster"),
                                 verdict("003", stats.REPRODUCED, stats.DIFFERENCE)])
    cells = {line[:3]: re.split(r"\s{2,}", line.strip()) for line in rows.splitlines()[2:]}
    assert cells["000"][-2:] == [stats.REPRODUCED, "passed"]
    assert stats.NO_MEASURABLE not in rows.splitlines()[2]
    assert cells["002"][-2:] == [stats.NO_MEASURABLE, "FAILED: found faster"]
    assert cells["003"][-2:] == [stats.REPRODUCED, "FAILED: found a difference"]


def test_the_kernel_stage_calibrates_the_stages_after_it(quick_run, allowed):
    _, env, _ = quick_run
    stages = {s["stage"]: s for s in env["results"]}
    profile = stages["kernel"]["profile"]
    assert profile["kind"] == "smpnet-calibration" and profile["tcp_rr"]["same-cpu"]["cycles"] > 0
    # loopback runs on any CPU count; arp needs two
    assert stages["loopback"]["params"]["calibration"] == profile
    assert stages["arp"].get("skipped") or stages["arp"]["params"]["calibration"] == profile
    if len(allowed) >= 2:   # a timing verdict: the calibrated gain, the raw model's beside it
        _, v = stages["loopback"]["verdicts"]     # the cycles saved, then the gain
        assert v["calibration"]["kernel_cycles"] == profile["tcp_rr"]["same-cpu"]["cycles"]
        assert "raw" in v and v["breakdown"]["saved_cycles"] is not None
    assert env["params"]["calibration"] is None     # none given: measured on the spot


def test_a_given_profile_skips_the_kernel_stage_and_reaches_the_calibrated(monkeypatch):
    import dataclasses

    from smpnet.experiment import Outcome
    seen = {}

    def recording(e):
        def run(cpus, p, progress):
            seen[e.name] = p
            return Outcome(p.record(), [], [])
        return dataclasses.replace(e, run=run)

    profile = {"kind": "smpnet-calibration", "tcp_rr": {"same-cpu": {"cycles": 1.0}}}
    warnings = []
    by = {e.name: e for e in run_all.stages()}
    out = run_all._stage(recording(by["kernel"]), [0], True, warnings, profile)
    assert out["skipped"] and "kernel" not in seen and warnings == [
        "kernel skipped: --calibration gave a profile"]
    run_all._stage(recording(by["loopback"]), [0], True, warnings, profile)
    assert seen["loopback"].calibration is profile
    run_all._stage(recording(by["locks"]), [0], True, warnings, profile)
    assert seen["locks"].calibration is profile      # to show its referee rows
    run_all._stage(recording(by["defer"]), [0, 1], True, warnings, profile)
    assert not hasattr(seen["defer"], "calibration")


def test_all_refuses_a_missing_profile_in_one_line(capsys):
    assert main(["all", "--quick", "--calibration", "/nonexistent/p.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--calibration /nonexistent/p.json" in err[0]


def test_all_plots_are_pngs(quick_run, allowed):
    _, _, plots = quick_run
    expected = {"locks.png", "contended.png", "loopback.png"}
    if len(allowed) >= 2:
        expected |= {"defer.png", "arp.png"}
    assert {p.name for p in plots.iterdir()} == expected
    for p in plots.iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000


def test_plot_without_matplotlib_says_how_to_install(capsys, monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(["all", "--quick", "--plot", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "pip install matplotlib" in err and "'.[plot]' in a clone" in err
    assert len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ compare

@pytest.fixture(scope="module")
def two_lock_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    paths = []
    for name in ("a", "b"):
        p = d / f"{name}.json"
        assert main(["locks", "--rounds", "5", "--loops", "20000", "--variant", "irq,irqsave",
                     "--output", str(p), "--json"]) == 0
        paths.append(p)
    return paths


def test_compare_two_saved_results(capsys, two_lock_runs):
    a, b = two_lock_runs
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["results"]
    tests = {r["key"]["test"] for r in rows}
    assert {"spin_lock_unlock_irq", "spin_lock_unlock_irqsave", "for_loop"} <= tests
    for r in rows:
        assert r["ratio"] == pytest.approx(r["b"] / r["a"])
        # judged, or not comparable with the reason said (a neighbour's load, the
        # empty loop moved between the runs: compare.md)
        assert r["significant"] in (True, False) or (
            r["judged_by"] == "not comparable" and any("not judged" in w for w in out["warnings"]))
    assert main(["compare", str(a), str(a)]) == 0   # a run against itself
    text = capsys.readouterr().out
    assert "beyond noise" in text and "1.000" in text


def test_compare_a_run_with_itself_finds_no_difference(capsys, two_lock_runs):
    a, _ = two_lock_runs
    capsys.readouterr()
    assert main(["compare", str(a), str(a), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert rows and not any(r["significant"] for r in rows)


def test_compare_refuses_mismatched_results(capsys, tmp_path, two_lock_runs, quick_run):
    a, _ = two_lock_runs
    other = tmp_path / "all.json"
    other.write_text(json.dumps(quick_run[1]))
    assert main(["compare", str(a), str(other)]) == 2
    assert "cannot compare" in capsys.readouterr().err
    old = tmp_path / "old.json"
    old.write_text(json.dumps(dict(json.loads(a.read_text()), schema=0)))
    assert main(["compare", str(a), str(old)]) == 2
    assert "schema" in capsys.readouterr().err
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    assert main(["compare", str(a), str(junk)]) == 2
    assert "not JSON" in capsys.readouterr().err
    assert main(["compare", str(a), str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.json" in err[0]


# ------------------------------------------------------------------ all's exit rule

def _canned(quick_run, broken):
    """run_all.run's answer, from the quick run, with `broken` applied."""
    _, env, _ = quick_run
    stages = {s["stage"]: {k: v for k, v in s.items() if k != "stage"} for s in env["results"]}
    broken(stages)
    return lambda cpus, quick=True, profile=None: (stages, env["verdicts"], [])


def test_all_exits_1_naming_a_broken_invariant(capsys, monkeypatch, tmp_path, quick_run):

    def unconserved(stages):
        stages["defer"]["results"] = [dict(r, conserved=False)
                                      for r in stages["defer"]["results"]]
        stages["loopback"]["results"] = [dict(r, refcnt_returns_to_0=False)
                                         for r in stages["loopback"]["results"][:1]]
        stages["contended"]["results"] = [dict(r, mutual_exclusion=False)
                                          for r in stages["contended"]["results"][:1]]

    monkeypatch.setattr(run_all, "run", _canned(quick_run, unconserved))
    out = tmp_path / "all.json"
    assert main(["all", "--quick", "--output", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    if quick_run[1]["results"][3]["results"]:  # defer ran (it needs 2 CPUs)
        assert any(ln.startswith("smpnet-bench all: invariant failed: defer: ") and
                   "not conserved" in ln for ln in err), err
    assert any("invariant failed: loopback: " in ln and "refcnt" in ln for ln in err), err
    assert any("invariant failed: contended: " in ln and "mutual exclusion" in ln
               for ln in err), err
    assert json.loads(out.read_text())["command"] == "all"  # the result is kept


def test_all_exits_0_when_every_invariant_holds(capsys, monkeypatch, quick_run):

    monkeypatch.setattr(run_all, "run", _canned(quick_run, lambda stages: None))
    assert main(["all", "--quick"]) == 0
    assert "invariant" not in capsys.readouterr().err


def test_pictures_that_cannot_be_drawn_do_not_lose_the_json(capsys, monkeypatch, tmp_path,
                                                             quick_run):
    from smpnet.report import plot

    def full_disk(env, directory):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_all, "run", _canned(quick_run, lambda stages: None))
    monkeypatch.setattr(plot, "write_all", full_disk)
    out = tmp_path / "all.json"
    assert main(["all", "--quick", "--output", str(out), "--plot", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"smpnet-bench all: pictures not written to {tmp_path / 'p'}: "
                   "No space left on device"]
    assert json.loads(out.read_text())["command"] == "all"


def test_an_unwritable_plot_directory_is_refused_before_the_run(capsys, monkeypatch, tmp_path):

    def never(*a, **k):
        raise AssertionError("ran")

    monkeypatch.setattr(run_all, "run", never)
    assert main(["all", "--quick", "--plot", str(tmp_path / "no" / "dir")]) == 2
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["all", "--quick", "--plot", str(f)]) == 2
    assert main(["all", "--quick", "--plot", "/proc/smpnet-pictures"]) == 2  # root may, /proc won't
    assert main(["all", "--quick", "--plot", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and "does not exist" in err[0] and "not a directory" in err[1]
    assert "cannot write in /proc" in err[2] and "needs a directory" in err[3]


def test_a_failed_stage_keeps_the_finished_ones(capsys, monkeypatch, tmp_path):
    """A worker killed in the last stage: exit 1, the stage named, and the
    stages before it in --output."""
    from smpnet.errors import WorkerDied

    real = run_all._stage

    def dies_in_arp(e, cpus, quick, warnings, profile):
        if e.name == "arp":
            raise WorkerDied(0, 0, 1234, "was killed by SIGKILL")
        if e.name == "info":   # a real stage, and one that starts no worker
            return real(e, cpus, quick, warnings, profile)
        return {"params": {}, "results": [{"test": e.name}], "verdicts": []}

    monkeypatch.setattr(run_all, "_stage", dies_in_arp)
    out = tmp_path / "all.json"
    assert main(["all", "--quick", "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"smpnet-bench: stage arp failed: emulated CPU 0 (real CPU 0, pid 1234) "
                       f"was killed by SIGKILL; run stopped; the {STAGES.index('arp')} finished "
                       f"stages went to {out}")
    env = json.loads(out.read_text())
    assert [s["stage"] for s in env["results"]] == STAGES[:STAGES.index("arp")]
    assert env["results"][0]["results"] and all(
        s["results"] == [{"test": s["stage"]}] for s in env["results"][1:])
    assert env["params"]["failed_stage"] == "arp"
    # without --output: a saved file, named
    assert main(["all", "--quick"]) == 1
    saved = capsys.readouterr().err.strip().splitlines()[-1].rsplit(" went to ", 1)[1]
    try:
        assert json.loads(open(saved).read())["params"]["failed_stage"] == "arp"
    finally:
        os.unlink(saved)


def test_a_stage_the_watchdog_stopped_is_named_and_the_next_stages_run(capsys, monkeypatch,
                                                                      tmp_path):
    """A stage stopped as stuck (a stopped worker, or one the load starved)
    does not end `all`: the stages after it run, its seed says it was not
    measured and why, and the run exits 1 naming it."""
    from smpnet.errors import Stalled

    ran = []

    def stalls_in_locks(e, cpus, quick, warnings, profile):
        ran.append(e.name)
        if e.name == "locks":
            raise Stalled(0, 0, 1234, "stopped", 7.0, 10.7)
        return {"params": {"stage": e.name}, "results": [], "verdicts": []}

    monkeypatch.setattr(run_all, "_stage", stalls_in_locks)
    out = tmp_path / "all.json"
    assert main(["all", "--quick", "--output", str(out)]) == 1
    assert ran == STAGES
    why = ("emulated CPU 0 (real CPU 0, pid 1234) made no progress: stopped, 10.7 s into a run "
           "expected to take 7.0 s; run stopped")
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"smpnet-bench all: stage locks failed: {why}"
    env = json.loads(out.read_text())
    stages = {s["stage"]: s for s in env["results"]}
    assert list(stages) == STAGES and stages["locks"]["failed"] == why
    assert stages["locks"]["results"] == [] and stages["arp"]["params"] == {"stage": "arp"}
    assert f"locks failed: {why}" in env["warnings"]
    assert {v["seed"]: v["verdict"] for v in env["verdicts"]}["003"] == \
        "not measured (locks failed)"


def test_interrupted_before_any_stage_finished_leaves_output_as_it_was(capsys, monkeypatch,
                                                                      tmp_path):
    from smpnet.errors import Interrupted

    def interrupted(*a, **k):
        raise Interrupted("interrupted: workers stopped")

    monkeypatch.setattr(run_all, "_stage", interrupted)
    out = tmp_path / "all.json"
    out.write_text("an earlier result\n")
    assert main(["all", "--quick", "--output", str(out)]) == 130
    assert out.read_text() == "an earlier result\n"
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "smpnet-bench: stage info failed: interrupted: workers stopped"


def test_an_interrupt_lost_in_a_stage_ends_all_before_the_next(capsys, monkeypatch, tmp_path):
    from smpnet.machine import process

    ran = []

    def lost_in_first(e, cpus, quick, warnings, profile):
        ran.append(e.name)
        process.interrupted.append(2)   # SIGINT taken; its KeyboardInterrupt was lost
        return {"params": {}, "results": [], "verdicts": []}

    monkeypatch.setattr(run_all, "_stage", lost_in_first)
    out = tmp_path / "all.json"
    assert main(["all", "--quick", "--output", str(out)]) == 130
    assert ran == STAGES[:1]     # no stage after the one the signal came in
    assert [s["stage"] for s in json.loads(out.read_text())["results"]] == STAGES[:1]


def test_a_home_matplotlib_cannot_write_gives_no_warning_and_no_stray_directory(tmp_path):
    """matplotlib's fallback for an unwritable ~/.config printed two warning
    lines and made a /tmp/matplotlib-* per run that os._exit never removes:
    smpnet gives it its own directory in TMPDIR, one per user, reused."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    env.update(HOME="/proc/1", TMPDIR=str(tmp_path))   # no .config under /proc, even for root
    cmd = [sys.executable, "-m", "smpnet", "locks", "--cpus", "0", "--algo", "tas", "--variant",
           "plain", "--rounds", "2", "--loops", "1000", "--plot", str(tmp_path / "pics")]
    for _ in range(2):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert [x for x in r.stderr.splitlines() if not x.startswith("smpnet-bench locks: [")] == []
    assert (tmp_path / "pics" / "locks.png").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir() if "matplotlib" in p.name) == [
        f"smpnet-matplotlib-{os.getuid()}"]
