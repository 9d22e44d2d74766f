"""locks: the time_bench_sample suite, uncontended, on one pinned CPU;
seed 003's irqsave - irq cost, as the seed measured it.

`locks --contended` runs the `contended` experiment instead (its options
stay here so that the command line people know keeps working).
"""
from dataclasses import dataclass
from typing import Optional

from ..errors import BadInput
from ..experiment import Experiment, Metric, Outcome, Params, bounded, parse_list
from ..machine import kernel_build
from ..machine.cpus import format_cpus
from ..measure import calibration, stats
from ..measure.time_bench import BUILT
from ..report import report
from ..report.report import table
from ..seeds import SEED_003
from .common import lockbench, lockpairs, locktext, lockopts
from .common.lockbench import ALGOS, VARIANTS

ROUNDS = 20   # 10 blocks of two rounds: a 95 % interval from the 2nd to the 9th


def add_options(p):
    lockopts.add_lock_options(p, several_builds=True)
    p.add_argument("--loops", type=bounded("--loops"), metavar="N",
                   help="ops per round (default: calibrated to 10 ms per round)")
    p.add_argument("--rounds", type=bounded("--rounds"), metavar="R",
                   help=f"measured rounds per test, after one warm-up round (default: {ROUNDS})")
    p.add_argument("--contended", action="store_true",
                   help="every selected CPU hammers one shared lock (the contended experiment)")
    lockopts.add_contended_options(p, "with --contended: ")
    calibration.add_option(p, "(default: none)", use="whose kernel-as-referee rows (the "
                           "kernel's own lock pair and atomics) are shown beside this run's")


@dataclass(frozen=True)
class LocksParams(Params):
    cpus: str
    algo: list
    variant: list
    restore: str
    check: bool
    contended: bool
    kernel_build: list
    kernel_build_record: dict
    seed_003_builds: list       # `all`'s: seed 003's rows alone under these builds too
    algo_host: Optional[dict]
    loops: Optional[int]        # None: calibrated
    rounds: int
    cpu: int
    calibration: Optional[dict]


def params(args, cpus):
    algos, host = lockopts.parse_algos(args.algo)
    variants = parse_list(args.variant, VARIANTS, "lock variant")
    contended_only = [o for o in ("--ncpus",) + lockopts.CONTENDED_ONLY
                      if getattr(args, o[2:].replace("-", "_")) is not None]
    contended_only += ["--oversubscribe"] if args.oversubscribe else []
    if contended_only:
        raise BadInput(f"{' and '.join(contended_only)}: for --contended runs only")
    builds, record = lockopts.kernel_builds(args.kernel_build, several=True)
    return LocksParams(cpus=format_cpus(cpus), algo=algos, variant=variants,
                       restore=args.restore, check=args.check, contended=False,
                       kernel_build=builds, kernel_build_record=record, seed_003_builds=[],
                       algo_host=host, loops=args.loops, rounds=args.rounds or ROUNDS,
                       cpu=cpus[0], calibration=calibration.from_args(args))


def _builds(kernel_builds):
    """The builds a run's suite ran under (results before --kernel-build: inline)."""
    return kernel_builds or ["inline"]


# The algorithm seed 003's verdict is given on (the kernel's lock, when it
# ran), and the variants it needs.
SEED_003_VARIANTS = ["irq", "irqsave"]


def _seed_algo(algos):
    return "qspinlock" if "qspinlock" in algos else algos[0]


def seconds(p, cpus):
    n = len(lockbench.suite_plan(p.algo, p.variant))
    n_locks = len(lockbench.suite_plan(p.algo, p.variant, locks_only=True, built_too=True))
    n_seed = len(lockbench.suite_plan([_seed_algo(p.algo)], SEED_003_VARIANTS, locks_only=True))
    return lockbench.suite_seconds(n + n_locks * (len(_builds(p.kernel_build)) - 1)
                                   + n_seed * len(p.seed_003_builds),
                                   p.loops, p.rounds)


def run(cpus, p, progress=None):
    """The suite once per kernel build (the tests on no lock with the first
    only, but local_BH_disable_enable, which the build shapes too), each
    with its own seed 003 verdict; then, for each of `seed_003_builds`
    (`all`'s), seed 003's rows alone."""
    builds = _builds(p.kernel_build)
    runs = [(b, p.algo, p.variant) for b in builds]
    runs += [(b, [_seed_algo(p.algo)], SEED_003_VARIANTS) for b in p.seed_003_builds]
    rows, verdicts, reports = [], [], {}
    for i, (build, algos, variants) in enumerate(runs):
        if progress and len(runs) > 1:
            progress(0, 1, f"kernel build {build} ({i + 1} of {len(runs)})")
        some, found = lockbench.run_suite(
            p.cpu, algos, variants, loops=p.loops, rounds=p.rounds,
            restore=p.restore, check=p.check, progress=progress, locks_only=i > 0,
            build=build, built_too=i < len(builds))
        lockpairs.derived(some)
        rows += some
        for k, n in found.items():
            reports[k] = reports.get(k, 0) + n
        v = lockpairs.seed_003_verdict(some, _seed_algo(p.algo), build)
        verdicts += [v] if v else []
    return Outcome(p.record(**({"checker_reports": reports} if p.check else {})), rows,
                   verdicts)


# `all` reports seed 003 under the host's build and under x86-nopreempt
# (with the host's return), whose irqsave is a call and irq's unlock
# inline: so a reader sees which part of irqsave - irq is the flags save
# and which the call.
ALL_SEED_003_BUILD = "x86-nopreempt"


def _all_seed_003_build(host):
    return ALL_SEED_003_BUILD + kernel_build.split(host)[1]


def plan(cpus, quick):
    if quick:
        algos, variants, rounds = ["qspinlock", "ticket", "tas"], ["plain", "irq", "irqsave"], 12
    else:
        algos, variants, rounds = list(ALGOS), list(VARIANTS), ROUNDS
    host = lockopts.host_build()
    return LocksParams(cpus=format_cpus(cpus), algo=algos, variant=variants, restore="sti",
                       check=False, contended=False, kernel_build=[host["kernel_build"]],
                       kernel_build_record=host["kernel_build_record"], algo_host=None,
                       seed_003_builds=[b for b in (_all_seed_003_build(host["kernel_build"]),)
                                        if b != host["kernel_build"]],
                       loops=None, rounds=rounds, cpu=cpus[0], calibration=None)


def _built(r):
    """Whether the row's figure is its kernel build's: a lock test's, or a
    test on no lock that the build shapes (time_bench.BUILT)."""
    return bool(r.get("algo")) or r["test"] in BUILT


def time_bench_row_line(r):
    """A result row in time_bench's line format, algorithm appended."""
    period = r["wall_s"] / r["rounds"] if r["rounds"] else 0.0
    line = (f"Type:{r['test']} Per elem: {round(r['cycles'])} cycles(tsc) {r['ns']:.3f} ns "
            f"(step:0) - (measurement period time:{period:.9f} sec "
            f"time_interval:{round(period * 1e9)}) - "
            f"(invoke count:{r['loops']} tsc_interval:{round(r['cycles'] * r['loops'])})")
    tags = [t for t in (r.get("algo"), r.get("kernel_build") if _built(r) else None,
                        locktext.NO_CLEAN_ROUND.strip("[]") if r.get("no_clean_round")
                        else None) if t]
    return line + (f" [{', '.join(tags)}]" if tags else "")


def text(env, extra):
    p, rows, verdicts = env["params"], env["results"], env["verdicts"]
    lines = [f"# time_bench suite on CPU {p['cpu']}: {p['rounds']} rounds after a warm-up, "
             f"restore={p['restore']}" + (", checker on" if p["check"] else "")]
    record = p.get("kernel_build_record")
    lines += lockopts.algo_host_lines(p)
    lines += [f"# kernel build: {kernel_build.describe_model(b, record)}"
              for b in _builds(p.get("kernel_build")) + p.get("seed_003_builds", [])]
    lines += [time_bench_row_line(r) for r in rows]
    lines.append("")
    cells = [(locktext.row_name(r, r["test"]), r["algo"] or "-", r.get("kernel_build", "inline") if _built(r) else "-",
              r["cycles"], r["cycles_min"], r["cycles_max"], r["ns"]) for r in rows]
    lines.append("Summary, per op (median of rounds, with min and max):")
    lines.append(table(cells, ["test", "algo", "build", "cycles", "min", "max", "ns"]))
    overhead = next((r["cycles"] for r in rows if r["test"] == "for_loop"), None)
    if overhead is not None:
        lines.append(f"Loop overhead: for_loop = {overhead:.2f} cycles per iteration, "
                     "included in every figure above.")
    dropped = locktext.dropped_line(rows)
    lines.append(f"Rounds: {dropped}." if dropped else
                 "Rounds: none thrown out (no round's thread was switched out).")
    lines += harness_text(rows, p["check"], p["restore"])
    lines.append("")
    for v in verdicts:
        text = report.verdict_lines(v, where=f"{v['algo']}, restore={p['restore']}, kernel "
                                             f"build {v.get('kernel_build', 'inline')}")
        lines += text[:2] + locktext.control_lines(v, p["restore"], p["check"]) + text[2:]
    if not verdicts:
        lines.append(f"seed 003: no verdict (it needs the irq and irqsave variants and "
                     f"--rounds {2 * stats.MIN_SAMPLES} or more: {stats.MIN_SAMPLES} blocks of two)")
    lines.append(locktext.checker_text(p.get("checker_reports", {}), p["check"]))
    lines += referee_lines(p.get("calibration"), rows)
    return "\n".join(lines)


def _same_path(row, ref):
    """Whether a row of this run times the op a referee row's model did:
    its test, and for a lock its algorithm and kernel build (never with
    IRQs off: no row of `locks` runs so)."""
    return (row["test"] == ref.get("model_test") and not row.get("contended")
            and not ref.get("irqs_off")
            and (ref.get("algo") is None or (row["algo"] == ref["algo"] and
                                             row.get("kernel_build") == ref.get("kernel_build"))))


def _this_run(rows, ref, loop):
    """This run's cycles of the path a referee row's model timed: its
    test's row less the empty loop `loop`, or less its twin test's row
    (`model_less`: the loop is in both); None where either did not run."""
    def cycles(test):
        return next((row["cycles"] for row in rows
                     if _same_path(row, {**ref, "model_test": test})), None)
    mine, less = cycles(ref.get("model_test")), (cycles(ref["model_less"])
                                                 if ref.get("model_less") else loop)
    return None if mine is None or less is None else mine - less


def referee_lines(cal, rows):
    """The kernel as referee from a profile (--calibration, or `all`'s):
    each op the kernel timed inside itself then, and this run's row of the
    same path beside it; nothing without a profile or its referee."""
    ref = (cal or {}).get("referee")
    if not ref:
        return [] if cal is None else ["", "Kernel as referee: the profile has none (it was "
                                       "saved without root, not on x86-64, or with "
                                       "--no-referee)"]
    # the referee's model figures are less the empty loop, as the kernel's are
    # less a twin program; this run's rows carry it (text(): "Loop overhead")
    loop = next((row["cycles"] for row in rows if row["test"] == "for_loop"), None)
    cells = []
    for op, r in ref.items():
        mine = _this_run(rows, r, loop)
        cells.append((op, locktext.figure(r["kernel_cycles"], (r["kernel_cycles_lo"],
                                                                 r["kernel_cycles_hi"]), 2),
                      calibration.referee_model_test(r) if r.get("model_test") else "-",
                      f"{r['model_over_kernel']:.3f}" + (f" ({r['judged_placement']})" if
                                                         r.get("judged_placement") else ""), mine,
                      f"{mine / r['kernel_cycles']:.3f}" if mine is not None else "not run"))
    return ["", f"Kernel as referee, from the profile {cal.get('source', '')} (measured "
            f"{cal.get('created', '?')} on CPU {next(iter(ref.values())).get('cpus')}): each op "
            "timed inside the running kernel then, TSC cycles; beside it this run's row of the "
            "same path (test, and for the lock pair its algorithm and build), less its empty "
            "loop as the referee's model is",
            table(cells, ["op", "kernel cycles [95 % interval]", "model's test",
                          "model / kernel then", "this run's cycles - loop", "this run / kernel"])]


def harness_text(rows, check, restore):
    """What the harness adds (smpnet / the bare-C baseline) and irqsave's
    control, per algorithm, from the paired rounds (lockpairs.derived)."""
    lines = []
    base = [r for r in rows if "harness_overhead" in r]
    if not base:
        lines += ["", "Harness overhead: not measured (it needs the plain variant and "
                  f"--rounds {2 * stats.MIN_SAMPLES} or more)"]
    else:
        lines += ["", "Harness overhead, spin_lock_unlock: smpnet / hand-written C "
                  f"({lockbench.BASELINE}), median over blocks of two rounds [95 % interval]"
                  + (" (checker on: smpnet's figures include the checker)" if check else "")]
        lines.append(table([(r["algo"], r.get("kernel_build", "inline"), r["cycles"],
                             r["bare_cycles"],
                             locktext.figure(r["harness_overhead"], r["harness_overhead_interval"], 3))
                            for r in base],
                           ["algo", "build", "smpnet cycles", "bare cycles",
                            "smpnet / bare [95 % interval]"]))
    ctl = [r for r in rows if "pushf_pop_cycles" in r or "control_minus_irq_cycles" in r]
    if ctl:
        lines += ["", f"irqsave's control ({lockbench.CONTROL}: irqsave without its pushf; pop), "
                  "cycles, median over blocks of two rounds [95 % interval]"]
        lines.append(table([(r["algo"], r.get("kernel_build", "inline"), r["cycles"],
                             locktext.figure(r["pushf_pop_cycles"], r["pushf_pop_interval"])
                             if "pushf_pop_cycles" in r else None,
                             locktext.figure(r["control_minus_irq_cycles"],
                                              r["control_minus_irq_interval"])
                             if "control_minus_irq_cycles" in r else None)
                            for r in ctl],
                           ["algo", "build", "control cycles", "irqsave - control (pushf; pop)",
                            "control - irq (" + locktext.control_minus_irq(
                                restore, check, {r.get("kernel_build", "inline") for r in ctl})
                            + ")"]))
    return lines


def plot(ax, rows):
    """Left: each lock test's median cycles per algorithm (and kernel build),
    with the rounds' min to max. Right: seed 003's question, irqsave - irq
    paired round by round, per algorithm and build, with its 95 % interval
    beside zero and the seed's 14 cycles."""
    lock_rows = [r for r in rows if r["algo"]]
    tests = list(dict.fromkeys(r["test"] for r in lock_rows))
    by_side = {}                # (algo, build): its rows
    for r in lock_rows:
        by_side.setdefault((r["algo"], r.get("kernel_build", "inline")), []).append(r)
    sides = list(by_side)
    several_builds = len({b for _, b in sides}) > 1
    name = {s: f"{s[0]}, {s[1]}" if several_builds else s[0] for s in sides}
    short = {s: f"{s[0]}\n{s[1]}" if several_builds else s[0] for s in sides}
    fig = ax.figure
    ax.remove()
    left, right = fig.add_subplot(1, 3, (1, 2)), fig.add_subplot(1, 3, 3)
    width = 0.8 / max(len(sides), 1)
    for i, side in enumerate(sides):
        mine = {r["test"]: r for r in by_side[side]}
        ys = [mine[t]["cycles"] if t in mine else 0 for t in tests]
        err = [[max(0.0, mine[t]["cycles"] - mine[t]["cycles_min"]) if t in mine else 0
                for t in tests],
               [max(0.0, mine[t]["cycles_max"] - mine[t]["cycles"]) if t in mine else 0
                for t in tests]]
        left.bar([x + i * width for x in range(len(tests))], ys, width, yerr=err, capsize=2,
                 label=name[side])
    left.set_xticks([x + width * (len(sides) - 1) / 2 for x in range(len(tests))])
    left.set_xticklabels(tests, rotation=20, ha="right", fontsize=8)
    left.set_ylabel("TSC cycles per lock + unlock\n(median; whiskers: rounds' min to max)")
    left.set_title("Uncontended lock costs", fontsize="medium")
    left.set_ylim(0, left.get_ylim()[1] * 1.3)     # room for the legend above the bars
    left.legend(fontsize="small", loc="upper left", ncol=2)
    # seed 003: irqsave - irq, where both ran with enough rounds for an interval
    found = []
    for side in sides:
        d = lockpairs.paired(by_side[side], "spin_lock_unlock_irqsave", "spin_lock_unlock_irq", side[0],
                             stats.per_op_diff)
        if d:
            found.append((short[side], d[0], d[1]))
    if found:
        ys = range(len(found))
        right.errorbar([f[1] for f in found], ys, capsize=4, fmt="o",
                       xerr=[[f[1] - f[2][0] for f in found], [f[2][1] - f[1] for f in found]])
        right.set_yticks(list(ys))
        right.set_yticklabels([f[0] for f in found], fontsize=8)
        right.axvline(0, color="0.4", lw=1)
        right.axvline(SEED_003["size"], color="tab:red", ls="--", lw=1)
        right.text(SEED_003["size"], 1.01, f"seed: {SEED_003['size']:g}", color="tab:red",
                   ha="center", va="bottom", fontsize="small",
                   transform=right.get_xaxis_transform())
        right.set_ylim(-0.5, len(found) - 0.5)
        right.set_xlabel("cycles (median, 95 % interval)")
    else:
        right.text(0.5, 0.5, "seed 003: needs irq, irqsave\nand --rounds 12 or more",
                   ha="center", va="center", transform=right.transAxes)
        right.set_xticks([])
        right.set_yticks([])
    right.set_title("seed 003: irqsave - irq", fontsize="medium", pad=14)
    fig.suptitle("locks: uncontended spinlock costs", fontsize="large")


EXPERIMENT = Experiment(
    name="locks",
    help="spinlock and IRQ-flag costs (seed 003: irqsave vs irq)",
    description="The time_bench_sample suite, uncontended, on the first selected CPU, "
                "in time_bench's line format, then a summary and seed 003's verdict. "
                "With --contended, every selected CPU hammers one shared lock instead "
                "(the contended experiment).",
    add_options=add_options, params=params, seconds=seconds, run=run, text=text,
    metric=Metric(("test", "algo", "variant", "restore", "kernel_build", "contended"), "cycles",
                  "samples", "cycles_min", "cycles_max", defaults={"kernel_build": "inline"}),
    kinds=("contended", {True: "contended", False: "locks"}), plan=plan, seeds=("003",), plot=plot,
    delegate=lambda args: "contended" if args.contended else None, calibrated=True,
)
