"""Output: the JSON envelope every subcommand shares, and text tables.

Envelope (schema 1):
  {"schema": 1, "smpnet": VERSION, "command": NAME, "machine": {...},
   "params": {...}, "results": [...], "verdicts": [...], "warnings": [...]}
A verdict: {"seed", "claim", "reference", "measured", "interval", "verdict"}.
"""
import json
import math

from . import __version__, _core, stats, sysinfo
from .cpus import format_cpus
from .tsc import tsc_info

SCHEMA = 1


def machine(cpus):
    """The "machine" object: host facts, TSC facts and build facts."""
    facts = sysinfo.machine_facts(cpus)
    facts.update(tsc_info())
    facts["cython"] = _core.CYTHON_VERSION
    facts["smpnet"] = __version__
    return facts


def envelope(command, cpus, params, results=(), verdicts=(), warnings=(), facts=None):
    facts = machine(cpus) if facts is None else facts
    return {
        "schema": SCHEMA,
        "smpnet": __version__,
        "command": command,
        "machine": facts,
        "params": params,
        "results": list(results),
        "verdicts": list(verdicts),
        "warnings": list(warnings),
    }


def dumps(env):
    """A result as JSON text. A number that is not finite (a CPU that never
    got the lock has no cycles per acquisition) is written null: JSON has no
    NaN or Infinity, and a reader such as compare would refuse the file."""
    return json.dumps(_finite(env), indent=2, allow_nan=False)


def _finite(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def table(rows, headers):
    """A plain aligned text table; numbers right-aligned."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_num(r[i]) for r in rows) if rows else False
               for i in range(len(headers))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if numeric[i] else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _cell(v):
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return "-" if v is None else str(v)


def time_bench_row_line(r):
    """A result row (dict) in time_bench's line format, algorithm appended."""
    period = r["wall_s"] / r["rounds"] if r["rounds"] else 0.0
    line = (f"Type:{r['test']} Per elem: {round(r['cycles'])} cycles(tsc) {r['ns']:.3f} ns "
            f"(step:0) - (measurement period time:{period:.9f} sec "
            f"time_interval:{round(period * 1e9)}) - "
            f"(invoke count:{r['loops']} tsc_interval:{round(r['cycles'] * r['loops'])})")
    return line + (f" [{r['algo']}]" if r.get("algo") else "")


# ------------------------------------------------------------------ the subcommands' text

def info_text(f, timers, warnings):
    def cpulist(c):
        return format_cpus(c) if c else "none"

    siblings = "; ".join(format_cpus(g) for g in f["smt_siblings"]) or "none among the selected CPUs"
    nodes = ", ".join(f"node{n}: {format_cpus(c)}" for n, c in sorted(f["numa_nodes"].items())) or "unknown"
    govs = sorted(set(f["governor"].values()))
    turbo = {True: "on", False: "off", None: "unknown"}[f["turbo"]]
    tsc = f"{f['tsc_hz'] / 1e6:.3f} MHz ({f['tsc_source']})"
    rows = [
        ("CPU model", f["cpu_model"]),
        ("Architecture", f["arch"]),
        ("Allowed CPUs", cpulist(f["allowed_cpus"])),
        ("Selected CPUs", cpulist(f["selected_cpus"])),
        ("SMT siblings", siblings),
        ("NUMA nodes", nodes),
        ("TSC", tsc),
        ("CPU flags", " ".join(f["cpu_flags"]) or "none of interest"),
        ("Hypervisor", f["hypervisor"] or "none"),
        ("Governor", ", ".join(govs) if govs else "no cpufreq"),
        ("Turbo", turbo),
        ("isolcpus", cpulist(f["isolcpus"])),
        ("nohz_full", cpulist(f["nohz_full"])),
        ("Kernel", f["kernel"]),
        ("Python", f["python"]),
        ("Cython", f"{f['cython']} (built with)"),
        ("numpy", f["numpy"]),
        ("psutil", f["psutil"] or "not installed"),
        ("smpnet", f["smpnet"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines.append("")
    lines.append("Timer costs, measured now (median of rounds, per iteration):")
    for r in timers:
        lines.append(f"  {r.test:<9} {r.cycles:8.2f} cycles  {r.ns:8.3f} ns  "
                     f"(min {r.cycles_min:.2f}, max {r.cycles_max:.2f} cycles; "
                     f"{r.rounds} rounds of {r.loops} loops)")
    lines.append("")
    if warnings:
        lines.append("Warnings (timings on this machine are less reliable):")
        lines.extend(f"  - {w}" for w in warnings)
    else:
        lines.append("No warnings: this machine is set up for stable timings.")
    return "\n".join(lines)


def locks_suite_text(rows, reports, verdicts, args, cpu):
    lines = [f"# time_bench suite on CPU {cpu}: {args.rounds} rounds after a warm-up, "
             f"restore={args.restore}" + (", checker on" if args.check else "")]
    for r in rows:
        lines.append(time_bench_row_line(r))
    lines.append("")
    cells = [(r["test"], r["algo"] or "-", r["cycles"], r["cycles_min"], r["cycles_max"], r["ns"])
             for r in rows]
    lines.append("Summary, per op (median of rounds, with min and max):")
    lines.append(table(cells, ["test", "algo", "cycles", "min", "max", "ns"]))
    overhead = next((r["cycles"] for r in rows if r["test"] == "for_loop"), None)
    if overhead is not None:
        lines.append(f"Loop overhead: for_loop = {overhead:.2f} cycles per iteration, "
                     "included in every figure above.")
    lines.append("")
    for v in verdicts:
        lo, hi = v["interval"]
        lines.append(f"seed {v['seed']}: {v['reference']}; here ({v['algo']}, "
                     f"restore={args.restore}): irqsave - irq = {v['measured']:.2f} cycles "
                     f"[95 % interval {lo:.2f} .. {hi:.2f}] -> {v['verdict']}")
    if not verdicts:
        lines.append(f"seed 003: no verdict (it needs the irq and irqsave variants and "
                     f"--rounds {stats.MIN_SAMPLES} or more)")
    lines.append(checker_text(reports, args.check))
    return "\n".join(lines)


def locks_contended_text(rows, reports, args):
    lines = []
    for r in rows:
        lines.append(f"# {r['algo']} {r['variant']}: {len(r['cpus'])} CPUs hammer one lock for "
                     f"{r['duration_s']} s, hold {r['hold_cycles']} cycles")
        for c in r["per_cpu"]:
            lines.append(f"  CPU {c['cpu']} (real {c['real_cpu']}): {c['acquisitions']} "
                         f"acquisitions, {c['cycles_per_acq']:.1f} cycles/acq, "
                         f"share {r['shares'][c['cpu']] * 100:.1f} %, {c['spins']} spins")
    lines.append("")
    cells = [(r["algo"], r["variant"], r["acq_per_s"] / 1e6, r["cycles"],
              r["system_cycles_per_acq"], r["fairness"], r["spins_per_acq"],
              "yes" if r["mutual_exclusion"] else "NO")
             for r in rows]
    lines.append(table(cells, ["algo", "variant", "M acq/s", "cycles/acq per CPU",
                                      "cycles/acq system", "fairness (Jain)", "spins/acq",
                                      "exclusive"]))
    lines.append("cycles/acq per CPU: median over CPUs of each CPU's run time over its own "
                 "acquisitions; system: run time over all acquisitions (one hand-over); "
                 "fairness: 1.0 = equal shares, 1/N = one CPU got all.")
    lines.append(checker_text(reports, args.check))
    return "\n".join(lines)


def checker_text(reports, on):
    if not on:
        return "checker: off (--check turns it on)"
    if not reports:
        return "checker: no reports"
    return "checker: " + ", ".join(f"{k} x{n}" for k, n in reports.items())


def defer_text(rows, verdicts, params, check):
    r0 = rows[0]
    amount = (f"{params['skbs']} skbs" if params["skbs"] else f"{params['duration_s']} s")
    lines = [f"# defer: {r0['rx_cpus']} RX CPU(s), {len(r0['cpus']) - r0['rx_cpus']} "
             f"consumer(s) on real CPUs {format_cpus(sorted(set(r0['cpus'])))}, "
             f"defer_max {params['defer_max']}, batch {params['batch']}, "
             f"{params['repeat']} runs of {amount} per strategy, lock {params['lock']}"]
    cells = []
    for r in rows:
        per_m = 1e6 / r["received"] if r["received"] else 0.0
        cells.append((r["strategy"], r["skbs_per_s"] / 1e6, r["skbs_per_s_min"] / 1e6,
                      r["skbs_per_s_max"] / 1e6, r["defer_cycles"], r["flush_cycles"],
                      r["flush_lock_cycles"], r["skbs_per_flush"], r["ipis"] * per_m,
                      r["fallback_frees"] * per_m, r["lock_spins"] * per_m,
                      "yes" if r["conserved"] else "NO"))
    lines.append(table(cells, [
        "strategy", "M skbs/s", "min", "max", "cyc/defer", "cyc/flush", "cyc/flush lock",
        "skbs/flush", "IPIs/M", "fallback/M", "spins/M", "conserved"]))
    lines.append(f"M skbs/s: median of the runs, end to end; cyc/defer: cycles per "
                 f"skb_attempt_defer_free (1 call in 8 timed); cyc/flush: per "
                 f"skb_defer_free_flush, and of its locked take of the list; "
                 f"{r0['timer_overhead_cycles']} cycles of timer overhead subtracted from each; "
                 f"/M: per million skbs.")
    lines.append("")
    buckets = ["1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", ">=128"]
    lines.append("Flush sizes (skbs per flush: flushes):")
    for r in rows:
        lines.append(f"  {r['strategy']:<8} " + "  ".join(
            f"{b}: {n}" for b, n in zip(buckets, r["flush_hist"]) if n))
    fastest = max(rows, key=lambda r: r["skbs_per_s"])
    flush_share = (f"{fastest['flush_cycles'] / max(fastest['skbs_per_flush'], 1):.1f}"
                   if fastest["flush_cycles"] is not None else "nothing (no flush ran)")
    defer_cost = (f"{fastest['defer_cycles']:.0f}" if fastest["defer_cycles"] is not None
                  else "an untimed share")
    lines.append(
        f"Where the cycles go ({fastest['strategy']}, the fastest): each skb costs the RX "
        f"CPU(s) {fastest['rx_cycles_per_skb']:.0f} cycles (NAPI receive, allocation, and "
        f"{flush_share} for its share of a flush) and the consumer(s) "
        f"{fastest['consumer_cycles_per_skb']:.0f} cycles (ring, read, and {defer_cost} in "
        f"skb_attempt_defer_free).")
    lines.append("")
    for v in verdicts:
        lo, hi = v["interval"]
        lines.append(f"seed {v['seed']}: {v['claim']}; reference: {v['reference']}")
        lines.append(f"  here: {v['measured']:+.2f} {v['unit']} [95 % interval {lo:+.2f} .. "
                     f"{hi:+.2f}] -> {v['verdict']}"
                     + (" (as the seed predicts)" if v.get("agrees_with_seed") else ""))
        if "in_flush" in v:
            f = v["in_flush"]
            lines.append(f"  in the flush itself (contended line): irqsave - irq = "
                         f"{f['measured']:+.2f} {f['unit']} [95 % interval "
                         f"{f['interval'][0]:+.2f} .. {f['interval'][1]:+.2f}]")
    if not verdicts:
        lines.append("seed 003: no verdict (see the warnings)")
    if check:
        for r in rows:
            rep = r["checker_reports"]
            lines.append(f"checker ({r['strategy']}): " + (
                ", ".join(f"{k} x{n}" for k, n in rep.items()) if rep else "no reports"))
    bad = [r["strategy"] for r in rows if not r["conserved"]]
    if bad:
        lines.append(f"CONSERVATION FAILED for {', '.join(bad)}: skbs lost or freed twice")
    return "\n".join(lines)


def warnings_text(warnings):
    if not warnings:
        return ""
    return "\n\nWarnings (timings on this machine are less reliable):\n" + \
        "\n".join(f"  - {w}" for w in warnings)


def loopback_text(rows, verdicts, params):
    amount = (f"{params['packets']} packets" if params["packets"]
              else f"{params['duration_s']} s")
    lines = [f"# loopback: {params['repeat']} runs of {amount} per mode, size "
             f"{params['size']} bytes, ACK in rx {'on' if params['ack_in_rx'] else 'off'}"
             + (", ACK STORM" if params["ack_storm"] else "")
             + f", stack {params['stack']}"]
    cells = []
    for r in rows:
        oops = r["overflow"]  # the CPU stopped at the oops: its rates mean nothing
        cells.append((r["mode"], r["cpus"], None if oops else r["pps"] / 1e6,
                      None if oops else r["tps"] / 1e6,
                      None if oops else r["cycles_per_packet"], r["refcnt_atomics"],
                      r["softirqs"], r["max_depth"], r["drops"], r["lstats_packets"],
                      f"yes, depth {r['overflow_depth']}" if oops else "no"))
    lines.append(table(cells, ["mode", "CPUs", "M pkt/s", "M trans/s", "cycles/pkt",
                               "refcnt atomics/pkt", "softirqs", "max depth", "drops",
                               "lstats packets", "overflow"]))
    lines.append("M pkt/s: every packet through loopback_xmit (requests, replies, ACKs), all "
                 "CPUs, median of the runs; cycles/pkt: per CPU, its run time over its "
                 "packets; softirqs: NET_RX runs; lstats packets equal the packets sent; "
                 "--packets is met in whole transactions per CPU.")
    for r in rows:
        if r["overflow"]:
            frames = " <- ".join(["loopback_xmit", "tcp_send_ack", "tcp_v4_rcv",
                                  "netif_receive_skb"] * 2)
            lines.append(f"oops ({r['mode']}, {r['cpus']} CPU(s)): emulated kernel stack "
                         f"overflow at loopback_xmit depth {r['overflow_depth']} "
                         f"({r['stack_max']} of {params['stack']} bytes): {frames} <- ... "
                         f"({r['overflow_depth']} times)")
    by_cpus = {}
    for r in rows:
        by_cpus.setdefault(r["mode"], []).append(r)
    if any(len(v) > 1 for v in by_cpus.values()):
        lines.append("")
        lines.append("Scaling (cycles per packet per CPU, by CPU count):")
        for mode, rs in by_cpus.items():
            lines.append(f"  {mode:<17} " + "  ".join(
                f"{r['cpus']}: {r['cycles_per_packet']:.1f}" for r in rs
                if r["cycles_per_packet"] is not None))
    lines.append("")
    for v in verdicts:
        lines.append(f"seed {v['seed']}: {v['claim']}; reference: {v['reference']}")
        if v["interval"] is not None:
            lo, hi = v["interval"]
            lines.append(f"  here: {v['measured']:.3f} {v['unit']} [95 % interval {lo:.3f} .. "
                         f"{hi:.3f}] -> {v['verdict']}")
        else:
            guard = ("overflowed too" if v["guarded_overflow"] else
                     f"survived by queueing ({v['guarded_drops']} backlog drops)")
            unguarded = (f"overflowed at depth {v['measured']}" if v["measured"]
                         else "did not overflow")
            lines.append(f"  here: direct {guard}; direct-unguarded {unguarded} "
                         f"-> {v['verdict']}")
    if not verdicts:
        lines.append("seed 002: no verdict (see the warnings)")
    return "\n".join(lines)


def arp_text(rows, verdicts, transcripts, params):
    lines = []
    for r in rows:
        lines.append(f"# probe {r['probe']}, HZ={r['hz']} (a tick is {1000 / r['hz']:g} ms)")
        lines.extend(transcripts[r["probe"]])
        lines.append("")
    cells = []
    for r in rows:
        for which in ("first_ms", "later_ms"):
            d = r[which]
            cells.append((r["probe"], which.split("_")[0], *(
                [f"{d[k]:.4g}" for k in ("min", "median", "p99", "max")] if d else [None] * 4)))
    lines.append(f"Round trips over {params['trials']} trials, in ms (first: the ping that "
                 f"waits for resolution; later: the rest):")
    lines.append(table(cells, ["probe", "ping", "min", "median", "p99", "max"]))
    lines.append(table([(r["probe"], r["solicits"], r["unres_discards"], r["failed"],
                         r["replies"], r["errors"], r["timeouts"],
                         None if r["unreachable_after_s"] is None
                         else f"{r['unreachable_after_s']:.2f} s") for r in rows],
                       ["probe", "solicits", "unres_discards", "failed", "replies", "errors",
                        "timeouts", "unreachable after"]))
    lines.append("")
    for v in verdicts:
        lo, hi = v["interval"]
        lines.append(f"seed {v['seed']}: {v['claim']}; reference: {v['reference']}")
        lines.append(f"  here: first ping {v['timer_first_ms']:.3g} ms -> "
                     f"{v['immediate_first_ms']:.3g} ms (medians; a tick is {v['tick_ms']:g} "
                     f"ms); timer - immediate = {v['measured']:.3f} ms [95 % interval "
                     f"{lo:.3f} .. {hi:.3f}] -> {v['verdict']}")
        ratio = v["immediate_first_over_later"]
        lines.append(f"  the tick model: timer-mode first pings' median at "
                     f"{v['timer_median_ticks']:.2f} of a tick (expected about 0.5), "
                     f"{v['timer_over_one_tick'] * 100:.0f} % over one tick (expected 0; "
                     f"scheduling delays on this machine add the rest); immediate-mode first "
                     f"ping {'-' if ratio is None else f'{ratio:.1f}'} times the later pings' "
                     f"median (target: at most 3; the seed: 2.3)")
    if not verdicts:
        lines.append("seed 000: no verdict (see the warnings)")
    return "\n".join(lines)
