"""The kernel as referee's judgement and its text: whether a row's
model / kernel interval lies within bounds, the table of the rows, and
`all`'s note under seed 003. Docs: docs/experiments/kernel.md, "The
kernel as referee".
"""
from ...measure import calibration

# Under a cycle an op is lost in the loop around it (the store forwarded, the
# add retired with the loop's own): its ratio is a ratio of rounding, not judged.
JUDGED_CYCLES = 1.0


# the bounds a ratio's whole interval must lie in: uncontended, contended
BOUNDS = {False: (0.9, 1.1), True: (0.8, 1.25)}


# a contended row whose rounds' line round trips part by more than this:
# the host moved its CPUs during the row (referee_contended.moved() warns)
TRIP_MOVED = 2.0


def trips_apart(least, most):
    """Whether two line round trips part by more than TRIP_MOVED: the host
    ran the CPUs in two placements (another core, another die)."""
    return most > TRIP_MOVED * least


def placements_mixed(row):
    """Whether a contended row's rounds saw a cache line's round trip
    between the CPUs change several-fold (trips_apart): the row mixes the
    host's two placements of its CPUs."""
    return trips_apart(row.get("line_round_trip_cycles_min", float("inf")),
                       row.get("line_round_trip_cycles_max", 0))


def within(row):
    """Whether a row's whole model/kernel interval is inside its BOUNDS;
    None where the kernel's op is under a cycle (JUDGED_CYCLES), the
    model emulates what user space cannot run (the row measures that), or
    the row's rounds mixed two placements of the CPUs (placements_mixed)
    without enough rounds at one to judge on (its judged_rounds)."""
    if (row["kernel_cycles"] < JUDGED_CYCLES or row.get("emulated")
            or (placements_mixed(row) and not row.get("judged_rounds"))):
        return None
    low, high = BOUNDS[bool(row.get("contended"))]
    return low <= row["model_over_kernel_lo"] and row["model_over_kernel_hi"] <= high


def seed_003_note(rows):
    """What `all` says under seed 003: the lock pair the seed's irqsave
    takes, timed inside this kernel, against the model's; None without it."""
    r = next((r for r in rows if r.get("test") == "spin_lock_pair"
              and not r.get("contended")), None)
    if r is None:
        return None
    return (f"the kernel's own irqsave lock pair (bpf_spin_lock), timed inside it on CPU "
            f"{r['cpus']}: {r['kernel_cycles']:.1f} [{r['kernel_cycles_lo']:.1f} .. "
            f"{r['kernel_cycles_hi']:.1f}] cycles; the model's ({r['algo']}, "
            f"{r['kernel_build']}) {r['model_cycles']:.1f}: model / kernel "
            f"{r['model_over_kernel']:.3f} [{r['model_over_kernel_lo']:.3f} .. "
            f"{r['model_over_kernel_hi']:.3f}]")


def text(p, rows):
    """The referee's table and what each row runs."""
    from ...report.report import table

    first = rows[0]
    u = first["unroll"]
    how = (f"a program of {2 * u} ops unrolled less its twin of {u}" if first.get("twin_ops")
           else f"{u} ops unrolled per run, its empty twin subtracted")   # before twin_ops
    if first.get("twin_ops") and any(r.get("contended") for r in rows):
        how += f"; contended: {u} ops less an empty twin"
    rounds = f"{first['rounds']} rounds" + "".join(sorted(
        {f" (contended: {r['rounds']})" for r in rows if r.get("contended")
         and r["rounds"] != first["rounds"]}))
    lines = [f"# the kernel as referee, CPU {first['cpus']}: each op timed inside the running "
             f"kernel (BPF test runs, {how}) and in smpnet's model ({p['referee_algo']}, kernel build "
             f"{p['kernel_build']}), {rounds}, TSC cycles, median [95 % interval]"]
    lines.append(table([(r["test"], f"{r['kernel_cycles']:.2f} [{r['kernel_cycles_lo']:.2f} .. "
                         f"{r['kernel_cycles_hi']:.2f}]",
                         f"{r['model_cycles']:.2f} [{r['model_cycles_lo']:.2f} .. "
                         f"{r['model_cycles_hi']:.2f}]", calibration.referee_model_test(r),
                         f"{r['model_over_kernel']:.3f} [{r['model_over_kernel_lo']:.3f} .. "
                         f"{r['model_over_kernel_hi']:.3f}]",
                         _judged(r))
                        for r in rows],
                       ["op", "kernel cycles", "model cycles", "model's test",
                        "model / kernel", "within bounds"]))
    lines.append("  within bounds: the ratio's whole interval in [{}, {}] uncontended, "
                 "[{}, {}] contended".format(*BOUNDS[False], *BOUNDS[True]))
    lines += [f"  {r['test']}: {r['kernel_runs']}" for r in rows]
    lines += [f"  {r['test']}: a cache line's round trip between the first two CPUs, before "
              f"each round and after the last: {r['line_round_trip_cycles']:.0f} cycles (median; "
              f"{r['line_round_trip_cycles_min']:.0f} .. {r['line_round_trip_cycles_max']:.0f}): "
              "where the host runs them, which a contended op's cost turns on"
              for r in rows if "line_round_trip_cycles" in r]
    lines += _irq_lines(rows)
    lines += [f"  {r['test']}: emulated, not judged: {r['emulated']}; the kernel's op costs "
              f"{r['kernel_cycles'] - r['model_cycles']:.1f} cycles more than the model's: what "
              "the emulation leaves out, " + ("inside a lock pair" if r.get("model_less")
                                              else "on its own (beside locked ops it can hide)")
              for r in rows if r.get("emulated")]
    return "\n".join(lines)


def _judged(row):
    """The table's `within bounds` column."""
    ok = within(row)
    if ok is not None:
        at = (f" ({len(row['judged_rounds'])} rounds, {row['judged_placement']})"
              if row.get("judged_rounds") else "")
        return ("yes" if ok else "no") + at
    return ("emulated" if row.get("emulated") else "placements mixed" if placements_mixed(row)
            else "under a cycle")


def _irq_lines(rows):
    """What the kernel's lock pair's sti costs inside it: the pair less the
    pair with IRQs already off; and the model's pair with what its emulation
    leaves out inside a pair added (where the rows ran)."""
    by = {r["test"]: r for r in rows if not r.get("contended")}
    on, off = by.get("spin_lock_pair"), by.get("spin_lock_pair_irqs_off")
    inside = by.get("irq_save_restore_in_pair")
    lines = []
    if on and off:
        lines.append(
            f"  spin_lock_pair: with IRQs already off (its sti not run) the kernel's pair costs "
            f"{on['kernel_cycles'] - off['kernel_cycles']:.1f} cycles less, the model's "
            f"{on['model_cycles'] - off['model_cycles']:.1f}: what sti costs inside the kernel's "
            "pair here, which the model emulates (its cli stays in both)")
    if on and inside:
        # an estimate from two figures of this run: rqspinlock's IRQ save and
        # restore stand for the pair's own (the same calls of irqflags.h)
        left_out = inside["kernel_cycles"] - inside["model_cycles"]
        full = on["model_cycles"] + left_out
        lines.append(
            f"  spin_lock_pair: with what the emulation leaves out inside a pair added "
            f"({left_out:.1f} cycles, irq_save_restore_in_pair) the model's pair would cost "
            f"{full:.1f} against the kernel's {on['kernel_cycles']:.1f}: "
            f"{full / on['kernel_cycles']:.3f}")
    return lines
