"""The loopback experiment's text and picture: the modes' table, the oops
lines, seed 002's verdicts; the picture of what direct delivery saves."""
import statistics

from ...report.report import table
from . import kstack, seed002


def text(env, extra):
    p, rows, verdicts = env["params"], env["results"], env["verdicts"]
    amount = f"{p['packets']} packets" if p["packets"] else f"{p['duration_s']} s"
    lines = [f"# loopback: {p['repeat']} runs of {amount} per mode, size "
             f"{p['size']} bytes, protocol {p.get('protocol', 'ack-every')}"
             + (", ACK STORM" if p["ack_storm"] else "") + f", stack {p['stack']}"]
    cells = []
    for r in rows:
        oops = r["overflow"]  # the CPU stopped at the oops: its rates mean nothing
        cells.append((r["mode"], r["cpus"], None if oops else r["pps"] / 1e6,
                      None if oops else r["tps"] / 1e6,
                      None if oops else r["cycles_per_packet"], r["refcnt_atomics"],
                      r["softirqs"], r["max_depth"], r["drops"], r.get("recursion_drops", 0),
                      r["lstats_packets"], f"yes, depth {r['overflow_depth']}" if oops else "no"))
    lines.append(table(cells, ["mode", "CPUs", "M pkt/s", "M trans/s", "cycles/pkt",
                               "refcnt atomics/pkt", "softirqs", "max depth", "backlog drops",
                               "recursion drops", "lstats packets", "overflow"]))
    lines.append("M pkt/s: every packet through loopback_xmit (requests, replies, ACKs), all "
                 "CPUs, median of the runs; cycles/pkt: per CPU, its run time over its "
                 "packets; softirqs: NET_RX runs; backlog drops: past netdev_max_backlog; "
                 "recursion drops: past XMIT_RECURSION_LIMIT (direct-xmit-recursion); lstats "
                 "packets equal the packets sent; --packets is met in whole transactions per "
                 "CPU.")
    lines += [kstack.oops_line(r, p["stack"]) for r in rows if r["overflow"]]
    by_mode = {}
    for r in rows:
        by_mode.setdefault(r["mode"], []).append(r)
    if any(len(v) > 1 for v in by_mode.values()):
        lines.append("")
        lines.append("Scaling (cycles per packet per CPU, by CPU count):")
        for mode, rs in by_mode.items():
            lines.append(f"  {mode:<17} " + "  ".join(
                f"{r['cpus']}: {r['cycles_per_packet']:.1f}" for r in rs
                if r["cycles_per_packet"] is not None))
    lines.append("")
    for v in verdicts:
        lines += seed002.verdict_text(v)
    if not verdicts:
        lines.append("seed 002: no verdict (see the warnings)")
    return "\n".join(lines)


def plot(ax, rows):
    """Seed 002's question first: on the verdict's CPU count, what a
    transaction costs in each mode (median, the runs' min to max; the
    calibrated ones with the host kernel's stack work, the raw model beside
    them), and netif_rx - direct run by run, the cycles direct saves, with
    their median. Then, where several CPU counts ran, packets per second
    by CPU count."""
    counts = sorted({r["cpus"] for r in rows})
    n = max(counts)
    at_n = [r for r in rows if r["cpus"] == n and r.get("cpt_samples")
            and any(x is not None for x in r["cpt_samples"])]
    at_n.sort(key=lambda r: (r["mode"].endswith(")"), r["mode"] not in ("netif_rx", "direct")))
    fig = ax.figure
    ax.remove()
    panels = 3 if len(counts) > 1 else 2
    cost, saved = fig.add_subplot(1, panels, 1), fig.add_subplot(1, panels, 2)
    for i, r in enumerate(at_n):
        xs = [x for x in r["cpt_samples"] if x is not None]
        cost.bar(i, r["cycles_per_transaction"],
                 yerr=[[r["cycles_per_transaction"] - min(xs)],
                       [max(xs) - r["cycles_per_transaction"]]], capsize=3)
    cost.set_xticks(range(len(at_n)))
    cost.set_xticklabels([r["mode"] for r in at_n], rotation=20, ha="right", fontsize=8)
    cost.set_yscale("log")
    cost.set_ylabel("TSC cycles per transaction\n(median; whiskers: runs' min to max)")
    cost.set_title(f"a transaction's cost by mode, {n} CPU(s)", fontsize="medium")
    by = {r["mode"]: r["cpt_samples"] for r in at_n}
    charged = any(r.get("stack_work_per_call") for r in at_n if r["mode"] == "netif_rx")
    pairs = [(label, a, b) for label, a, b in (
        ("calibrated" if charged else "the model alone", "netif_rx", "direct"),
        ("raw model", "netif_rx (raw)", "direct (raw)")) if a in by and b in by]
    for k, (label, a, b) in enumerate(pairs):
        d = [x - y for x, y in zip(by[a], by[b]) if x is not None and y is not None]
        if d:
            saved.scatter(d, [k] * len(d), alpha=0.6)
            saved.plot([statistics.median(d)], [k], marker="|", markersize=25, color="k")
    saved.axvline(0, color="0.4", lw=1)
    saved.set_yticks(range(len(pairs)))
    saved.set_yticklabels([p[0] for p in pairs])
    saved.set_ylim(-0.5, max(len(pairs), 1) - 0.5)
    saved.set_xlabel("netif_rx - direct, cycles per transaction\n(dots: runs, paired; bar: median)")
    saved.set_title("seed 002: cycles direct delivery saves", fontsize="medium")
    if panels == 3:
        pps = fig.add_subplot(1, 3, 3)
        for mode in dict.fromkeys(r["mode"] for r in rows):
            pts = sorted((r["cpus"], r["pps"] / 1e6) for r in rows if r["mode"] == mode)
            pps.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
        pps.set_xticks(counts)
        pps.set_yscale("log")
        pps.set_xlabel("CPUs")
        pps.set_ylabel("million packets per second (all CPUs)")
        pps.set_title("every mode by CPU count", fontsize="medium")
        pps.legend(fontsize="x-small")
    fig.suptitle("loopback: netif_rx (2008) against direct delivery (the patch)", fontsize="large")
