"""What a KVM guest's kernel runs for its spinlocks: the choice
(kvm_spinlock_init()'s), the paravirt qspinlock's halt and kick, its
unlock's locked cmpxchg, and virt_spin_lock()'s test-and-set."""
import gzip
import re
import time

import pytest

from conftest import X86, code_of
from smpnet import Machine, _core
from smpnet.machine import kernel_build, layout

PV_UNHALT = 1 << kernel_build.KVM_FEATURE_PV_UNHALT
REALTIME = 1 << kernel_build.KVM_HINTS_REALTIME


def _root(tmp_path, config, possible="0-1", cmdline="quiet"):
    for d in ("proc", "sys/devices/system/cpu"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
    with gzip.open(tmp_path / "proc" / "config.gz", "wt") as f:
        f.write(config)
    (tmp_path / "sys/devices/system/cpu/possible").write_text(possible + "\n")
    (tmp_path / "proc/cmdline").write_text(cmdline + "\n")
    return str(tmp_path)


PV = "CONFIG_PARAVIRT=y\nCONFIG_PARAVIRT_SPINLOCKS=y\n"


@pytest.mark.parametrize("hypervisor, config, kvm, possible, cmdline, algo, why", [
    (None, PV, (PV_UNHALT, 0), "0-1", "", "qspinlock", "no hypervisor"),
    ("KVM", PV, (PV_UNHALT, 0), "0-1", "", "pvqspinlock", "the paravirt qspinlock"),
    ("KVM", PV, (PV_UNHALT, REALTIME), "0-1", "", "qspinlock", "REALTIME hint"),
    ("KVM", PV, (0, 0), "0-1", "", "virt_tas", "no PV_UNHALT"),
    ("KVM", PV, (PV_UNHALT, 0), "0", "", "qspinlock", "one possible CPU"),
    ("KVM", PV, (PV_UNHALT, 0), "0-1", "quiet nopvspin", "qspinlock", "nopvspin"),
    ("KVM", "CONFIG_PARAVIRT=y\n", (PV_UNHALT, 0), "0-1", "", "virt_tas",
     "without PARAVIRT_SPINLOCKS"),
    ("KVM", "# CONFIG_PARAVIRT is not set\n", (PV_UNHALT, 0), "0-1", "", "qspinlock",
     "no PARAVIRT"),
    ("Xen", PV, (0, 0), "0-1", "", "qspinlock", "not modelled"),
])
def test_the_lock_a_guest_kernel_runs(tmp_path, hypervisor, config, kvm, possible, cmdline,
                                      algo, why):
    root = _root(tmp_path, config, possible, cmdline)
    got, reason = kernel_build.host_lock(hypervisor, kernel_build.kernel_build(root), root, kvm)
    assert got == algo and why in reason


def _machine(allowed, ncpus):
    return Machine(cpus=allowed[:1], ncpus=ncpus, oversubscribe=True,
                   regions=[("locks", layout.LOCK_SLOT, 1)])


def _hammer(ctx, reg, count):
    return _core.lock_hammer(ctx.seg, ctx.cpu, reg, 0, 0, count, 0, 0)


def _hold_then_hammer(ctx, reg, count, hold_s, until_halted=False):
    """CPU 0 holds the lock `hold_s` seconds, or until another CPU has halted
    waiting for it (at most 30 s), then every CPU hammers it. until_halted:
    the others start only once CPU 0 holds it, so that they must wait for it
    however the scheduler ordered the workers (a CPU that ran first would
    otherwise finish before CPU 0 took the lock, and never halt)."""
    if ctx.cpu == 0:
        c = _core.Cpu(ctx.seg, 0, lock_region=reg, timeout=30)
        c.spin_lock(0)
        deadline = time.monotonic() + (30 if until_halted else hold_s)
        irq = ctx.machine.region("irq")
        while time.monotonic() < deadline and not (until_halted and irq["pv_halts"].sum()):
            time.sleep(0.01)
        c.spin_unlock(0)
    elif until_halted:
        lock = ctx.machine.region("locks")[0]["lock"]
        deadline = time.monotonic() + 30
        while not lock["val"] and time.monotonic() < deadline:
            time.sleep(0.001)
    return _hammer(ctx, reg, count)


def test_pvqspinlock_waiters_halt_and_are_kicked(allowed):
    """A holder that sleeps: its waiters spin their threshold and halt (a
    futex wait), the head on the lock word with the locked byte
    _Q_SLOW_VAL, the others on their nodes; the unlock's slow path and the
    hand-offs kick them, and the lock stays exclusive."""
    count = 20000
    # two CPUs, real where there are two; the holder lets go once the waiter
    # has halted (however late its worker started)
    with Machine(cpus=allowed[:2], ncpus=2, oversubscribe=True,
                 regions=[("locks", layout.LOCK_SLOT, 1)]) as m:
        reg = m.segment.region_names.index("locks")
        _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS["pvqspinlock"], 0)
        out = m.run(_hold_then_hammer, reg, count, 0, True, timeout=120)
        assert [r[0] for r in out] == [count] * 2 and not any(r[3] for r in out)
        assert m.region("locks")[0]["counter"] == 2 * count
        assert int(m.region("irq")["pv_halts"].sum()) > 0
        assert int(m.region("locks")[0]["lock"]["val"]) == 0


FUTEX_WAIT, FUTEX_WAKE = 0, 1


def _futex_ops(code):
    """The futex op of each syscall() a function's code makes: the value
    its third argument register (%edx) was last given before the call."""
    ops, edx = [], None
    for line in code.splitlines():
        if re.search(r"\bcall +[0-9a-f]+ <syscall@plt>", line):
            ops.append(edx)
        elif re.search(r"\txor +%edx,%edx", line):
            edx = 0
        elif m := re.search(r"\tmov +\$0x([0-9a-f]+),%edx", line):
            edx = int(m[1], 16)
        elif re.search(r",%(?:[re]dx|dx|dl)\b", line):
            edx = None    # set to something not a constant
    return ops


@pytest.mark.skipif(not X86, reason="reads x86 code")
def test_the_pv_hand_off_kicks_a_halted_successor(core_functions):
    """pv_queued_spin_lock_slowpath(): its waits are FUTEX_WAITs (a node's
    halt, the head's on the lock word), and the hand-off to a successor
    that halted is one FUTEX_WAKE (pv_kick_node()); the unlock's slow path
    wakes the head. Read from the built core: which syscalls a run makes
    depends on scheduling, which a loaded machine decides, not the code."""
    lock = _futex_ops(code_of(core_functions, "pv_queued_spin_lock_slowpath"))
    assert sorted(lock) == [FUTEX_WAIT, FUTEX_WAIT, FUTEX_WAKE]
    assert _futex_ops(code_of(core_functions, "pv_queued_spin_unlock_slowpath")) == [FUTEX_WAKE]


def test_the_other_locks_never_halt(allowed):
    with _machine(allowed, 3) as m:
        reg = m.segment.region_names.index("locks")
        for algo in ("qspinlock", "virt_tas"):
            _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS[algo], 0)
            m.run(_hold_then_hammer, reg, 2000, 0.2, timeout=120)
        assert int(m.region("irq")["pv_halts"].sum()) == 0


@pytest.mark.skipif(not X86, reason="reads x86 code")
def test_the_pv_unlock_is_a_call_and_a_locked_byte_cmpxchg(core_functions):
    """__pv_queued_spin_unlock(): out of line, `lock cmpxchg` of the locked
    byte where qspinlock's unlock is a byte store; qspinlock's inline
    unlock has no locked instruction. One copy per return (the inline
    build's, a plain one); how each returns: test_kernel_build.py."""
    for ret in "012":
        pv = code_of(core_functions, f"pv_queued_spin_unlock_{ret}")
        assert re.search(r"lock cmpxchg %[a-d]l,\(%rdi\)", pv)
    loop = code_of(core_functions,
                   "tb_lock_loop_VARIANT_PLAIN_SPIN_PVQSPINLOCK_KSHAPE_INLINE_0_0_0")
    assert re.search(r"\bcall +[0-9a-f]+ <pv_queued_spin_unlock_0>", loop)
    native = code_of(core_functions, "tb_lock_loop_VARIANT_PLAIN_SPIN_QSPINLOCK_KSHAPE_INLINE_0_0_0")
    assert len(re.findall(r"\block\b", native)) == 1      # the acquire's cmpxchg only
    assert re.search(r"movb +\$0x0,\(%r", native)


@pytest.mark.skipif(not X86, reason="reads x86 code")
def test_virt_tas_waits_by_test_and_set_of_the_whole_word(core_functions):
    """virt_spin_lock(): a read of the word, then a cmpxchg of all of it
    (no pending bit, no queue: no btsl, no xchg of the tail)."""
    body = code_of(core_functions, "virt_spin_lock")
    assert re.search(r"lock cmpxchg %e[a-z]+,\(%r", body)
    assert not re.search(r"\bbts|\bxchg", body.replace("cmpxchg", ""))


@pytest.mark.skipif(not X86, reason="reads x86 code")
@pytest.mark.parametrize("slowpath", ["queued_spin_lock_slowpath", "pv_queued_spin_lock_slowpath"])
def test_the_slow_paths_prefetch_the_next_node_for_writing(core_functions, slowpath):
    """qspinlock.c: a waiter that reaches the queue's head and finds a
    successor already linked fetches its node's line for writing (the
    hand-off writes it), with the kernel's prefetchw."""
    assert re.search(r"\tprefetchw ", code_of(core_functions, slowpath))
