"""arp's text report and its picture: the round trips, the counters, and
seed 000's verdicts with the first ping's wait in ticks."""
import numpy as np

from ...report import report
from ...report.report import table
from ...seeds import SEED_MACHINE
from .ping import transcript_key


def text(env, extra):
    p, rows, verdicts = env["params"], env["results"], env["verdicts"]
    lines = []
    for r in rows:
        lines.append(f"# probe {r['probe']}, HZ={r['hz']} (a tick is {1000 / r['hz']:g} ms), "
                     f"phase {r['phase']}")
        lines.extend(extra["transcripts"][transcript_key(r["probe"], r["phase"])])
        lines.append("")
    cells = []
    for r in rows:
        for which in ("first_ms", "later_ms"):
            d = r[which]
            cells.append((r["probe"], r["phase"], which.split("_")[0], *(
                [f"{d[k]:.4g}" for k in ("min", "median", "p99", "max")] if d else [None] * 4)))
    lines.append(f"Round trips over {p['trials']} trials, in ms (first: the ping that "
                 f"waits for resolution; later: the rest):")
    lines.append(table(cells, ["probe", "phase", "ping", "min", "median", "p99", "max"]))
    lines.append(table([(r["probe"], r["phase"], r["solicits"], r["unres_discards"], r["failed"],
                         r["replies"], r["errors"], r["timeouts"],
                         None if r["unreachable_after_s"] is None
                         else f"{r['unreachable_after_s']:.2f} s") for r in rows],
                       ["probe", "phase", "solicits", "unres_discards", "failed", "replies", "errors",
                        "timeouts", "unreachable after"]))
    lines.append("")
    for v in verdicts:
        text = report.verdict_lines(v, where=f"phase {v['phase']}")
        lines += text[:2]
        lines.append(f"  first ping {v['timer_first_ms']:.3g} ms -> "
                     f"{v['immediate_first_ms']:.3g} ms (medians; a tick is {v['tick_ms']:g} ms)")
        ratio = v["immediate_first_over_later"]
        model = ("about 0.5, and none over one tick" if v["phase"] == "uniform" else
                 "just over 1: the tick, then the round trip")
        lines.append(f"  measured within it: timer-mode first pings' median at "
                     f"{v['timer_median_ticks']:.2f} of a tick, {v['timer_over_one_tick'] * 100:.0f}"
                     f" % over one tick (the model: {model}; scheduling delays on this machine "
                     f"add the rest); immediate-mode first ping "
                     f"{'-' if ratio is None else f'{ratio:.1f}'} times the later pings' median "
                     f"(the seed: 2.3)")
        w = v.get("timer_wait_ticks")
        if w:
            lines.append(f"  timer mode's first-ping wait, in ticks: median {w['median']:.2f}, "
                         f"p99 {w['p99']:.2f}, max {w['max']:.2f}; the seed's one sample "
                         f"({v['seed_wait_ticks']:.2f} tick) is at the "
                         f"{v['seed_percentile']:.0f}th percentile"
                         + ("; the tick phase (each ping sent just after a boundary) is the "
                            "upper bound" if v["phase"] == "uniform" else
                            "; this phase is the upper bound of a shell-started ping's wait"))
        cal = v.get("calibration")
        if cal:
            lines.append(f"  calibrated link: a real veth ping here takes {cal['first_us']:.1f} us "
                         f"first, {cal['later_us']:.1f} us later (the host kernel's, with seed "
                         f"000's patch): {cal['first_us'] / cal['later_us']:.2f} times")
        lines += text[2:]
    if not verdicts:
        lines.append("seed 000: no verdict (see the warnings)")
    return "\n".join(lines)


def plot(ax, rows):
    """The first ping's latency, a histogram per probe mode and send phase,
    with the seed's two figures marked: 9.91 ms (timer, before) and 0.152
    ms (immediate, after), at HZ=100."""
    bins = np.logspace(-4, 2, 61)   # 0.1 us to 100 ms
    for r in rows:
        if r.get("first_samples_ms"):
            ax.hist(r["first_samples_ms"], bins=bins, alpha=0.6,
                    label=f"{r['probe']}, phase {r.get('phase', 'uniform')} (HZ={r['hz']})")
    seed = SEED_MACHINE["000"]
    for ms, what in ((seed["first_ms"], "the seed's before"), (seed["after_ms"], "after")):
        ax.axvline(ms, color="tab:red", ls="--", lw=1)
        ax.text(ms, 1.01, f"{what}: {ms:g} ms", color="tab:red", ha="center", va="bottom",
                fontsize="small", transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    ax.set_xlabel("first ping after arp -d, ms (log scale)")
    ax.set_ylabel("trials")
    ax.set_title("arp: the first ping's latency by probe mode and send phase", pad=16)
    ax.legend(fontsize="small")
