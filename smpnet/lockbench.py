"""Locks on a machine: the lock region, the checker's reports, and the
uncontended time_bench suite run on one pinned CPU.

The library under the lock experiments (`locks`, `contended`) and `defer`,
which measures seed 003's per-op cost the way the seed did.
"""
from . import _core, layout, stats
from .experiment import bounded
from .machine import Machine
from .seeds import SEED_003
from .time_bench import MIN_ROUND_S, SUITE, interleaved

# names of enum spin_algo and enum spin_variant, in the C order
ALGOS = tuple(sorted(_core.LOCK_ALGOS, key=_core.LOCK_ALGOS.get))
VARIANTS = tuple(sorted(_core.LOCK_VARIANTS, key=_core.LOCK_VARIANTS.get))
RESTORES = ("sti", "popf")

# For run-time estimates: a typical op (an uncontended lock and unlock is
# 5-20 ns), and the slowest one the watchdog must wait for (the checker on).
TYPICAL_OP_S = 10e-9
SLOWEST_OP_S = 200e-9


def add_lock_options(p, algo_default="qspinlock"):
    """--algo, --variant, --restore, --check: what every lock experiment takes."""
    p.add_argument("--algo", default=algo_default, metavar="LIST",
                   help=f"lock algorithms: {','.join(ALGOS)} or all (default: {algo_default})")
    p.add_argument("--variant", default="all", metavar="LIST",
                   help=f"lock variants: {','.join(VARIANTS)} or all (default: all)")
    p.add_argument("--restore", choices=RESTORES, default="sti",
                   help="local_irq_restore: sti = Linux 5.12+ (default), popf = older kernels")
    p.add_argument("--check", action="store_true",
                   help="run the lock/IRQ checker and report what it finds")


HOLD_CYCLES, DURATION = 0, 0.5   # a contended run's defaults


def add_contended_options(p, which=""):
    """--hold-cycles and --duration of a contended run (`which`: the help's
    prefix). No default here: a run that is not contended refuses them."""
    p.add_argument("--hold-cycles", type=bounded("--hold-cycles"), metavar="N",
                   help=f"{which}critical-section length in TSC cycles (default: {HOLD_CYCLES})")
    p.add_argument("--duration", type=bounded("--duration"), metavar="S",
                   help=f"{which}seconds per algorithm and variant (default: {DURATION})")


# smpnet's instruments, run beside the suite on every selected algorithm
# (docs/experiments/locks.md, "What each side executes"):
BASELINE = "ref_spin_lock_unlock"   # spin_lock_unlock written by hand in C (reference.h)
CONTROL = "spin_lock_unlock_irqsave_nopushf"   # irqsave but its pushf; pop (time_bench.h)


def suite_plan(algos, variants, locks_only=False):
    """The suite's (test, algorithm or None) pairs, in order (locks_only:
    its lock tests only), then the instruments: the bare-C baseline on each
    algorithm when spin_lock_unlock runs (plain), irqsave's control when
    irqsave runs."""
    plan = []
    for test, variant in SUITE:
        if variant is None:
            plan += [] if locks_only else [(test, None)]
        elif variant in variants:
            plan.extend((test, algo) for algo in algos)
    for algo in algos:
        plan += [(BASELINE, algo)] if "plain" in variants else []
        plan += [(CONTROL, algo)] if "irqsave" in variants else []
    return plan


def measuring_order(plan):
    """The plan as its rounds run: the tests on no lock, then each
    algorithm's lock tests and instruments together, so that the tests a
    figure pairs (smpnet and its baseline, irqsave, its control and irq)
    run next to one another in every pass."""
    algos = list(dict.fromkeys(a for _, a in plan))
    return sorted(plan, key=lambda e: algos.index(e[1]))


def suite_seconds(n_tests, loops=None, rounds=10, op_s=TYPICAL_OP_S):
    """What the uncontended suite takes: per test, a calibration (doubling
    up to MIN_ROUND_S), a warm-up round, the rounds, and up to 3 rounds of
    the empty loop."""
    if loops is None:
        return n_tests * (rounds + 6) * MIN_ROUND_S * 1.5
    return n_tests * (rounds + 4) * loops * op_s


def locks_region(nr):
    return [("locks", layout.LOCK_SLOT, nr)]


def init_locks(m, algos):
    """One lock per algorithm in the machine's lock region; returns the region's index."""
    region = m.segment.region_names.index("locks")
    for i, algo in enumerate(algos):
        _core.lock_init(m.segment.buf, region, i, _core.LOCK_ALGOS[algo], i)
    return region


def checker_reports(m):
    """{bug kind: count} over all CPUs since the machine started."""
    irq = m.region("irq")
    out = {}
    for k, name in enumerate(layout.LOCKDEP_BUGS):
        n = int(irq["bugs"][:, k].sum())
        if n:
            out[name] = n
    return out


def new_reports(before, after):
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


def run_suite(cpu, algos, variants, loops=None, rounds=10, restore="sti", check=False,
              progress=None, locks_only=False):
    """The uncontended suite on real CPU `cpu`, with its instruments, all
    interleaved round by round (time_bench.interleaved). Returns (rows in
    suite_plan's order, checker reports); derived() adds the figures that
    pair rounds."""
    plan = measuring_order(suite_plan(algos, variants, locks_only))

    def bench(ctx):
        region = ctx.machine.segment.region_names.index("locks")
        entries = []
        for test, algo in plan:
            where = dict(seg=ctx.seg, cpu=0, check=check, popf=restore == "popf")
            if algo is not None:
                where.update(lock_region=region, lock_index=algos.index(algo))
            entries.append((test, where))
        results = interleaved(entries, loops=loops, rounds=rounds, progress=progress)
        return [(test, algo, r) for (test, algo), r in zip(plan, results)]

    with Machine(cpus=[cpu], regions=locks_region(len(algos))) as m:
        init_locks(m, algos)
        results = m.run(bench, expected=suite_seconds(len(plan), loops, rounds, SLOWEST_OP_S))[0]
        reports = checker_reports(m)
    rows = []
    order = suite_plan(algos, variants, locks_only)
    for test, algo, r in sorted(results, key=lambda x: order.index(x[:2])):
        rows.append({
            "test": test, "algo": algo, "variant": dict(SUITE).get(test), "restore": restore,
            "cpus": [cpu], "contended": False,
            "cycles": r.cycles, "cycles_min": r.cycles_min, "cycles_max": r.cycles_max,
            "ns": r.ns, "loops": r.loops, "rounds": r.rounds, "samples": r.samples,
            "overhead_cycles": r.overhead_cycles, "wall_s": r.wall_s,
        })
    derived(rows)
    return rows, reports


def _row(rows, test, algo):
    return next((r for r in rows if r["test"] == test and r["algo"] == algo), None)


def paired(rows, a, b, algo, op):
    """op(a's round k, b's round k) over the rounds of tests a and b on
    `algo`, which the interleaved rounds pair: (median, [95 % interval]),
    or None when either did not run or ran too few rounds."""
    ra, rb = _row(rows, a, algo), _row(rows, b, algo)
    if ra is None or rb is None or len(ra["samples"]) != len(rb["samples"]) \
            or len(ra["samples"]) < stats.MIN_SAMPLES:
        return None
    med, ci = stats.median_ci([op(x, y) for x, y in zip(ra["samples"], rb["samples"])])
    return med, list(ci)


def derived(rows):
    """The figures that pair a test's rounds with another's, added to the
    rows they describe: on spin_lock_unlock, harness_overhead = smpnet /
    bare (the baseline's cycles in bare_cycles); on irqsave's control,
    irqsave - control (the pushf; pop alone) and control - irq (smpnet's
    own bookkeeping of the save, expected about 0). Each with its 95 %
    interval (a bootstrap over the rounds' ratios or differences)."""
    def diff(a, b):
        return a - b

    for r in rows:
        if r["test"] == "spin_lock_unlock":
            ratio = paired(rows, "spin_lock_unlock", BASELINE, r["algo"], lambda a, b: a / b)
            if ratio:
                r["bare_cycles"] = _row(rows, BASELINE, r["algo"])["cycles"]
                r["harness_overhead"], r["harness_overhead_interval"] = ratio
        elif r["test"] == CONTROL:
            for key, a, b in (("pushf_pop", "spin_lock_unlock_irqsave", CONTROL),
                              ("bookkeeping", CONTROL, "spin_lock_unlock_irq")):
                d = paired(rows, a, b, r["algo"], diff)
                if d:
                    r[f"{key}_cycles"], r[f"{key}_interval"] = d


def seed_003_verdict(rows, algo):
    """irqsave - irq on `algo`, paired round by round, with what its
    control says of it."""
    d = paired(rows, "spin_lock_unlock_irqsave", "spin_lock_unlock_irq", algo,
               lambda a, b: a - b)
    if d is None:
        return None
    v = dict(SEED_003, algo=algo, measured=d[0], interval=d[1], unit="cycles",
             verdict=stats.verdict(d[1]))
    control = _row(rows, CONTROL, algo)
    if control and "bookkeeping_cycles" in control:
        v["control"] = {k: control[k] for k in ("test", "pushf_pop_cycles", "pushf_pop_interval",
                                                 "bookkeeping_cycles", "bookkeeping_interval")}
    return v


def figure(value, interval, digits=2):
    """`value [low .. high]`"""
    return f"{value:.{digits}f} [{interval[0]:.{digits}f} .. {interval[1]:.{digits}f}]"


def control_lines(v):
    """What a seed 003 verdict's control splits irqsave - irq into."""
    if "control" not in v:
        return []
    c = v["control"]
    return [f"  of which the pushf; pop (irqsave - control) = "
            f"{figure(c['pushf_pop_cycles'], c['pushf_pop_interval'])} cycles and smpnet's "
            f"bookkeeping (control - irq) = "
            f"{figure(c['bookkeeping_cycles'], c['bookkeeping_interval'])} cycles"]


def checker_text(reports, on):
    if not on:
        return "checker: off (--check turns it on)"
    if not reports:
        return "checker: no reports"
    return "checker: " + ", ".join(f"{k} x{n}" for k, n in reports.items())
