"""The `locks` command: the time_bench suite's rows and JSON, kernel builds,
the contended runs, seed 003's verdict, bad input. The locks themselves:
test_locks.py."""
import json
import re

import numpy as np
import pytest

from conftest import X86, reaches
from lock_helpers import is_free, lock_machine, region
from smpnet import Machine, _core
from smpnet.cli import main
from smpnet.experiments import contended
from smpnet.experiments.common import lockbench as locks, lockpairs, locktext
from smpnet.machine import layout
from smpnet.machine.tsc import tsc_hz
from smpnet.measure import stats, time_bench

ALGOS = locks.ALGOS


def _blocks(a, b, op):
    """op over blocks of two rounds (A B, then B A), as lockpairs.paired pairs them."""
    return [op(a[k] + a[k + 1], b[k] + b[k + 1]) for k in range(0, len(a) - 1, 2)]


def test_locks_suite_json(capsys, allowed):
    assert main(["locks", "--json", "--loops", "2000", "--rounds", "12",
                 "--algo", "qspinlock,ticket", "--check"]) == 0
    env = json.loads(capsys.readouterr().out)
    tests = [(r["test"], r["algo"]) for r in env["results"]]
    expected = []
    for test, variant in time_bench.SUITE:
        expected += [(test, None)] if variant is None else [(test, "qspinlock"), (test, "ticket")]
    for algo in ("qspinlock", "ticket"):   # the instruments, after the suite
        expected += [(locks.BASELINE, algo), (locks.CONTROL, algo), (locks.AA, algo)]
    assert tests == expected
    by = {(r["test"], r["algo"]): r for r in env["results"]}

    def diff(a, b):
        return (a - b) / 2

    for algo in ("qspinlock", "ticket"):
        # what pairs rounds is computed from the blocks of two rounds: smpnet /
        # bare, irqsave - control, control - irq, each their median
        smp, ref = by["spin_lock_unlock", algo], by[locks.BASELINE, algo]
        assert smp["bare_cycles"] == ref["cycles"]
        assert smp["harness_overhead"] == pytest.approx(
            np.median(_blocks(smp["samples"], ref["samples"], lambda a, b: a / b)))
        lo, hi = smp["harness_overhead_interval"]
        assert lo <= smp["harness_overhead"] <= hi
        ctl = by[locks.CONTROL, algo]
        for key, a, b in (("pushf_pop", "spin_lock_unlock_irqsave", locks.CONTROL),
                          ("control_minus_irq", locks.CONTROL, "spin_lock_unlock_irq")):
            assert ctl[f"{key}_cycles"] == pytest.approx(np.median(
                _blocks(by[a, algo]["samples"], by[b, algo]["samples"], diff)))
    for r in env["results"]:
        assert {"test", "algo", "variant", "restore", "cpus", "contended", "cycles",
                "cycles_min", "cycles_max", "ns", "loops", "rounds"} <= set(r)
        assert r["loops"] == 2000 and r["rounds"] == 12 and not r["contended"]
        assert r["cycles_min"] <= r["cycles"] <= r["cycles_max"]
    (v,) = env["verdicts"]
    assert v["seed"] == "003" and v["algo"] == "qspinlock" and v["pairs"] == 6
    assert v["kind"] == "measured" and v["size"] == 14.0 and v["unit"] == "cycles"
    lo, hi = v["interval"]
    assert lo <= v["measured"] <= hi
    assert v["verdict"] == stats.verdict(v["interval"], 14.0)
    q = {t: by[t, "qspinlock"]["samples"] for t in ("spin_lock_unlock_irqsave",
                                                     "spin_lock_unlock_irq", locks.AA)}
    assert v["measured"] == pytest.approx(np.median(
        _blocks(q["spin_lock_unlock_irqsave"], q["spin_lock_unlock_irq"], diff)))
    assert v["control"]["measured"] == pytest.approx(np.median(
        _blocks(q[locks.AA], q["spin_lock_unlock_irq"], diff)))
    assert v["control"]["sides"] == "irq against irq"
    assert v["pushf_control"]["pushf_pop_cycles"] == \
        by[locks.CONTROL, "qspinlock"]["pushf_pop_cycles"]
    assert env["params"]["checker_reports"] == {}


@pytest.mark.skipif(not X86, reason="the x86 flags save, pushf")
def test_the_flags_save_is_a_real_pushf_in_every_loop_that_saves(core_functions):
    """Seed 003's cost is an instruction, not a counter: every time_bench
    loop of irqsave and irqsave_before_lock, on every algorithm, kernel
    build, checker on or off, popf or sti, runs a pushf (inline, or in the
    out-of-line entry point it calls); the loops that save no flags (plain,
    bh, irq, irq_disable_before_lock) and irqsave's control (NOPUSHF) run
    none."""
    loops = {f for f in core_functions if f.startswith("tb_lock_loop_")}
    saving = {f for f in loops if re.match(r"tb_lock_loop_VARIANT_IRQSAVE(_BEFORE_LOCK)?_SPIN_", f)}
    # 2 variants x (kernel build, check, popf)
    assert len(saving) == 2 * len(_core.KERNEL_BUILDS) * 4 * len(_core.LOCK_ALGOS)
    pushf = {f for f in loops if reaches(core_functions, f, r"\bpushf")}
    assert pushf == saving
    assert any("NOPUSHF" in f for f in loops) and not any("NOPUSHF" in f for f in pushf)


def _rows(**samples):
    return [{"test": t, "algo": "qspinlock", "samples": s, "cycles": float(np.median(s))}
            for t, s in samples.items()]


def test_paired_figures_take_blocks_of_two_rounds():
    # irqsave - irq is the median over blocks of two rounds of the per-op
    # difference, not the difference of the medians: the rounds are paired.
    # A drift of +1 cycle a round, in A B / B A order, cancels in each block.
    irq = [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]
    irqsave = [x + 11 + (1 if k % 2 == 0 else -1) for k, x in enumerate(irq)]
    rows = _rows(spin_lock_unlock_irqsave=irqsave, spin_lock_unlock_irq=irq,
                 spin_lock_unlock_irqsave_nopushf=[x + 1 for x in irq],
                 **{locks.AA: [x + (0.5 if k % 2 else -0.5) for k, x in enumerate(irq)]},
                 spin_lock_unlock=[20] * 12, ref_spin_lock_unlock=[10] * 12)
    lockpairs.derived(rows)
    v = lockpairs.seed_003_verdict(rows, "qspinlock")
    assert v["measured"] == 11 and v["interval"] == [11, 11] and v["pairs"] == 6
    assert v["verdict"] == stats.REPRODUCED and v["size_ratio"][0] == pytest.approx(11 / 14)
    ctl = v["pushf_control"]
    assert ctl["pushf_pop_cycles"] == 10 and ctl["control_minus_irq_cycles"] == 1
    assert v["control"]["measured"] == 0 and v["control"]["reliable"]
    (smp,) = [r for r in rows if r["test"] == "spin_lock_unlock"]
    assert smp["harness_overhead"] == 2.0 and smp["bare_cycles"] == 10


def test_no_paired_figure_from_too_few_or_unequal_rounds():
    rows = _rows(spin_lock_unlock_irqsave=[30] * 10, spin_lock_unlock_irq=[20] * 10,
                 spin_lock_unlock=[20] * 12, ref_spin_lock_unlock=[10] * 11)
    lockpairs.derived(rows)
    assert lockpairs.seed_003_verdict(rows, "qspinlock") is None   # 5 blocks
    assert all("harness_overhead" not in r for r in rows)      # unequal rounds


def test_the_checker_run_says_its_figures_include_the_checker(capsys):
    assert main(["locks", "--loops", "1000", "--rounds", "12", "--variant", "plain,irq,irqsave",
                 "--check", "--kernel-build", "x86-preempt"]) == 0
    out = capsys.readouterr().out
    assert "Harness overhead" in out and "smpnet's figures include the checker" in out
    assert "irqsave - control (pushf; pop)" in out and "of which the pushf; pop" in out
    # with the checker, control - irq is not smpnet's bookkeeping alone, and says so
    assert "control - irq (smpnet's bookkeeping + the checker)" in out


@pytest.mark.parametrize("builds, held", [
    (["inline"], "smpnet's bookkeeping, ~0"),
    (["x86-preempt"], "smpnet's bookkeeping, ~0"),          # both pairs are two calls
    (["x86-nopreempt"], "smpnet's bookkeeping + the call irqsave's unlock is and irq's is not"),
    (["inline", "x86-nopreempt"],
     "smpnet's bookkeeping + the calls irqsave makes and irq does not, by build")])
def test_control_minus_irq_names_the_call_a_build_adds_to_irqsave(builds, held):
    assert locktext.control_minus_irq("sti", False, builds) == held


def test_the_locks_text_has_time_bench_lines(capsys):
    assert main(["locks", "--loops", "1000", "--rounds", "2", "--variant", "irq,irqsave"]) == 0
    out = capsys.readouterr().out
    assert "Type:spin_lock_unlock_irq Per elem: " in out and "cycles(tsc)" in out
    assert "Type:spin_lock_unlock Per elem" not in out  # plain not selected
    assert "seed 003:" in out


REFEREE = {"spin_lock_pair": {"kernel_cycles": 40.0, "kernel_cycles_lo": 39.0,
                              "kernel_cycles_hi": 41.0, "model_cycles": 38.0,
                              "model_over_kernel": 0.95, "model_over_kernel_lo": 0.94,
                              "model_over_kernel_hi": 0.96, "cpus": "1",
                              "model_test": "spin_lock_unlock_irqsave", "algo": "ticket",
                              "kernel_build": "x86-preempt"},
           "cmpxchg": {"kernel_cycles": 20.0, "kernel_cycles_lo": 19.0, "kernel_cycles_hi": 21.0,
                       "model_cycles": 19.0, "model_over_kernel": 0.95,
                       "model_over_kernel_lo": 0.9, "model_over_kernel_hi": 1.0, "cpus": "1",
                       "model_test": "cmpxchg", "algo": None, "kernel_build": "x86-preempt"}}


def test_locks_shows_a_profiles_referee_beside_its_rows_of_the_same_path():
    from smpnet.experiments import locks as locks_cmd

    def row(test, cycles, algo=None, build="inline"):
        return {"test": test, "cycles": cycles, "algo": algo, "kernel_build": build}
    rows = [row("for_loop", 1.0), row("cmpxchg", 23.0),
            row("spin_lock_unlock_irqsave", 31.0, "ticket", "inline"),   # another build
            row("spin_lock_unlock_irqsave", 51.0, "qspinlock", "x86-preempt"),  # another lock
            row("spin_lock_unlock_irqsave", 45.0, "ticket", "x86-preempt")]
    text = "\n".join(locks_cmd.referee_lines({"referee": REFEREE, "source": "/p.json",
                                              "created": "then"}, rows))
    assert "from the profile /p.json (measured then on CPU 1)" in text
    lines = {line.split()[0]: line.split() for line in text.splitlines()[3:]}
    assert lines["spin_lock_pair"][-2:] == ["44.000", "1.100"]    # (45 - 1) / 40
    assert lines["cmpxchg"][-2:] == ["22.000", "1.100"]           # (23 - 1) / 20
    assert lines["cmpxchg"][-2:] != ["not", "run"]
    # the pair with IRQs off: no row of locks runs so, whatever its test
    off = {"spin_lock_pair_irqs_off": {**REFEREE["spin_lock_pair"], "irqs_off": True}}
    text = "\n".join(locks_cmd.referee_lines({"referee": off}, rows))
    assert text.splitlines()[-1].split()[0] == "spin_lock_pair_irqs_off"
    assert text.endswith("not run")
    # a row of one test less another: this run's two rows of the path, the loop in both
    less = {"irq_save_restore_in_pair": {**REFEREE["spin_lock_pair"], "kernel_cycles": 20.0,
                                         "model_less": "spin_lock_unlock"}}
    plain = row("spin_lock_unlock", 37.0, "ticket", "x86-preempt")
    text = "\n".join(locks_cmd.referee_lines({"referee": less}, rows + [plain]))
    assert text.splitlines()[-1].split()[-6:] == [
        "spin_lock_unlock_irqsave", "less", "spin_lock_unlock", "0.950", "8.000", "0.400"]
    text = "\n".join(locks_cmd.referee_lines({"referee": less}, rows))     # plain not run
    assert text.endswith("not run")
    without = locks_cmd.referee_lines({"referee": REFEREE}, rows[1:])   # no empty loop: none
    assert all(line.endswith("not run") for line in without[-1].splitlines()[2:])
    # a contended row figured on one placement's rounds says which
    placed = {"xchg_contended": {**REFEREE["cmpxchg"], "model_test": "atomic_hammer xchg",
                                 "judged_placement": "nearer"}}
    text = "\n".join(locks_cmd.referee_lines({"referee": placed}, rows))
    assert text.splitlines()[-1].split()[-6:] == ["xchg", "0.950", "(nearer)", "-", "not", "run"]
    assert locks_cmd.referee_lines(None, rows) == []
    assert "the profile has none" in locks_cmd.referee_lines({"referee": None}, rows)[1]


def test_locks_takes_a_profile_and_refuses_a_missing_one(capsys, tmp_path, allowed):
    from smpnet.measure import calibration
    tcp = {"test": "tcp_rr", "placement": "same-cpu", "cycles": 12000.0, "cycles_lo": 11000.0,
           "cycles_hi": 13000.0, "us": 4.6}
    prof = calibration.from_kernel([tcp], {}, 2.6e9)
    prof["referee"] = REFEREE
    path = tmp_path / "p.json"
    path.write_text(calibration.dumps(prof))
    assert main(["locks", "--cpus", str(allowed[0]), "--algo", "ticket", "--variant", "irqsave",
                 "--kernel-build", "x86-preempt", "--rounds", "2", "--loops", "1000",
                 "--calibration", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Kernel as referee, from the profile " + str(path) in out
    pair = next(line for line in out.splitlines() if line.startswith("spin_lock_pair "))
    assert "not run" not in pair
    assert main(["locks", "--calibration", str(tmp_path / "none.json")]) == 2
    assert "--calibration" in capsys.readouterr().err


def test_locks_contended_json(capsys, allowed):
    assert main(["locks", "--contended", "--json", "--duration", "0.05", "--variant", "plain",
                 "--ncpus", "3", "--oversubscribe"]) == 0
    env = json.loads(capsys.readouterr().out)
    (r,) = env["results"]
    assert r["contended"] and r["algo"] == "qspinlock" and r["test"] == "spin_lock_unlock"
    assert r["mutual_exclusion"] and r["loops"] == sum(c["acquisitions"] for c in r["per_cpu"])
    assert len(r["per_cpu"]) == 3 and r["acq_per_s"] > 0
    acq = [c["acquisitions"] for c in r["per_cpu"]]
    # the median of the rounds' Jain indices; each CPU's share of the whole
    assert r["fairness"] == pytest.approx(float(np.median(r["fairness_samples"])))
    assert r["shares"] == pytest.approx([a / sum(acq) for a in acq])
    # a round's index is Jain's of what each CPU got: 1 for equal shares,
    # (300 + 100)^2 / (3 (300^2 + 100^2)) for 300, 100 and none
    figures = contended._figures
    assert figures([(100, 1000, 0)] * 3, 1e9)["fairness"] == pytest.approx(1.0)
    assert figures([(300, 1000, 0), (100, 1000, 0), (0, 1000, 0)], 1e9)["fairness"] == \
        pytest.approx(400 ** 2 / (3 * (300 ** 2 + 100 ** 2)))
    assert not r["timing_valid"]


@pytest.mark.parametrize("oversubscribe", [False, True])
def test_long_holds_end_at_the_deadline(allowed, oversubscribe):
    """A hold ends at the deadline and the deadline is read after every
    acquisition when holding: the acquisitions are what fits in the run
    (the tester saw exactly 16 per CPU, the deadline read every 16th)."""
    ncpus = 3 if oversubscribe else len(allowed)
    duration, hold_s = 0.2, 0.05
    hold = int(hold_s * tsc_hz())
    rows, _ = contended.run_contended(allowed, ["ticket"], ["plain"], duration=duration,
                                  hold_cycles=hold, ncpus=ncpus, oversubscribe=oversubscribe)
    (r,) = rows
    acq = [c["acquisitions"] for c in r["per_cpu"]]
    # holds are exclusive: at most duration / hold of them end inside the
    # run, plus each CPU's last one, cut short by the deadline
    assert sum(acq) <= duration / hold_s + ncpus
    assert r["mutual_exclusion"] and r["loops"] == sum(acq)
    assert r["fairness"] == pytest.approx(
        sum(acq) ** 2 / (len(acq) * sum(a * a for a in acq)))  # from what happened


@pytest.mark.parametrize("argv", [
    ["--algo", "rwlock"], ["--algo", ""], ["--variant", "irqsafe"], ["--algo", "tas,tas"],
    ["--algo", "tas,,ttas"], ["--variant", "plain,"],
    ["--loops", "0"], ["--loops", "x"], ["--rounds", "0"], ["--duration", "-1"],
    ["--hold-cycles", "-1"], ["--restore", "iret"], ["--ncpus", "2"],
    ["--contended", "--ncpus", "99"], ["--contended", "--ncpus", "99999", "--oversubscribe"],
    ["--contended", "--hold-cycles", "100000000000000", "--duration", "0.1"],
    # an option the run would not use is refused, not ignored
    ["--hold-cycles", "5"], ["--duration", "0.1"], ["--oversubscribe"],
    ["--contended", "--loops", "5"], ["--contended", "--rounds", "3"],
])
def test_locks_bad_input_exit_2(capsys, argv):
    assert main(["locks"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("smpnet-bench: ")


def test_a_hold_longer_than_the_run_is_refused_before_any_worker(capsys, monkeypatch):
    from smpnet.machine import machine

    def never(*a, **k):
        raise AssertionError("a machine was made")

    monkeypatch.setattr(machine.Machine, "__init__", never)
    assert main(["contended", "--hold-cycles", "10000000000", "--duration", "0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "longer than the whole 0.1 s run" in err[0]


def test_a_broken_mutual_exclusion_exits_1(capsys, monkeypatch):
    real = contended.run_contended

    def broken(*a, **k):
        rows, reports = real(*a, **k)
        return [dict(r, mutual_exclusion=False) for r in rows], reports

    monkeypatch.setattr(contended, "run_contended", broken)
    assert main(["locks", "--contended", "--duration", "0.02", "--variant", "plain",
                 "--ncpus", "2", "--oversubscribe"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("smpnet-bench locks: invariant failed: qspinlock plain: "
                              "mutual exclusion broken")


@pytest.mark.parametrize("algo", ALGOS)
def test_each_time_bench_lock_loop_is_its_algorithms_and_checks_only_when_asked(algo):
    # the lock tests run a loop compiled per (variant, algorithm, checker,
    # restore mode), chosen before the round: the one chosen takes this
    # lock's algorithm, leaves the CPU as it found it, and runs the checker
    # exactly when asked
    loops = 100
    tests = [t for t, v in time_bench.SUITE if v] + ["spin_lock_unlock_irqsave_nopushf"]

    def body(ctx):
        irq = ctx.machine.region("irq")[ctx.cpu]
        out = []
        for test in tests:
            for check in (False, True):
                for popf in (False, True):
                    before = int(irq["lock_checks"])
                    _core.time_bench_round(test, loops, seg=ctx.seg, cpu=ctx.cpu,
                                           lock_region=region(ctx.machine), lock_index=0,
                                           check=check, popf=popf)
                    out.append((test, check, popf, int(irq["lock_checks"]) - before,
                                int(ctx.machine.region("locks")[0]["lock"]["val"]),
                                int(irq["irqs_off"]), int(irq["preempt_count"]),
                                int(irq["bugs"].sum())))
        return out

    with lock_machine([0]) as m:
        _core.lock_init(m.segment.buf, region(m), 0, _core.LOCK_ALGOS[algo], 0)
        rows = m.run(body)[0]
    taken = 0
    for test, check, popf, checks, val, irqs_off, preempt, nbugs in rows:
        taken += loops
        where = (test, check, popf)
        assert checks == (loops if check else 0), where
        assert (irqs_off, preempt, nbugs) == (0, 0, 0), where
        if algo == "ticket":  # now serving == next ticket == every acquire so far
            assert val == (taken & 0xFFFF) * 0x10001, where
        else:
            assert is_free(val, algo), where


@pytest.mark.parametrize("algo", ALGOS)
def test_the_bare_c_baseline_takes_and_releases_its_locks_algorithm(algo):
    # ref_spin_lock_unlock runs the lock's own algorithm's acquire and
    # release (a ticket lock's halves both advance), and leaves the preempt
    # count as it found it
    loops = 100

    def body(ctx):
        irq = ctx.machine.region("irq")[ctx.cpu]
        _core.time_bench_round(locks.BASELINE, loops, seg=ctx.seg, cpu=ctx.cpu,
                               lock_region=region(ctx.machine), lock_index=0)
        return int(ctx.machine.region("locks")[0]["lock"]["val"]), int(irq["preempt_count"])

    with lock_machine([0]) as m:
        _core.lock_init(m.segment.buf, region(m), 0, _core.LOCK_ALGOS[algo], 0)
        val, preempt = m.run(body)[0]
    assert preempt == 0
    if algo == "ticket":
        assert val == loops * 0x10001
    else:
        assert is_free(val, algo)


def test_each_time_bench_irq_loop_checks_only_when_asked():
    # local_irq_save_restore and local_BH_disable_enable run a loop compiled
    # per checker and restore mode: each leaves the CPU as it found it, and
    # local_bh_enable() with IRQs off is reported by the checker's loop alone
    loops = 100
    bh_bug = layout.LOCKDEP_BUGS.index("bh_enable_with_irqs_off")

    def body(ctx):
        irq = ctx.machine.region("irq")[ctx.cpu]
        out = []
        for irqs_off in (0, 1):
            for test in ("local_irq_save_restore", "local_BH_disable_enable"):
                for check in (False, True):
                    for popf in (False, True):
                        irq["irqs_off"] = irqs_off
                        before = int(irq["bugs"][bh_bug])
                        _core.time_bench_round(test, loops, seg=ctx.seg, cpu=ctx.cpu,
                                               check=check, popf=popf)
                        out.append(((irqs_off, test, check, popf), int(irq["bugs"][bh_bug]) - before,
                                    int(irq["irqs_off"]), int(irq["preempt_count"]),
                                    int(irq["save_depth"])))
        irq["irqs_off"] = 0
        return out

    with Machine(cpus=[0]) as m:
        rows = m.run(body)[0]
    for (irqs_off, test, check, popf), bugs, off, preempt, depth in rows:
        where = (irqs_off, test, check, popf)
        assert (off, preempt, depth) == (irqs_off, 0, 0), where
        reported = check and irqs_off and test == "local_BH_disable_enable"
        assert bugs == (loops if reported else 0), where


def test_the_picture_shows_seed_003s_paired_difference_with_its_interval(capsys):
    """locks.png answers the seed's question: irqsave - irq per algorithm,
    the verdict's median and 95 % interval (the bars alone, medians without
    intervals, could not tell one cycle from noise); its footer names the
    machine and the load."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from smpnet.experiments import locks as locks_experiment
    from smpnet.report import plot

    assert main(["locks", "--json", "--cpus", "0", "--algo", "tas,ticket", "--variant",
                 "plain,irq,irqsave", "--loops", "1000", "--rounds", "12",
                 "--kernel-build", "inline"]) == 0
    env = json.loads(capsys.readouterr().out)
    fig, ax = plt.subplots()
    locks_experiment.plot(ax, env["results"])
    left, right = fig.axes
    (bars,) = [c for c in right.containers]          # the errorbar: one point per algorithm
    xs, _ = bars.lines[0].get_data()
    segments = bars.lines[2][0].get_segments()      # each point's interval
    names = [lbl.get_text() for lbl in right.get_yticklabels()]
    assert names == ["tas", "ticket"]
    (v,) = env["verdicts"]                          # seed 003's, on the first algorithm
    k = names.index(v["algo"])
    assert xs[k] == pytest.approx(v["measured"])
    assert [segments[k][0][0], segments[k][1][0]] == pytest.approx(v["interval"])
    plt.close(fig)
    lines = plot.footer(env["machine"], {"high": True,
                                         "why": "other processes used 40 % of CPU 0"})
    assert env["machine"]["cpu_model"] in lines[0]
    assert lines[1] == "competing load during the run: other processes used 40 % of CPU 0"
    assert plot.footer(env["machine"], {"high": False, "why": None})[1] == \
        "no competing load seen on these CPUs"
    assert plot.footer(env["machine"])[1] == "no competing load seen on these CPUs"
