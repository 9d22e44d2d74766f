"""smpnet.load: the arithmetic on made-up counters, exactly, and one real
competitor on a real CPU (a lower bound only, no timing)."""
import collections
import dataclasses
import json
import os
import subprocess
import sys
import time
import types

import psutil
import pytest

from smpnet import run_all
from smpnet.experiment import Outcome
from smpnet.machine import load
from smpnet.machine.machine import Machine as SmpMachine
from smpnet.report import report

# psutil's per-CPU times on Linux, and on a platform without steal
Times = collections.namedtuple(
    "scputimes", "user nice system idle iowait irq softirq steal guest guest_nice")
NoSteal = collections.namedtuple("scputimes", "user nice system idle")


def idle(seconds, **busy):
    """One CPU's counters after `seconds` of which `busy` were not idle."""
    fields = dict.fromkeys(Times._fields, 0.0)
    fields.update(busy)
    not_idle = sum(v for k, v in busy.items() if k not in ("guest", "guest_nice"))
    fields["idle"] = seconds - not_idle
    return Times(**fields)


class Machine:
    """Made-up counters standing in for psutil, os and time inside load."""

    def __init__(self, monkeypatch, online=None):
        self.rows, self.tree, self.clock = [], 0.0, 100.0
        self.online = online
        monkeypatch.setattr(load, "psutil", types.SimpleNamespace(cpu_times=self.cpu_times))
        monkeypatch.setattr(load, "os", types.SimpleNamespace(times=self.times))
        monkeypatch.setattr(load, "time", types.SimpleNamespace(monotonic=lambda: self.clock))
        monkeypatch.setattr(load, "_read_cpulist",
                            lambda root, path: list(self.online or range(len(self.rows))))

    def cpu_times(self, percpu):
        assert percpu
        return list(self.rows)

    def times(self):
        # a third of the tree's time is this process's, the rest reaped children's
        return os.times_result((self.tree / 3, 0.0, self.tree / 3, self.tree / 3, 0.0))

    def run(self, cpus, seconds, rows, tree=0.0):
        """start, `seconds` pass with each CPU's counters growing by `rows`, finish."""
        self.rows = [idle(50.0) for _ in rows]
        sample = load.start(cpus)
        self.clock += seconds
        self.tree += tree
        self.rows = [Times(*(a + b for a, b in zip(before, grown)))
                     for before, grown in zip(self.rows, rows)]
        return load.finish(sample)


def test_an_idle_machine_has_no_load(monkeypatch):
    facts = Machine(monkeypatch).run([0, 1], 2.0, [idle(2.0), idle(2.0)])
    assert facts == {
        "cpus": [0, 1], "seconds": 2.0, "busy_share": 0.0, "others_share": 0.0,
        "steal_share": 0.0, "steal_known": True, "threshold": load.HIGH_SHARE,
        "resolution_share": pytest.approx(2 * load.TICK_S * 3 / 4.0),   # 2 ticks x 3, of 4 s
        "high": False, "why": None,
    }


def test_busy_time_less_the_trees_own_is_the_others_share(monkeypatch):
    # 0.4 s busy on CPU 0 in 1 s over 2 CPUs, of which 0.1 s was this tree's
    facts = Machine(monkeypatch).run(
        [0, 1], 1.0, [idle(1.0, user=0.25, system=0.1, irq=0.02, softirq=0.03), idle(1.0)],
        tree=0.1)
    assert facts["busy_share"] == pytest.approx(0.4 / 2)
    assert facts["others_share"] == pytest.approx(0.3 / 2)
    assert facts["steal_share"] == 0.0
    assert facts["high"] is True
    assert facts["why"] == "other processes used 15 % of CPUs 0-1 during the run"


def test_the_tree_includes_reaped_children(monkeypatch):
    # all of the busy time is the tree's, two thirds of it reaped children's
    facts = Machine(monkeypatch).run([0], 1.0, [idle(1.0, user=0.6)], tree=0.6)
    assert facts["busy_share"] == pytest.approx(0.6)
    assert facts["others_share"] == pytest.approx(0.0)
    assert facts["high"] is False


def test_steal_is_its_own_share_and_not_busy(monkeypatch):
    facts = Machine(monkeypatch).run(
        [0, 1], 1.0, [idle(1.0, steal=0.2), idle(1.0, steal=0.04)])
    assert facts["steal_share"] == pytest.approx(0.24 / 2)
    assert facts["busy_share"] == 0.0 and facts["others_share"] == 0.0
    assert facts["high"] is True
    assert facts["why"] == "the hypervisor stole 12 % of CPUs 0-1 during the run"


def test_both_reasons_are_given(monkeypatch):
    facts = Machine(monkeypatch).run([1], 1.0, [idle(1.0), idle(1.0, user=0.5, steal=0.3)])
    assert facts["why"] == ("other processes used 50 % of CPU 1 during the run; "
                            "the hypervisor stole 30 % of CPU 1 during the run")


def test_the_others_share_is_clamped_at_zero(monkeypatch):
    # the tree ran 0.5 s, mostly outside the selected CPU, which was busy 0.2 s
    facts = Machine(monkeypatch).run([0], 1.0, [idle(1.0, user=0.2), idle(1.0, user=0.3)],
                                     tree=0.5)
    assert facts["others_share"] == 0.0
    assert facts["busy_share"] == pytest.approx(0.2)


def test_cpus_outside_the_selection_are_ignored(monkeypatch):
    facts = Machine(monkeypatch).run(
        [0, 1], 1.0, [idle(1.0), idle(1.0), idle(1.0, user=1.0), idle(1.0, steal=1.0)])
    assert facts["cpus"] == [0, 1]
    assert facts["busy_share"] == facts["others_share"] == facts["steal_share"] == 0.0


def test_guest_time_is_not_counted_twice(monkeypatch):
    # the kernel counts a guest's time in user (and guest_nice in nice) as well
    facts = Machine(monkeypatch).run(
        [0], 1.0, [idle(1.0, user=0.3, guest=0.3, nice=0.1, guest_nice=0.1)])
    assert facts["busy_share"] == pytest.approx(0.4)


def test_with_a_cpu_offline_the_rows_follow_the_online_list(monkeypatch):
    # /proc/stat lists CPUs 0, 2 and 3: the second row is CPU 2
    machine = Machine(monkeypatch, online=[0, 2, 3])
    facts = machine.run([2], 1.0, [idle(1.0), idle(1.0, user=0.7), idle(1.0, user=0.1)])
    assert facts["cpus"] == [2]
    assert facts["others_share"] == pytest.approx(0.7)


def test_a_cpu_missing_from_the_counters_is_left_out(monkeypatch):
    facts = Machine(monkeypatch).run([0, 5], 1.0, [idle(1.0, user=0.2)])
    assert facts["cpus"] == [0]
    assert facts["others_share"] == pytest.approx(0.2)


def test_what_the_tick_counting_alone_can_give_is_not_load(monkeypatch):
    """Three ticks of others over a 50 ms run on two CPUs is 30 % of their
    time and within what counting in ticks can put there (two a CPU and two
    for the tree: 60 %); the same 30 % over 10 s is load."""
    tick = load.TICK_S
    short = Machine(monkeypatch).run([0, 1], 0.05, [idle(0.05, user=3 * tick), idle(0.05)])
    assert short["others_share"] == pytest.approx(3 * tick / 0.1)
    assert short["resolution_share"] == pytest.approx(6 * tick / 0.1)
    assert short["high"] is False and short["why"] is None
    long = Machine(monkeypatch).run([0, 1], 10.0, [idle(10.0, user=6.0), idle(10.0)])
    assert long["others_share"] == pytest.approx(0.3) and long["high"] is True
    assert "other processes used 30 % of CPUs 0-1" in long["why"]


def test_at_the_threshold_is_not_high(monkeypatch):
    facts = Machine(monkeypatch).run([0], 1.0, [idle(1.0, user=load.HIGH_SHARE)])
    assert facts["others_share"] == load.HIGH_SHARE
    assert facts["high"] is False and facts["why"] is None


def test_no_steal_field_counts_as_none_and_says_so(monkeypatch):
    machine = Machine(monkeypatch)
    machine.rows = [NoSteal(1.0, 0.0, 0.0, 9.0)]
    sample = load.start([0])
    machine.clock += 1.0
    machine.rows = [NoSteal(1.5, 0.0, 0.1, 9.4)]
    facts = load.finish(sample)
    assert facts["steal_known"] is False and facts["steal_share"] == 0.0
    assert facts["others_share"] == pytest.approx(0.6)


def test_a_share_is_at_most_all_of_the_time(monkeypatch):
    # counted in whole ticks, a CPU can show a tick more than the wall time
    facts = Machine(monkeypatch).run([0], 1.0, [idle(1.0, user=1.01, steal=1.01)])
    assert facts["busy_share"] == facts["others_share"] == facts["steal_share"] == 1.0


def test_no_time_passing_gives_zero_shares(monkeypatch):
    facts = Machine(monkeypatch).run([0], 0.0, [idle(0.0)])
    assert facts["seconds"] == 0.0 and facts["others_share"] == 0.0 and not facts["high"]


def test_no_cpus_is_refused():
    with pytest.raises(ValueError):
        load.start([])


# The spinner must run this much CPU time on the selected CPU between the
# samples; the test waits for it rather than for a wall time, so a loaded
# machine only makes the test slower.
SPIN_SECONDS = 0.5


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_a_busy_process_on_the_selected_cpu_is_seen():
    cpu = max(os.sched_getaffinity(0))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        # Pinned from here rather than in preexec_fn, which is unsafe with
        # threads about (numpy's); until start() it may run anywhere.
        os.sched_setaffinity(spinner.pid, {cpu})
        sample = load.start([cpu])
        spun = psutil.Process(spinner.pid)
        before = sum(spun.cpu_times()[:2])
        deadline = time.monotonic() + 120
        while sum(spun.cpu_times()[:2]) - before < SPIN_SECONDS:
            assert time.monotonic() < deadline, "the spinner got no CPU time"
            time.sleep(0.05)
        # Still alive, so not in this tree's reaped children's time: another process.
        facts = load.finish(sample)
    finally:
        spinner.kill()
        spinner.wait()
    others = facts["others_share"] * facts["seconds"]  # CPU seconds on that one CPU
    print("\nspinner on CPU %d: %r, others %.3f CPU s" % (cpu, facts, others))
    # The spinner alone ran 0.5 s on that CPU; this process, which mostly
    # slept, would have to use 0.4 s of CPU to bring the others below 0.1 s.
    assert facts["cpus"] == [cpu]
    assert others > 0.1
    assert facts["others_share"] > 0


def test_a_high_load_is_recorded_and_said_on_the_verdict(monkeypatch, capsys):
    # the sample around the run (faked here: what it says, not how it is
    # measured) reaches every verdict, the warnings and the verdict's text
    from smpnet.cli import main

    seen = {"cpus": [0], "seconds": 1.0, "busy_share": 0.9, "others_share": 0.4,
            "steal_share": 0.0, "steal_known": True, "threshold": load.HIGH_SHARE,
            "high": True, "why": "other processes used 40 % of CPU 0 during the run"}
    monkeypatch.setattr(load, "finish", lambda sample: seen)
    assert main(["locks", "--json", "--rounds", "12", "--loops", "1000",
                 "--variant", "irq,irqsave"]) == 0
    env = json.loads(capsys.readouterr().out)
    (v,) = env["verdicts"]
    assert {k: v["load"][k] for k in seen} == seen
    assert v["load"]["runs"]["count"] >= 1     # the machine's run, sampled on its own
    assert any("competing load" in w and "40 %" in w for w in env["warnings"])
    assert main(["locks", "--rounds", "12", "--loops", "1000", "--variant", "irq,irqsave"]) == 0
    assert "WARNING: competing load: other processes used 40 %" in capsys.readouterr().out


# ------------------------------------------------------------------ in `all`: every stage, every run
# A stage whose A/A control found a difference says the load on its CPUs,
# whatever its size (faked here: what is said, not how it is measured).

LOW = {"cpus": [0, 1], "seconds": 1.0, "busy_share": 0.04, "others_share": 0.03,
       "steal_share": 0.0, "steal_known": True, "threshold": load.HIGH_SHARE, "high": False,
       "why": None}


def fake_stage(control_reliable, name="loopback"):
    """An experiment whose one verdict's A/A control did or did not find a
    difference."""
    def run(cpus, p, progress):
        c = {"sides": "a against a", "measured": 1.0, "interval": [0.5, 1.5],
             "verdict": "no measurable difference" if control_reliable else "difference found",
             "reliable": control_reliable}
        return Outcome(p, [{"x": 1}], [{"seed": "002", "control": c}])
    e = next(e for e in run_all.stages() if e.name == name)
    return dataclasses.replace(e, run=run, calibrates=None, calibrated=False, min_cpus=1)


def test_a_stage_whose_control_found_a_difference_says_its_load_even_when_low(monkeypatch):
    monkeypatch.setattr(load, "finish", lambda sample: dict(LOW))
    warnings = []
    stage = run_all._stage(fake_stage(False), [0, 1], True, warnings, None)
    assert stage["load"]["others_share"] == 0.03 and not stage["load"]["high"]
    (line,) = [w for w in warnings if "A/A control" in w]
    assert line.startswith("loopback: A/A control found a difference (difference found); "
                           "load on CPUs 0-1 during the stage: others 3 %, steal 0 %")
    # and the verdict's own lines say it, though the load was under the threshold
    (v,) = stage["verdicts"]
    v.update(seed="002", claim="c", reference="r", unit="%", measured=1.0, interval=[0.5, 1.5],
             verdict="reproduced")
    assert "  load on CPUs 0-1 during the run: others 3 %, steal 0 %" in report.verdict_lines(v)


def test_a_high_load_on_a_stage_without_verdicts_is_said(monkeypatch):
    # the kernel stage gives no verdict, but the later stages charge its figures
    high = dict(LOW, steal_share=0.24, high=True,
                why="the hypervisor stole 24 % of CPUs 0-1 during the run")
    monkeypatch.setattr(load, "finish", lambda sample: dict(high))
    warnings = []
    e = dataclasses.replace(fake_stage(True, "kernel"),
                            run=lambda cpus, p, progress: Outcome(p, [{"x": 1}], []))
    stage = run_all._stage(e, [0, 1], True, warnings, None)
    assert stage["load"]["high"]
    assert warnings == ["kernel: competing load during the run: the hypervisor stole 24 % of "
                        "CPUs 0-1 during the run; its figures are less reliable"]


def test_a_clean_control_with_low_load_adds_no_load_line(monkeypatch):
    monkeypatch.setattr(load, "finish", lambda sample: dict(LOW))
    warnings = []
    stage = run_all._stage(fake_stage(True), [0, 1], True, warnings, None)
    assert "load" in stage and warnings == []


def test_every_stage_of_all_is_sampled(monkeypatch, allowed):
    seen = []
    monkeypatch.setattr(load, "finish", lambda sample: seen.append(sample.cpus) or dict(LOW))
    monkeypatch.setattr(run_all, "stages", lambda: [
        dataclasses.replace(e, run=lambda cpus, p, progress: Outcome(p, [], []),
                            calibrates=None, calibrated=False, min_cpus=1)
        for e in STAGES])
    done, _, _ = run_all.run([allowed[0]], quick=True, progress=False)
    assert list(done) == [e.name for e in STAGES]
    # one sample of the selected CPUs around each stage, recorded in it
    assert seen == [(allowed[0],)] * len(STAGES)
    assert all(stage["load"]["others_share"] == 0.03 and stage["load"]["runs"]["count"] == 0
               for stage in done.values())


STAGES = run_all.stages()


def test_all_says_the_load_beside_a_seed_whose_control_found_a_difference():
    control = {"sides": "irq against irq", "measured": 1.0, "interval": [0.5, 1.5],
               "verdict": "difference found", "reliable": False}
    v = {"seed": "003", "stage": "locks", "original_machine": "E5-1650 v4", "measured": 1.0,
         "interval": [0.5, 1.5], "unit": "cycles", "verdict": "reproduced", "control": control,
         "load": dict(LOW, runs=load.runs_summary([dict(LOW, others_share=0.2)]))}
    text = run_all.text({"params": {"quick": True, "cpus": "0-1"}, "results": [],
                         "verdicts": [v], "warnings": []}, [])
    assert ("seed 003 (locks): load on CPUs 0-1 during the stage: others 3 %, steal 0 % "
            "(sampled run by run, 1 run; the most in one: others 20 %, steal 0 %)") in text


def _nothing(ctx):
    return ctx.cpu


def test_every_run_of_a_machine_is_sampled_inside_a_stage(allowed):
    def two_runs():
        with SmpMachine(cpus=allowed[:1]) as m:
            m.run(_nothing)
            m.run(_nothing)
        return "done"

    out, seen = load.around(allowed[:1], two_runs)
    assert out == "done" and seen["runs"]["count"] == 2
    assert 0 <= seen["runs"]["others_share_max"] <= 1
    with SmpMachine(cpus=allowed[:1]) as m:   # outside a stage no run is sampled
        assert load.run_started(m.real_cpus) is None
    assert "(sampled run by run, 2 runs; the most in one: others" in load.describe(seen)
