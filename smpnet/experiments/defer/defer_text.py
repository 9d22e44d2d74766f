"""The defer experiment's text and picture: what an IPI costs here, the
table per strategy (and IPI cost, with --ipi-cycles), the flush sizes and
where the cycles go at the verdicts' point, seed 003's verdicts, the
checker and conservation; a bar chart, or with --ipi-cycles the sweep."""
from ...machine import kernel_build
from ...machine.cpus import format_cpus
from ...report import report
from ...report.report import table
from ..common import locktext
from .defer_ipi import (MEASURED, gain_text, ipi_lines, ipi_point_text, ipi_points, plot_sweep,
                        sweep_lines, verdict_point)
from .defer_rows import line_rtt_range


def text(env, extra):
    p, rows, verdicts = env["params"], env["results"], env["verdicts"]
    r0 = rows[0]
    amount = f"{p['skbs']} skbs" if p["skbs"] else f"{p['duration_s']} s"
    lines = [f"# defer: {r0['rx_cpus']} RX CPU(s), {len(r0['cpus']) - r0['rx_cpus']} "
             f"consumer(s) on real CPUs {format_cpus(sorted(set(r0['cpus'])))}, "
             f"defer_max {p['defer_max']}, batch {p['batch']}, "
             f"{p['repeat']} runs of {amount} per strategy, lock {p['lock']}",
             "# kernel build: " + kernel_build.describe_model(p.get("kernel_build", "inline"),
                                                              p.get("kernel_build_record"))]
    lines += ipi_lines(r0)
    span = line_rtt_range(rows)
    if span:
        lines.append(f"cache line round trip between the kick's real CPUs, measured before "
                     f"each run: median {span[1]:,.0f} cycles, from {span[0]:,.0f} to "
                     f"{span[2]:,.0f} (where the hypervisor ran the vCPUs: every cross-CPU "
                     f"cost follows it)")
    sweep = len(ipi_points(rows)) > 1
    cells = []
    for r in rows:
        per_m = 1e6 / r["received"] if r["received"] else 0.0
        cells.append(((ipi_point_text(r), f"{r['irq_entry_cycles']:,.0f}") if sweep else ()) + (
                      r["strategy"], r["skbs_per_s"] / 1e6, r["skbs_per_s_min"] / 1e6,
                      r["skbs_per_s_max"] / 1e6, gain_text(r.get("gain_over_none")),
                      r["defer_cycles"], r["flush_cycles"],
                      r["flush_lock_cycles"], r.get("flush_irq_cycles"), r["skbs_per_flush"],
                      r["ipis"] * per_m,
                      r.get("ipis_by_rule_per_m"),
                      r.get("ipi_send_cycles"), r["irq_entry_cycles"] if r["ipis"] else None,
                      r["fallback_frees"] * per_m, r.get("remote_frees", 0) * per_m,
                      r["lock_spins"] * per_m, "yes" if r["conserved"] else "NO"))
    lines.append(table(cells, (["IPI send", "IPI entry"] if sweep else []) + [
        "strategy", "M skbs/s", "min", "max", "% over none", "cyc/defer", "cyc/flush",
        "cyc/flush lock", "cyc/IRQ in lock", "skbs/flush", "IPIs/M", "by rule/M", "cyc/IPI send", "cyc/IPI entry",
        "fallback/M", "remote frees/M", "spins/M", "conserved"]))
    lines.append(f"M skbs/s: median of the runs, end to end; cyc/defer: cycles per "
                 f"skb_attempt_defer_free (1 call in 8 timed, less an IPI's send); cyc/flush: per "
                 f"skb_defer_free_flush, and of its locked take of the list without the IRQs "
                 f"taken inside it; cyc/IRQ in lock: those IRQs' handling per take that took "
                 f"any (the IPI irq and irqsave replay as their unlock re-enables IRQs, "
                 f"or one taken while a take waited with IRQs on); "
                 f"{r0['timer_overhead_cycles']} cycles of timer overhead subtracted from each; "
                 f"/M: per million skbs; remote frees: freed on a CPU that did not allocate "
                 f"them (none's every skb, the others' fallbacks); % over none: skbs/s, "
                 f"paired run by run, 95 % interval; IPIs/M: kicks sent; by rule/M: the "
                 f"kernel's rule at this load, one kick in each cycle of the list that passed "
                 f"defer_max / 2 (flushes of more than {p['defer_max'] // 2} skbs; fewer are "
                 f"sent while one is in flight); cyc/IPI send: the sender's cycles per IPI, "
                 f"timed; cyc/IPI entry: the target's, charged per IPI taken.")
    lines += placement_lines(rows, sweep)
    if sweep:
        lines += [""] + sweep_lines(rows)
    # the flushes and the cycles' split at the point the verdicts come from
    main = [r for r in rows if r.get("ipi_cycles", MEASURED) == verdict_point(ipi_points(rows))]
    at = f" at IPI cost {ipi_point_text(main[0])}" if sweep else ""
    lines.append("")
    buckets = ["1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", ">=128"]
    lines.append(f"Flush sizes (skbs per flush: flushes){at}:")
    for r in main:
        lines.append(f"  {r['strategy']:<8} " + "  ".join(
            f"{b}: {n}" for b, n in zip(buckets, r["flush_hist"]) if n))
    fastest = max(main, key=lambda r: r["skbs_per_s"])
    flush_share = (f"{fastest['flush_cycles'] / max(fastest['skbs_per_flush'], 1):.1f}"
                   if fastest["flush_cycles"] is not None else "nothing (no flush ran)")
    defer_cost = (f"{fastest['defer_cycles']:.0f}" if fastest["defer_cycles"] is not None
                  else "an untimed share")
    lines.append(
        f"Where the cycles go ({fastest['strategy']}, the fastest{at}): each skb costs the RX "
        f"CPU(s) {fastest['rx_cycles_per_skb']:.0f} cycles (NAPI receive, allocation, and "
        f"{flush_share} for its share of a flush) and the consumer(s) "
        f"{fastest['consumer_cycles_per_skb']:.0f} cycles (ring, read, and {defer_cost} in "
        f"skb_attempt_defer_free).")
    lines.append("")
    for v in verdicts:
        text = report.verdict_lines(v)
        lines += text[:2] + locktext.control_lines(v)
        if "in_flush" in v:
            f = v["in_flush"]
            lines.append(f"  in the flush itself (contended line): irqsave - irq = "
                         f"{locktext.figure(f['measured'], f['interval'])} {f['unit']}")
        lines += text[2:]
    if not verdicts:
        lines.append("seed 003: no verdict (see the warnings)")
    def name(r):
        return r["strategy"] + (f" at IPI cost {ipi_point_text(r)}" if sweep else "")

    if p["check"]:
        for r in rows:
            rep = r["checker_reports"]
            lines.append(f"checker ({name(r)}): " + (
                ", ".join(f"{k} x{n}" for k, n in rep.items()) if rep else "no reports"))
    bad = [name(r) for r in rows if not r["conserved"]]
    if bad:
        lines.append(f"CONSERVATION FAILED for {', '.join(bad)}: skbs lost or freed twice")
    return "\n".join(lines)


def placement_lines(rows, sweep):
    """% over none over the pairs of one vCPU placement, where the line's
    round trip moved between two (docs/experiments/defer.md)."""
    split = next((r["gain_over_none_by_placement"]["split_cycles"] for r in rows
                  if r.get("gain_over_none_by_placement")), None)
    if split is None:
        return []
    lines = [f"% over none, the pairs whose two runs saw one placement: near (a line's round "
             f"trip under {split:,.0f} cycles) and far (over it); each pair's gain where they "
             f"are fewer than 6:"]
    for r in rows:
        g = r.get("gain_over_none_by_placement")
        if not g:
            continue
        cells = []
        for side in ("near", "far"):
            x = g[side]
            cells.append(f"{side} " + (
                gain_text(x) + f" ({x['pairs']} pairs)" if x["measured"] is not None
                else ", ".join(f"{v:+.0f}" for v in x["gains"]) or "no pair"))
        lines.append(f"  {r['strategy']}" + (f" at IPI cost {ipi_point_text(r)}" if sweep else "")
                     + ": " + "; ".join(cells))
    return lines


def plot(ax, rows):
    if len(ipi_points(rows)) > 1:
        return plot_sweep(ax, rows)
    med = [r["skbs_per_s"] / 1e6 for r in rows]
    err = [[m - r["skbs_per_s_min"] / 1e6 for m, r in zip(med, rows)],
           [r["skbs_per_s_max"] / 1e6 - m for m, r in zip(med, rows)]]
    ax.bar([r["strategy"] for r in rows], med, yerr=err, capsize=6)
    ax.set_ylabel("million skbs per second, end to end (median, min-max)")
    ax.set_title("skb defer-free list strategies")
