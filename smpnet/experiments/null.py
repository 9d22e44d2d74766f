"""null: the A/A control. One time_bench op in two identical configurations,
A and B (same test, same lock algorithm, same CPU, each on its own lock
slot), timed by the same C loops, calibration and warm-up as `locks`, round
by round in ABBA order, and compared per ABBA block, in which a linear drift
cancels. B - A is the harness's own noise and bias on this machine: a
sound harness says "no measurable difference".
"""
import statistics
from dataclasses import dataclass
from typing import Optional

from .. import _core
from ..errors import BadInput
from ..experiment import Experiment, Metric, Outcome, Params, bounded
from ..machine import tsc
from ..machine.cpus import format_cpus
from ..machine.machine import Machine
from ..measure import stats
from ..measure.time_bench import SUITE, calibrate_loops, clean_round, round_counts
from ..report.report import table
from .common import lockbench, locktext

TESTS = tuple(t for t, _ in SUITE)
SIDES = ("A", "B")
NULL_CLAIM = {
    "seed": None,
    "claim": "two identical configurations cost the same (B - A = 0 cycles)",
    "reference": "0 cycles: the A/A control",
    "unit": "cycles",
    "kind": "measured",
    "margin": None,   # an A/A control: any difference is the harness's (stats.equivalence)
}


def add_options(p):
    p.add_argument("--test", default="spin_lock_unlock", metavar="NAME",
                   help=f"the time_bench test both sides run: {', '.join(TESTS)} "
                        "(default: spin_lock_unlock)")
    p.add_argument("--algo", default="qspinlock", metavar="ALGO",
                   help=f"lock algorithm: {', '.join(lockbench.ALGOS)} (default: qspinlock)")
    p.add_argument("--loops", type=bounded("--loops"), metavar="N",
                   help="ops per round (default: calibrated to 10 ms per round)")
    p.add_argument("--rounds", type=bounded("--rounds"), default=12, metavar="R",
                   help="measured rounds per side, after one warm-up round (default: 12)")


@dataclass(frozen=True)
class NullParams(Params):
    cpus: str
    cpu: int
    test: str
    algo: str
    loops: Optional[int]    # ops per round; None: calibrated
    rounds: int


def params(args, cpus):
    if args.test not in TESTS:
        raise BadInput(f"unknown time_bench test {args.test!r} (choose from {', '.join(TESTS)})")
    if args.algo not in lockbench.ALGOS:
        raise BadInput(f"--algo takes one lock algorithm: {', '.join(lockbench.ALGOS)}")
    if args.rounds // 2 < stats.MIN_SAMPLES:    # a null run is for its verdict
        raise BadInput(f"--rounds {args.rounds} gives no verdict: it needs "
                       f"{2 * stats.MIN_SAMPLES} or more ({stats.MIN_SAMPLES} ABBA blocks)")
    return NullParams(cpus=format_cpus(cpus), cpu=cpus[0], test=args.test, algo=args.algo,
                      loops=args.loops, rounds=args.rounds)


def seconds(p, cpus):
    return 2 * lockbench.suite_seconds(1, p.loops, p.rounds)


def order(rounds):
    """ABBA: A,B then B,A, and so on. Within each block of two rounds a
    linear drift adds the same to both sides (see blocks)."""
    return [SIDES if r % 2 == 0 else SIDES[::-1] for r in range(rounds)]


def blocks(a, b):
    """B - A per complete ABBA block (rounds 2k and 2k+1): (B1 + B2 - A1 - A2) / 2.
    A drift linear in time cancels exactly in each block; a round-by-round
    difference would alternate +d, -d around it. An odd last round is left out."""
    return [(b[k] + b[k + 1] - a[k] - a[k + 1]) / 2 for k in range(0, len(a) - 1, 2)]


def run(cpus, p, progress=None):
    test, rounds = p.test, p.rounds
    lock = dict(SUITE)[test] is not None

    def bench(ctx):
        region = ctx.machine.segment.region_names.index("locks")
        where = {s: dict(seg=ctx.seg, cpu=0, lock_region=region, lock_index=i)
                 for i, s in enumerate(SIDES)}
        loops = p.loops or calibrate_loops(test, **where["A"])
        kept = {s: [] for s in SIDES}
        for side in SIDES:   # warm-up, thrown away
            _core.time_bench_round(test, loops, **where[side])
        for r, sides in enumerate(order(rounds)):
            if progress:
                progress(r, rounds, f"{test} round {r + 1} ({', '.join(sides)})")
            for side in sides:
                kept[side].append(clean_round(
                    lambda n, side=side: _core.time_bench_round(test, n, **where[side]), loops))
        return (loops, {s: [k.per_op for k in kept[s]] for s in SIDES},
                {s: round_counts(kept[s]) for s in SIDES})

    with Machine(cpus=[p.cpu], regions=lockbench.locks_region(2)) as m:
        lockbench.init_locks(m, [p.algo] * 2)
        loops, samples, dropped = m.run(bench, expected=2 * lockbench.suite_seconds(
            1, p.loops, rounds, lockbench.SLOWEST_OP_S))[0]
    tsc_hz = tsc.tsc_hz()
    rows = [{"side": s, "test": test, "algo": p.algo if lock else None,
             "cycles": statistics.median(samples[s]), "cycles_min": min(samples[s]),
             "cycles_max": max(samples[s]), "ns": statistics.median(samples[s]) * 1e9 / tsc_hz,
             "loops": loops, "rounds": rounds, "samples": samples[s], **dropped[s]}
            for s in SIDES]
    if rounds // 2 < stats.MIN_SAMPLES:
        return Outcome(p.record(), rows, [], [f"no verdict: it needs --rounds {2 * stats.MIN_SAMPLES} "
                                     f"or more ({stats.MIN_SAMPLES} ABBA blocks)"])
    delta, ci = stats.median_ci(blocks(samples["A"], samples["B"]))
    return Outcome(p.record(), rows, [stats.judge(NULL_CLAIM, delta, ci,
                                         pairs=len(blocks(samples["A"], samples["B"])))])


def text(env, extra):
    p, rows = env["params"], env["results"]
    lines = [f"# null: {p['test']}" + (f" [{p['algo']}]" if rows[0]["algo"] else "")
             + f" twice on CPU {p['cpu']}, {p['rounds']} rounds of {rows[0]['loops']} ops "
             "per side, ABBA order"]
    lines.append(table([(locktext.row_name(r, r["side"]), r["cycles"], r["cycles_min"], r["cycles_max"], r["ns"])
                        for r in rows], ["side", "cycles", "min", "max", "ns"]))
    dropped = locktext.dropped_line(rows)
    if dropped:
        lines.append(dropped)
    for v in env["verdicts"]:
        lo, hi = v["interval"]
        lines.append(f"B - A = {v['measured']:+.3f} cycles per op (median over ABBA blocks) "
                     f"[95 % interval {lo:+.3f} .. {hi:+.3f}] -> {v['verdict']}")
    if not env["verdicts"]:
        lines.append("no verdict (see the warnings)")
    return "\n".join(lines)


EXPERIMENT = Experiment(
    name="null",
    help="the A/A control: one op in two identical configurations, B - A",
    description="Times one time_bench op in two identical configurations, A and B, through "
                "the same harness as locks, rounds interleaved ABBA, and reports B - A with "
                "its 95 % interval. A sound harness says: no measurable difference.",
    add_options=add_options, params=params, seconds=seconds, run=run, text=text,
    metric=Metric(("side", "test", "algo"), "cycles", "samples", "cycles_min", "cycles_max"),
    machine_options=False,
)
