"""Spinlocks: mutual exclusion, dead holders, the checker, the CLI."""
import contextlib
import json
import os
import re
import signal
import time

import numpy as np
import pytest

from conftest import X86, reaches
from smpnet import Machine, WorkerDied, _core
from smpnet.cli import main
from smpnet.experiments import contended
from smpnet.experiments.common import lockbench as locks
from smpnet.machine import layout
from smpnet.machine.tsc import tsc_hz
from smpnet.measure import stats, time_bench

ALGOS = locks.ALGOS
VARIANTS = locks.VARIANTS
IRQ_TEST = _core.IRQ_VECTORS["test"]
HI = _core.SOFTIRQS["hi"]


def lock_machine(cpus, n=1, **kw):
    return Machine(cpus=cpus, regions=[("locks", layout.LOCK_SLOT, n)], **kw)


def region(m):
    return m.segment.region_names.index("locks")


def hammer(ctx, reg, variant, count, check=False):
    return _core.lock_hammer(ctx.seg, ctx.cpu, reg, 0, variant, count, 0, 0, check)


MCS_NODES = _core.c_constants()["MCS_NODES"]


def is_free(val, algo, m=None):
    if algo == "ticket":
        return val & 0xFFFF == val >> 16  # now serving == next ticket
    if algo == "clh" and val:
        # the last release's node, left as the next acquirer's predecessor
        # (mcs_spinlock.h): released, when the machine is there to look
        cpu, idx = (val >> (MCS_NODES.bit_length() - 1)) - 1, val & (MCS_NODES - 1)
        if m is None:
            return cpu >= 0
        node = m.region("qnodes")["mcs"][cpu][idx]
        return bool(node["lock"]) and node["locked"] == 0 and node["next"] == 0xffffffff
    return algo == "pthread" or val == 0


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("ncpus,count", [(2, 200000), (4, 2000)], ids=["2cpus", "4cpus-oversubscribed"])
def test_mutual_exclusion_every_variant(allowed, algo, ncpus, count):
    with lock_machine(allowed, ncpus=ncpus, oversubscribe=True) as m:
        reg = region(m)
        for variant in VARIANTS:
            _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS[algo], 0)
            out = m.run(hammer, reg, _core.LOCK_VARIANTS[variant], count, timeout=120)
            assert [r[0] for r in out] == [count] * ncpus, variant
            assert not any(r[3] for r in out), f"{variant}: aborted"
            # the counter is incremented non-atomically inside the lock
            assert m.region("locks")[0]["counter"] == ncpus * count, variant
            assert is_free(int(m.region("locks")[0]["lock"]["val"]), algo, m), variant


@pytest.mark.parametrize("algo", ALGOS)
def test_waiters_give_up_when_the_holder_dies(allowed, algo):
    returned = np.dtype([("flag", "<u4")])

    def body(ctx, reg):
        if ctx.cpu == 0:
            _core.Cpu(ctx.seg, 0, lock_region=reg).spin_lock(0)
            os.kill(os.getpid(), signal.SIGKILL)  # dies holding the lock
        out = _core.lock_hammer(ctx.seg, ctx.cpu, reg, 0, 0, 1 << 40, 0, 0)
        ctx.machine.region("returned")[ctx.cpu]["flag"] = 1  # gave up by itself
        return out

    with Machine(cpus=allowed, ncpus=3, oversubscribe=True,
                 regions=[("locks", layout.LOCK_SLOT, 1), ("returned", returned, 3)]) as m:
        reg = region(m)
        _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS[algo], 0)
        with pytest.raises(WorkerDied, match="emulated CPU 0 .*SIGKILL"):
            m.run(body, reg, timeout=30)  # a hang would be RunTimeout
        # the waiters saw the stop flag and returned, before any SIGKILL
        assert list(m.region("returned")["flag"]) == [0, 1, 1]


@pytest.mark.parametrize("algo", ["qspinlock", "pvqspinlock", "ticket", "pthread", "mcs", "clh"])
@pytest.mark.parametrize("variant", ["plain", "irqsave", "bh"])
def test_irqs_during_contention(allowed, algo, variant):
    """CPU 0 keeps sending IPIs while CPUs 1 and 2 hammer lock 0; the IRQ
    handler takes lock 1, so CPUs waiting for lock 0 with IRQs on nest a
    second acquisition (qspinlock: MCS node 1; mcs, clh: a second node)
    inside the wait."""
    done = np.dtype([("flag", "<u4")])

    def body(ctx, reg):
        if ctx.cpu == 0:
            c = _core.Cpu(ctx.seg, 0)
            deadline = time.monotonic() + 20
            flags = ctx.machine.region("done")["flag"]
            while not all(flags[1:]) and time.monotonic() < deadline:
                c.send_ipi(1, IRQ_TEST)
                c.send_ipi(2, IRQ_TEST)
            return None
        out = _core.lock_hammer(ctx.seg, ctx.cpu, reg, 0, _core.LOCK_VARIANTS[variant], 0,
                                0.3, 200, True, False, 1)
        ctx.machine.region("done")[ctx.cpu]["flag"] = 1
        return out

    with Machine(cpus=allowed, ncpus=3, oversubscribe=True,
                 regions=[("locks", layout.LOCK_SLOT, 2), ("done", done, 3)]) as m:
        reg = region(m)
        for i in range(2):
            _core.lock_init(m.segment.buf, reg, i, _core.LOCK_ALGOS[algo], i)
        out = m.run(body, reg, timeout=60)
        total = out[1][0] + out[2][0]
        locks_ = m.region("locks")
        assert locks_[0]["counter"] == total and not out[1][3] and not out[2][3]
        irq = m.region("irq")
        assert irq["hardirqs"][1:].sum() > 0
        assert irq["irqs_while_masked"].sum() == 0
        assert int(irq["bugs"].sum()) == 0  # lock 1 only in hardirq, lock 0 never
        assert is_free(int(locks_[0]["lock"]["val"]), algo, m)
        assert is_free(int(locks_[1]["lock"]["val"]), algo, m)
        qnodes = m.region("qnodes")
        # all given back but, for CLH, the released node each lock keeps
        kept = sum(1 for i in (0, 1) if algo == "clh" and locks_[i]["lock"]["val"])
        assert not qnodes["n"]["count"].any() and (qnodes["mcs"]["lock"] != 0).sum() == kept


# ------------------------------------------------------------------ side table

def test_a_locks_algorithm_and_id_live_in_the_side_table_not_in_its_word(allowed):
    with lock_machine([allowed[0]], n=3) as m:
        reg = region(m)
        r = m.segment.header["regions"][reg]
        for i, algo in enumerate(("tas", "pthread", "qspinlock")):
            _core.lock_init(m.segment.buf, reg, i, _core.LOCK_ALGOS[algo], 100 + i)
        keys = m.region("lock_info")["e"]["key"]
        for i, algo in enumerate(("tas", "pthread", "qspinlock")):
            e = m.segment.lock_info("locks", i)
            assert int(e["key"]) == int(r["offset"]) + i * int(r["stride"]) + 1
            assert (int(e["algo"]), int(e["id"])) == (_core.LOCK_ALGOS[algo], 100 + i)
            assert int(m.region("locks")[i]["lock"]["val"]) == 0
        assert m.segment.lock_info("locks", 2, "counter") is None
        # initialising a lock again reuses its entry, for the new algorithm
        _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS["ticket"], 7)
        assert int((keys != 0).sum()) == 3
        assert int(m.segment.lock_info("locks", 0)["algo"]) == _core.LOCK_ALGOS["ticket"]
        # and the lock runs as the table says: a ticket lock's word counts tickets
        out = m.run(hammer, reg, _core.LOCK_VARIANTS["plain"], 5)
        assert out[0][0] == 5 and int(m.region("locks")[0]["lock"]["val"]) == 5 * 0x10001


@contextlib.contextmanager
def two_pthread_locks(cpu):
    """A Cpu driven from Python, with locks 0 and 1 pthread mutexes."""
    with lock_machine([cpu], n=2) as m:
        reg = region(m)
        for i in range(2):
            _core.lock_init(m.segment.buf, reg, i, _core.LOCK_ALGOS["pthread"], i)
        yield _core.Cpu(m.segment.buf, 0, lock_region=reg)


def test_the_entry_a_cpu_keeps_is_used_for_its_own_lock_only(allowed):
    """A CPU keeps the side-table entry it found last (spin_lock_info), so
    one lock taken over and over is not searched for again; taking a second
    lock must still find the second's: with pthread, the first's mutex
    taken again by its holder would be refused (an error-checking mutex)
    and a hint used for the wrong lock would show."""
    with two_pthread_locks(allowed[0]) as c:
        for _ in range(3):
            c.spin_lock(0)
            c.spin_lock(1, timeout=0.5)      # lock 0's mutex would be EDEADLK here
            c.spin_unlock(0)
            c.spin_unlock(1)
        c.spin_lock(1)                        # each unlock released its own mutex
        c.spin_lock(0, timeout=0.5)
        c.spin_unlock(1)
        c.spin_unlock(0)


def test_a_lock_taken_over_and_over_is_found_in_the_side_table_once(allowed):
    """pthread's mutex (and any lock's entry) is searched for when the CPU
    turns to another lock, not at every lock and unlock: the timed loop's
    one lock costs one search, as a kernel caller holds its lock's address."""
    with two_pthread_locks(allowed[0]) as c:
        for _ in range(50):
            c.spin_lock(0)
            c.spin_unlock(0)
        assert c.lock_info_searches == 1
        order = [1, 0, 0, 1] * 5              # lock 1, lock 0, unlock 0, unlock 1
        for k, i in enumerate(order):
            (c.spin_lock if k % 4 < 2 else c.spin_unlock)(i)
        changes = sum(a != b for a, b in zip([0] + order, order))
        assert c.lock_info_searches == 1 + changes


def test_a_full_side_table_is_one_clear_error(allowed):
    per = layout.LOCK_INFO_PER_CPU
    with lock_machine([allowed[0]], n=per + 1) as m:
        reg = region(m)
        for i in range(per):
            _core.lock_init(m.segment.buf, reg, i, _core.LOCK_ALGOS["tas"], i)
        with pytest.raises(OSError, match="side table is full"):
            _core.lock_init(m.segment.buf, reg, per, _core.LOCK_ALGOS["tas"], per)


def test_a_lock_never_initialised_is_refused_before_its_loop(allowed):
    with lock_machine([allowed[0]], n=1) as m:
        with pytest.raises(ValueError, match="not initialised"):
            _core.lock_hammer(m.segment.buf, 0, region(m), 0, 0, 1, 0, 0)
        c = _core.Cpu(m.segment.buf, 0, lock_region=region(m))
        for op in (c.spin_lock, c.spin_unlock, c.set_irq_test_lock):
            with pytest.raises(ValueError, match="not initialised"):
                op(0)


# ------------------------------------------------------------------ checker

@pytest.fixture(params=ALGOS)
def checked(request, allowed):
    with lock_machine([allowed[0]], n=2) as m:
        reg = region(m)
        for i in range(2):
            _core.lock_init(m.segment.buf, reg, i, _core.LOCK_ALGOS[request.param], 10 + i)
        yield m, _core.Cpu(m.segment.buf, 0, check=True, lock_region=reg)


def bugs(m):
    irq = m.region("irq")[0]
    return {name: int(irq["bugs"][k]) for k, name in enumerate(layout.LOCKDEP_BUGS)
            if irq["bugs"][k]}


def test_checker_spin_lock_irq_with_irqs_off(checked):
    m, c = checked
    c.local_irq_disable()
    v = VARIANTS.index("irq")
    c.spin_lock(0, v)
    c.spin_unlock(0, v)
    assert bugs(m) == {"lock_irq_with_irqs_off": 1}
    assert m.region("irq")[0]["first_bug_lock"] == 10


def test_checker_hardirq_inversion(checked):
    m, c = checked
    c.set_irq_test_lock(1)
    c.spin_lock(1)          # process context, IRQs on
    c.spin_unlock(1)
    c.send_ipi(0, IRQ_TEST)
    c.irq_poll()            # the handler takes the same lock in hardirq context
    assert bugs(m) == {"hardirq_inversion": 1}
    assert m.region("irq")[0]["first_bug_lock"] == 11


def test_checker_softirq_inversion(checked):
    m, c = checked
    c.set_irq_test_lock(0)
    c.spin_lock(0)          # BHs on
    c.spin_unlock(0)
    c.local_bh_disable()
    c.raise_softirq(HI)
    c.local_bh_enable()     # the softirq takes the lock in softirq context
    assert bugs(m) == {"softirq_inversion": 1}


def test_checker_unbalanced_restore(checked):
    m, c = checked
    c.local_irq_restore(0x200)   # never saved
    assert bugs(m) == {"unbalanced_irq_restore": 1}
    c.local_irq_save()           # never restored
    c.lockdep_end()
    assert bugs(m) == {"unbalanced_irq_restore": 2}


def test_checker_recursion_stops_instead_of_deadlocking(checked):
    m, c = checked
    c.spin_lock(0)
    with pytest.raises(RuntimeError, match="aborted"):
        c.spin_lock(0)
    assert bugs(m) == {"recursion": 1}
    assert m.header["stop"] == 1


def test_checker_bh_enable_with_irqs_off(checked):
    m, c = checked
    c.local_bh_disable()
    c.local_irq_disable()
    c.local_bh_enable()
    c.local_irq_enable()
    assert bugs(m) == {"bh_enable_with_irqs_off": 1}


def test_recursion_without_the_checker_times_out(allowed):
    with lock_machine([allowed[0]]) as m:
        reg = region(m)
        _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS["qspinlock"], 0)
        c = _core.Cpu(m.segment.buf, 0, lock_region=reg)
        c.spin_lock(0)
        with pytest.raises(RuntimeError, match="timeout"):
            c.spin_lock(0, timeout=0.2)
        c.spin_unlock(0)
        assert m.region("locks")[0]["lock"]["val"] == 0


def test_checker_quiet_on_correct_irq_safe_locking(checked):
    m, c = checked
    c.set_irq_test_lock(0)
    v = VARIANTS.index("irqsave")
    flags = c.spin_lock(0, v)       # process context takes it with IRQs off
    c.send_ipi(0, IRQ_TEST)         # raised while held: waits for unmask
    c.spin_unlock(0, v, flags)      # the handler runs here, after the unlock
    assert m.region("irq")[0]["hardirqs"] == 1
    v = VARIANTS.index("irq")
    c.spin_lock(1, v)
    c.spin_unlock(1, v)
    c.lockdep_end()
    assert bugs(m) == {}


def test_checker_quiet_on_every_variant_under_contention(allowed):
    with lock_machine(allowed, ncpus=2, oversubscribe=True) as m:
        reg = region(m)
        for variant in VARIANTS:
            _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS["qspinlock"], 0)
            m.run(hammer, reg, _core.LOCK_VARIANTS[variant], 2000, True, timeout=60)
        assert int(m.region("irq")["bugs"].sum()) == 0


# ------------------------------------------------------------------ CLI

def _blocks(a, b, op):
    """op over blocks of two rounds (A B, then B A), as lockbench.paired pairs them."""
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
    locks.derived(rows)
    v = locks.seed_003_verdict(rows, "qspinlock")
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
    locks.derived(rows)
    assert locks.seed_003_verdict(rows, "qspinlock") is None   # 5 blocks
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
    assert locks.control_minus_irq("sti", False, builds) == held


def test_the_locks_text_has_time_bench_lines(capsys):
    assert main(["locks", "--loops", "1000", "--rounds", "2", "--variant", "irq,irqsave"]) == 0
    out = capsys.readouterr().out
    assert "Type:spin_lock_unlock_irq Per elem: " in out and "cycles(tsc)" in out
    assert "Type:spin_lock_unlock Per elem" not in out  # plain not selected
    assert "seed 003:" in out


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
