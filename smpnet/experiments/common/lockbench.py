"""Locks on a machine: the lock region, the checker's reports, and the
uncontended time_bench suite run on one pinned CPU.

The library under the lock experiments (`locks`, `contended`) and `defer`,
which measures seed 003's per-op cost the way the seed did.
"""
import mmap

from ... import _core
from ...machine import layout
from ...machine.machine import Machine
from ...measure.time_bench import BUILT, MIN_ROUND_S, SUITE, interleaved

# names of enum spin_algo and enum spin_variant, in the C order
ALGOS = tuple(sorted(_core.LOCK_ALGOS, key=_core.LOCK_ALGOS.get))
VARIANTS = tuple(sorted(_core.LOCK_VARIANTS, key=_core.LOCK_VARIANTS.get))
RESTORES = ("sti", "popf")

# For run-time estimates: a typical op (an uncontended lock and unlock is
# 5-20 ns), and the slowest one the watchdog must wait for (the checker on).
TYPICAL_OP_S = 10e-9
SLOWEST_OP_S = 200e-9


# smpnet's instruments, run beside the suite on every selected algorithm
# (docs/experiments/locks.md, "What each side executes"):
BASELINE = "ref_spin_lock_unlock"   # spin_lock_unlock written by hand in C (reference.h)
CONTROL = "spin_lock_unlock_irqsave_nopushf"   # irqsave but its pushf; pop (time_bench.h)
# seed 003's A/A control: spin_lock_unlock_irq a second time, in the same
# rounds, so irq' - irq is what this pipeline finds between identical sides
AA = "spin_lock_unlock_irq (A/A)"
MEASURES = {AA: "spin_lock_unlock_irq"}   # the time_bench test a plan entry runs


def suite_plan(algos, variants, locks_only=False, built_too=False):
    """The suite's (test, algorithm or None) pairs, in order (locks_only:
    its lock tests only, and with built_too the tests on no lock that the
    kernel build shapes, BUILT), then the instruments: the bare-C baseline
    on each algorithm when spin_lock_unlock runs (plain), irqsave's control
    when irqsave runs, seed 003's A/A control when its verdict can be given."""
    plan = []
    for test, variant in SUITE:
        if variant is None:
            plan += [] if locks_only and not (built_too and test in BUILT) else [(test, None)]
        elif variant in variants:
            plan.extend((test, algo) for algo in algos)
    for algo in algos:
        plan += [(BASELINE, algo)] if "plain" in variants else []
        plan += [(CONTROL, algo)] if "irqsave" in variants else []
        plan += [(AA, algo)] if {"irq", "irqsave"} <= set(variants) else []
    return plan


# each instrument runs right after the test it is set against
FOLLOWERS = {"spin_lock_unlock": (BASELINE,), "spin_lock_unlock_irqsave": (CONTROL,),
             "spin_lock_unlock_irq": (AA,)}


def measuring_order(plan):
    """The plan as its rounds run: the tests on no lock, then each
    algorithm's lock tests, each instrument right after the test it is set
    against (smpnet, then its baseline; irqsave, then its control; irq, then
    irq again), so that what a figure pairs runs side by side in every pass."""
    instruments = {i for f in FOLLOWERS.values() for i in f}
    order = []
    for algo in dict.fromkeys(a for _, a in plan):
        for test, a in plan:
            if a == algo and test not in instruments:
                order.append((test, algo))
                order += [(i, algo) for i in FOLLOWERS.get(test, ()) if (i, algo) in plan]
    return order + [e for e in plan if e not in order]


def suite_seconds(n_tests, loops=None, rounds=10, op_s=TYPICAL_OP_S):
    """What the uncontended suite takes: per test, a calibration (doubling
    up to MIN_ROUND_S), a warm-up round, the rounds, and up to 3 rounds of
    the empty loop."""
    if loops is None:
        return n_tests * (rounds + 6) * MIN_ROUND_S * 1.5
    return n_tests * (rounds + 4) * loops * op_s


def locks_region(nr, dense=False):
    """`nr` lock slots, each on a page of its own at the same offset in it:
    a contended lock's cost goes with where its line lies in a page (a
    ticket lock on the two CPUs of a Zen 4 guest, one slot after another of
    a dense region: 143-145 cycles an op on slots 0, 3 and 64, 176-183 on
    1, 2 and 65), and two algorithms' locks a line apart would compare two
    places as well as two algorithms. `dense`: a line each (the referee's
    contended pair, which picks a slot by its page offset)."""
    return [("locks", layout.LOCK_SLOT if dense else layout.padded(layout.LOCK_SLOT,
                                                                   mmap.PAGESIZE), nr)]


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


def suite_entries(plan, algos, seg, region, check, restore, build):
    """The harness's (time_bench test, where) for each of `plan`'s (test,
    algorithm or None): on CPU 0 of segment `seg`, a lock test on its
    algorithm's lock in `region`; every one with kernel build `build`
    (the lock tests' entry points, local_BH_disable_enable's call)."""
    entries = []
    for test, algo in plan:
        where = dict(seg=seg, cpu=0, check=check, popf=restore == "popf",
                     kbuild=_core.KERNEL_BUILDS[build])
        if algo is not None:
            where.update(lock_region=region, lock_index=algos.index(algo))
        entries.append((MEASURES.get(test, test), where))
    return entries


def run_suite(cpu, algos, variants, loops=None, rounds=10, restore="sti", check=False,
              progress=None, locks_only=False, build="inline", built_too=False):
    """The uncontended suite on real CPU `cpu`, with its instruments, all
    interleaved round by round (time_bench.interleaved), the lock entry
    points and local_bh_enable() shaped as kernel build `build` makes them.
    Returns (rows in suite_plan's order, checker reports); lockpairs.derived() adds
    the figures that pair rounds."""
    plan = measuring_order(suite_plan(algos, variants, locks_only, built_too))

    def bench(ctx):
        region = ctx.machine.segment.region_names.index("locks")
        entries = suite_entries(plan, algos, ctx.seg, region, check, restore, build)
        results = interleaved(entries, loops=loops, rounds=rounds, progress=progress)
        return [(test, algo, r) for (test, algo), r in zip(plan, results)]

    with Machine(cpus=[cpu], regions=locks_region(len(algos))) as m:
        init_locks(m, algos)
        results = m.run(bench, expected=suite_seconds(len(plan), loops, rounds, SLOWEST_OP_S))[0]
        reports = checker_reports(m)
    rows = []
    order = suite_plan(algos, variants, locks_only, built_too)
    for test, algo, r in sorted(results, key=lambda x: order.index(x[:2])):
        rows.append({
            "test": test, "algo": algo, "variant": dict(SUITE).get(test), "restore": restore,
            "kernel_build": build, "cpus": [cpu], "contended": False,
            "cycles": r.cycles, "cycles_min": r.cycles_min, "cycles_max": r.cycles_max,
            "ns": r.ns, "loops": r.loops, "rounds": r.rounds, "samples": r.samples,
            "overhead_cycles": r.overhead_cycles, "wall_s": r.wall_s,
            "dropped_rounds": r.dropped, "spoiled_rounds": r.spoiled,
            "no_clean_round": r.no_clean_round,
        })
    return rows, reports
