"""The kernel as referee, contended: the lock pair and the atomics on every
selected CPU at once, in the kernel (BPF test runs) and in the model,
kernel and model in alternate order round by round. Docs:
docs/experiments/kernel.md, "The kernel as referee".
"""
import struct
import time

from ... import _core
from ...machine import workers
from ...machine.machine import Machine
from ..common import bpf, lockbench
from .referee import PLACEMENT, TESTS, UNROLL, _figures, _repeat, programs

CONTENDED_S = 0.2       # each side's hammer in a lock pair's round, every CPU at once


def _kernel_hammer(ctx, prog, empty, repeat, duration):
    """In every worker at once: the counted lock pair's test runs for
    `duration` seconds on one shared map value. Returns the empty twin's ns
    per run (the lookup, uncontended) and each run's (start, end, ns as the
    kernel timed it), start and end on CLOCK_MONOTONIC, shared by the CPUs."""
    empty_ns, _ = bpf.test_run(empty, repeat)
    deadline = time.monotonic() + duration
    runs = []
    while not runs or runs[-1][1] < deadline:
        t0 = time.monotonic()
        ns, _ = bpf.test_run(prog, repeat)
        runs.append((t0, time.monotonic(), ns))
    workers.heartbeat()
    return empty_ns, runs


def _overlapped_ns_per_op(per_cpu):
    """ns per op on each CPU from its runs that lie wholly inside the time
    every CPU was running them: a CPU that started first or ended last ran
    alone for a while, uncontended, and that is not this row's op."""
    start = max(runs[0][0] for _, runs in per_cpu)
    end = min(runs[-1][1] for _, runs in per_cpu)
    out = []
    for empty_ns, runs in per_cpu:
        inside = [ns for t0, t1, ns in runs if t0 >= start and t1 <= end]
        if inside:
            out.append((sum(inside) / len(inside) - empty_ns) / UNROLL)
    return out


def _model_hammer(ctx, region, duration, kbuild):
    """In every worker at once: the model's lock pair (irqsave, flags
    restored by a test of them, as the kernel's) on one lock, its counter
    + 1 inside; (cycles per op, ops)."""
    n, cycles, _, _ = _core.lock_hammer(ctx.seg, ctx.cpu, region, 0,
                                        _core.LOCK_VARIANTS["irqsave"], 0, duration, 0,
                                        False, False, -1, 0, kbuild)
    workers.heartbeat()
    return cycles / n, n


def _model_atomic(ctx, region, op, duration):
    """In every worker at once: the model's locked RMW `op` on one shared
    word (lock slot 1's); (cycles per op, ops)."""
    n, cycles = _core.atomic_hammer(ctx.seg, region, 1, op, duration)
    workers.heartbeat()
    return cycles / n, n


def counted_programs(k):
    """(the contended lock pair's program, its empty twin, their map): UNROLL
    lock pairs, each with the value's counter + 1 inside, as lock_hammer's."""
    m = bpf.spin_lock_map(k)
    return (k.prog(bpf.lookup_or_exit(m, bpf.spin_lock_pair(counted=True) * UNROLL),
                   b"pair_counted"), k.prog(bpf.lookup_or_exit(m, b""), b"pair_counted"), m)


def kernel_count(k, m):
    """The counter of the counted programs' map value."""
    return struct.unpack_from("<q", k.lookup(m), bpf.SPIN_LOCK_CNT)[0]


# The contended rows: the lock pair (a counter + 1 inside, as lock_hammer
# counts its critical sections), then the atomics on one shared word; and
# how long each side runs in a round.
CONTENDED = ("spin_lock_pair", "fetch_add", "cmpxchg", "xchg")
CONTENDED_ATOMIC_S = 0.1


def contended_seconds(rounds, tests=CONTENDED):
    return rounds * 2 * sum((CONTENDED_S if t == "spin_lock_pair" else CONTENDED_ATOMIC_S) + 0.3
                            for t in tests)


def measure_contended(cpus, tsc_hz, algo, build, rounds, tests=CONTENDED):
    """The contended rows: each op of `tests` (of CONTENDED) on every CPU
    of `cpus` at once, in the kernel (its BPF program's test runs on one
    map value) and in the model (lock_hammer of one lock; atomic_hammer of
    one word), kernel and model in alternate order round by round: cycles
    per op while all contend, the mean over the CPUs. The lock pair's
    counter, on each side, must equal the ops it ran (`counted`: a lost
    update would be a broken lock, or a miscount)."""
    rows = []
    with bpf.Bpf() as k, Machine(cpus=cpus, regions=lockbench.locks_region(2)) as m:
        region = lockbench.init_locks(m, [algo])
        for test in tests:
            if test == "spin_lock_pair":
                prog, empty, m_fd = counted_programs(k)
                seconds, model = CONTENDED_S, (_model_hammer, region, CONTENDED_S,
                                               _core.KERNEL_BUILDS[build])
            else:
                prog, empty = programs(k, test)
                seconds, model = CONTENDED_ATOMIC_S, (_model_atomic, region, test,
                                                      CONTENDED_ATOMIC_S)
            # runs of about RUN_NS / 10 uncontended, ten times that contended: tens
            # in a round, each long beside the test run's own set-up between two
            repeat = max(1, _repeat(prog) // 10)
            ops = {"kernel": kernel_count(k, m_fd) if test == "spin_lock_pair" else 0,
                   "model": 0}     # the lock pair's: _repeat's own runs counted
            kernel, modelled = _contended_rounds(m, (_kernel_hammer, prog, empty, repeat, seconds),
                                                 model, seconds, rounds, repeat, tsc_hz, ops)
            row = {"test": f"{test}_contended", "placement": PLACEMENT, "contended": True,
                   "cpus": ",".join(map(str, cpus)),
                   "kernel_runs": f"{KERNEL_RUNS[test]}, on CPUs {','.join(map(str, cpus))} at "
                                  f"once, one map value, {seconds:g} s a side a round: cycles "
                                  "per op, the mean over the CPUs",
                   "model_test": MODEL_CONTENDED[test], "algo": algo if test ==
                   "spin_lock_pair" else None, "kernel_build": build,
                   **_figures(kernel, modelled), "repeat": repeat, "rounds": rounds, "ops": ops}
            if test == "spin_lock_pair":
                row["counted"] = {"kernel": kernel_count(k, m_fd) == ops["kernel"],
                                  "model": int(m.region("locks")[0]["counter"]) == ops["model"]}
            rows.append(row)
    return rows


def miscounted(rows):
    """A warning per contended row whose counter, on a side, is not the ops
    that side ran: its figures count something else than its ops."""
    return [f"kernel referee: {r['test']}: the {side}'s counter is not the ops it ran "
            f"({r['ops'][side]}): its figures are not one op's"
            for r in rows for side, ok in r.get("counted", {}).items() if not ok]


# what each contended row runs, kernel and model
KERNEL_RUNS = {**{t.name: t.kernel for t in TESTS if t.name in CONTENDED},
               "spin_lock_pair": "bpf_spin_lock() + bpf_spin_unlock() of one map value, its "
                                 "counter + 1 inside"}
MODEL_CONTENDED = {"spin_lock_pair": "lock_hammer irqsave, a counter + 1 inside",
                   "fetch_add": "atomic_hammer fetch_add", "cmpxchg": "atomic_hammer cmpxchg",
                   "xchg": "atomic_hammer xchg"}


def _contended_rounds(m, kernel_side, model_side, seconds, rounds, repeat, tsc_hz, ops):
    """`rounds` rounds of one contended op, each side on every CPU at once,
    in alternate order: ([kernel cycles per op], [model's]), a round counted
    whole so that the ratios pair its sides; `ops` gains each side's ops."""
    kernel, model = [], []
    sides = [("kernel", kernel_side), ("model", model_side)]
    for r in range(rounds):
        got = {}
        for side, (fn, *args) in (sides if r % 2 == 0 else sides[::-1]):
            per_cpu = m.run(fn, *args, expected=seconds + 0.3)
            if side == "kernel":
                ops["kernel"] += sum(len(runs) for _, runs in per_cpu) * repeat * UNROLL
                per_cpu = [ns * tsc_hz / 1e9 for ns in _overlapped_ns_per_op(per_cpu)]
            else:
                ops["model"] += sum(n for _, n in per_cpu)
                per_cpu = [c for c, _ in per_cpu]
            if per_cpu:
                got[side] = sum(per_cpu) / len(per_cpu)
        if len(got) == 2:
            kernel.append(got["kernel"])
            model.append(got["model"])
    return kernel, model
