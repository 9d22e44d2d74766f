"""The lock suite's paired figures: a test's rounds against another's over
ABBA blocks (stats.paired_abba), the harness's overhead and irqsave's
control (derived()), and seed 003's verdict with its A/A control.
docs/experiments/locks.md, "How to read the result".
"""
from ...measure import stats, verdict_facts
from ...seeds import SEED_003
from .lockbench import AA, BASELINE, CONTROL


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
