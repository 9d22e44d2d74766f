"""ab: a user's spinlocks, IRQ and BH calls as the kernel build makes them
(local_bh_enable()'s call and return, irqsave's pushf and popf, hold()),
and a lock algorithm per variant (SMPNET_VARIANT_ALGO), each read from the
built object where that is the point. No test asserts a timing. The rest
of the kernel API: test_ab_kernel_api.py."""
import json
import re
import shutil
import subprocess

import pytest

import smpnet
from ab_helpers import EXAMPLES, FAST, cache, two_cpus, write  # noqa: F401
from conftest import X86, object_functions, thunk_addresses, timed_loop
from smpnet.cli import main
from smpnet.experiments.ab import build
from smpnet.machine import kernel_build


BH = """#include <smpnet.h>
SMPNET_STATE(struct smpnet_none, struct smpnet_none);
SMPNET_VARIANT(bh) { local_bh_disable(); local_bh_enable(); }
SMPNET_VARIANT(preempt) { preempt_disable(); preempt_enable(); }
"""


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_a_users_local_bh_enable_follows_the_kernel_build():
    """A user's local_bh_enable() is the kernel's: a call of
    __local_bh_enable_ip() in every x86 build (returning through its
    build's thunk in a +safe-ret or +ret-thunk one), the body inline in
    `inline` alone."""
    thunk_of = {"+safe-ret": "smpnet_srso_return_thunk", "+ret-thunk": "smpnet_ret_thunk"}
    for name, called in (("inline", None), ("x86-nopreempt", "__local_bh_enable_ip_0_0"),
                         ("x86-preempt+safe-ret", "__local_bh_enable_ip_0_1"),
                         ("x86-debug+ret-thunk", "__local_bh_enable_ip_0_2")):
        want = thunk_of.get(kernel_build.split(name)[1])
        if want and not smpnet._core.RETURN_THUNK_MODELLED:
            continue
        obj = build.build(BH, "bh.c", smpnet._core.LOCK_ALGOS["qspinlock"],
                          kbuild=smpnet._core.KERNEL_BUILDS[name])
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj.path],
                             capture_output=True, text=True, check=True).stdout
        calls = set(re.findall(r"\b(?:call|jmp) +[0-9a-f]+ <(__local_bh_enable_ip_\w+)>", asm))
        assert calls == ({called} if called else set()), name
        if called:   # the copy returns as its build returns: by its thunk, or a ret
            body = re.search(rf"<{called}>:\n(.*?)(?:\n\n|\Z)", asm, re.S)[1]
            jumps = {t for t, a in thunk_addresses(obj.path).items()
                     if re.search(rf"\bjmp +0*{a} <", body)}
            assert jumps == ({want} if want else set()), name
            assert bool(re.search(r"\tret\b", body)) != bool(want), name


HOLDS = """#include <smpnet.h>
struct shared { unsigned long n, held; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(plain) { shared->n++; }
SMPNET_VARIANT(holds) { uint64_t t = tsc_read_unordered(); hold();
			shared->held += tsc_read_unordered() - t; }
"""


def test_hold_cycles_change_only_the_variants_that_hold(allowed):
    """--hold-cycles is hold()'s: a variant that never calls it keeps its
    contended loop (the deadline read every 16th op: its ops a multiple of
    16 at the deadline), and a hold never runs past the run's end."""
    from smpnet import Machine
    from smpnet.experiments.ab import rounds

    obj = build.build(HOLDS, "holds.c", smpnet._core.LOCK_ALGOS["qspinlock"])
    plain, holds = obj.variants
    with Machine(cpus=allowed[:1], regions=rounds.regions(obj, 2, 1)) as m:
        where = rounds.Where(m, [obj, obj])
        for hold in (0, 1000):
            ops, _, _, stopped, _ = smpnet._core.ab_contended(
                plain.contended, 0.01, m.segment.buf, 0, hold_cycles=hold, **where.state(0))
            assert not stopped and ops > 0 and ops % 16 == 0, hold
        # a hold five times the run: cut at the run's end, not held whole 16 times
        hold = int(0.05 * float(m.header["tsc_hz"]))
        ops, cycles, _, stopped, _ = smpnet._core.ab_contended(
            holds.contended, 0.01, m.segment.buf, 0, hold_cycles=hold, **where.state(1))
        assert not stopped and ops == 16
        held = int.from_bytes(m.region("ab_shared")[1]["bytes"][8:16].tobytes(), "little")
        assert held <= cycles


IRQSAVE = """#include <smpnet.h>
struct shared { spinlock_t lock; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(irqsave) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(irqsave) { unsigned long flags;
	spin_lock_irqsave(&shared->lock, flags); spin_unlock_irqrestore(&shared->lock, flags); }
SMPNET_INIT(irq) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(irq) { spin_lock_irq(&shared->lock); spin_unlock_irq(&shared->lock); }
"""


def test_a_users_irqsave_saves_the_flags_and_restores_them_as_built():
    """The user's spin_lock_irqsave() runs pushf (not the no-pushf control
    time_bench has), spin_lock_irq() does not, and the unlock restores with
    popf exactly where the object was built with --restore popf."""
    from conftest import reaches
    qspinlock = smpnet._core.LOCK_ALGOS["qspinlock"]
    for popf in (False, True):
        fns = object_functions(build.build(IRQSAVE, "irqsave.c", qspinlock, popf=popf).path)
        timed = {v: timed_loop(fns, v) for v in ("irqsave", "irq")}
        assert reaches(fns, timed["irqsave"], r"\tpushf")
        assert not reaches(fns, timed["irq"], r"\tpushf")
        assert reaches(fns, timed["irqsave"], r"\tpopf") == popf, popf


LOCK_CHANGE = (EXAMPLES / "ticket_vs_qspinlock.c").read_text()


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_a_variant_on_a_lock_of_its_own_runs_from_that_locks_build(tmp_path, capsys, allowed,
                                                                   monkeypatch):
    """examples/ticket_vs_qspinlock.c: SMPNET_VARIANT_ALGO(ticket, ticket)
    against the run's qspinlock: the file is built twice, each a kernel of
    one lock; `ticket` (its helper, init and check too) runs from the
    ticket build, `qspinlock` from the other, every CPU at once, each check
    holding exclusion; the JSON and the text name the variant's own
    algorithm."""
    calls = []
    real = build.build
    monkeypatch.setattr(build, "build", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    f = str(EXAMPLES / "ticket_vs_qspinlock.c")
    assert main(["ab", f, *FAST, *two_cpus(allowed), "--repeat", "2", "--duration", "0.01",
                 "--algo", "qspinlock", "--kernel-build", "x86-preempt", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    algos = smpnet._core.LOCK_ALGOS
    assert sorted(calls) == sorted([algos["qspinlock"], algos["ticket"]])
    assert env["params"]["variant_algos"] == {"ticket": "ticket"}
    for algo, other in (("ticket", "QSPINLOCK"), ("qspinlock", "TICKET")):
        obj = real(LOCK_CHANGE, "ticket_vs_qspinlock.c", algos[algo],
                   kbuild=smpnet._core.KERNEL_BUILDS["x86-preempt"])
        assert [v.algo for v in obj.variants] == [algos["ticket"], -1]
        fns = object_functions(obj.path)
        # both variants' loops, which gcc may fold into one (the same code)
        body = "".join(fns[f] for f in fns if f.startswith("smpnet_timed_"))
        helper = "".join(fns[f] for f in fns if f.startswith("section"))
        called = re.findall(r"\bcall +[0-9a-f]+ <(_raw_spin_lock\w*)>", body + helper)
        assert called and all(f"SPIN_{algo.upper()}" in c and other not in c for c in called)
    assert main(["ab", f, "--cpus", "0", *FAST, "--algo", "qspinlock", "--kernel-build",
                 "x86-preempt"]) == 0     # the two objects above: no build
    assert ", qspinlock, ticket on ticket, " in capsys.readouterr().out.splitlines()[0]


def test_a_lock_algorithm_smpnet_lacks_is_the_compilers_line(tmp_path, capsys):
    f = write(tmp_path, LOCK_CHANGE.replace("(ticket, ticket)", "(ticket, hle)"), "bad.c")
    assert main(["ab", f, "--cpus", "0"]) == 2
    assert "smpnet_algo_hle" in capsys.readouterr().err
