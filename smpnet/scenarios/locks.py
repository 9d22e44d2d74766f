"""Lock strategies and the IRQ model: seed 003's irqsave-versus-irq cost.

Two experiments:
  suite      the time_bench_sample tests, uncontended, on one pinned CPU
  contended  every selected CPU hammers one shared lock (time_bench's
             concurrent mode): acquisitions/s, cycles per acquisition,
             each CPU's share and Jain's fairness index
"""
import statistics
import sys

from .. import _core, layout, stats
from ..errors import BadInput
from .. import machine
from ..machine import Machine
from ..time_bench import MIN_ROUND_S, SUITE, TEST_OF_VARIANT, time_bench

# names of enum spin_algo and enum spin_variant, in the C order
ALGOS = tuple(sorted(_core.LOCK_ALGOS, key=_core.LOCK_ALGOS.get))
VARIANTS = tuple(sorted(_core.LOCK_VARIANTS, key=_core.LOCK_VARIANTS.get))
RESTORES = ("sti", "popf")


SEED_003 = {
    "seed": "003",
    "claim": "spin_lock_irq is cheaper than spin_lock_irqsave (irqsave - irq > 0 cycles)",
    "reference": "irqsave - irq = 14 cycles (48 - 34, E5-1650 v4 @ 3.60GHz)",
}


# For run-time estimates: a typical op (an uncontended lock and unlock is
# 5-20 ns), and the slowest one the watchdog must wait for (the checker on).
TYPICAL_OP_S = 10e-9
SLOWEST_OP_S = 200e-9


def suite_plan(algos, variants):
    """The suite's (test, algorithm or None) pairs, in order."""
    plan = []
    for test, variant in SUITE:
        if variant is None:
            plan.append((test, None))
        elif variant in variants:
            plan.extend((test, algo) for algo in algos)
    return plan


def suite_seconds(n_tests, loops=None, rounds=10, op_s=TYPICAL_OP_S):
    """What the uncontended suite takes: per test, a calibration (doubling
    up to MIN_ROUND_S), a warm-up round, the rounds, and up to 3 rounds of
    the empty loop."""
    if loops is None:
        return n_tests * (rounds + 6) * MIN_ROUND_S * 1.5
    return n_tests * (rounds + 4) * loops * op_s


def contended_seconds(n_combos, duration, ncpus=2, real_cpus=2):
    return n_combos * machine.run_seconds(duration, ncpus, real_cpus, counted=False)


def parse_list(text, known, what):
    """'a,b' -> ['a', 'b'] checked against `known`; 'all' -> all of them."""
    if text is None or text.strip() == "all":
        return list(known)
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise BadInput(f"empty {what} list (choose from {', '.join(known)}, or all)")
    for t in items:
        if t not in known:
            raise BadInput(f"unknown {what} {t!r} (choose from {', '.join(known)}, or all)")
    if len(set(items)) != len(items):
        raise BadInput(f"a {what} is listed twice in {text!r}")
    return items


def _locks_region(nr):
    return [("locks", layout.LOCK_SLOT, nr)]


def _init_locks(m, algos):
    region = m.segment.region_names.index("locks")
    for i, algo in enumerate(algos):
        _core.lock_init(m.segment.buf, region, i, _core.LOCK_ALGOS[algo], i)
    return region


def _checker_reports(m):
    """{bug kind: count} over all CPUs since the machine started."""
    irq = m.region("irq")
    out = {}
    for k, name in enumerate(layout.LOCKDEP_BUGS):
        n = int(irq["bugs"][:, k].sum())
        if n:
            out[name] = n
    return out


def _new_reports(before, after):
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


# ------------------------------------------------------------------ suite

def run_suite(cpu, algos, variants, loops=None, rounds=10, restore="sti", check=False,
              progress=None):
    """The uncontended suite on real CPU `cpu`. Returns (rows, checker reports)."""
    plan = suite_plan(algos, variants)

    def bench(ctx):
        region = ctx.machine.segment.region_names.index("locks")
        rows = []
        for n, (test, algo) in enumerate(plan):
            if progress:
                progress(n, len(plan), test if algo is None else f"{test} [{algo}]")
            where = dict(seg=ctx.seg, cpu=0, check=check, popf=restore == "popf")
            if algo is not None:
                where.update(lock_region=region, lock_index=algos.index(algo))
            rows.append((test, algo, time_bench(test, loops=loops, rounds=rounds, **where)))
        return rows

    with Machine(cpus=[cpu], regions=_locks_region(len(algos))) as m:
        _init_locks(m, algos)
        results = m.run(bench, expected=suite_seconds(len(plan), loops, rounds, SLOWEST_OP_S))[0]
        reports = _checker_reports(m)
    rows = []
    for test, algo, r in results:
        rows.append({
            "test": test, "algo": algo, "variant": dict(SUITE)[test], "restore": restore,
            "cpus": [cpu], "contended": False,
            "cycles": r.cycles, "cycles_min": r.cycles_min, "cycles_max": r.cycles_max,
            "ns": r.ns, "loops": r.loops, "rounds": r.rounds, "samples": r.samples,
            "overhead_cycles": r.overhead_cycles, "wall_s": r.wall_s,
        })
    return rows, reports


def seed_003_verdict(rows, algo):
    """irqsave - irq on `algo`, from the suite's samples."""
    def samples(test):
        for r in rows:
            if r["test"] == test and r["algo"] == algo:
                return r["samples"]
        return None

    a, b = samples("spin_lock_unlock_irqsave"), samples("spin_lock_unlock_irq")
    if a is None or b is None or min(len(a), len(b)) < stats.MIN_SAMPLES:
        return None
    delta, ci = stats.median_diff_ci(a, b)
    return dict(SEED_003, algo=algo, measured=delta, interval=list(ci),
                unit="cycles", verdict=stats.verdict(ci))


# ------------------------------------------------------------------ contended

def run_contended(cpus, algos, variants, duration=0.5, hold_cycles=0, restore="sti",
                  check=False, ncpus=None, oversubscribe=False, progress=None):
    """Every CPU hammers one lock, for each algorithm and variant. The
    checker's reports are given per row, and in total."""
    rows = []
    combos = [(a, v) for a in algos for v in variants]
    with Machine(cpus=cpus, ncpus=ncpus, oversubscribe=oversubscribe,
                 regions=_locks_region(len(algos))) as m:
        region = _init_locks(m, algos)
        hz = float(m.header["tsc_hz"])
        if hold_cycles > duration * hz:
            raise BadInput(f"--hold-cycles {hold_cycles} is longer than the whole "
                           f"{duration} s run ({duration * hz:.0f} cycles)")
        for n, (algo, variant) in enumerate(combos):
            if progress:
                progress(n, len(combos), f"{algo} {variant}")
            index = algos.index(algo)
            _core.lock_init(m.segment.buf, region, index, _core.LOCK_ALGOS[algo], index)
            before = _checker_reports(m)
            per_cpu = m.run(_hammer, region, index, _core.LOCK_VARIANTS[variant], duration,
                            hold_cycles, check, restore == "popf",
                            expected=duration,
                            progress=lambda m: int(m.region("locks")["counter"].sum()))
            counter = int(m.region("locks")[index]["counter"])
            row = _contended_row(m, algo, variant, restore, per_cpu, counter, hz,
                                 duration, hold_cycles)
            if check:
                row["checker_reports"] = _new_reports(before, _checker_reports(m))
            rows.append(row)
        reports = _checker_reports(m)
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


def _contended_row(m, algo, variant, restore, per_cpu, counter, hz, duration, hold):
    acq = [r[0] for r in per_cpu]
    total = sum(acq)
    # a CPU's cycles per acquisition: its run time over its own acquisitions
    cyc = [r[1] / r[0] if r[0] else float("inf") for r in per_cpu]
    elapsed = max(r[1] for r in per_cpu)
    seconds = elapsed / hz
    return {
        "test": TEST_OF_VARIANT[variant], "algo": algo, "variant": variant,
        "restore": restore, "cpus": [int(c) for c in m.cpu_map], "contended": True,
        "cycles": statistics.median(cyc), "cycles_min": min(cyc), "cycles_max": max(cyc),
        "ns": statistics.median(cyc) * 1e9 / hz, "loops": total, "rounds": 1,
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


def progress_printer(stage):
    """A progress line on stderr, rewritten in place on a terminal."""
    tty = sys.stderr.isatty()

    def show(n, total, what):
        line = f"smpnet-bench {stage}: [{n + 1}/{total}] {what}"
        if tty:
            sys.stderr.write("\r\033[K" + line)
            if n + 1 == total:
                sys.stderr.write("\r\033[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return show
