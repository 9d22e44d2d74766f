"""contended: every selected CPU hammers one shared lock (time_bench's
concurrent mode): acquisitions/s, cycles per acquisition, each CPU's share
and Jain's fairness index, per algorithm and variant.

Also what `locks --contended` runs. Inside `all` it runs on 1, 2, ... N
CPUs: throughput by CPU count.
"""
import os
import statistics
from dataclasses import dataclass
from typing import Optional

from ... import _core
from ...errors import BadInput
from ...experiment import Experiment, Metric, Outcome, Params, parse_list
from ...machine import kernel_build, machine, tsc
from ...machine.cpus import format_cpus
from ...machine.machine import Machine
from ...measure import stats
from ...measure.time_bench import TEST_OF_VARIANT
from ...report.report import table
from ..common import lockbench, locktext, lockopts
from ..common.lockbench import ALGOS, VARIANTS
from . import lockrank


def add_options(p):
    lockopts.add_lock_options(p)
    lockopts.add_contended_options(p)


@dataclass(frozen=True)
class ContendedParams(Params):
    cpus: str
    algo: list
    algo_host: Optional[dict]
    variant: list
    restore: str
    check: bool
    contended: bool
    kernel_build: str
    kernel_build_record: dict
    duration_s: float
    hold_cycles: list
    think_cycles: list
    repeat: int
    rng_seed: int
    scale: Optional[list]       # the emulated CPU counts swept; None: --ncpus's one
    ncpus: int
    oversubscribe: bool


def params(args, cpus):
    for option in ("loops", "rounds"):   # locks --contended: the suite's options
        if getattr(args, option, None) is not None:
            raise BadInput(f"--{option}: for the uncontended suite only, not --contended")
    duration = lockopts.DURATION if args.duration is None else args.duration
    hold = [lockopts.HOLD_CYCLES] if args.hold_cycles is None else args.hold_cycles
    think = [lockopts.THINK_CYCLES] if args.think_cycles is None else args.think_cycles
    for option, values in (("--hold-cycles", hold), ("--think-cycles", think)):
        for v in values:
            _check_cycles(option, v, duration, tsc.tsc_hz())
    scale = args.scale
    if scale is not None:
        if args.ncpus is not None:
            raise BadInput("--scale gives the emulated CPU counts: not with --ncpus")
        if max(scale) > len(cpus) and not args.oversubscribe:
            raise BadInput(f"--scale {max(scale)}: only {len(cpus)} CPUs are selected "
                           f"({format_cpus(cpus)}); more needs --oversubscribe (timings "
                           "then not valid)")
        scale = sorted(scale)
    seed = args.rng_seed if args.rng_seed is not None else \
        int.from_bytes(os.urandom(8), "little")
    builds, record = lockopts.kernel_builds(args.kernel_build)
    algos, host = lockopts.parse_algos(args.algo)
    return ContendedParams(
        cpus=format_cpus(cpus), algo=algos, algo_host=host,
        variant=parse_list(args.variant, VARIANTS, "lock variant"),
        restore=args.restore, check=args.check, contended=True,
        kernel_build=builds[0], kernel_build_record=record,
        duration_s=duration, hold_cycles=hold, think_cycles=think,
        repeat=lockopts.REPEAT if args.repeat is None else args.repeat,
        rng_seed=seed, scale=scale, ncpus=args.ncpus or len(cpus),
        oversubscribe=args.oversubscribe)


def _check_cycles(option, cycles, duration, tsc_hz):
    if cycles > duration * tsc_hz:
        raise BadInput(f"{option} {cycles} is longer than the whole "
                       f"{duration} s run ({duration * tsc_hz:.0f} cycles)")


def contended_seconds(n_combos, duration, ncpus=2, real_cpus=2):
    return n_combos * machine.run_seconds(duration, ncpus, real_cpus, counted=False)


def _counts(p):
    """The CPU counts the run sweeps (None: the one machine of --ncpus)."""
    return p.scale or [None]


def seconds(p, cpus):
    n = len(p.algo) * len(p.variant) * p.repeat * len(p.hold_cycles) * len(p.think_cycles)
    return sum(contended_seconds(n, p.duration_s, k or p.ncpus,
                                 min(k, len(cpus)) if k else len(cpus))
               for k in _counts(p))


def run(cpus, p, progress=None):
    sweep = [(h, t) for h in p.hold_cycles for t in p.think_cycles]
    counts = _counts(p)
    total = len(counts) * len(sweep) * p.repeat * len(p.algo) * len(p.variant)
    rows, reports, done = [], {}, [0]

    def step(n, _, what):   # one progress count over the whole sweep
        if progress:
            progress(done[0], total, what)
        done[0] += 1

    for k in counts:
        # k emulated CPUs on the first k selected, or, past them (with
        # --oversubscribe), on all of them in turn
        r, new = run_contended(cpus[:k] if k else cpus, p.algo, p.variant,
                               duration=p.duration_s, restore=p.restore,
                               check=p.check, ncpus=k or p.ncpus,
                               oversubscribe=k > len(cpus) if k else p.oversubscribe,
                               progress=step, sweep=sweep, repeat=p.repeat,
                               rng_seed=p.rng_seed, build=p.kernel_build)
        rows += r
        reports = {x: reports.get(x, 0) + new.get(x, 0) for x in {**reports, **new}}
    lockrank.rank(rows)
    return Outcome(p.record(**({"checker_reports": reports} if p.check else {})), rows)


def plan(cpus, quick):
    # short: a few repeats of 0.05 s give `all` a scaling curve with intervals
    return ContendedParams(
        cpus=format_cpus(cpus), algo=list(ALGOS) if not quick else
        ["qspinlock", "ticket", "tas"], variant=["plain"] if quick else ["plain", "irq"],
        restore="sti", check=False, contended=True, **lockopts.host_build(), algo_host=None,
        duration_s=0.05 if quick else 0.1, hold_cycles=[0], think_cycles=[0],
        repeat=3 if quick else 6, rng_seed=0, ncpus=len(cpus), oversubscribe=False,
        scale=list(range(1, len(cpus) + 1)))


def run_contended(cpus, algos, variants, duration=0.5, hold_cycles=0, restore="sti",
                  check=False, ncpus=None, oversubscribe=False, progress=None,
                  think_cycles=0, sweep=None, repeat=1, rng_seed=0, build="inline"):
    """Every CPU hammers one lock, for each algorithm and variant, `repeat`
    rounds at each (hold, think) point of `sweep` (default: the one given),
    each round in its own shuffled order (lockrank.round_orders). One row
    per point, algorithm and variant, each figure a median over the rounds
    with its interval and samples; the lock entry points shaped as kernel
    build `build` makes them. The checker's reports are given per row, and
    in total."""
    rows = []
    combos = [(a, v) for a in algos for v in variants]
    sweep = sweep or [(hold_cycles, think_cycles)]
    with Machine(cpus=cpus, ncpus=ncpus, oversubscribe=oversubscribe,
                 regions=lockbench.locks_region(len(algos))) as m:
        region = lockbench.init_locks(m, algos)
        tsc_hz = float(m.header["tsc_hz"])
        for hold, think in sweep:   # for Python callers; the CLI checked them
            _check_cycles("--hold-cycles", hold, duration, tsc_hz)
            _check_cycles("--think-cycles", think, duration, tsc_hz)
        n, total = 0, len(sweep) * repeat * len(combos)
        for hold, think in sweep:
            runs = {c: [] for c in combos}
            point = (len(m.cpu_map), hold, think)
            for order in lockrank.round_orders(combos, repeat, rng_seed, point):
                for algo, variant in order:
                    if progress:
                        progress(n, total, f"{algo} {variant}")
                    n += 1
                    runs[(algo, variant)].append(
                        _one(m, region, algos.index(algo), algo, variant, duration, hold,
                             think, check, restore, build))
            rows += [_row(m, algo, variant, restore, runs[(algo, variant)], tsc_hz, duration,
                          hold, think, check) for algo, variant in combos]
        reports = lockbench.checker_reports(m)
    return rows, reports


def _one(m, region, index, algo, variant, duration, hold, think, check, restore, build):
    """One run of one algorithm and variant: its per-CPU results, the counter
    under the lock, and the checker's new reports."""
    _core.lock_init(m.segment.buf, region, index, _core.LOCK_ALGOS[algo], index)
    before = lockbench.checker_reports(m)
    per_cpu = m.run(_hammer, region, index, _core.LOCK_VARIANTS[variant], duration,
                    hold, think, check, restore == "popf", _core.KERNEL_BUILDS[build],
                    expected=duration,
                    progress=lambda m: int(m.region("locks")["counter"].sum()))
    return {"per_cpu": per_cpu, "counter": int(m.region("locks")[index]["counter"]),
            "reports": lockbench.new_reports(before, lockbench.checker_reports(m))
            if check else {}}


def invariant_failures(rows):
    """Contended rows whose lock let two CPUs in at once (the counter it
    guards disagrees with the acquisitions counted)."""
    return [f"{r['algo']} {r['variant']}: mutual exclusion broken (the counter under the "
            f"lock disagrees with {r['loops']} acquisitions)"
            for r in rows if r.get("contended") and not r["mutual_exclusion"]]


def _hammer(ctx, region, index, variant, duration, hold_cycles, think_cycles, check, popf,
            kbuild):
    return _core.lock_hammer(ctx.seg, ctx.cpu, region, index, variant, 0, duration,
                             hold_cycles, check, popf, -1, think_cycles, kbuild)


def _figures(per_cpu, tsc_hz):
    """One run's figures (lockrank.FIGURES)."""
    acq = [r[0] for r in per_cpu]
    total = sum(acq)
    # a CPU's cycles per acquisition: its run time over its own acquisitions
    cyc = [r[1] / r[0] if r[0] else float("inf") for r in per_cpu]
    elapsed = max(r[1] for r in per_cpu)
    seconds = elapsed / tsc_hz
    return {"acq_per_s": total / seconds if seconds else 0.0,
            "cycles": statistics.median(cyc),
            # the machine's: run time over all acquisitions
            "system_cycles_per_acq": elapsed / total if total else float("inf"),
            "fairness": stats.jain_fairness(acq),
            "spins_per_acq": sum(r[2] for r in per_cpu) / total if total else 0.0}


def _row(m, algo, variant, restore, runs, tsc_hz, duration, hold, think, check):
    """One point's row: every figure a median over the rounds, with its 95 %
    interval and the rounds' samples; per CPU, the totals over the rounds."""
    fig = lockrank.summarise([_figures(r["per_cpu"], tsc_hz) for r in runs])
    ncpu = len(runs[0]["per_cpu"])
    acq = [sum(r["per_cpu"][i][0] for r in runs) for i in range(ncpu)]
    cyc_total = [sum(r["per_cpu"][i][1] for r in runs) for i in range(ncpu)]
    cyc = [c / a if a else float("inf") for c, a in zip(cyc_total, acq)]
    total = sum(acq)
    row = {
        "test": TEST_OF_VARIANT[variant], "algo": algo, "variant": variant,
        "restore": restore, "cpus": [int(c) for c in m.cpu_map], "contended": True,
        "ns": fig["cycles"] * 1e9 / tsc_hz, "cycles_min": min(cyc), "cycles_max": max(cyc),
        "loops": total, "rounds": len(runs), **fig,
        "shares": [a / total if total else 0.0 for a in acq],
        "duration_s": duration, "hold_cycles": hold, "think_cycles": think,
        "mutual_exclusion": all(sum(x[0] for x in r["per_cpu"]) == r["counter"] for r in runs),
        "per_cpu": [{"cpu": i, "real_cpu": int(m.cpu_map[i]), "acquisitions": acq[i],
                     "cycles_per_acq": cyc[i], "spins": sum(r["per_cpu"][i][2] for r in runs)}
                    for i in range(ncpu)],
        "timing_valid": m.timing_valid,
    }
    if check:
        row["checker_reports"] = {}
        for r in runs:
            for k, n in r["reports"].items():
                row["checker_reports"][k] = row["checker_reports"].get(k, 0) + n
    return row


def _fig(r, name, scale=1.0, digits=1):
    """`median [low .. high]` of one figure of a row."""
    lo, hi = (x / scale if x is not None else float("inf") for x in r[f"{name}_interval"])
    v = r[name] / scale if r[name] is not None else float("inf")
    return f"{v:.{digits}f} [{lo:.{digits}f} .. {hi:.{digits}f}]"


def _shares(r):
    s = [x * 100 for x in r["shares"]]
    return "/".join(f"{x:.0f}" for x in s) if len(s) <= 4 else f"{min(s):.0f}-{max(s):.0f}"


def text(env, extra):
    p, rows = env["params"], env["results"]
    points = {}
    for r in rows:
        points.setdefault(lockrank.point_of(r), []).append(r)
    lines = [f"{p.get('repeat', 1)} rounds of {p['duration_s']} s per algorithm and variant "
             f"at each point, each round in its own shuffled order (RNG seed "
             f"{p.get('rng_seed')}); every figure is the median over the rounds "
             f"[95 % interval].",
             "Kernel build: " + kernel_build.describe_model(p.get("kernel_build", "inline"),
                                                            p.get("kernel_build_record"))]
    lines += lockopts.algo_host_lines(p)
    for (k, hold, think), group in points.items():
        lines += ["", f"# {k} CPUs hammer one lock, hold {hold} cycles, think {think} cycles"]
        cells = [(r["algo"], r["variant"], _fig(r, "acq_per_s", 1e6, 2), _fig(r, "cycles"),
                  _fig(r, "system_cycles_per_acq"), _fig(r, "fairness", digits=3),
                  _fig(r, "spins_per_acq", digits=2), _shares(r),
                  "yes" if r["mutual_exclusion"] else "NO") for r in group]
        lines.append(table(cells, ["algo", "variant", "M acq/s", "cycles/acq per CPU",
                                   "cycles/acq system", "fairness (Jain)", "spins/acq",
                                   "shares %", "exclusive"]))
        if all("rank" in r for r in group):
            lines += [""] + lockrank.ranking_text(group)
    lines += ["", "cycles/acq per CPU: median over CPUs of each CPU's run time over its own "
              "acquisitions; system: run time over all acquisitions (at hold 0 and think 0, one "
              "hand-over of the lock: the loop times no hand-over on its own); fairness: 1.0 = "
              "equal shares, 1/N = one CPU got all; shares: each CPU's acquisitions over all "
              "rounds. gain %: the faster's throughput over the slower's, round by round; "
              f"'{lockrank.REAL}' where its 95 % interval excludes 0. Ranking: '>' a real "
              "difference, '~' none measurable, '?' too few rounds "
              f"(under {stats.MIN_SAMPLES})."]
    lines.append(locktext.checker_text(p.get("checker_reports", {}), p["check"]))
    return "\n".join(lines)


def _band(ax, rows, x_of, figure, scale, label):
    """One line with its interval band: `figure` against x_of(row)."""
    pts = sorted((x_of(r), r[figure] / scale, r[f"{figure}_interval"][0] / scale,
                  r[f"{figure}_interval"][1] / scale) for r in rows)
    xs = [q[0] for q in pts]
    line, = ax.plot(xs, [q[1] for q in pts], marker="o", label=label)
    ax.fill_between(xs, [q[2] for q in pts], [q[3] for q in pts], alpha=0.2,
                    color=line.get_color())


def plot(ax, rows):
    """Throughput against CPUs and against hold time, fairness against hold
    time: the panels of what the run swept, one line per algorithm and
    variant with its 95 % interval band (a run that swept nothing: its
    throughput by algorithm and variant)."""
    counts = sorted({len(r["cpus"]) for r in rows})
    holds = sorted({r["hold_cycles"] for r in rows})
    panels = ([("CPUs hammering one lock", lambda r: len(r["cpus"]), "acq_per_s")]
              if len(counts) > 1 else [])
    if len(holds) > 1:
        panels += [("hold (TSC cycles)", lambda r: r["hold_cycles"], "acq_per_s"),
                   ("hold (TSC cycles)", lambda r: r["hold_cycles"], "fairness")]
    fig = ax.figure
    if not panels:
        names = [f"{r['algo']} {r['variant']}" for r in rows]
        err = [[(r["acq_per_s"] - r.get("acq_per_s_interval", [r["acq_per_s"]] * 2)[0]) / 1e6
                for r in rows],
               [(r.get("acq_per_s_interval", [r["acq_per_s"]] * 2)[1] - r["acq_per_s"]) / 1e6
                for r in rows]]
        ax.bar(names, [r["acq_per_s"] / 1e6 for r in rows], yerr=err, capsize=3)
        ax.set_ylabel("million acquisitions per second")
        ax.tick_params(axis="x", rotation=45)
        ax.set_title("Contended lock throughput (95 % intervals)")
        return
    ax.remove()
    fig.set_size_inches(max(5.5 * len(panels), 9), 5.5)
    for k, (xlabel, x_of, figure) in enumerate(panels):
        a = fig.add_subplot(1, len(panels), k + 1)
        fixed = {"CPUs hammering one lock": ("hold_cycles", holds[0])}.get(
            xlabel, ("cpus", None))
        for algo, variant in dict.fromkeys((r["algo"], r["variant"]) for r in rows):
            mine = [r for r in rows if r["algo"] == algo and r["variant"] == variant
                    and (r["hold_cycles"] == fixed[1] if fixed[0] == "hold_cycles"
                         else len(r["cpus"]) == counts[-1])
                    and r.get("think_cycles", 0) == rows[0].get("think_cycles", 0)]
            if "acq_per_s_interval" in mine[0]:
                _band(a, mine, x_of, figure, 1e6 if figure == "acq_per_s" else 1.0,
                      f"{algo} {variant}")
        think = rows[0].get("think_cycles", 0)
        if "hold" in xlabel:
            a.set_xscale("symlog", linthresh=100)
            if figure == "acq_per_s":   # hold 10000 is 100 times fewer than hold 0
                a.set_yscale("log")
            a.set_title(f"{counts[-1]} CPUs, think {think} cycles", fontsize="medium")
        else:
            a.set_xticks(counts)
            a.set_title(f"hold {holds[0]} cycles, think {think} cycles", fontsize="medium")
        a.set_xlabel(xlabel)
        a.set_ylabel("million acquisitions per second" if figure == "acq_per_s"
                     else "fairness (Jain's index)")
        a.grid(True, alpha=0.3)
        a.legend(fontsize="small")
    fig.suptitle("contended: medians over rounds, 95 % interval bands", fontsize="large")


EXPERIMENT = Experiment(
    name="contended",
    help="every selected CPU hammers one shared lock (also: locks --contended)",
    description="Every selected CPU hammers one shared lock, per algorithm and variant, for "
                "--duration seconds: acquisitions per second, cycles per acquisition, each "
                "CPU's share and Jain's fairness index. The same as locks --contended.",
    add_options=add_options, params=params, seconds=seconds, run=run, text=text,
    # cycles_min/max of a contended row are per CPU, not a run's spread: the
    # rounds' samples judge the noise
    # a row is one sweep point's; rows written before the sweeps had no think time
    metric=Metric(("test", "algo", "variant", "cpus", "hold_cycles", "think_cycles"),
                  "acq_per_s", "acq_per_s_samples", None, None, {"think_cycles": 0}),
    plan=plan, invariant_failures=invariant_failures, plot=plot,
)
