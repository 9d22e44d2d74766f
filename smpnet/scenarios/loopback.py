"""The loopback fast path: seed 002's +5 % and its reviewer's stack overflow.

Every emulated CPU runs a tbench-like client and server over the one
loopback device, in the chosen mode; all CPUs share the device's refcnt
line, which netif_rx() writes twice per packet (dev_hold, dev_put) and the
direct path not at all. Each mode runs `repeat` times, interleaved.
"""
import statistics


from .. import _core, layout, stats
from ..errors import BadInput
from .. import machine
from ..machine import Machine
from . import defer

MODES = tuple(sorted(_core.LOOPBACK_MODES, key=_core.LOOPBACK_MODES.get))
STACKS = {"8k": 8192, "16k": 16384}
SIZE = 100
DURATION = 0.2
REPEAT = 5
MAX_PACKETS = 1 << 40
# For run-time estimates with --packets: a typical rate (15-19 M packets/s
# per CPU on 2 vCPUs). A slower run keeps the watchdog waiting by its
# progress count.
TYPICAL_PPS = 1e7
POOL = 16384  # skb heads, at least: see pool_size()


def pool_size(ncpus):
    """Every CPU's backlog full (1001) and its cache full (64), and slack."""
    return max(POOL, ncpus * (_core.NETDEV_MAX_BACKLOG + 1 + 64) + 1024)

SEED_002 = {
    "seed": "002",
    "claim": "direct delivery is faster than netif_rx (tbench, direct / netif_rx > 1)",
    "reference": "tbench +5 % (2008)",
}
SEED_002_STORM = {
    "seed": "002",
    "claim": "with ACKs of ACKs, the depth guard survives by queueing; unguarded recursion "
             "overflows the kernel stack",
    "reference": "the reviewer's objection (David Miller, 2008)",
}


def validate(ncpus, packets, duration, size, repeat, ack_in_rx, ack_storm):
    if packets is not None and duration is not None:
        raise BadInput("give --packets or --duration, not both")
    if duration is not None and not 0 < duration <= 3600:
        raise BadInput(f"--duration {duration}: give (0, 3600] seconds")
    if ack_storm and not ack_in_rx:
        raise BadInput("--ack-storm needs --ack-in-rx: the storm starts from an ACK")
    if packets is not None and not ncpus <= packets <= MAX_PACKETS:
        raise BadInput(f"--packets {packets}: give {ncpus} (one per CPU) to {MAX_PACKETS}")
    if not 1 <= size <= 65535:
        raise BadInput(f"--size {size}: give 1 to 65535 bytes")
    if not 1 <= repeat <= defer.MAX_REPEAT:
        raise BadInput(f"--repeat {repeat}: give 1 to {defer.MAX_REPEAT}")


def estimate_seconds(ncpus, n_modes, repeat, packets=None, duration=None, scaling=False,
                     real_cpus=2):
    work = machine.work_seconds(packets, duration or (None if packets else DURATION), TYPICAL_PPS)
    counts = range(1, ncpus + 1) if scaling else [ncpus]
    return sum(n_modes * repeat * machine.run_seconds(work, k, real_cpus, bool(packets))
               for k in counts)


def run(cpus, modes=MODES, packets=None, duration=None, size=SIZE, ack_in_rx=True,
        ack_storm=False, stack="16k", repeat=REPEAT, ncpus=None, oversubscribe=False,
        scaling=False, progress=None):
    """Returns (rows, verdicts, why there is no verdict or None)."""
    n = ncpus or len(cpus)
    validate(n, packets, duration, size, repeat, ack_in_rx, ack_storm)
    if stack not in STACKS:
        raise BadInput(f"--stack {stack}: choose {' or '.join(STACKS)}")
    if packets is None and duration is None:
        duration = DURATION
    counts = list(range(1, n + 1)) if scaling else [n]
    plan = [(k, r, mode) for k in counts for r in range(repeat) for mode in modes]
    runs = {(k, mode): [] for k in counts for mode in modes}
    machines = {}
    try:
        for i, (k, r, mode) in enumerate(plan):
            if progress:
                progress(i, len(plan), f"{mode} on {k} CPU(s) (run {r + 1} of {repeat})")
            if k not in machines:
                machines[k] = _open(cpus, k, oversubscribe or k > len(cpus))
            m = machines[k]
            runs[(k, mode)].append(_one_run(m, mode, packets, duration, size, ack_in_rx,
                                            ack_storm, STACKS[stack]))
        rows = [_row(mode, k, runs[(k, mode)], machines[k]) for k in counts for mode in modes]
    finally:
        for m in machines.values():
            m.close()
    return (rows,) + _verdicts(rows, runs, n, modes, repeat, ack_storm)


INVARIANTS = (
    ("conserved", "skbs not conserved"),
    ("lstats_equal_packets", "lstats packets differ from packets sent"),
    ("depth_returns_to_0", "lstats depth did not return to 0"),
    ("refcnt_returns_to_0", "dev->refcnt did not return to 0"),
)


def _progress(m):
    """What the watchdog sees rise while packets move."""
    st = m.region("lo_stats")
    return int(st["xmits"].sum()) + int(st["delivered"].sum())


def invariant_failures(rows):
    """What broke the model's invariants, by mode and CPU count."""
    out = []
    for r in rows:
        held = dict(r, lstats_equal_packets=r["lstats_packets"] == r["packets"])
        out += [f"{r['mode']} on {r['cpus']} CPU(s): {what}"
                for key, what in INVARIANTS if not held[key]]
    return out


def _open(cpus, k, oversubscribe):
    regions = [("skb", layout.SK_BUFF, pool_size(k)), ("skb_pool", layout.SKB_POOL, 1),
               ("napi_cache", layout.NAPI_ALLOC_CACHE, k), ("skb_stats", layout.SKB_STATS, k),
               ("net_device", layout.NET_DEVICE, 1), ("lo_stats", layout.LO_STATS, k)]
    real = cpus if k > len(cpus) else cpus[:k]
    return Machine(cpus=real, ncpus=k, oversubscribe=oversubscribe, regions=regions).open()


def _one_run(m, mode, packets, duration, size, ack_in_rx, ack_storm, thread_size):
    names = m.segment.region_names
    idx = tuple(names.index(r) for r in defer.NET_REGIONS)
    dev, lo = names.index("net_device"), names.index("lo_stats")
    _core.net_init(m.segment.buf, idx, _core.LOCK_ALGOS["qspinlock"])
    m.region("lo_stats")[:] = 0
    m.region("net_device")[:] = 0
    m.lstats[:] = 0
    softirqs0 = m.region("irq")["softirqs"].copy()
    cycles = m.run(_cpu_body, idx, dev, lo, _core.LOOPBACK_MODES[mode], ack_in_rx, ack_storm,
                   size, packets or 0, duration or 0.0, thread_size,
                   expected=machine.work_seconds(packets, duration, TYPICAL_PPS),
                   progress=_progress)
    st = m.region("lo_stats")
    hz = float(m.header["tsc_hz"])
    xmits = [int(x) for x in st["xmits"]]
    skb = m.region("skb_stats")
    return {
        "cycles": [int(c) for c in cycles],
        "seconds": max(cycles) / hz,
        "packets": sum(xmits),
        "transactions": int(st["transactions"].sum()),
        "requests": int(st["requests"].sum()), "replies": int(st["replies"].sum()),
        "acks": int(st["acks"].sum()),
        "cycles_per_packet": statistics.median(c / x for c, x in zip(cycles, xmits) if x)
        if any(xmits) else None,
        "refcnt_atomics": int(st["refcnt_atomics"].sum()),
        "softirqs": int((m.region("irq")["softirqs"] - softirqs0).sum()),
        "backlog_schedules": int(st["softirq_raises"].sum()),
        "alloc_failed": int(skb["alloc_failed"].sum()),
        "direct": int(st["direct"].sum()), "queued": int(st["queued"].sum()),
        "max_depth": int(st["max_depth"].max()),
        "max_rx_nest": int(st["max_rx_nest"].max()),
        "stack_max": int(st["stack_max"].max()),
        "overflow": bool(st["overflow"].any()),
        "overflow_depth": int(st["overflow_depth"].max()),
        "drops": int(m.softnet["dropped"].sum()),
        "purged": int(st["purged"].sum()),
        "lstats_packets": int(m.lstats["packets"].sum()),
        "lstats_bytes": int(m.lstats["bytes"].sum()),
        "depth_after": [int(d) for d in m.lstats["depth"]],
        "refcnt_after": int(m.region("net_device")[0]["refcnt"]),
        "allocated": int(skb["allocated"].sum()), "freed": int(skb["freed"].sum()),
    }


def _cpu_body(ctx, idx, dev, lo, mode, ack_in_rx, ack_storm, size, packets, duration,
              thread_size):
    # CPU i sends its share of the packets, in whole transactions
    quota = packets // ctx.nr_cpus + (1 if ctx.cpu < packets % ctx.nr_cpus else 0)
    return _core.loopback_run(ctx.seg, ctx.cpu, idx, dev, lo, mode, ack_in_rx, ack_storm,
                              size, quota, duration, thread_size)


# per-run counts a row adds up, and high-water marks it keeps the highest of
SUMMED = ("softirqs", "backlog_schedules", "alloc_failed", "requests", "replies", "acks",
          "direct", "queued", "drops", "purged", "lstats_packets", "lstats_bytes")
HIGHEST = ("max_depth", "max_rx_nest", "stack_max", "overflow_depth")


def _row(mode, k, runs, m):
    pps = [r["packets"] / r["seconds"] for r in runs]
    tps = [r["transactions"] / r["seconds"] for r in runs]
    packets = sum(r["packets"] for r in runs)
    cpp = [r["cycles_per_packet"] for r in runs if r["cycles_per_packet"] is not None]
    return {
        "mode": mode, "cpus": k, "real_cpus": [int(c) for c in m.cpu_map], "runs": len(runs),
        "packets": packets,
        "pps": statistics.median(pps), "pps_samples": pps,
        "tps": statistics.median(tps), "tps_samples": tps,
        "cycles_per_packet": statistics.median(cpp) if cpp else None,
        "refcnt_atomics": sum(r["refcnt_atomics"] for r in runs) / packets if packets else 0.0,
        **{k: sum(r[k] for r in runs) for k in SUMMED},
        **{k: max(r[k] for r in runs) for k in HIGHEST},
        "overflow": any(r["overflow"] for r in runs),
        "depth_returns_to_0": all(d == 0 for r in runs for d in r["depth_after"]),
        "refcnt_returns_to_0": all(r["refcnt_after"] == 0 for r in runs),
        "conserved": all(r["allocated"] == r["freed"] for r in runs),
        "timing_valid": m.timing_valid,
    }


def _verdicts(rows, runs, n, modes, repeat, ack_storm):
    out, why = [], None
    if ack_storm:
        by = {r["mode"]: r for r in rows if r["cpus"] == n}
        if "direct" in by and "direct-unguarded" in by:
            guarded, unguarded = by["direct"], by["direct-unguarded"]
            holds = (not guarded["overflow"] and guarded["queued"] > 0
                     and unguarded["overflow"])
            out.append(dict(SEED_002_STORM, measured=unguarded["overflow_depth"],
                            unit="nested loopback_xmit frames at the overflow",
                            interval=None, verdict="reproduced" if holds else "not reproduced",
                            guarded_overflow=guarded["overflow"],
                            guarded_drops=guarded["drops"]))
        else:
            why = "the storm verdict needs the direct and direct-unguarded modes"
        return out, why
    if "netif_rx" not in modes or "direct" not in modes:
        return out, "seed 002's verdict needs the netif_rx and direct modes"
    if repeat < stats.MIN_SAMPLES:
        return out, f"seed 002's verdict needs --repeat {stats.MIN_SAMPLES} or more"
    row = next(r for r in rows if r["cpus"] == n and r["mode"] == "direct")
    if not row["timing_valid"]:
        return out, "an oversubscribed machine gives no timing verdict"
    direct = [r["transactions"] / r["seconds"] for r in runs[(n, "direct")]]
    base = [r["transactions"] / r["seconds"] for r in runs[(n, "netif_rx")]]
    ratio, ci = stats.median_ratio_ci(direct, base)
    out.append(dict(SEED_002, measured=ratio, unit="direct / netif_rx, transactions/s",
                    interval=list(ci), verdict=stats.verdict((ci[0] - 1, ci[1] - 1))))
    return out, why
