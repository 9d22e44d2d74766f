"""Seed 002's verdicts from the loopback experiment's runs: direct delivery's
gain over netif_rx (paired runs, with the A/A control, the calibration and
what direct saves per transaction), and the ACK storm's overflow."""
from ... import _core
from ...measure import stats, verdict_facts
from ...report import report
from ...seeds import SEED_002, SEED_002_CYCLES, SEED_002_STORM

AA = "netif_rx (A/A)"
RAW = ("netif_rx (raw)", "direct (raw)")   # the raw model beside a calibrated run


def storm_verdict(rows, n):
    by = {r["mode"]: r for r in rows if r["cpus"] == n}
    if "direct" not in by or "direct-unguarded" not in by:
        return [], "the storm verdict needs the direct and direct-unguarded modes"
    guarded, unguarded = by["direct"], by["direct-unguarded"]
    holds = not guarded["overflow"] and guarded["queued"] > 0 and unguarded["overflow"]
    v = dict(SEED_002_STORM, measured=unguarded["overflow_depth"],
             unit="nested loopback_xmit frames at the overflow",
             interval=None, verdict="reproduced" if holds else "not reproduced",
             guarded_overflow=guarded["overflow"], guarded_drops=guarded["drops"])
    limited = by.get("direct-xmit-recursion")
    if limited:   # the hypothetical bounded delivery, shown beside the two
        v["xmit_recursion"] = {k: limited[k] for k in
                               ("overflow", "recursion_drops", "max_depth", "drops")}
    return [v], None


def _per_transaction(row, key):
    # refcnt_atomics is a row's per-packet figure; the others are its counts
    count = row[key] * row["packets"] if key == "refcnt_atomics" else row[key]
    return count / row["transactions"] if row["transactions"] else None


def verdicts(rows, runs, n, modes, repeat, ack_storm, sizing=None):
    if ack_storm:
        return storm_verdict(rows, n)
    if "netif_rx" not in modes or "direct" not in modes:
        return [], "seed 002's verdict needs the netif_rx and direct modes"
    if repeat < stats.MIN_SAMPLES:
        return [], f"seed 002's verdict needs --repeat {stats.MIN_SAMPLES} or more"
    by = {r["mode"]: r for r in rows if r["cpus"] == n}
    if not by["direct"]["timing_valid"]:
        return [], "an oversubscribed machine gives no timing verdict"

    def tps(mode):
        return [r["transactions"] / r["seconds"] for r in runs.get((n, mode), [])]

    def cpt(mode):
        return [r["cycles_per_transaction"] for r in runs.get((n, mode), [])]

    # the primary: what the patch changes, cycles per transaction, paired
    # (None when too few runs completed a transaction on either side)
    cycles = stats.paired(cpt("netif_rx"), cpt("direct"), lambda a, b: a - b)
    vc = None
    if cycles:
        vc = stats.judge(SEED_002_CYCLES, cycles[0], cycles[1], pairs=cycles[2])
        vc["label"] = "cycles saved per transaction"
        aa = stats.paired(cpt("netif_rx"), cpt(AA), lambda a, b: a - b)
        if aa:
            vc["control"] = stats.control("netif_rx against netif_rx", aa[0], aa[1])
    v = stats.judge(SEED_002, *stats.paired(tps("direct"), tps("netif_rx"), stats.gain))
    cost = by["netif_rx"]["cycles_per_transaction"]
    v["label"] = ("% of this host's transaction ("
                  + (f"{cost:,.0f} cycles)" if cost is not None else "its cost not measured)"))
    aa = stats.paired(tps(AA), tps("netif_rx"), stats.gain)
    if aa:
        v["control"] = stats.control("netif_rx against netif_rx", aa[0], aa[1])
    # what direct delivery saves per transaction, on the verdict's sides
    # (calibrated, when they are: the stack work's spin keeps its average,
    # and a path runs colder between real work than in a tight loop): the
    # primary's figure; and the counts behind it, [netif_rx, direct]
    v["breakdown"] = dict(
        saved_cycles=cycles[0] if cycles else None, saved_interval=cycles[1] if cycles else None,
        transaction_cycles=by["netif_rx"]["cycles_per_transaction"],
        per_transaction={key: [_per_transaction(by["netif_rx"], key),
                               _per_transaction(by["direct"], key)]
                         for key in ("refcnt_atomics", "softirqs", "queued")})
    if sizing:
        raw_saved = stats.paired(cpt(RAW[0]), cpt(RAW[1]), lambda a, b: a - b)
        v["breakdown"]["saved_cycles_raw"] = raw_saved[0] if raw_saved else None
        v["calibration"] = dict(sizing, measured_work_cycles=_per_transaction(
            by["netif_rx"], "stack_work_cycles"))
        v["unit_note"] = ("calibrated: each transaction costs the host kernel's measured "
                          "TCP request/response cycles, the model's own work included")
        raw = stats.paired(tps(RAW[1]), tps(RAW[0]), stats.gain)
        if raw:
            v["raw"] = {"measured": raw[0], "interval": raw[1]}
    else:
        v["calibration"] = None
    if vc is None:
        return [v], None
    vc["calibration"] = v["calibration"]
    return [vc, v], None


def name_the_cost(verdicts, profile):
    """Give the gain's verdict (not the storm's, whose size is the stack's)
    the machine fact that sets its size: the transaction's cost that was
    charged, from `profile`, or that none was (verdict_facts.tcp_rr)."""
    timed = [v for v in verdicts if v.get("interval") is not None]
    gain = next((v for v in timed if "breakdown" in v), None)   # the model's own cost is there
    for v in timed:
        v["machine_fact"] = verdict_facts.tcp_rr(profile, gain or v)


def verdict_text(v):
    """Seed 002's verdict lines, with the calibration and the breakdown."""
    if v["interval"] is None:     # the storm
        guard = ("overflowed too" if v["guarded_overflow"] else
                 f"survived by queueing ({v['guarded_drops']} backlog drops)")
        unguarded = (f"overflowed at depth {v['measured']}" if v["measured"]
                     else "did not overflow")
        here = f"direct {guard}; direct-unguarded {unguarded}"
        x = v.get("xmit_recursion")
        if x:
            here += ("; direct-xmit-recursion " + (
                "overflowed too" if x["overflow"] else
                f"survived by dropping ({x['recursion_drops']} drops past "
                f"XMIT_RECURSION_LIMIT {_core.XMIT_RECURSION_LIMIT}, "
                f"depth {x['max_depth']} at most)"))
        return report.verdict_lines(v, here)
    lines = report.verdict_lines(v, where=v.get("label"))
    if "breakdown" not in v:      # the cycles verdict: its figure is the line above
        return lines
    cal, b = v.get("calibration"), v.get("breakdown")
    if cal:
        lines.append(f"  calibrated: {cal['kernel_cycles']:.0f} cycles per transaction, the host "
                     f"kernel's (TCP_RR, one CPU) = {cal['model_cycles']:.0f} the model's own "
                     f"+ {cal['work_cycles']:.0f} of stack work (measured: "
                     f"{cal['measured_work_cycles']:.0f} per transaction)")
        if v.get("raw"):
            lo, hi = v["raw"]["interval"]
            lines.append(f"  raw model (no stack work): {v['raw']['measured']:+.1f} % "
                         f"[{lo:+.1f} .. {hi:+.1f}]")
    else:
        lines.append("  uncalibrated: a transaction costs only what the model executes; "
                     "give --calibration (smpnet-bench kernel --save) to size it")
    if b and b["saved_cycles"] is not None:
        lo, hi = b["saved_interval"]
        per = ", ".join(f"{k.replace('_', ' ')} {a:.2f} -> {d:.2f}"
                        for k, (a, d) in b["per_transaction"].items()
                        if a is not None and d is not None)
        raw = b.get("saved_cycles_raw")
        raw = f"{raw:.0f} in the raw model's tight loop; " if raw is not None else ""
        lines.append(f"  direct saves {b['saved_cycles']:.0f} cycles per transaction "
                     f"[{lo:.0f} .. {hi:.0f}] of {b['transaction_cycles']:.0f} ({raw}per "
                     f"transaction: {per})")
    return lines
