"""The kernel as referee: the running kernel's own spin lock pair, atomics,
per-CPU increment and helper call, timed inside it (BPF test runs of
hand-assembled programs), beside smpnet's model of the same op on the same
CPU in the same rounds (the contended rows: referee_contended.py; the
judgement and the table: referee_text.py).
Docs: docs/experiments/kernel.md, "The kernel as referee".
"""
import errno
from dataclasses import dataclass

from ... import _core
from ...machine.machine import Machine
from ...measure import stats
from ...measure.time_bench import calibrate_loops, clean_round, pass_order
from ..common import bpf, lockbench, lockopts
from . import kernel_btf

# ops per program run (the contended rows'); the uncontended op is the
# difference of a program of 2 * UNROLL ops and its twin of UNROLL, over UNROLL
UNROLL = _core.TB_PROG_OPS
RUN_NS = 5e6            # a test run lasts about this long (its repeat is calibrated to it)
PLACEMENT = "in-kernel"  # the rows' placement: the kernel's figure is the row's `cycles`
# rounds of the uncontended ops (kernel --referee-rounds), about 0.3 s each: a
# round's ratio scatters by some 10 % on a busy host, and the median's 95 %
# interval of 10 rounds spans the 2nd to 9th of them (kernel.md, "Rounds")
ROUNDS = 40
NOT_ASKED = "left out (--no-referee)"     # params.referee_skipped, and no warning


@dataclass(frozen=True)
class Test:
    name: str       # the row
    kernel: str     # what one op runs in the kernel
    model: str      # smpnet's time_bench test of the same op
    locked: bool    # the model's test takes the host's lock
    per_loop: int = 1   # ops in one iteration of the model's loop: the empty loop is shared
    emulated: str = ""  # what the model emulates here and user space cannot run: not judged
    irqs_off: bool = False  # the ops inside bpf_local_irq_save() and _restore(), both sides
    kfuncs: tuple = ()  # the kernel functions its programs call by BTF id: (names, since)
    twin: str = ""      # the kernel's twin runs UNROLL of this op, not UNROLL of its own
    model_twin: str = ""    # the model's figure is its test's less this test's


IRQ = (bpf.IRQ_KFUNCS, "Linux 6.14 on")
RES = (bpf.RES_KFUNCS, "Linux 6.15 on")


TESTS = (
    Test("spin_lock_pair",
         "bpf_spin_lock() + bpf_spin_unlock(): local_irq_save, preempt_disable, the host's "
         "arch_spin_lock, the flags in a per-CPU variable; and back (kernel/bpf/helpers.c)",
         "bpf_spin_lock_pair", True),
    Test("spin_lock_pair_irqs_off",
         "the same pair with IRQs already off, inside bpf_local_irq_save() and "
         "bpf_local_irq_restore() (kfuncs, Linux 6.14 on): its cli run, its sti not (the "
         "saved flags have IF clear)", "bpf_spin_lock_pair", True, irqs_off=True, kfuncs=IRQ),
    Test("fetch_add", "BPF_ATOMIC BPF_ADD | BPF_FETCH on a map value: lock xadd",
         "atomic_fetch_add_unrolled", False, _core.TB_UNROLL),
    Test("cmpxchg", "the map value read, then BPF_ATOMIC BPF_CMPXCHG of it to itself + 1: "
         "lock cmpxchg, as a cmpxchg loop's body", "cmpxchg_unrolled", False, _core.TB_UNROLL),
    Test("xchg", "BPF_ATOMIC BPF_XCHG on a map value: xchg", "atomic_xchg_unrolled", False,
         _core.TB_UNROLL),
    Test("this_cpu_inc", "a per-CPU array map's value + 1 (load, add, store)",
         "this_cpu_inc", False, _core.TB_PROG_OPS),
    Test("helper_call", "call bpf_get_numa_node_id() and return, as this kernel builds it, "
         "the calls back to back", "function_calls_unrolled", False, _core.TB_PROG_OPS),
    Test("irq_save_restore", "bpf_local_irq_save() + bpf_local_irq_restore() (kfuncs, Linux "
         "6.14 on): two calls, pushf; pop; cli, the flags tested, sti; the pairs back to back",
         "irq_save_restore_calls", False, _core.TB_PROG_OPS,
         "cli and sti (privileged): the model keeps the mask in memory", kfuncs=IRQ),
    Test("irq_save_restore_in_pair",
         "bpf_res_spin_lock_irqsave() + bpf_res_spin_unlock_irqrestore() less "
         "bpf_res_spin_lock() + bpf_res_spin_unlock() (kfuncs of kernel/bpf/rqspinlock.c, "
         "Linux 6.15 on), a pair each: local_irq_save() and local_irq_restore() inside a lock "
         "pair: pushf; pop; cli, the flags kept on the stack, tested, sti",
         "spin_lock_unlock_irqsave", True,
         emulated="cli and sti (privileged): the model keeps the mask in memory",
         kfuncs=RES, twin="res_spin_lock_pair", model_twin="spin_lock_unlock"),
)


def _op(test, ids=None, at=0):
    """The instructions of one op of `test`, the value's address in r6, its
    line `at` bytes into the value (the lock there, the atomics' word 8 bytes
    on, as a lock slot's counter); `ids`: the IRQ kfuncs' BTF ids
    (available()'s), read here when None."""
    R0, R1, R6 = bpf.R0, bpf.R1, bpf.R6
    word = at + bpf.SPIN_LOCK_CNT
    if test.startswith("spin_lock_pair"):      # with IRQs off too: the same op
        return bpf.spin_lock_pair(at)
    if test == "fetch_add":
        return bpf.mov64_imm(R1, 1) + bpf.atomic_dw(bpf.BPF_ADD | bpf.BPF_FETCH, R6, R1, word)
    if test == "cmpxchg":     # old = *p; cmpxchg(p, old, old + 1): time_bench's, always succeeds
        return (bpf.ldx_dw(R0, R6, word) + bpf.mov64_reg(R1, R0) + bpf.add64_imm(R1, 1)
                + bpf.atomic_dw(bpf.BPF_CMPXCHG, R6, R1, word))
    if test == "xchg":
        return bpf.mov64_imm(R1, 1) + bpf.atomic_dw(bpf.BPF_XCHG, R6, R1, word)
    if test == "this_cpu_inc":
        return bpf.ldx_dw(R1, R6, 0) + bpf.add64_imm(R1, 1) + bpf.stx_dw(R6, R1, 0)
    if test == "helper_call":
        return bpf.call(bpf.FUNC_get_numa_node_id)
    if test == "irq_save_restore":
        return bpf.irq_save_restore(ids or kernel_btf.vmlinux_func_ids(KFUNCS))
    if test in ("irq_save_restore_in_pair", "res_spin_lock_pair"):
        return bpf.res_spin_lock_pair(ids or kernel_btf.vmlinux_func_ids(KFUNCS), at,
                                      test == "irq_save_restore_in_pair")
    raise ValueError(test)


def plan(rounds, referee_rounds, contended):
    """The referee's plan: its rounds (its contended ops take the run's
    --rounds, 6 at least), its contended ops, and the lock and kernel build
    the model's side runs (the host's), or why it cannot run here."""
    why = bpf.refused()
    if why:
        return {"referee_skipped": why}
    return {"referee_rounds": referee_rounds,
            "referee_contended_rounds": max(rounds, stats.MIN_SAMPLES),
            "referee_contended": list(contended), "referee_algo": lockopts.host_algo()["algo"],
            **lockopts.host_build()}


KFUNCS = tuple(sorted({f for t in TESTS if t.kfuncs for f in t.kfuncs[0]}))   # all tests'


def available():
    """(the tests this kernel can run, [why each other cannot], the kfuncs'
    BTF ids): a test whose programs call kfuncs needs them in this kernel
    (its Test.kfuncs say since when) and the kernel's BTF, read once here
    for the run."""
    try:
        ids, why = kernel_btf.vmlinux_func_ids(KFUNCS), None
    except (OSError, bpf.BpfError) as e:
        ids, why = {}, f"the kernel's BTF ({kernel_btf.VMLINUX_BTF}) not read: {e}"
    missing = {t: why or f"this kernel has no {', '.join(t.kfuncs[0])} kfuncs ({t.kfuncs[1]})"
               for t in TESTS if t.kfuncs and not set(t.kfuncs[0]) <= set(ids)}
    return (tuple(t for t in TESTS if t not in missing),
            [f"{t.name}: {why}" for t, why in missing.items()], ids)


def programs(k, test, ids=None):
    """(the op's program, its twin): the same lookup of the same map, then
    2 * UNROLL ops or UNROLL, loaded through `k` (a bpf.Bpf); `ids` as
    _op()'s. The lock and the atomics' word lie in a cache line of their own
    (k.line_start()), as the model's lock slot does.

    Why not a program and an empty twin: a test run's own cost between two
    runs of the program (its loop, the call and return: about 70 cycles on
    a Zen 4 guest) runs beside the ops' chain, not after it, and the empty
    twin's run subtracts time the ops hid. A lone xchg came out 4.42, 4.97
    and 5.19 cycles with 64, 128 and 256 ops less the empty twin, and
    5.42-5.45 as the difference of two programs (64 or 128 to 256): the
    overhead is the same in both, hidden or not."""
    return map_programs(k, *op_map(k, test), test, ids, TWIN_OPS)


TWIN_OPS = (2 * UNROLL, UNROLL)     # programs()' ops: the program's and its twin's


def op_map(k, test):
    """(the map `test`'s programs run on, where its line starts in the value)."""
    if test == "this_cpu_inc":
        return k.map(bpf.BPF_MAP_TYPE_PERCPU_ARRAY, 16), 0
    at = k.line_start()
    if test == "irq_save_restore_in_pair":
        return bpf.spin_lock_map(k, at, bpf.RES_SPIN_LOCK), at
    return (bpf.spin_lock_map(k, at) if test.startswith("spin_lock_pair")
            else k.map(bpf.BPF_MAP_TYPE_ARRAY, bpf.LINE_VALUE)), at


def map_programs(k, m, at, test, ids=None, ops=(UNROLL, 0)):
    """A program of `test` on map `m` for each count of `ops` (by default
    the op's program and its empty twin), its line `at` bytes into the value
    (as _op()'s); a test with IRQs off runs its ops inside bpf.irqs_off().
    A test with a `twin` op: UNROLL of its op and UNROLL of the twin's."""
    t = next(t for t in TESTS if t.name == test)
    if t.kfuncs:
        ids = ids or kernel_btf.vmlinux_func_ids(KFUNCS)
    name, op = test.encode()[:15], _op(test, ids, at)
    if t.twin:
        return tuple(k.prog(bpf.lookup_or_exit(m, o * UNROLL), name)
                     for o in (op, _op(t.twin, ids, at)))

    def body(n):
        return bpf.irqs_off(ids, op * n) if t.irqs_off else op * n
    return tuple(k.prog(bpf.lookup_or_exit(m, body(n)), name) for n in ops)


def _kernel_round(prog, twin, repeat, reverse):
    """One round of a test in the kernel: cycles per op, the program's less
    its twin's (programs()), the two in the round's order."""
    runs = [(twin, 0), (prog, 1)]
    ns = [0, 0]
    for fd, i in (reversed(runs) if reverse else runs):
        ns[i], ret = bpf.test_run(fd, repeat)
        if ret != bpf.DONE:
            raise bpf.BpfError(f"test run returned {ret}", errno.EIO)
    return (ns[1] - ns[0]) / UNROLL


def _repeat(prog):
    ns, _ = bpf.test_run(prog, 1000)
    return int(min(max(RUN_NS / max(ns, 1), 100), 1 << 20))


def _measure(ctx, tests, ids, rounds, algo, build):
    """In the pinned worker: `rounds` rounds, each test's kernel round and
    model round in turn, tests forwards and backwards by round; the model's
    figures less its empty loop, as the kernel's less its twin.

    Each kernel round loads its test's programs anew (closed after it, and
    at the end whatever happens): the JIT puts a program at a random offset
    in its pack (bpf_jit_binary_pack_alloc()), and where the calls and
    returns land moves a call-heavy op. On the Zen 4 guest, eight loads of
    helper_call's programs gave 16.3 to 18.2 cycles a call (the lock pair
    113.3-115.2): one load is one placement, the rounds now sample them."""
    region = ctx.machine.segment.region_names.index("locks")
    entries = lockbench.suite_entries([(t.model, algo if t.locked else None) for t in tests],
                                      [algo], ctx.seg, region, False, "sti", build)
    for t, (_, where) in zip(tests, entries):
        where["irqs_off"] = t.irqs_off
    loops = [calibrate_loops(test, **where) for test, where in entries]
    twin_loops = [calibrate_loops(t.model_twin, **where) if t.model_twin else None
                  for t, (_, where) in zip(tests, entries)]
    empty = calibrate_loops("for_loop")

    def model_round(i, loop):
        """The model's figure for tests[i]: its round's cycles per op less
        the empty loop's, or less its twin test's (whose loop is the same)."""
        (test, where), twin = entries[i], tests[i].model_twin

        def per_op(name, n):
            return clean_round(lambda k: _core.time_bench_round(name, k, **where), n).per_op
        return per_op(test, loops[i]) - (per_op(twin, twin_loops[i]) if twin
                                         else loop / tests[i].per_loop)

    with bpf.Bpf() as k:
        maps = [op_map(k, t.name) for t in tests]

        def load(i):
            return map_programs(k, *maps[i], tests[i].name, ids, TWIN_OPS)

        repeats = []
        for i in range(len(tests)):
            progs = load(i)
            repeats.append(_repeat(progs[0]))
            k.drop(*progs)
        kernel_ns = [[] for _ in tests]
        loads = [0] * len(tests)
        model = [[] for _ in tests]
        for r in range(rounds):
            # the model's empty loop, this round: what its figures carry that the
            # kernel's (a twin subtracted) do not. It may hide beside the ops as
            # the test run's cost does (programs()), but it is 0.7 cycles an
            # iteration, 0.05 an op of a TB_UNROLL loop (kernel.md)
            loop = clean_round(lambda n: _core.time_bench_round("for_loop", n), empty).per_op
            for i in pass_order(len(tests), r):
                progs = load(i)
                loads[i] += 1
                kernel_ns[i].append(_kernel_round(*progs, repeats[i], r % 2 == 1))
                k.drop(*progs)
                model[i].append(model_round(i, loop))
    return kernel_ns, model, repeats, loads


def seconds(rounds):
    """What the referee should take: each round runs every test's two
    programs and its model round, about 10 ms each, and calibration."""
    return 1.0 + rounds * len(TESTS) * 0.03


def measure(cpu, tsc_hz, algo, build, rounds, warnings):
    """Rows: each op this kernel can run (available(); a warning for each
    other) in the kernel and in the model on `cpu`, in TSC cycles, with
    model / kernel round by round; the model's lock is `algo`, its entry
    points and returns kernel build `build` (the host's)."""
    tests, missing, ids = available()
    warnings += [f"kernel referee: {why}" for why in missing]
    with Machine(cpus=[cpu], regions=lockbench.locks_region(1)) as m:
        lockbench.init_locks(m, [algo])
        kernel_ns, model, repeats, loads = m.run(_measure, tests, ids, rounds, algo, build,
                                                 expected=seconds(rounds))[0]
    rows = []
    for t, kns, mod, rep, n in zip(tests, kernel_ns, model, repeats, loads):
        row = {"test": t.name, "placement": PLACEMENT, "cpus": str(cpu),
               "kernel_runs": t.kernel, "model_test": t.model,
               "algo": algo if t.locked else None, "kernel_build": build,
               **_figures([ns * tsc_hz / 1e9 for ns in kns], mod),
               "kernel_ns": stats.median_ci(kns)[0], "repeat": rep, "rounds": rounds,
               "twin_ops": UNROLL, "loads": n}
        if t.emulated:
            row["emulated"] = t.emulated
        if t.irqs_off:
            row["irqs_off"] = True
        if t.model_twin:
            row["model_less"] = t.model_twin
        rows.append(row)
    return rows


def _figures(kernel, model):
    """A row's figures from its rounds' kernel and model cycles per op (in
    step, round by round): each side's median and interval, model / kernel
    round by round, the kernel's as the row's `cycles` (compare reads it).
    A round's kernel figure is the difference of two test runs, which a
    loaded machine can put below zero: `cycles` and its interval, a cost,
    are clipped at 0 (compare refuses a negative cost), kernel_cycles* and
    the samples are as measured."""
    ratio = [m / k if k > 0 else float("inf") for m, k in zip(model, kernel)]
    kfig = stats.median_fields("kernel_cycles", kernel)
    return {**kfig, "cycles": max(kfig["kernel_cycles"], 0.0),
            "cycles_lo": max(kfig["kernel_cycles_lo"], 0.0),
            "cycles_hi": max(kfig["kernel_cycles_hi"], 0.0), "cycles_samples": kernel,
            **stats.median_fields("model_cycles", model),
            **stats.median_fields("model_over_kernel", ratio), "unroll": UNROLL,
            "kernel_samples": kernel, "model_samples": model}
