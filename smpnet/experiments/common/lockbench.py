"""Locks on a machine: the lock region, the checker's reports, and the
uncontended time_bench suite run on one pinned CPU.

The library under the lock experiments (`locks`, `contended`) and `defer`,
which measures seed 003's per-op cost the way the seed did.
"""
from ... import _core
from ...machine import kernel_build, layout
from ...machine.machine import Machine
from ...measure import stats, verdict_facts
from ...measure.time_bench import BUILT, MAX_ATTEMPTS, MIN_ROUND_S, SUITE, interleaved
from ...seeds import SEED_003

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


def locks_region(nr):
    return [("locks", layout.LOCK_SLOT, nr)]


def init_locks(m, algos):
    """One lock per algorithm in the machine's lock region; returns the region's index."""
    region = m.segment.region_names.index("locks")
    for i, algo in enumerate(algos):
        _core.lock_init(m.segment.buf, region, i, _core.LOCK_ALGOS[algo], i)
    return region


def dropped_line(rows):
    """What the harness threw out (time_bench.clean_round), in a line, or None."""
    dropped = sum(r.get("dropped_rounds", 0) for r in rows)
    spoiled = sum(r.get("spoiled_rounds", 0) for r in rows)
    if not dropped and not spoiled:
        return None
    line = (f"{dropped} round attempts thrown out and rerun shorter: their thread was switched "
            "out during them (another task ran on the CPU)")
    if spoiled:
        line += (f"; {spoiled} rounds kept switched out after {MAX_ATTEMPTS} attempts: "
                 "the CPU is busy, those figures include other work")
    unclean = sum(1 for r in rows if r.get("no_clean_round"))
    if unclean:
        line += (f"; {unclean} row{'s' if unclean != 1 else ''} had no clean round at all, "
                 f"marked {NO_CLEAN_ROUND}: {'their figures are' if unclean != 1 else 'its figure is'}"
                 " the CPU's other work as much as the op's")
    return line


NO_CLEAN_ROUND = "[no clean round]"


def row_name(r, name):
    """A row's name in a table, marked when every one of its rounds was
    switched out (time_bench.round_counts): its figure is not the op's alone."""
    return f"{name} {NO_CLEAN_ROUND}" if r.get("no_clean_round") else name


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
    Returns (rows in suite_plan's order, checker reports); derived() adds
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
    derived(rows)
    return rows, reports


def _row(rows, test, algo):
    return next((r for r in rows if r["test"] == test and r["algo"] == algo), None)


def paired(rows, a, b, algo, op):
    """op(a, b) over the rounds of tests a and b on `algo`, taken two rounds
    at a time: op(a1 + a2, b1 + b2) for rounds 2k and 2k+1, which run in
    opposite orders (A B, then B A), so a drift linear in time adds alike to
    both sides of each block and cancels in it. (Round by round it would
    alternate +d, -d, and the median of an odd count would keep one.)
    Returns (median over the blocks, [95 % interval], blocks), or None when
    either did not run or there are fewer than stats.MIN_SAMPLES blocks."""
    ra, rb = _row(rows, a, algo), _row(rows, b, algo)
    if ra is None or rb is None or len(ra["samples"]) != len(rb["samples"]):
        return None
    return stats.paired_abba(ra["samples"], rb["samples"], op)


def derived(rows):
    """The figures that pair a test's rounds with another's, added to the
    rows they describe: on spin_lock_unlock, harness_overhead = smpnet /
    bare (the baseline's cycles in bare_cycles); on irqsave's control,
    irqsave - control (the pushf; pop alone) and control - irq (smpnet's
    own bookkeeping of the save, expected about 0 with restore=sti and the
    checker off; with popf it also holds the popf restore, with the
    checker the checker's work on the save). Each with its 95 % interval
    over the blocks of two rounds (paired); a difference is halved per op
    (stats.per_op_diff), a block being two rounds' sum."""
    for r in rows:
        if r["test"] == "spin_lock_unlock":
            ratio = paired(rows, "spin_lock_unlock", BASELINE, r["algo"], lambda a, b: a / b)
            if ratio:
                r["bare_cycles"] = _row(rows, BASELINE, r["algo"])["cycles"]
                r["harness_overhead"], r["harness_overhead_interval"], _ = ratio
        elif r["test"] == CONTROL:
            for key, a, b in (("pushf_pop", "spin_lock_unlock_irqsave", CONTROL),
                              ("control_minus_irq", CONTROL, "spin_lock_unlock_irq")):
                d = paired(rows, a, b, r["algo"], stats.per_op_diff)
                if d:
                    r[f"{key}_cycles"], r[f"{key}_interval"], _ = d


def seed_003_verdict(rows, algo, build="inline"):
    """irqsave - irq on `algo`, paired round by round, with what irqsave's
    control splits it into, the A/A control's own verdict and the machine
    fact (verdict_facts.pushf_pop), the rows' entry points shaped as kernel
    build `build` makes them."""
    d = paired(rows, "spin_lock_unlock_irqsave", "spin_lock_unlock_irq", algo, stats.per_op_diff)
    if d is None:
        return None
    v = stats.judge(SEED_003, d[0], d[1], pairs=d[2])
    v["algo"], v["kernel_build"] = algo, build
    v["label"] = f"kernel build {build}"    # where `all` lists it among a seed's verdicts
    ctl = _row(rows, CONTROL, algo)
    if ctl and "control_minus_irq_cycles" in ctl:
        v["pushf_control"] = {k: ctl[k] for k in (
            "test", "pushf_pop_cycles", "pushf_pop_interval", "control_minus_irq_cycles",
            "control_minus_irq_interval")}
    aa = paired(rows, AA, "spin_lock_unlock_irq", algo, stats.per_op_diff)
    if aa:
        v["control"] = stats.control("irq against irq", aa[0], aa[1])
    # what sets the size here: this CPU's pushf; pop against the seed's 14
    v["machine_fact"] = verdict_facts.pushf_pop(v.get("pushf_control"), model=build)
    return v


def figure(value, interval, digits=2):
    """`value [low .. high]`"""
    return f"{value:.{digits}f} [{interval[0]:.{digits}f} .. {interval[1]:.{digits}f}]"


def extra_calls(build):
    """How many more of its entry points irqsave calls out of line than irq
    does in kernel build `build` (x86-nopreempt: its unlock, 1)."""
    calls = set(kernel_build.calls_of(build))
    return (len(calls & {"spin_lock_irqsave", "spin_unlock_irqrestore"})
            - len(calls & {"spin_lock_irq", "spin_unlock_irq"}))


def control_minus_irq(restore, check, builds=("inline",)):
    """What control - irq holds besides smpnet's bookkeeping of the save,
    in the kernel builds `builds` (one verdict's, or a table's)."""
    extra = (["the popf restore"] if restore == "popf" else []) + (["the checker"] if check else [])
    calls = sorted({extra_calls(b) for b in builds} - {0})
    if calls:
        extra.append("the call irqsave's unlock is and irq's is not" if calls == [1] and
                     len(builds) == 1 else "the calls irqsave makes and irq does not, by build")
    return ("smpnet's bookkeeping" + "".join(f" + {x}" for x in extra)
            + ("" if extra else ", ~0"))


def control_lines(v, restore="sti", check=False):
    """What a seed 003 verdict's control splits irqsave - irq into."""
    if "pushf_control" not in v:
        return []
    c = v["pushf_control"]
    builds = (v.get("kernel_build", "inline"),)
    return [f"  of which the pushf; pop (irqsave - control) = "
            f"{figure(c['pushf_pop_cycles'], c['pushf_pop_interval'])} cycles and control - irq "
            f"({control_minus_irq(restore, check, builds)}) = "
            f"{figure(c['control_minus_irq_cycles'], c['control_minus_irq_interval'])} cycles"]


def checker_text(reports, on):
    if not on:
        return "checker: off (--check turns it on)"
    if not reports:
        return "checker: no reports"
    return "checker: " + ", ".join(f"{k} x{n}" for k, n in reports.items())
