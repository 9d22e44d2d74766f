"""The kernel as referee: the programs' shapes, that they load, run the op
they claim and are closed, and the one-line refusal without privilege.
Timing is the benchmarks' and the note's, never asserted here."""
import json
import os
import platform
import re
import struct
import subprocess
import sys

import pytest

from conftest import bpf_root as root
from conftest import drop_capabilities
from smpnet import _core
from smpnet.cli import main
from smpnet.experiments.common import bpf
from smpnet.experiments.kernel import kernel_btf, kernel_text, referee, referee_contended


def _insns(code):
    return [struct.unpack_from("<BBhi", code, i) for i in range(0, len(code), 8)]


def test_each_program_unrolls_its_op_between_a_lookup_and_an_exit():
    for t in referee.available()[0]:
        op = _insns(referee._op(t.name))
        prog = _insns(bpf.lookup_or_exit(3, referee._op(t.name) * referee.UNROLL))
        empty = _insns(bpf.lookup_or_exit(3, b""))
        jeq = next(i for i, x in enumerate(prog) if x[0] == 0x15)
        # the same lookup, then the body (the null check's jump is over it)
        assert prog[:jeq] == empty[:jeq] and prog[jeq][:2] == empty[jeq][:2]
        assert len(prog) == len(empty) + referee.UNROLL * len(op)
        assert prog[-1][0] == 0x95 and empty[-1][0] == 0x95      # exit
        # the null check jumps over the whole body to the return
        assert prog[jeq + 1 + prog[jeq][2]][0] == 0xb7           # r0 = DONE
    calls = [x[3] for x in _insns(referee._op("spin_lock_pair") * referee.UNROLL)
             if x[0] == 0x85]
    assert calls == [bpf.FUNC_spin_lock, bpf.FUNC_spin_unlock] * referee.UNROLL


class _Loader:
    """A bpf.Bpf that keeps what it is asked to load, for programs()."""
    def __init__(self):
        self.loaded = []

    def line_start(self):
        return 56

    def btf(self, blob):
        return 7

    def map(self, kind, value_size, btf=None):
        return 3

    def prog(self, insns, name):
        self.loaded.append(_insns(insns))
        return len(self.loaded)


def test_an_op_is_a_program_of_twice_the_ops_less_its_twin():
    # the uncontended op is the difference of 2 * UNROLL ops and UNROLL:
    # the test run's own cost is in both, where an empty twin would take
    # off time the ops hid (referee.programs())
    ids = dict(zip(bpf.IRQ_KFUNCS + bpf.RES_KFUNCS, range(1, 7)))
    for t in referee.TESTS:
        k = _Loader()
        assert referee.programs(k, t.name, ids) == (1, 2)
        prog, twin = k.loaded
        op = len(_insns(referee._op(t.name, ids, 56)))
        if t.twin:      # UNROLL of each op: tested below
            continue
        assert len(prog) - len(twin) == referee.UNROLL * op, t.name
        around = len(_insns(bpf.irqs_off(ids, b""))) if t.irqs_off else 0
        assert len(twin) == len(_insns(bpf.lookup_or_exit(3, b""))) + referee.UNROLL * op + around


def test_the_pair_with_irqs_off_runs_between_the_irq_save_and_restore():
    # the kernel's pair inside bpf_local_irq_save() ... _restore(): its own
    # save finds IRQs off, so its restore skips sti (helpers.c, irqflags.h)
    ids = dict(zip(bpf.IRQ_KFUNCS, (101, 102)))
    k = _Loader()
    referee.programs(k, "spin_lock_pair_irqs_off", ids)
    for prog in k.loaded:
        calls = [(x[1] >> 4, x[3]) for x in prog if x[0] == 0x85]    # (src, imm)
        kfunc = 2       # BPF_PSEUDO_KFUNC_CALL
        assert calls[1] == (kfunc, 101) and calls[-1] == (kfunc, 102), calls
        assert {c for c in calls[2:-1]} == {(0, bpf.FUNC_spin_lock), (0, bpf.FUNC_spin_unlock)}
    # the same pair as the row with IRQs on, and a row that says so
    t = {t.name: t for t in referee.TESTS}
    assert t["spin_lock_pair_irqs_off"].model == t["spin_lock_pair"].model
    assert t["spin_lock_pair_irqs_off"].irqs_off and not t["spin_lock_pair"].irqs_off


def test_irq_save_restore_inside_a_pair_is_a_pair_with_them_less_one_without():
    # kernel/bpf/rqspinlock.c's pairs with and without local_irq_save() and
    # _restore(), UNROLL of each; every lock's failure returns its error
    # (the verifier holds the lock only where it returned 0)
    ids = dict(zip(bpf.RES_KFUNCS, (11, 12, 13, 14)))
    k = _Loader()
    referee.programs(k, "irq_save_restore_in_pair", ids)
    for prog, (lock, unlock) in zip(k.loaded, ((13, 14), (11, 12))):
        calls = [(i, x[1] >> 4, x[3]) for i, x in enumerate(prog) if x[0] == 0x85]
        assert [c[1:] for c in calls[1:]] == [(2, lock), (2, unlock)] * referee.UNROLL
        for i, _, imm in calls[1:]:
            if imm == lock:     # if r0 == 0 skip the exit
                assert prog[i + 1] == (0x15, 0, 1, 0) and prog[i + 2][0] == 0x95
            # the lock's address (and, with IRQs saved, the flags' on the stack)
            flags = [x[:2] for x in prog[i - 2:i]]
            assert (flags == [(0xbf, 0xa << 4 | 2), (0x07, 2)]) == (imm in (13, 14))
    t = next(t for t in referee.TESTS if t.name == "irq_save_restore_in_pair")
    assert t.emulated and t.kfuncs == referee.RES and t.locked
    # the model's side: its irqsave pair less its plain pair, on the same lock
    variants = dict(_core.TIME_BENCH_SUITE)
    assert (variants[t.model], variants[t.model_twin]) == ("irqsave", "plain")
    blob = bpf.btf_spin_lock_value(56, bpf.LINE_VALUE, bpf.RES_SPIN_LOCK)[0]
    assert b"\0bpf_res_spin_lock\0" in blob and b"\0bpf_spin_lock\0" not in blob


def test_the_lock_map_declares_a_bpf_spin_lock_in_its_btf():
    blob, key_id, value_id = bpf.btf_spin_lock_value()
    magic, version, _, hdr_len, _, type_len, str_off, str_len = struct.unpack_from(
        "<HBBIIIII", blob)
    assert (magic, version, hdr_len) == (0xeB9F, 1, 24)
    names = blob[hdr_len + str_off:hdr_len + str_off + str_len]
    assert b"\0bpf_spin_lock\0" in names
    assert (key_id, value_id) == (1, 4) and len(blob) == hdr_len + type_len + str_len


@root
def test_the_programs_load_run_their_op_and_are_closed():
    with bpf.Bpf() as k:
        for t in referee.available()[0]:
            prog, twin = referee.programs(k, t.name)
            assert bpf.test_run(prog, 10)[1] == bpf.DONE
            assert bpf.test_run(twin, 10)[1] == bpf.DONE
        fds = list(k.fds)
        # fetch_add's and cmpxchg's words went up by one per op, UNROLL per
        # run, 10 runs: every cmpxchg succeeded, as the model's does
        for test in ("fetch_add", "cmpxchg"):
            m = k.map(bpf.BPF_MAP_TYPE_ARRAY, 16)
            prog = k.prog(bpf.lookup_or_exit(m, referee._op(test) * referee.UNROLL))
            bpf.test_run(prog, 10)
            assert struct.unpack_from("<q", k.lookup(m), 8)[0] == 10 * referee.UNROLL, test
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


@root
def test_the_lock_and_the_atomics_word_lie_alone_in_one_cache_line():
    """The referee's values put the lock (or the atomics' word) at a line
    start with its counter in the same line and the rest of the line theirs,
    as the model's lock slot: read back from the value's own address."""
    with bpf.Bpf() as k:
        at = k.line_start()
        assert 0 <= at < bpf.LINE and at % 8 == 0 and at + bpf.LINE <= bpf.LINE_VALUE
        for m in (bpf.spin_lock_map(k, at), k.map(bpf.BPF_MAP_TYPE_ARRAY, bpf.LINE_VALUE)):
            # the value's address, stored past the lock and its counter
            where = at + 16
            prog = k.prog(bpf.lookup_or_exit(m, bpf.stx_dw(bpf.R6, bpf.R6, where)))
            assert bpf.test_run(prog, 1)[1] == bpf.DONE
            value = k.lookup(m)
            assert len(value) == bpf.LINE_VALUE        # the whole value copied out
            address, = struct.unpack_from("<Q", value, where)
            assert (address + at) % bpf.LINE == 0
            assert (address + at + bpf.SPIN_LOCK_CNT) // bpf.LINE == (address + at) // bpf.LINE


def test_the_kernels_btf_names_its_functions_and_a_missing_one_is_left_out(tmp_path):
    # a BTF blob of its own: int, then a FUNC_PROTO and two FUNCs
    names = b"\0int\0f_one\0f_two\0"
    types = (struct.pack("<IIII", 1, bpf.BTF_KIND_INT << 24, 4, 32)
             + struct.pack("<III", 0, 13 << 24 | 1, 1) + struct.pack("<II", 0, 1)   # proto(int)
             + struct.pack("<III", names.index(b"f_one"), kernel_btf.BTF_KIND_FUNC << 24, 2)
             + struct.pack("<III", names.index(b"f_two"), kernel_btf.BTF_KIND_FUNC << 24, 2))
    hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(names))
    path = tmp_path / "vmlinux"
    path.write_bytes(hdr + types + names)
    assert kernel_btf.vmlinux_func_ids(["f_two", "f_one", "f_three"], str(path)) == {
        "f_one": 3, "f_two": 4}
    path.write_bytes(b"\0" * 32)
    with pytest.raises(bpf.BpfError, match="not BTF"):
        kernel_btf.vmlinux_func_ids(["f_one"], str(path))


def test_without_the_kfuncs_a_row_is_left_out_with_a_reason(monkeypatch):
    # a 6.14 kernel: the IRQ kfuncs, not rqspinlock's
    monkeypatch.setattr(kernel_btf, "vmlinux_func_ids",
                        lambda names: {n: 7 for n in names if n in bpf.IRQ_KFUNCS})
    tests, why, ids = referee.available()
    assert set(ids) == set(bpf.IRQ_KFUNCS)
    assert [t.name for t in referee.TESTS if t not in tests] == ["irq_save_restore_in_pair"]
    assert why == ["irq_save_restore_in_pair: this kernel has no bpf_res_spin_lock, "
                   "bpf_res_spin_unlock, bpf_res_spin_lock_irqsave, "
                   "bpf_res_spin_unlock_irqrestore kfuncs (Linux 6.15 on)"]
    monkeypatch.setattr(kernel_btf, "vmlinux_func_ids", lambda names: {})
    tests, why, ids = referee.available()
    left = ["spin_lock_pair_irqs_off", "irq_save_restore", "irq_save_restore_in_pair"]
    assert [t.name for t in referee.TESTS if t not in tests] == left
    assert why[:2] == [f"{name}: this kernel has no bpf_local_irq_save, "
                       "bpf_local_irq_restore kfuncs (Linux 6.14 on)" for name in left[:2]]


def test_a_kernel_round_below_zero_leaves_the_rows_cost_at_zero_and_its_samples_whole():
    # a loaded machine can make a round's program run faster than its twin's:
    # compare reads `cycles` as a cost and refuses one below zero
    kernel, model = [-2.7, 5.3, 5.4, 5.5, 5.4, 5.6], [5.4] * 6
    row = referee._figures(kernel, model)
    assert row["kernel_cycles_lo"] == -2.7 and row["cycles_lo"] == 0.0
    assert row["cycles"] == row["kernel_cycles"] > 0 and row["cycles_hi"] == row["kernel_cycles_hi"]
    assert row["cycles_samples"] == row["kernel_samples"] == kernel
    assert referee._figures([-1.0] * 6, model)["cycles"] == 0.0


@root
def test_kernel_prints_the_referee_beside_the_model(capsys, allowed, monkeypatch):
    cpus = allowed[:2]
    # the rows, their fields and the progress are checked here, not the figures:
    # each contended side hammers half a run's time (3 chunks a line, 12.5 ms)
    for name in ("CONTENDED_S", "CONTENDED_ATOMIC_S"):
        monkeypatch.setattr(referee_contended, name, getattr(referee_contended, name) / 2)
    # the uncontended ops' rounds (--referee-rounds) apart from the contended
    # ones' (--rounds, 6 at least)
    assert main(["kernel", "--json", "--cpus", ",".join(map(str, cpus)), "--transactions", "20",
                 "--rounds", "1", "--trials", "1", "--referee-rounds", "7"]) == 0
    out, err = capsys.readouterr()
    env = json.loads(out)
    rows = [r for r in env["results"] if r["placement"] == referee.PLACEMENT]
    contended = [f"{t}_contended" for t in referee_contended.CONTENDED] if len(cpus) == 2 else []
    # progress: a step for the uncontended rows, then one for each contended op,
    # on one counter from 1 to its total with the run's other steps
    steps = re.findall(r"\] the kernel as referee: (\S+)", err)
    assert steps == ["uncontended"] + list(referee_contended.CONTENDED)[:len(contended)]
    counts = [(int(n), int(total)) for n, total in re.findall(r"\[(\d+)/(\d+)\]", err)]
    assert [n for n, _ in counts] == list(range(1, len(counts) + 1))
    assert {total for _, total in counts} == {len(counts)}
    assert [r["test"] for r in rows] == [t.name for t in referee.available()[0]] + contended
    assert (("kernel referee: no contended rows: they need two CPUs and one is selected"
             in env["warnings"]) == (not contended))
    for r in rows:
        if r["test"] == "spin_lock_pair_contended":
            # every critical section counted, on both sides: the ops are what ran
            assert r["counted"] == {"kernel": True, "model": True} and min(r["ops"].values()) > 0
            # the model's lines in pages of their own each round (a segment's page
            # or two), as the kernel's fresh maps
            rounds = min(r["rounds"], referee_contended.LOCK_PAGES)
            assert rounds <= r["model_pages"] <= 2 * rounds
            assert not [w for w in env["warnings"] if "counter is not the ops" in w]
    assert (env["params"]["referee_rounds"], env["params"]["referee_contended_rounds"]) == (7, 6)
    for r in rows:
        rounds = env["params"]["referee_contended_rounds" if r.get("contended") else
                               "referee_rounds"]
        assert len(r["kernel_samples"]) == len(r["model_samples"]) == r["rounds"] == rounds
        # a ratio over a kernel round at or below zero (two programs' difference,
        # on a busy machine) is infinite, which the JSON writes as null
        ends = [r[f"model_over_kernel{s}"] for s in ("_lo", "", "_hi")]
        finite = [v for v in ends if v is not None]
        assert finite == sorted(finite) and finite == ends[:len(finite)]
        assert len(finite) == 3 or min(r["kernel_samples"]) <= 0
        assert r["cycles"] == r["kernel_cycles"] and r["unroll"] == referee.UNROLL
        # each round's programs loaded anew: a placement each (referee._measure)
        assert r.get("loads", rounds) == rounds
        assert ("loads" in r) != bool(r.get("contended"))
        # the IRQ save and restore inside a pair: the model's irqsave pair less its plain one
        assert r.get("model_less") == ("spin_lock_unlock" if r["test"] ==
                                       "irq_save_restore_in_pair" else None)
        assert r["cpus"] == (",".join(map(str, cpus)) if r.get("contended") else str(cpus[0]))
    assert rows[0]["algo"] == env["params"]["referee_algo"]
    # what the programs run, listed from the kernel's text (where objdump is)
    listed = env["params"]["kernel_text"]
    assert (set(kernel_text.HELPERS) <= set(listed)) == (
        not any(w.startswith("kernel referee: what it runs not listed") for w in env["warnings"]))


def test_the_uncontended_rows_take_rounds_of_their_own(monkeypatch, allowed):
    """--referee-rounds for the uncontended rows; the contended ones take the
    run's --rounds, 6 at least; `all` 40 and 10, 6 and 6 quick."""
    from smpnet.cli import build_parser
    from smpnet.experiments import kernel
    from smpnet.measure import stats
    monkeypatch.setattr(referee.bpf, "refused", lambda: None)     # as where it can run
    p = kernel.params(build_parser().parse_args(["kernel", "--rounds", "3", "--referee-rounds",
                                                 "9"]), allowed[:1])
    assert (p.referee_rounds, p.referee_contended_rounds) == (9, stats.MIN_SAMPLES)
    p = kernel.params(build_parser().parse_args(["kernel", "--rounds", "12"]), allowed[:1])
    assert (p.referee_rounds, p.referee_contended_rounds) == (referee.ROUNDS, 12)
    quick, full = kernel.plan(allowed[:2], True), kernel.plan(allowed[:2], False)
    assert (quick.referee_rounds, quick.referee_contended_rounds) == (6, 6)
    assert (full.referee_rounds, full.referee_contended_rounds) == (referee.ROUNDS, 10)


def test_no_referee_leaves_it_out_without_a_warning(monkeypatch, allowed):
    from smpnet.cli import build_parser
    from smpnet.experiments import kernel
    monkeypatch.setattr(referee.bpf, "refused", lambda: None)     # as where it can run
    monkeypatch.setattr(referee, "measure", lambda *a: pytest.fail("the referee ran"))
    p = kernel.params(build_parser().parse_args(["kernel", "--no-referee"]), allowed[:2])
    for rounds in ("9", str(referee.ROUNDS)):       # one or other, the default's value too
        assert main(["kernel", "--no-referee", "--referee-rounds", rounds]) == 2
    assert p.referee_rounds is None and p.referee_skipped == referee.NOT_ASKED
    warnings = []
    assert kernel.referee_part(allowed[:2], p, warnings, {}, lambda i: None) == []
    assert warnings == []
    # where it cannot run, the warning says why
    monkeypatch.setattr(referee.bpf, "refused", lambda: "bpf(2) not permitted")
    p = kernel.params(build_parser().parse_args(["kernel"]), allowed[:1])
    assert kernel.referee_part(allowed[:1], p, warnings, {}, lambda i: None) == []
    assert warnings == ["kernel referee skipped: bpf(2) not permitted"]


def test_without_privilege_the_referee_is_one_skip_line(tmp_path):
    """Without a capability (root's dropped before exec, as in a locked-down
    container), one line that says why."""
    if os.geteuid() != 0:
        why = bpf.refused()
    else:
        r = subprocess.run([sys.executable, "-c", "from smpnet.experiments.common import bpf; "
                            "print(bpf.refused())"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           preexec_fn=drop_capabilities)
        assert r.returncode == 0, r.stderr
        why = r.stdout.strip()
    if platform.machine() == "x86_64":
        assert why.startswith("bpf(2) not permitted (it needs root")
    else:
        assert why.startswith("not x86-64")


def test_info_says_whether_the_kernel_can_referee_here(capsys, allowed):
    cpus = ["--cpus", str(allowed[0])]
    assert main(["info", "--json", *cpus]) == 0
    why = json.loads(capsys.readouterr().out)["params"]["kernel_referee_refused"]
    assert why == bpf.refused()
    assert main(["info", *cpus]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Kernel referee"))
    assert (why or "available: `smpnet-bench kernel`") in line
