"""An IPI's cost in the defer experiment: what was measured here
(_core.ipi_cycles(): the send, the target's entry, the round trip and its
floor; _core.futex_wake_cycles(): the wake-up, an upper bound), what each
side is charged at each --ipi-cycles point, and how the text and the
picture show it (docs/experiments/defer.md, "An IPI's cost")."""
from ...measure import stats
from ...report.report import table

MEASURED = "measured"   # an --ipi-cycles point: the costs measured here (core/ipi.pyx)
AA = "irq (A/A)"        # seed 003's A/A control: irq a second time, in the same rounds


def ipi_wake(w):
    """_core.futex_wake_cycles()'s result as the rows carry it: the median
    with its 95 % interval, min and max, and where it was measured; not the
    samples."""
    return {**stats.median_fields("cycles", w["samples"]),
            **{k: w[k] for k in ("min", "max", "rounds", "woken", "missed", "waker_cpu",
                                 "sleeper_cpu", "cross_cpu", "complete")}}


def _figure(samples):
    """A list of per-round cycles as the rows carry it: median, its 95 %
    interval, min, max and how many; None for no samples."""
    if not samples:
        return None
    return {**stats.median_fields("cycles", samples), "min": min(samples), "max": max(samples),
            "n": len(samples)}


def ipi_figures(ipi, syscall_cycles):
    """_core.ipi_cycles()'s result as the rows carry it (core/ipi.pyx): the
    send (tgkill with a kick less without, paired), the target's entry (an
    IPI's gap on a spinning thread), the round trip and its floor (membarrier
    with and without the peer running), each a median with its interval; and
    what the target is charged where membarrier gave no entry: a real kernel
    entry and exit (getppid, syscall_cycles)."""
    out = {k: ipi[k] for k in ("sender_cpu", "target_cpu", "cross_cpu", "membarrier",
                               "rounds", "complete")}
    for name in ("send", "entry", "round_trip", "floor"):
        out[name] = _figure(ipi[name])
    out["syscall_cycles"] = syscall_cycles
    return out


def ipi_charges(figures, cycles=None, entry=None):
    """(cycles charged to an IPI's sender, to its target, how each was had).
    `cycles` (an --ipi-cycles point) charges both sides that many; None, what
    was measured. `entry` (--ipi-entry-cycles) sets the target's either way.
    With one real CPU no IPI could be measured: the send is charged nothing,
    the target a kernel entry and exit."""
    if entry is not None:
        entry_how = "--ipi-entry-cycles"
    elif cycles is not None:
        entry, entry_how = cycles, "--ipi-cycles"
    elif figures["entry"]:
        entry, entry_how = figures["entry"]["cycles"], "measured"
    else:
        entry, entry_how = figures["syscall_cycles"], "a kernel entry and exit (getppid)"
    if cycles is not None:
        send, send_how = cycles, "--ipi-cycles"
    elif figures["send"]:
        send, send_how = max(0.0, figures["send"]["cycles"]), "measured"
    else:
        send, send_how = 0.0, "none: one real CPU"
    return float(send), float(entry), send_how, entry_how


def _cycles(f):
    """A measured figure: `median [low .. high] cycles (n)`."""
    return (f"{f['cycles']:,.0f} [{f['cycles_lo']:,.0f} .. {f['cycles_hi']:,.0f}] cycles "
            f"(median of {f['n']})")


def ipi_lines(r):
    """What an IPI costs here, how each part was measured, and what was
    charged (docs/experiments/defer.md, "An IPI's cost")."""
    ipi, w = r.get("ipi"), r.get("ipi_wake")
    if not ipi:
        return []
    where = f"real CPU {ipi['sender_cpu']} -> {ipi['target_cpu']}"
    if not ipi["send"]:
        lines = [f"IPIs ({where}): one real CPU, so no IPI crosses CPUs here and none could "
                 f"be measured; charged: send {r['ipi_send_charged']:,.0f} cycles "
                 f"({ipi['send_charged_how']}), entry {r['irq_entry_cycles']:,.0f} cycles "
                 f"({ipi['entry_charged_how']})"]
    else:
        lines = [f"IPI send, measured ({where}): {_cycles(ipi['send'])}: tgkill() of a signal "
                 f"the target thread takes (signal_wake_up() kicks its CPU: one asynchronous "
                 f"IPI) less tgkill() of one it blocks (no kick), paired; the sender does not "
                 f"wait"]
        if ipi["entry"]:
            lines.append(f"IPI entry, measured: {_cycles(ipi['entry'])}: the gap a "
                         f"membarrier() IPI leaves in a thread reading the TSC on the target "
                         f"(entry, the kernel's handling, exit)")
            lines.append(f"IPI round trip, reported: {_cycles(ipi['round_trip'])}: "
                         f"membarrier() with the target thread running (one IPI, waited for), "
                         f"against a floor of {_cycles(ipi['floor'])} with it asleep (no IPI)")
        else:
            lines.append("IPI entry: membarrier(PRIVATE_EXPEDITED) is not available here; the "
                         "target is charged a kernel entry and exit (getppid) instead")
    if w:
        lines.append(f"cross-CPU wake-up, reported as an upper bound on the send, not charged: "
                     f"{w['cycles']:,.0f} [{w['cycles_lo']:,.0f} .. {w['cycles_hi']:,.0f}] "
                     f"cycles (FUTEX_WAKE of a thread asleep on real CPU {w['sleeper_cpu']}, "
                     f"median of {w['woken']})")
    if ipi["send"] and not ipi["complete"]:
        lines.append(f"(partial: the send's rounds did not all finish within the time bound; "
                     f"{ipi['send']['n']} pairs of rounds of {ipi['rounds'] // 2})")
    lines.append(f"charged per IPI: the sender {r['ipi_send_charged']:,.0f} cycles "
                 f"({ipi['send_charged_how']}), as smp_call_function_single_async() pays; the target "
                 f"{r['irq_entry_cycles']:,.0f} cycles ({ipi['entry_charged_how']}), as "
                 f"generic_smp_call_function_single_interrupt() runs")
    return lines


def verdict_point(points):
    """The IPI cost whose runs give seed 003's verdicts: the measured one,
    where it was run."""
    return MEASURED if MEASURED in points else points[0]


def ipi_points(rows):
    """The IPI send costs a run charged, in order: "measured" or cycles."""
    out = []
    for r in rows:
        if r.get("ipi_cycles", MEASURED) not in out:
            out.append(r.get("ipi_cycles", MEASURED))
    return out


def ipi_point_text(r):
    pt = r.get("ipi_cycles", MEASURED)
    return f"{r['ipi_send_charged']:,.0f} (measured)" if pt == MEASURED else f"{pt:,}"


def gain_text(g):
    if not g:
        return None
    return f"{g['measured']:+.1f} [{g['interval'][0]:+.1f} .. {g['interval'][1]:+.1f}]"


def sweep_lines(rows):
    """% over none of each list strategy at each IPI send cost, cheapest first."""
    points = sorted(ipi_points(rows), key=lambda pt: _send_of(rows, pt))
    strategies = [r["strategy"] for r in rows
                  if r.get("ipi_cycles", MEASURED) == points[0] and r["strategy"] not in ("none", AA)]
    at = {(r.get("ipi_cycles", MEASURED), r["strategy"]): r for r in rows}
    cells = [[s] + [gain_text(at[pt, s].get("gain_over_none")) for pt in points]
             for s in strategies]
    heads = ["% over none at IPI cost"] + [
        f"{_send_of(rows, pt):,.0f}" + (" (here)" if pt == MEASURED else "") for pt in points]
    return [table(cells, heads),
            "(TSC cycles charged per IPI: to the sender, and to the target unless "
            "--ipi-entry-cycles set it; here: the sender's measured send, the target its "
            "measured entry)"]


def _send_of(rows, pt):
    return next(r["ipi_send_charged"] for r in rows if r.get("ipi_cycles", MEASURED) == pt)


def plot_sweep(ax, rows):
    """% over none at each IPI cost, with interval bands, the costs evenly
    spaced in their order (bare metal's hundreds of cycles and a nested
    guest's tens of thousands on one axis); this machine's own marked."""
    points = sorted(ipi_points(rows), key=lambda pt: _send_of(rows, pt))
    xs = range(len(points))
    at = {(r.get("ipi_cycles", MEASURED), r["strategy"]): r for r in rows}
    for s in dict.fromkeys(r["strategy"] for r in rows if r["strategy"] not in ("none", AA)):
        gains = [at[pt, s].get("gain_over_none") for pt in points]
        pts = [(x, g) for x, g in zip(xs, gains) if g]
        if not pts:
            continue
        line, = ax.plot([x for x, _ in pts], [g["measured"] for _, g in pts], marker="o",
                        label=s)
        ax.fill_between([x for x, _ in pts], [g["interval"][0] for _, g in pts],
                        [g["interval"][1] for _, g in pts], color=line.get_color(), alpha=0.1)
    ax.axhline(0, color="black", linewidth=0.8)
    labels = []
    for pt in points:
        r = next(r for r in rows if r.get("ipi_cycles", MEASURED) == pt)
        labels.append(f"{r['ipi_send_charged']:,.0f}" if pt != MEASURED else
                      f"here:\nsend {r['ipi_send_charged']:,.0f}\n"
                      f"entry {r['irq_entry_cycles']:,.0f}")
        if pt == MEASURED:
            ax.axvline(points.index(pt), color="grey", linestyle="--")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels)
    ax.set_xlabel("TSC cycles charged per IPI, to the sender and to the target")
    ax.set_ylabel("% skbs/s over none (median, 95 % interval)")
    ax.set_title("defer lists against no list (none), as an IPI's cost varies")
    ax.legend(loc="upper right")
