"""smpnet-bench all and compare."""
import json

import pytest

from smpnet.cli import main

STAGES = ["info", "locks", "contended", "defer", "loopback", "arp"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One `all --quick --plot`, shared by the tests below (it takes seconds)."""
    d = tmp_path_factory.mktemp("all")
    out, plots = d / "all.json", d / "plots"
    rc = main(["all", "--quick", "--output", str(out), "--plot", str(plots)])
    return rc, json.loads(out.read_text()), plots


def test_all_quick_has_every_stage_and_a_verdict_per_seed(quick_run, allowed):
    rc, env, _ = quick_run
    assert rc == 0 and env["command"] == "all" and env["schema"] == 1
    assert [s["stage"] for s in env["results"]] == STAGES
    for stage in env["results"]:
        assert "params" in stage and "results" in stage
        if stage["stage"] in ("defer", "arp") and len(allowed) < 2:
            assert stage["skipped"]
        else:
            assert stage["results"], stage["stage"]
    assert [v["seed"] for v in env["verdicts"]] == ["000", "002", "003"]
    for v in env["verdicts"]:
        assert v["verdict"] in ("reproduced", "not reproduced", "no measurable difference",
                                "not measured")
        assert v["original_machine"] and v["reference"]


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
    assert "pip install 'smpnet[plot]'" in err and len(err.strip().splitlines()) == 1


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
    rows = out["rows"]
    tests = {r["key"]["test"] for r in rows}
    assert {"spin_lock_unlock_irq", "spin_lock_unlock_irqsave", "for_loop"} <= tests
    for r in rows:
        assert r["ratio"] == pytest.approx(r["b"] / r["a"])
        assert r["significant"] in (True, False)
    assert main(["compare", str(a), str(a)]) == 0   # a run against itself
    text = capsys.readouterr().out
    assert "beyond noise" in text and "1.000" in text


def test_compare_a_run_with_itself_finds_no_difference(capsys, two_lock_runs):
    a, _ = two_lock_runs
    capsys.readouterr()
    assert main(["compare", str(a), str(a), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
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
