"""A loopback mode's row from its runs: the rates' medians and samples, the
counts summed, the high-water marks at their highest, the oops of the
deepest run, and the model's invariants held in every run."""
import statistics

# per-run counts a row adds up, and high-water marks it keeps the highest of
SUMMED = ("softirqs", "backlog_schedules", "alloc_failed", "requests", "replies", "acks",
          "direct", "queued", "drops", "purged", "lstats_packets", "lstats_bytes",
          "transactions", "sk_backlogged", "recursion_drops", "stack_work_cycles")
HIGHEST = ("max_depth", "max_rx_nest", "stack_max", "overflow_depth")


def row(mode, k, runs, m):
    """One mode at one CPU count, from its runs (_one_run's counters)."""
    pps = [r["packets"] / r["seconds"] for r in runs]
    tps = [r["transactions"] / r["seconds"] for r in runs]
    packets = sum(r["packets"] for r in runs)
    cpp = [r["cycles_per_packet"] for r in runs if r["cycles_per_packet"] is not None]
    cpt = [r["cycles_per_transaction"] for r in runs if r["cycles_per_transaction"] is not None]
    return {
        "mode": mode, "cpus": k, "real_cpus": [int(c) for c in m.cpu_map], "runs": len(runs),
        "packets": packets,
        "pps": statistics.median(pps), "pps_samples": pps,
        "tps": statistics.median(tps), "tps_samples": tps,
        "cycles_per_packet": statistics.median(cpp) if cpp else None,
        "cycles_per_transaction": statistics.median(cpt) if cpt else None,
        # per run, in run order (None: it completed no transaction), so that
        # run r of one mode pairs with run r of another, as the verdict pairs them
        "cpt_samples": [r["cycles_per_transaction"] for r in runs],
        "stack_work_per_call": runs[0]["stack_work_per_call"],
        "refcnt_atomics": sum(r["refcnt_atomics"] for r in runs) / packets if packets else 0.0,
        **{k: sum(r[k] for r in runs) for k in SUMMED},
        **{k: max(r[k] for r in runs) for k in HIGHEST},
        "overflow": any(r["overflow"] for r in runs),
        **{k: max(runs, key=lambda r: r["oops_frames"])[k]
           for k in ("oops_trace", "oops_frames", "oops_refused")},
        "depth_returns_to_0": all(d == 0 for r in runs for d in r["depth_after"]),
        "refcnt_returns_to_0": all(r["refcnt_after"] == 0 for r in runs),
        "conserved": all(r["allocated"] == r["freed"] for r in runs),
        "timing_valid": m.timing_valid,
    }
