"""The contended comparison's statistics: the interleaved order of its
rounds, the figures of repeated runs (median over rounds with a 95 %
interval), and the ranking that says which differences are real.

A sweep point is (CPUs, hold cycles, think cycles). At each point every
selected (algorithm, variant) runs once per round, in an order shuffled
per round from a seeded generator, so a drift of the machine (a neighbour's
load, the clock) hits every combination alike; a difference between two
combinations is then taken round by round (paired), as the seeds'
verdicts are (docs/design.md, Statistics).
"""
import numpy as np

from ...measure import stats
from ...report.report import table

# the figures each run gives, reported as a median over rounds with its
# interval: name -> (text header, unit)
FIGURES = {
    "acq_per_s": ("M acq/s", "million acquisitions per second"),
    "cycles": ("cycles/acq CPU", "TSC cycles per acquisition, median over CPUs"),
    "system_cycles_per_acq": ("cycles/acq system", "TSC cycles of run time per acquisition"),
    "fairness": ("fairness", "Jain's index, 1 = equal shares"),
    "spins_per_acq": ("spins/acq", "spin-loop iterations per acquisition"),
}
REAL = "real difference"
TOO_FEW = "too few rounds"
BASE_VARIANT = "plain"   # what the other variants of an algorithm are set against


def round_orders(combos, repeat, rng_seed, point=()):
    """The order of `combos` in each of `repeat` rounds: a fresh shuffle per
    round from a generator seeded by (rng_seed, *point), so one seed gives
    the same orders at a point whatever else the sweep holds."""
    rng = np.random.default_rng([int(rng_seed), *(int(x) for x in point)])
    return [[combos[i] for i in rng.permutation(len(combos))] for _ in range(repeat)]


def summarise(samples):
    """{figure: median, figure_interval: [low, high], figure_samples: [...]}
    over the rounds' values of every figure (stats.median_ci: with fewer
    than stats.MIN_SAMPLES rounds the interval is [min, max] and covers
    less)."""
    out = {}
    for name in FIGURES:
        values = [s[name] for s in samples]
        med, (lo, hi) = stats.median_ci(values)
        out.update({name: med, f"{name}_interval": [lo, hi], f"{name}_samples": values})
    return out


def point_of(row):
    """The sweep point a row belongs to: (CPUs, hold cycles, think cycles)."""
    return len(row["cpus"]), row["hold_cycles"], row.get("think_cycles", 0)


def _gain(a, b):
    return (a - b) / b * 100 if b else float("nan")


def _difference(a, b):
    """a's throughput over b's in %, paired by round: {diff_pct, interval,
    rounds, label}."""
    d = stats.paired(a["acq_per_s_samples"], b["acq_per_s_samples"], _gain)
    if d is None:
        med, _ = stats.median_ci([_gain(x, y) for x, y in
                                  zip(a["acq_per_s_samples"], b["acq_per_s_samples"])])
        return {"diff_pct": med, "interval": None, "rounds": len(a["acq_per_s_samples"]),
                "label": TOO_FEW}
    med, ci, n = d
    real = ci[0] > 0 or ci[1] < 0
    return {"diff_pct": med, "interval": ci, "rounds": n,
            "label": REAL if real else stats.NO_MEASURABLE}


def rank(rows):
    """Add the ranking to the rows, point by point: per variant, `rank` (1 =
    the most acquisitions per second) and `versus`, this row's throughput
    against each slower algorithm's; per algorithm, `versus_base`, each
    variant against plain (the cost of irqsave over plain under
    contention)."""
    points = {}
    for r in rows:
        points.setdefault(point_of(r), []).append(r)
    for group in points.values():
        for variant in dict.fromkeys(r["variant"] for r in group):
            ranked = sorted((r for r in group if r["variant"] == variant),
                            key=lambda r: -r["acq_per_s"])
            for i, a in enumerate(ranked):
                a["rank"] = i + 1
                a["versus"] = [dict(algo=b["algo"], **_difference(a, b)) for b in ranked[i + 1:]]
        for algo in dict.fromkeys(r["algo"] for r in group):
            mine = [r for r in group if r["algo"] == algo]
            base = next((r for r in mine if r["variant"] == BASE_VARIANT), mine[0])
            for r in mine:
                if r is not base:
                    r["versus_base"] = dict(variant=base["variant"], **_difference(r, base))
    return rows


def ranking_line(ranked):
    """'ticket > tas ~ ttas': the rows of one variant in rank order, '>'
    where the next one is slower by a real difference, '~' where there is no
    measurable one, '?' with too few rounds to tell."""
    out = ranked[0]["algo"]
    for a, b in zip(ranked, ranked[1:]):
        label = next(v["label"] for v in a["versus"] if v["algo"] == b["algo"])
        out += {REAL: " > ", TOO_FEW: " ? "}.get(label, " ~ ") + b["algo"]
    return out


def _pct(d):
    if d["interval"] is None:
        return f"{d['diff_pct']:+.1f}", "-"
    lo, hi = d["interval"]
    return f"{d['diff_pct']:+.1f}", f"{lo:+.1f} .. {hi:+.1f}"


def ranking_text(rows):
    """The ranking of one point's rows: per variant its line and every pair;
    the variants of each algorithm against plain."""
    lines = []
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    pairs = []
    for v in variants:
        ranked = sorted((r for r in rows if r["variant"] == v), key=lambda r: r["rank"])
        lines.append(f"ranking by throughput, {v}: {ranking_line(ranked)}")
        pairs += [(a["algo"], d["algo"], v, *_pct(d), d["label"])
                  for a in ranked for d in a["versus"]]
    if pairs:
        lines.append(table(pairs, ["faster", "slower", "variant", "gain %", "95 % interval %",
                                   "verdict"]))
    costs = [(r["algo"], f"{r['variant']} vs {r['versus_base']['variant']}",
              *_pct(r["versus_base"]), r["versus_base"]["label"])
             for r in rows if "versus_base" in r]
    if costs:
        lines.append("")
        lines.append(table(costs, ["algo", "variant", "throughput %", "95 % interval %",
                                   "verdict"]))
    return lines


def pairs_of(rows):
    """{(point, variant, faster, slower): the difference} over every
    ranked pair, and {(point, algo, variant): against plain}."""
    out = {}
    for r in rows:
        p = point_of(r)
        for d in r.get("versus", []):
            out[(p, r["variant"], r["algo"], d["algo"])] = d
        if "versus_base" in r:
            out[(p, r["algo"], r["variant"], r["versus_base"]["variant"])] = r["versus_base"]
    return out


def agreement(first, second):
    """Where the first run called a difference real, what the second says:
    {"real": how many the first called real, "agree": real in the second
    too, same direction; "not_real": no measurable difference (or too few
    rounds) in the second; "opposite": real the other way; "missing": not
    in the second}. A pair is keyed by its faster side in the first run;
    the second may have ranked the two the other way round."""
    a, b = pairs_of(first), pairs_of(second)
    out = {"real": 0, "agree": 0, "not_real": 0, "opposite": 0, "missing": 0}
    for key, d in a.items():
        if d["label"] != REAL:
            continue
        out["real"] += 1
        point, group, x, y = key
        other = b.get(key)
        if other is None and (point, group, y, x) in b:   # ranked the other way round
            other = dict(b[(point, group, y, x)], diff_pct=-b[(point, group, y, x)]["diff_pct"])
        if other is None:
            out["missing"] += 1
        elif other["label"] != REAL:
            out["not_real"] += 1
        elif (other["diff_pct"] > 0) == (d["diff_pct"] > 0):
            out["agree"] += 1
        else:
            out["opposite"] += 1
    return out
