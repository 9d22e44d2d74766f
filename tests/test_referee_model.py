"""The kernel as referee, the model's side: each op's loop read from the
built core's code (objdump), the kernel's program's shape in the model's
(ops in a row, calls as the build makes them, the word it works on).
Timing is the benchmarks' and the note's, never asserted here."""
import os
import platform
import re

import pytest

from conftest import code_of, loop_tag, thunk_addresses
from smpnet import Machine, _core
from smpnet.experiments.kernel import referee
from smpnet.machine import kernel_build, layout


def _insns_of(body):
    return [line.split("\t")[-1].strip() for line in body.splitlines() if "\t" in line]


X86_64 = platform.machine() == "x86_64"


@pytest.mark.skipif(not X86_64, reason="reads x86-64 code")
@pytest.mark.parametrize("build", ["x86-preempt", "x86-preempt+safe-ret",
                                   "x86-preempt+ret-thunk"])
def test_the_models_helper_call_is_calls_back_to_back_as_the_kernels(core_functions, build):
    # the kernel's programs call their helper 256 and 128 times in a row; the
    # model's loop must hold 128 calls with nothing between them (the
    # referee shares the empty loop among them; 16 to an iteration is not
    # the same op under SRSO: time_bench.h), each of the copy that returns
    # as the build does, whose body is the helper's: the ftrace nop and one
    # segment-relative load
    t = next(t for t in referee.TESTS if t.name == "helper_call")
    assert t.per_loop == _core.TB_PROG_OPS
    assert next(t for t in referee.TESTS if t.name == "irq_save_restore").per_loop == t.per_loop
    ret = _core.KERNEL_RETURNS[kernel_build.split(build)[1]]
    insns = _insns_of(code_of(core_functions,
                              f"tb_cpu_loop_TB_OP_CALLS_EMPTY_{loop_tag(build)}_0_0"))
    calls = [i for i, x in enumerate(insns) if x.startswith("call")]
    assert len(calls) == t.per_loop
    assert {insns[i].split("<")[1] for i in calls} == {f"tb_helper_{ret}>"}
    between = [x for x in insns[calls[0]:calls[-1]] if not x.startswith("call")]
    assert len(between) <= 1        # at most the loop counter's add, scheduled among them
    body = code_of(core_functions, f"tb_helper_{ret}")
    helper = _insns_of(body)
    assert helper[0].startswith("nop") and re.match(r"movslq +%fs:", helper[1])
    # the ftrace site's nop is the kernel's 5 bytes (BYTES_NOP5), as the listing's
    at = [int(line.split(":")[0], 16) for line in body.splitlines() if "\t" in line]
    assert at[1] - at[0] == 5 and helper[0].split() == ["nopl", "0x0(%rax,%rax,1)"]
    assert (helper[2] == "ret") == (ret == 0)
    assert referee.TESTS[0].per_loop == 1


@pytest.mark.skipif(not X86_64, reason="reads x86-64 code")
def test_the_models_pair_with_irqs_off_runs_inside_a_save_and_restore(allowed):
    # irqs_off: one local_irq_save() more than the round's pairs make (the
    # checker counts each pushf), and the CPU's IRQs as they were before: a
    # test IRQ sent before the round taken by its end where they were on,
    # left pending where they were off
    loops = 100

    def body(ctx):
        cpu = _core.Cpu(ctx.seg, ctx.cpu, check=True)
        irq = ctx.machine.region("irq")[ctx.cpu]
        out = []
        for off_before, irqs_off in ((False, False), (False, True), (True, True)):
            if off_before:
                cpu.local_irq_disable()
            cpu.send_ipi(ctx.cpu)
            saves, taken = int(irq["flags_saves"]), int(irq["hardirqs"])
            _core.time_bench_round("bpf_spin_lock_pair", loops, seg=ctx.seg, cpu=ctx.cpu,
                                   lock_region=ctx.machine.segment.region_names.index("locks"),
                                   check=True, irqs_off=irqs_off)
            out.append((int(irq["flags_saves"]) - saves, cpu.irqs_disabled(),
                        int(irq["hardirqs"]) - taken))
            cpu.local_irq_enable()
        with pytest.raises(ValueError, match="no IRQ state"):
            _core.time_bench_round("for_loop", 10, irqs_off=True)
        return out

    with Machine(cpus=[allowed[0]], regions=[("locks", layout.LOCK_SLOT, 1)]) as m:
        _core.lock_init(m.segment.buf, m.segment.region_names.index("locks"), 0,
                        _core.LOCK_ALGOS["qspinlock"], 0)
        assert m.run(body)[0] == [(loops, False, 1), (loops + 1, False, 1),
                                  (loops + 1, True, 0)]


def test_the_models_atomics_are_unrolled_as_the_kernels_programs(core_functions):
    # TB_UNROLL locked ops between two loop branches, each the JIT's
    # instruction: lock xadd (not lock add), lock cmpxchg, xchg
    for name, op in (("fetch_add", "lock xadd"), ("cmpxchg", "lock cmpxchg"), ("xchg", "xchg")):
        t = next(t for t in referee.TESTS if t.name == name)
        assert t.per_loop == _core.TB_UNROLL
        insns = _insns_of(code_of(core_functions, f"__pyx_f_6smpnet_5_core_tb_{t.model}"))
        ops = [x for x in insns if x.startswith(op + " ")]
        assert len(ops) == _core.TB_UNROLL, (name, insns)
        first, last = insns.index(ops[0]), len(insns) - insns[::-1].index(ops[-1])
        assert not any(x.startswith("j") for x in insns[first:last]), name
    # and the contended rows' hammer (inlined into atomic_hammer, each op's
    # loop there): the same TB_UNROLL ops between two branches
    (name,) = [n for n in core_functions if re.fullmatch(r"__pyx_pw_\w+_core_\d+atomic_hammer", n)]
    hammer = _insns_of(code_of(core_functions, name))
    branch = [i for i, x in enumerate(hammer) if x.startswith("j")]
    for op in ("lock xadd", "lock cmpxchg", "xchg"):
        # the longest run of the op with no branch between (the wrapper's
        # own atomics, memoryview counts, come alone)
        runs, run, last = [], 0, None
        for i, x in enumerate(hammer):
            if x.startswith(op + " "):
                run = run + 1 if last is not None and not any(last < b < i for b in branch) else 1
                runs.append(run)
                last = i
        assert max(runs) == _core.TB_UNROLL, (op, hammer)


@pytest.mark.skipif(not X86_64, reason="reads x86-64 code")
def test_the_models_per_cpu_increment_is_the_programs_run_of_them(core_functions):
    # the kernel's program runs 256 loads, adds and stores in a row (its twin
    # 128), on a per-CPU value through a register: the model's loop holds
    # TB_PROG_OPS of them with no branch between, each the same three
    # instructions on one word through one register that is not the stack
    # pointer (where a Zen 3 renames memory: time_bench.h)
    t = next(t for t in referee.TESTS if t.name == "this_cpu_inc")
    assert t.per_loop == _core.TB_PROG_OPS
    insns = _insns_of(code_of(core_functions, f"__pyx_f_6smpnet_5_core_tb_{t.model}"))
    ops = [i for i, x in enumerate(insns) if re.fullmatch(r"mov +%r\w+,(-?0x\w+)?\(%r\w+\)", x)]
    assert len(ops) == t.per_loop, insns
    assert not any(x.startswith("j") for x in insns[ops[0]:ops[-1]])
    words = {insns[i].split(",")[1] for i in ops}
    assert len(words) == 1, words
    # not the stack's: %rsp, or %rbp as a frame pointer (both renamed on Zen 3)
    assert re.search(r"\((%r\w+)\)", next(iter(words)))[1] not in ("%rsp", "%rbp"), words
    (word,) = words
    others = []
    start = max(j for j in range(ops[0]) if insns[j].startswith("mov") and f"{word}," in insns[j])
    for i in ops:   # each store's load and add before it, nothing else but the loop's count
        reg = insns[i].split()[1].split(",")[0]
        between = [x.split() for x in insns[start:i]]
        load, add = ["mov", f"{word},{reg}"], ["add", f"$0x1,{reg}"]
        assert load in between and add in between[between.index(load):], insns[start:i + 1]
        others += [x for x in between if x not in (load, add)]
        start = i + 1
    assert len(others) <= 1, others
    # the word is this CPU's pcpu_lstats.packets in the segment: the op counts there
    cpu = sorted(os.sched_getaffinity(0))[0]
    with Machine(cpus=[cpu]) as m:
        before = int(m.lstats[0]["packets"])
        m.run(lambda ctx: _core.time_bench_round("this_cpu_inc", 4 * t.per_loop, seg=ctx.seg,
                                                 cpu=ctx.cpu))
        assert int(m.lstats[0]["packets"]) - before == 4 * t.per_loop


@pytest.mark.skipif(not X86_64, reason="reads x86-64 code")
@pytest.mark.parametrize("ret", [0, 1, 2])
def test_the_models_lock_pair_is_the_helpers_two_calls_deep(core_functions, ret):
    # bpf_spin_lock() calls __bpf_spin_lock_irqsave() and bpf_spin_unlock()
    # __bpf_spin_unlock_irqrestore(), and returns 0 after (no tail call);
    # the model's are calls of its out-of-line irqsave copies of the same
    # return, the PV unlock inside a call that returns as they do
    build = {0: "x86-preempt", 1: "x86-preempt+safe-ret", 2: "x86-preempt+ret-thunk"}[ret]
    loop = code_of(core_functions, "tb_lock_loop_TB_VARIANT_BPF_SPIN_LOCK_SPIN_PVQSPINLOCK_"
                   f"{loop_tag(build)}_0_0")
    calls = re.findall(r"\bcall +[0-9a-f]+ <([^>+]+)>", loop)
    assert calls == [f"bpf_spin_lock_SPIN_PVQSPINLOCK_0_{ret}",
                     f"bpf_spin_unlock_SPIN_PVQSPINLOCK_0_{ret}_sti"]
    thunks = thunk_addresses()
    want = {1: thunks["smpnet_srso_return_thunk"], 2: thunks["smpnet_ret_thunk"]}.get(ret)
    for helper, inner in zip(calls, ("_raw_spin_lock_irqsave_SPIN_PVQSPINLOCK_0_0_",
                                     "_raw_spin_unlock_irqrestore_sti_SPIN_PVQSPINLOCK_0_0_")):
        insns = _insns_of(code_of(core_functions, helper))
        assert [x for x in insns if x.startswith("call")] == [
            x for x in insns if x.startswith("call") and x.endswith(f"<{inner}{ret}>")] != []
        jumps_to_thunk = [x for x in insns if want and re.match(rf"jmp +0*{want} <", x)]
        assert bool(jumps_to_thunk) == (ret != 0) and ("ret" in insns) == (ret == 0)
        assert not any(x.startswith("jmp") and inner in x for x in insns)   # no tail call
    unlock = code_of(core_functions, f"_raw_spin_unlock_irqrestore_sti_SPIN_PVQSPINLOCK_0_0_{ret}")
    assert f"<pv_queued_spin_unlock_{ret}>" in unlock
    pv = _insns_of(code_of(core_functions, f"pv_queued_spin_unlock_{ret}"))
    assert any(x.startswith("lock cmpxchg %dl") for x in pv)
    assert ("ret" in pv) == (ret == 0)
    assert any(re.match(rf"jmp +0*{want} <", x) for x in pv) == (ret != 0)
