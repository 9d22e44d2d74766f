"""Spinlocks: mutual exclusion, dead holders, the side table, the checker.
The `locks` command: test_locks_cli.py."""
import contextlib
import os
import signal
import time

import numpy as np
import pytest

from lock_helpers import bugs, is_free, lock_machine, region
from smpnet import Machine, WorkerDied, _core
from smpnet.experiments.common import lockbench as locks
from smpnet.machine import layout

ALGOS = locks.ALGOS
VARIANTS = locks.VARIANTS
IRQ_TEST = _core.IRQ_VECTORS["test"]
HI = _core.SOFTIRQS["hi"]


def hammer(ctx, reg, variant, count, check=False):
    return _core.lock_hammer(ctx.seg, ctx.cpu, reg, 0, variant, count, 0, 0, check)





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
def test_mutual_exclusion_through_bpf_spin_lock(allowed, algo):
    """lock_hammer's bpf_spin_lock() pairs (the referee's contended model
    side): the same exclusion, each restore mode and checker, on two CPUs."""
    count = 20000
    irqsave = _core.LOCK_VARIANTS["irqsave"]
    with lock_machine(allowed, ncpus=2, oversubscribe=True) as m:
        reg = region(m)
        for check, popf in ((False, False), (True, True)):
            _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS[algo], 0)
            out = m.run(lambda ctx: _core.lock_hammer(ctx.seg, ctx.cpu, reg, 0, irqsave, count,
                                                      0, 0, check, popf, bpf_spin_lock=True),
                        timeout=120)
            assert [(r[0], r[3]) for r in out] == [(count, False)] * 2
            assert m.region("locks")[0]["counter"] == 2 * count
            assert is_free(int(m.region("locks")[0]["lock"]["val"]), algo, m)
        with pytest.raises(ValueError, match=r"bpf_spin_lock\(\) is an irqsave pair"):
            _core.lock_hammer(m.segment.buf, 0, reg, 0, _core.LOCK_VARIANTS["irq"], 1, 0, 0,
                              bpf_spin_lock=True)


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
