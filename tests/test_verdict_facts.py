"""The machine fact behind each verdict's size (verdict_facts.py), built
from synthetic rows: what is asserted is what the verdicts and reports say,
never a timing."""
import gzip

import pytest

from smpnet import run_all
from smpnet.experiments import locks
from smpnet.experiments.common import lockbench, lockpairs
from smpnet.experiments.loopback import seed002
from smpnet.measure import verdict_facts
from smpnet.report import plaintext, report
from smpnet.seeds import SEED_002, SEED_002_STORM


def suite_rows(per_op, spread=0.2):
    """Rows of the uncontended suite on qspinlock, 12 rounds each: test ->
    cycles per op; each round a little off (k % 3 * spread), so intervals
    are not a point."""
    return [{"test": test, "algo": "qspinlock", "cycles": c, "samples":
             [c + spread * (k % 3) for k in range(12)]} for test, c in per_op.items()]


def seed_003(with_control=True):
    per_op = {"spin_lock_unlock_irqsave": 20.4, "spin_lock_unlock_irq": 20.0,
              lockbench.AA: 20.0}
    if with_control:
        per_op[lockbench.CONTROL] = 20.0
    rows = suite_rows(per_op)
    lockpairs.derived(rows)
    return lockpairs.seed_003_verdict(rows, "qspinlock")


# ------------------------------------------------------------------ seed 003

def test_seed_003_names_this_cpus_pushf_cost_and_the_seeds_cpu(monkeypatch):
    monkeypatch.setattr(verdict_facts.sysinfo, "cpu_model", lambda: "Test CPU 9000")
    v = seed_003()
    fact = v["machine_fact"]
    assert fact["fact"] == "pushf_pop" and fact["cpu"] == "Test CPU 9000"
    # this CPU's figure is the control's irqsave - control, its interval with it
    assert fact["cycles"] == v["pushf_control"]["pushf_pop_cycles"] == pytest.approx(0.4)
    assert fact["interval"] == v["pushf_control"]["pushf_pop_interval"]
    assert (fact["seed_cpu"], fact["seed_cycles"]) == ("E5-1650 v4 @ 3.60GHz", 14.0)
    assert v["verdict"] == "smaller than the seed's"
    text = "\n".join(report.verdict_lines(v))
    lo, hi = fact["interval"]
    assert (f"this CPU's flags save (pushf; pop) costs 0.40 [{lo:.2f} .. {hi:.2f}] cycles "
            f"(Test CPU 9000) against the seed's 14 on the E5-1650 v4 @ 3.60GHz") in text
    # locks' own report prints it with the verdict
    env = {"params": locks.plan([0], True).record(), "results": [], "verdicts": [v]}
    assert "flags save (pushf; pop) costs 0.40" in locks.text(env, {})


def test_seed_003_without_irqsaves_control_says_the_cost_was_not_measured():
    v = seed_003(with_control=False)
    assert v["machine_fact"]["cycles"] is None
    line = report.fact_line(v)
    assert "not measured" in line and "the seed's 14 on the E5-1650 v4" in line


# ------------------------------------------------------------------ seed 002

def gain_verdict(transaction_cycles=1700.0):
    return dict(SEED_002, measured=4.0, interval=[3.0, 5.0], verdict="reproduced", pairs=6,
                size_ratio=[0.8, 0.6, 1.0],
                breakdown={"transaction_cycles": transaction_cycles, "saved_cycles": None})


PROFILE = {"tcp_rr": {"same-cpu": {"cycles": 13500.0, "cycles_lo": 13200.0,
                                   "cycles_hi": 13800.0, "us": 5.2}},
           "machine": {"cpu_model": "Test CPU 9000"}, "created": "2026-12-01T10:00:00+0000"}


def test_seed_002_names_the_kernels_transaction_cost_that_was_charged():
    v, storm = gain_verdict(), dict(SEED_002_STORM, measured=40, interval=None)
    v["calibration"] = {"kernel_cycles": 13500.0, "model_cycles": 1650.0}
    seed002.name_the_cost([v, storm], PROFILE)
    assert "machine_fact" not in storm     # the overflow's size is the stack's, not a cost
    fact = v["machine_fact"]
    assert fact["charged"] and fact["cycles"] == 13500.0 and fact["interval"] == [13200, 13800]
    assert fact["model_cycles"] == 1650.0     # the sizing run's, not the calibrated transaction's
    line = report.fact_line(v)
    assert "costs 13,500 [13,200 .. 13,800] cycles (5.2 us) a transaction" in line
    assert "measured in this run" in line and "Test CPU 9000" in line
    assert "Eric Dumazet's machine (2008)" in line and "its cost not given" in line
    # a saved profile says where it came from and when it was measured
    seed002.name_the_cost([v], dict(PROFILE, source="/tmp/here.json"))
    assert "the profile /tmp/here.json, measured 2026-12-01" in report.fact_line(v)


def test_seed_002_says_when_no_profile_was_charged():
    v = gain_verdict(1712.4)
    seed002.name_the_cost([v], None)
    assert not v["machine_fact"]["charged"] and v["machine_fact"]["model_cycles"] == 1712.4
    line = report.fact_line(v)
    assert "no calibration profile was charged" in line and "1,712 cycles measured here" in line


# ------------------------------------------------------------------ seed 000

@pytest.mark.parametrize("phase, means", [("tick", "just after a tick boundary"),
                                          ("uniform", "at a random point of a tick")])
def test_seed_000_names_the_hz_and_the_tick_phase(phase, means):
    line = verdict_facts.line(verdict_facts.tick(250, phase, 0.987))
    assert f"HZ=250 (a 4 ms tick), phase {phase}: each ping sent {means}" in line
    assert "median 0.99 tick, measured" in line
    assert "the seed's: HZ=100, first ping 9.91 ms" in line


# ------------------------------------------------------------------ all's table

def table_verdicts():
    v003 = dict(seed_003(), stage="locks", original_machine="E5-1650 v4 @ 3.60GHz, time_bench")
    v002 = dict(gain_verdict(), stage="loopback", original_machine="tbench (2008)")
    seed002.name_the_cost([v002], PROFILE)
    v000 = {"seed": "000", "stage": "arp", "original_machine": "HZ=100 (2011)", "measured": 9.9,
            "interval": [9.8, 10.0], "unit": "ms", "verdict": "reproduced", "kind": "model",
            "size_ratio": [1.0, 1.0, 1.0], "machine_fact": verdict_facts.tick(100, "tick", 0.99)}
    return [v000, v002, v003]


def all_env(verdicts, warnings=()):
    return {"params": {"quick": True, "cpus": "0-1"}, "results": [], "verdicts": verdicts,
            "warnings": list(warnings),
            "machine": {"cpu_model": "Test CPU 9000", "arch": "x86_64", "kernel": "6.18",
                        "selected_cpus": [0, 1], "hypervisor": None}}


def test_all_says_each_seeds_machine_fact_under_the_table_within_80_columns_by_mail():
    env = all_env(table_verdicts())
    text = run_all.text(env, [])
    table_end = text.index("What sets each size here")
    for seed, words in (("000", "HZ=100 (a 10 ms tick), phase tick"),
                        ("002", "costs 13,500 [13,200 .. 13,800] cycles"),
                        ("003", "flags save (pushf; pop) costs 0.40")):
        assert f"  seed {seed}: " in text[table_end:] and words in text[table_end:]
    with plaintext.narrow():
        mail = plaintext.render(run_all.text(env, []), env["machine"])
    assert max(len(line) for line in mail.splitlines()) <= plaintext.EMAIL_WIDTH
    assert "flags save (pushf;" in mail


def test_a_stages_note_on_a_seed_goes_under_that_seeds_fact():
    """The kernel stage's referee row: its line under seed 003, after the
    seed's own fact, and within 80 columns by mail."""
    from smpnet.experiments.kernel import referee_text
    row = {"test": "spin_lock_pair", "cpus": "1", "algo": "pvqspinlock",
           "kernel_build": "x86-preempt", "kernel_cycles": 48.33, "kernel_cycles_lo": 47.96,
           "kernel_cycles_hi": 52.37, "model_cycles": 46.1, "model_over_kernel": 0.955,
           "model_over_kernel_lo": 0.937, "model_over_kernel_hi": 0.958}
    note = referee_text.seed_003_note([dict(row, contended=True,
                                            test="spin_lock_pair_contended"), row])
    assert "48.3 [48.0 .. 52.4] cycles" in note and "0.955 [0.937 .. 0.958]" in note
    assert referee_text.seed_003_note([]) is None
    env = all_env(table_verdicts())
    env["results"] = [{"stage": "kernel", "seed_notes": {"003": note}},
                      {"stage": "other", "seed_notes": {"000": "a word on 000"}}]
    text = run_all.text(env, [])
    below = text[text.index("What sets each size here"):].splitlines()
    own = next(i for i, x in enumerate(below) if "flags save (pushf; pop)" in x)
    assert below[own + 1] == f"  seed 003: {note}"
    own = next(i for i, x in enumerate(below) if "HZ=100 (a 10 ms tick)" in x)
    assert below[own + 1] == "  seed 000: a word on 000"
    with plaintext.narrow():
        mail = plaintext.render(text, env["machine"])
    assert max(len(line) for line in mail.splitlines()) <= plaintext.EMAIL_WIDTH


def test_seed_003_names_the_entry_points_this_hosts_kernel_calls(tmp_path, monkeypatch):
    """From a kernel config: on a PREEMPTION build (no INLINE_SPIN_*), all
    four of the seed's entry points are calls; with INLINE_SPIN_UNLOCK_IRQ
    (a build without PREEMPTION), spin_unlock_irq is inline; without any
    readable config the fact says the build is not known."""
    from smpnet.machine import kernel_build
    (tmp_path / "proc").mkdir()
    for config, calls in (("CONFIG_PREEMPTION=y\nCONFIG_UNINLINE_SPIN_UNLOCK=y\n",
                           list(verdict_facts.SEED_003_ENTRY_POINTS)),
                          ("# CONFIG_PREEMPTION is not set\nCONFIG_INLINE_SPIN_UNLOCK_IRQ=y\n",
                           ["spin_lock_irqsave", "spin_unlock_irqrestore", "spin_lock_irq"])):
        with gzip.open(tmp_path / "proc" / "config.gz", "wt") as f:
            f.write(config)
        build = kernel_build.kernel_build(str(tmp_path))
        assert build["source"] == "/proc/config.gz"
        assert ("spin_unlock" in build["calls"]) == ("UNINLINE_SPIN_UNLOCK=y" in config)
        fact = verdict_facts.pushf_pop(None, "Test CPU", build)
        assert fact["host_calls"] == calls
        assert (f"this host's kernel (/proc/config.gz) calls {', '.join(calls)} out of line"
                in verdict_facts.line(fact))
    (tmp_path / "proc" / "config.gz").unlink()
    build = kernel_build.kernel_build(str(tmp_path), release="no-such-release")
    assert build["source"] is None and build["calls"] is None
    fact = verdict_facts.pushf_pop(None, "Test CPU", build)
    assert fact["host_calls"] is None and "build is not known" in verdict_facts.line(fact)
