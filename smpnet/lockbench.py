"""Locks on a machine: the lock region, the checker's reports, and the
uncontended time_bench suite run on one pinned CPU.

The library under the lock experiments (`locks`, `contended`) and `defer`,
which measures seed 003's per-op cost the way the seed did.
"""
from . import _core, layout, stats
from .experiment import bounded
from .machine import Machine
from .seeds import SEED_003
from .time_bench import MIN_ROUND_S, SUITE, time_bench

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

    with Machine(cpus=[cpu], regions=locks_region(len(algos))) as m:
        init_locks(m, algos)
        results = m.run(bench, expected=suite_seconds(len(plan), loops, rounds, SLOWEST_OP_S))[0]
        reports = checker_reports(m)
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


def checker_text(reports, on):
    if not on:
        return "checker: off (--check turns it on)"
    if not reports:
        return "checker: no reports"
    return "checker: " + ", ".join(f"{k} x{n}" for k, n in reports.items())
