"""A defer run's counters as the defer experiment's rows: per run, what the
shared skb_stats, softnet and IRQ regions counted (measure()); per
strategy, the runs' sums and medians (row()); and each strategy's gain in
skbs/s over `none`, the kernel before the list existed (add_gains())."""
import statistics

from ...machine import layout
from ...measure import stats
from ..common import net


def measure(m, cycles, rx, overhead, spins0, bugs0):
    st = m.region("skb_stats")
    tsc_hz = float(m.header["tsc_hz"])
    tot = {name: int(st[name].sum()) for name in layout.SKB_STATS.names if name != "flush_hist"}
    seconds = max(cycles) / tsc_hz
    flushes = max(tot["flushes"], 1)
    softnet = m.region("softnet")
    # the latest flushes' lock sections, of every CPU, as a trimmed mean: one
    # preempted flush must not stand for all of them (a mean would let it),
    # and a median of whole cycles would hide a difference of a few
    samples = [int(x) for s in st for x in
               s["flush_lock_sample"][: min(int(s["nr_flush_samples"]), layout.FLUSH_SAMPLES)]]
    return {
        **tot,
        "skbs_per_s": tot["received"] / seconds if seconds else 0.0,
        "seconds": seconds,
        "defer_cycles": tot["defer_cycles"] / tot["defer_samples"] - overhead
        if tot["defer_samples"] else None,
        # one serialising pair around a flush, and a read inside it
        "flush_cycles": tot["flush_cycles"] / flushes - overhead if tot["flushes"] else None,
        "flush_lock_cycles": stats.trimmed_mean(samples) - overhead if samples else None,
        # the IPI taken as the locked take's unlock re-enables IRQs, apart
        "flush_irq_cycles": tot["flush_irq_cycles"] / tot["flush_irq_replays"]
        if tot["flush_irq_replays"] else None,
        "flush_hist": [int(x) for x in st["flush_hist"].sum(axis=0)],
        "lock_spins": int((m.region("irq")["spins"] - spins0["spins"]).sum()),
        "ipi_send_cycles": int((m.region("irq")["ipi_send_cycles"]
                                - spins0["ipi_send_cycles"]).sum()),
        "time_squeeze": int(softnet["time_squeeze"].sum()),
        "missing": net.audit(m),
        "rx_cycles_per_skb": sum(cycles[:rx]) / max(tot["received"], 1),
        "consumer_cycles_per_skb": sum(cycles[rx:]) / max(tot["received"], 1),
        "checker_reports": {name: int(n) for name, n in
                            zip(layout.LOCKDEP_BUGS, m.region("irq")["bugs"].sum(axis=0) - bugs0)
                            if n},
    }


def _median(runs, key):
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def row(strategy, runs, cpus, rx, defer_max, batch, overhead, timing_valid, ipi):
    """A strategy's runs at one IPI cost: `ipi` holds its point (the
    --ipi-cycles value or "measured"), what was charged, and the figures
    measured here (ipi_figures, the wake-up's upper bound)."""
    allocated = sum(r["allocated"] for r in runs)
    freed = sum(r["freed"] for r in runs)
    rates = [r["skbs_per_s"] for r in runs]
    flushed, flushes = sum(r["flushed"] for r in runs), sum(r["flushes"] for r in runs)
    received = sum(r["received"] for r in runs)
    ipis = sum(r["ipis"] for r in runs)
    reports = {}
    for r in runs:
        for k, v in r["checker_reports"].items():
            reports[k] = reports.get(k, 0) + v
    return {
        "strategy": strategy, "cpus": cpus, "rx_cpus": rx, "defer_max": defer_max,
        "batch": batch, "runs": len(runs),
        "allocated": allocated, "freed": freed, "lost": allocated - freed,
        "double_free": sum(r["double_free"] + r["stale"] for r in runs),
        "alloc_failed": sum(r["alloc_failed"] for r in runs),
        "missing_after_run": sum(r["missing"] for r in runs),
        "conserved": allocated == freed and all(
            r["double_free"] == 0 and r["stale"] == 0 and r["missing"] == 0 for r in runs),
        "skbs_per_s": statistics.median(rates), "skbs_per_s_min": min(rates),
        "skbs_per_s_max": max(rates), "skbs_per_s_samples": rates,
        "defer_cycles": _median(runs, "defer_cycles"),
        "flush_cycles": _median(runs, "flush_cycles"),
        "flush_lock_cycles": _median(runs, "flush_lock_cycles"),
        "flush_lock_samples": [r["flush_lock_cycles"] for r in runs],
        "flush_irq_cycles": _median(runs, "flush_irq_cycles"),
        "flush_irq_replays": sum(r["flush_irq_replays"] for r in runs),
        "flushes": flushes, "skbs_per_flush": flushed / flushes if flushes else 0.0,
        "max_flush": max(r["max_flush"] for r in runs),
        "flush_hist": [sum(col) for col in zip(*(r["flush_hist"] for r in runs))],
        "ipis": ipis,
        "ipis_per_m": ipis * 1e6 / received if received else 0.0,
        # the kernel's rule at this load: one kick in each cycle of the list
        # that passed defer_max / 2 (fewer when one is still in flight)
        "ipis_by_rule": sum(r["flushes_past_half"] for r in runs),
        "ipis_by_rule_per_m": (sum(r["flushes_past_half"] for r in runs) * 1e6 / received
                               if received else 0.0),
        # an IPI's cost: the sender's send, timed per send (a spin of
        # ipi_send_charged), and the target's entry, handling and exit
        # (irq_entry_cycles, spun per IPI taken); "ipi" says how each was had
        "ipi_cycles": ipi["point"],
        "ipi_send_charged": ipi["send"],
        "ipi_send_cycles": sum(r["ipi_send_cycles"] for r in runs) / ipis if ipis else None,
        "irq_entry_cycles": ipi["entry"],
        "ipi": {**ipi["figures"], "send_charged_how": ipi["send_how"],
                "entry_charged_how": ipi["entry_how"]},
        "ipi_wake": ipi["wake"],
        "remote_frees": sum(r["remote_frees"] for r in runs),
        "remote_frees_per_m": (sum(r["remote_frees"] for r in runs) * 1e6 / received
                               if received else 0.0),
        "fallback_frees": sum(r["fallback_frees"] for r in runs),
        "deferred": sum(r["deferred"] for r in runs),
        "lock_spins": sum(r["lock_spins"] for r in runs),
        "received": received,
        "rx_cycles_per_skb": _median(runs, "rx_cycles_per_skb"),
        "consumer_cycles_per_skb": _median(runs, "consumer_cycles_per_skb"),
        "timer_overhead_cycles": overhead,
        "checker_reports": reports,
        "checker_lock_checks": sum(r["lock_checks"] for r in runs),
        "timing_valid": timing_valid,
        # a cache line's round trip between the kick's real CPUs, before
        # each run (None with one real CPU): where the vCPUs ran
        "line_rtt_samples": [r["line_rtt_cycles"] for r in runs],
        "line_rtt_cycles": _median(runs, "line_rtt_cycles"),
    }


# A line's round trip that changes this many times over between a
# command's runs: the vCPUs were placed differently (SMT siblings, cores
# sharing a cache, or across caches), and every cross-CPU cost with them.
PLACEMENT_SPREAD = 2.0


def add_gains(rows, runs, split=None):
    """Each strategy's gain in skbs/s over `none` (the consumer freeing
    remotely), paired run by run, with its 95 % interval; None without
    `none` in the run or with too few runs. With a placement split (a
    line's round trip in cycles: placement_split), also the gain over the
    pairs whose two runs both saw the line under it ("near") and both over
    it ("far"): each {"pairs", "gains" (each pair's, %), "measured",
    "interval" (None under stats.MIN_SAMPLES pairs)}."""
    if "none" not in runs:
        return
    for r in rows:
        if r["strategy"] == "none":
            r["gain_over_none"] = None
            continue
        mine, none = runs[r["strategy"]], runs["none"]
        g = stats.paired([x["skbs_per_s"] for x in mine], [x["skbs_per_s"] for x in none],
                         stats.gain)
        r["gain_over_none"] = {"measured": g[0], "interval": g[1]} if g else None
        if split is not None:
            r["gain_over_none_by_placement"] = {
                "split_cycles": split,
                **{side: _placement_gain(mine, none, far, split)
                   for side, far in (("near", False), ("far", True))}}


def _placement_gain(mine, none, far, split):
    pairs = [(a["skbs_per_s"], b["skbs_per_s"]) for a, b in zip(mine, none)
             if a["line_rtt_cycles"] is not None and b["line_rtt_cycles"] is not None
             and (a["line_rtt_cycles"] >= split) == far == (b["line_rtt_cycles"] >= split)]
    g = stats.paired([a for a, _ in pairs], [b for _, b in pairs], stats.gain)
    return {"pairs": len(pairs), "gains": [stats.gain(a, b) for a, b in pairs],
            "measured": g[0] if g else None, "interval": g[1] if g else None}


def placement_split(lines):
    """The line round trip (cycles) that splits a command's runs into two
    placements of its vCPUs, or None when the round trip never moved
    PLACEMENT_SPREAD times over (or was not measured): PLACEMENT_SPREAD
    times the fastest."""
    values = [x for x in lines if x is not None]
    if not values or max(values) < PLACEMENT_SPREAD * min(values):
        return None
    return PLACEMENT_SPREAD * min(values)


def line_rtt_range(rows):
    """(min, median, max) of the line round trips measured before the
    runs, or None where none was (one real CPU)."""
    values = sorted(x for r in rows for x in r.get("line_rtt_samples", []) if x is not None)
    if not values:
        return None
    return values[0], statistics.median(values), values[-1]


def placement_warnings(rows):
    """A warning when the cross-CPU line's round trip moved PLACEMENT_SPREAD
    times over between runs: runs of one side then ran on different
    machines, as far as the cache lines go, and pairs mix them."""
    span = line_rtt_range(rows)
    if span is None or placement_split(span) is None:
        return []
    return [f"a cache line's round trip between the kick's real CPUs ranged from "
            f"{span[0]:,.0f} to {span[2]:,.0f} cycles over the runs (median {span[1]:,.0f}): the "
            f"hypervisor ran the vCPUs closer or further apart from run to run, every "
            f"cross-CPU cost changed with it, and the intervals hold that spread"]
