"""contended: every selected CPU hammers one shared lock (time_bench's
concurrent mode): acquisitions/s, cycles per acquisition, each CPU's share
and Jain's fairness index, per algorithm and variant.

Also what `locks --contended` runs. Inside `all` it runs on 1, 2, ... N
CPUs: throughput by CPU count.
"""
import statistics

from .. import _core, lockbench, machine, stats, tsc
from ..cpus import format_cpus
from ..errors import BadInput
from ..experiment import Experiment, Metric, Outcome, parse_list
from ..lockbench import ALGOS, VARIANTS
from ..machine import Machine
from ..report import table
from ..time_bench import TEST_OF_VARIANT


def add_options(p):
    lockbench.add_lock_options(p)
    lockbench.add_contended_options(p)


def params(args, cpus):
    for option in ("loops", "rounds"):   # locks --contended: the suite's options
        if getattr(args, option, None) is not None:
            raise BadInput(f"--{option}: for the uncontended suite only, not --contended")
    duration = lockbench.DURATION if args.duration is None else args.duration
    hold = lockbench.HOLD_CYCLES if args.hold_cycles is None else args.hold_cycles
    _check_hold(hold, duration, tsc.tsc_hz())
    return {"cpus": format_cpus(cpus), "algo": parse_list(args.algo, ALGOS, "lock algorithm"),
            "variant": parse_list(args.variant, VARIANTS, "lock variant"),
            "restore": args.restore, "check": args.check, "contended": True,
            "duration_s": duration, "hold_cycles": hold,
            "ncpus": args.ncpus or len(cpus), "oversubscribe": args.oversubscribe}


def _check_hold(hold_cycles, duration, tsc_hz):
    if hold_cycles > duration * tsc_hz:
        raise BadInput(f"--hold-cycles {hold_cycles} is longer than the whole "
                       f"{duration} s run ({duration * tsc_hz:.0f} cycles)")


def contended_seconds(n_combos, duration, ncpus=2, real_cpus=2):
    return n_combos * machine.run_seconds(duration, ncpus, real_cpus, counted=False)


def seconds(p, cpus):
    n = len(p["algo"]) * len(p["variant"])
    counts = range(1, len(cpus) + 1) if p.get("scale") else [p["ncpus"]]
    return sum(contended_seconds(n, p["duration_s"], k, len(cpus)) for k in counts)


def run(cpus, p, progress=None):
    kw = dict(duration=p["duration_s"], hold_cycles=p["hold_cycles"], restore=p["restore"],
              check=p["check"], progress=progress)
    if p.get("scale"):   # throughput by CPU count, in `all`
        rows, reports = [], {}
        for k in range(1, len(cpus) + 1):
            r, reports = run_contended(cpus[:k], p["algo"], p["variant"], **kw)
            rows += r
    else:
        rows, reports = run_contended(cpus, p["algo"], p["variant"], ncpus=p["ncpus"],
                                      oversubscribe=p["oversubscribe"], **kw)
    if p["check"]:
        p = dict(p, checker_reports=reports)
    return Outcome(p, rows)


def plan(cpus, quick):
    return {"cpus": format_cpus(cpus), "algo": list(ALGOS) if not quick else
            ["qspinlock", "ticket", "tas"], "variant": ["plain"] if quick else ["plain", "irq"],
            "restore": "sti", "check": False, "contended": True,
            "duration_s": 0.1 if quick else 0.3, "hold_cycles": 0, "ncpus": len(cpus),
            "oversubscribe": False, "scale": True}


def run_contended(cpus, algos, variants, duration=0.5, hold_cycles=0, restore="sti",
                  check=False, ncpus=None, oversubscribe=False, progress=None):
    """Every CPU hammers one lock, for each algorithm and variant. The
    checker's reports are given per row, and in total."""
    rows = []
    combos = [(a, v) for a in algos for v in variants]
    with Machine(cpus=cpus, ncpus=ncpus, oversubscribe=oversubscribe,
                 regions=lockbench.locks_region(len(algos))) as m:
        region = lockbench.init_locks(m, algos)
        tsc_hz = float(m.header["tsc_hz"])
        _check_hold(hold_cycles, duration, tsc_hz)   # for Python callers; the CLI checked it
        for n, (algo, variant) in enumerate(combos):
            if progress:
                progress(n, len(combos), f"{algo} {variant}")
            index = algos.index(algo)
            _core.lock_init(m.segment.buf, region, index, _core.LOCK_ALGOS[algo], index)
            before = lockbench.checker_reports(m)
            per_cpu = m.run(_hammer, region, index, _core.LOCK_VARIANTS[variant], duration,
                            hold_cycles, check, restore == "popf",
                            expected=duration,
                            progress=lambda m: int(m.region("locks")["counter"].sum()))
            counter = int(m.region("locks")[index]["counter"])
            row = _row(m, algo, variant, restore, per_cpu, counter, tsc_hz, duration, hold_cycles)
            if check:
                row["checker_reports"] = lockbench.new_reports(before,
                                                               lockbench.checker_reports(m))
            rows.append(row)
        reports = lockbench.checker_reports(m)
    return rows, reports


def invariant_failures(rows):
    """Contended rows whose lock let two CPUs in at once (the counter it
    guards disagrees with the acquisitions counted)."""
    return [f"{r['algo']} {r['variant']}: mutual exclusion broken (the counter under the "
            f"lock disagrees with {r['loops']} acquisitions)"
            for r in rows if r.get("contended") and not r["mutual_exclusion"]]


def _hammer(ctx, region, index, variant, duration, hold_cycles, check, popf):
    return _core.lock_hammer(ctx.seg, ctx.cpu, region, index, variant, 0, duration,
                             hold_cycles, check, popf)


def _row(m, algo, variant, restore, per_cpu, counter, tsc_hz, duration, hold):
    acq = [r[0] for r in per_cpu]
    total = sum(acq)
    # a CPU's cycles per acquisition: its run time over its own acquisitions
    cyc = [r[1] / r[0] if r[0] else float("inf") for r in per_cpu]
    elapsed = max(r[1] for r in per_cpu)
    seconds = elapsed / tsc_hz
    return {
        "test": TEST_OF_VARIANT[variant], "algo": algo, "variant": variant,
        "restore": restore, "cpus": [int(c) for c in m.cpu_map], "contended": True,
        "cycles": statistics.median(cyc), "cycles_min": min(cyc), "cycles_max": max(cyc),
        "ns": statistics.median(cyc) * 1e9 / tsc_hz, "loops": total, "rounds": 1,
        "acq_per_s": total / seconds if seconds else 0.0,
        # the machine's: run time over all acquisitions (one lock hand-over)
        "system_cycles_per_acq": elapsed / total if total else float("inf"),
        "fairness": stats.jain_fairness(acq),
        "shares": [a / total if total else 0.0 for a in acq],
        "spins_per_acq": sum(r[2] for r in per_cpu) / total if total else 0.0,
        "duration_s": duration, "hold_cycles": hold,
        "mutual_exclusion": counter == total,
        "per_cpu": [{"cpu": i, "real_cpu": int(m.cpu_map[i]), "acquisitions": r[0],
                     "cycles_per_acq": cyc[i], "spins": r[2]} for i, r in enumerate(per_cpu)],
        "timing_valid": m.timing_valid,
    }


def text(env, extra):
    rows, lines = env["results"], []
    for r in rows:
        lines.append(f"# {r['algo']} {r['variant']}: {len(r['cpus'])} CPUs hammer one lock for "
                     f"{r['duration_s']} s, hold {r['hold_cycles']} cycles")
        for c in r["per_cpu"]:
            lines.append(f"  CPU {c['cpu']} (real {c['real_cpu']}): {c['acquisitions']} "
                         f"acquisitions, {c['cycles_per_acq']:.1f} cycles/acq, "
                         f"share {r['shares'][c['cpu']] * 100:.1f} %, {c['spins']} spins")
    lines.append("")
    cells = [(r["algo"], r["variant"], r["acq_per_s"] / 1e6, r["cycles"],
              r["system_cycles_per_acq"], r["fairness"], r["spins_per_acq"],
              "yes" if r["mutual_exclusion"] else "NO") for r in rows]
    lines.append(table(cells, ["algo", "variant", "M acq/s", "cycles/acq per CPU",
                               "cycles/acq system", "fairness (Jain)", "spins/acq",
                               "exclusive"]))
    lines.append("cycles/acq per CPU: median over CPUs of each CPU's run time over its own "
                 "acquisitions; system: run time over all acquisitions (one hand-over); "
                 "fairness: 1.0 = equal shares, 1/N = one CPU got all.")
    lines.append(lockbench.checker_text(env["params"].get("checker_reports", {}),
                                          env["params"]["check"]))
    return "\n".join(lines)


def plot(ax, rows):
    for (algo, variant) in dict.fromkeys((r["algo"], r["variant"]) for r in rows):
        pts = sorted((len(r["cpus"]), r["acq_per_s"] / 1e6) for r in rows
                     if r["algo"] == algo and r["variant"] == variant)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{algo} {variant}")
    ax.set_xticks(sorted({len(r["cpus"]) for r in rows}))
    ax.set_xlabel("CPUs hammering one lock")
    ax.set_ylabel("million acquisitions per second")
    ax.set_title("Contended lock throughput by CPU count")
    ax.legend()


EXPERIMENT = Experiment(
    name="contended",
    help="every selected CPU hammers one shared lock (also: locks --contended)",
    description="Every selected CPU hammers one shared lock, per algorithm and variant, for "
                "--duration seconds: acquisitions per second, cycles per acquisition, each "
                "CPU's share and Jain's fairness index. The same as locks --contended.",
    add_options=add_options, params=params, seconds=seconds, run=run, text=text,
    # cycles_min/max of a contended row are per CPU, not a run's spread: none here
    metric=Metric(("test", "algo", "variant", "cpus"), "acq_per_s", None, None, None),
    plan=plan, invariant_failures=invariant_failures, plot=plot,
)
