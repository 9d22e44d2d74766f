"""smpnet-bench compare A.json B.json: row by row, is the difference real?

Rows are matched by what identifies them in their experiment (its metric's
keys: a lock test by test, algorithm, variant...; a defer row by strategy;
an arp row by probe and HZ); an `all` result is compared stage by stage,
matched by stage name. A side may hold several results of one command
(`compare A1 A2 A3 -- B1 B2`, pooled): each row then stands for its runs.
For each matched row: both values, the ratio B/A, and whether the
difference exceeds the noise (unless the two ran under conditions that
make them not comparable, `not_comparable`: another machine, another
calibration profile, a load or placement warning, the empty loop itself
moved; those rows are named and not judged). The noise is the widest the
rows allow (_significant): between runs, with several a side, which holds
what moves between two runs of one build; else between the rounds of each
run, by the 95 % bootstrap interval of the difference of medians (pyperf's
compare_to), or by the [min, max] ranges; with neither, unknown.

Every file is read and checked whole first (results.py).
"""
import math
from collections import Counter

import numpy as np

from ..errors import BadInput
from ..jsonfile import MAX_BYTES  # noqa: F401 (the command's API)
from ..measure import stats
from .results import commands, field_name, load, members, metric, pooled  # noqa: F401 (the API)
from .results import _key_text, _shown

# samples a side for the bootstrap: two independent runs' samples, not
# pairs, so the verdicts' order-statistics rule (stats.MIN_SAMPLES) does
# not apply; below this, the [min, max] ranges judge
MIN_SAMPLES = 3

MAX_BOOTSTRAP = 200               # samples per side the bootstrap uses (evenly thinned above)


# ------------------------------------------------------------------ comparing

def compare(a, b, differ=None):
    """The comparison rows of two checked results (see load), A's order;
    `differ`: not_comparable(a, b), when the caller has it already."""
    if a.command != b.command:
        raise BadInput(f"cannot compare {a.path} (a result of {a.command}) with {b.path} "
                       f"(a result of {b.command}): compare takes two results of one command")
    rows, matched, null_in = [], 0, set()
    differ = not_comparable(a, b) if differ is None else differ
    for name, a_rows in a.tables.items():
        b_rows = b.tables.get(name, {})
        for match, ra in a_rows.items():
            rb = b_rows.get(match)
            if rb is None:
                continue
            matched += 1
            null_in |= {f.path for f, r in ((a, ra), (b, rb)) if r.value is None}
            if ra.value is None or rb.value is None:
                continue
            m = metric(ra.kind)
            if differ.get(name) or differ.get(None):
                significant, how = None, "not comparable"
            else:
                significant, how = _significant(ra, rb)
            rows.append({
                "table": name, "key": ra.key,
                "metric": field_name(m.value),
                "a": ra.value, "b": rb.value, "ratio": _ratio(ra.value, rb.value),
                "significant": significant, "judged_by": how,
            })
    if not rows:
        kinds_a, kinds_b = _kinds(a), _kinds(b)
        if kinds_a and kinds_b and not kinds_a & kinds_b:
            raise BadInput(f"cannot compare {a.path} ({_kinds_text(kinds_a)} rows) with "
                           f"{b.path} ({_kinds_text(kinds_b)} rows)")
        if matched:  # arp --peer-down: no ping was answered, so no latency
            raise BadInput(f"{a.path} and {b.path}: the {matched} rows they share have no "
                           f"value to compare (null in {' and '.join(sorted(null_in))}: "
                           "nothing was measured)")
        raise BadInput(f"{a.path} and {b.path} have no result rows in common")
    return rows


def differences(a, b):
    """{table: [why], None: [why]}: the conditions under which two sides'
    rows are not comparable (None: every table): another machine (CPU model,
    kernel, hypervisor), another calibration profile (that table's), or a
    load or placement warning in any result (every table: what moved the
    figures of one run is not in the other's noise). A side of several
    results (pooled) is held to the same: each of its results against
    every other result of either side."""
    every = members(a) + members(b)
    out = {}
    for i, x in enumerate(every):
        for y in every[i + 1:]:
            for k, v in _condition_differences(x, y).items():
                out.setdefault(k, []).extend(v)
    for r in every:
        for what, w in (r.conditions or {}).get("warnings", []):
            out.setdefault(None, []).append(f"{r.path} warns of {what}: {w}")
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}   # a file against itself: once


def _condition_differences(a, b):
    """differences() between two results' machines and calibration profiles."""
    ca, cb = (r.conditions or {} for r in (a, b))
    out = {}
    ma, mb = ca.get("machine", {}), cb.get("machine", {})
    for k in ("cpu_model", "kernel", "hypervisor"):
        if ma.get(k) != mb.get(k):
            out.setdefault(None, []).append(
                f"another machine: {k.replace('_', ' ')} {ma.get(k)!r} in {a.path}, "
                f"{mb.get(k)!r} in {b.path}")
    if ma.get("smpnet") != mb.get("smpnet"):   # the model itself may have changed
        out.setdefault(None, []).append(
            f"another smpnet, whose model may differ: {ma.get('smpnet')!r} in {a.path}, "
            f"{mb.get('smpnet')!r} in {b.path}")
    pa, pb = ca.get("calibration", {}), cb.get("calibration", {})
    for name in set(pa) & set(pb):
        if pa[name] != pb[name]:
            out.setdefault(name, []).append(
                f"{name}: another calibration profile ({_profile(pa[name])} in {a.path}, "
                f"{_profile(pb[name])} in {b.path})")
    return out


# The row that measures the machine itself, not the code: the empty loop
# (time_bench's for_loop), in the tables that have one (locks, info).
SPEED_ROW = "for_loop"


def speed_differences(a, b):
    """{table: [why]} for the tables whose empty loop (SPEED_ROW) is itself
    beyond noise between the two results: the CPU ran at another speed
    against its TSC (another frequency, a busy SMT sibling, another host
    core), which moves every figure of the table alike, so no other row of
    it can be judged. The judgement is compare's own (_significant)."""
    out = {}
    for name, a_rows in a.tables.items():
        b_rows = b.tables.get(name, {})
        for match, ra in a_rows.items():
            rb = b_rows.get(match)
            if rb is None or ra.value is None or rb.value is None:
                continue
            if isinstance(ra.key, dict) and ra.key.get("test") == SPEED_ROW:
                if _significant(ra, rb)[0]:
                    out.setdefault(name, []).append(
                        f"{name}: the empty loop ({SPEED_ROW}) cost {ra.value:.3g} cycles in "
                        f"{a.path} and {rb.value:.3g} in {b.path}, beyond noise: the CPU ran "
                        "at another speed (its frequency, a busy SMT sibling, another host "
                        "core), which moves every row alike")
    return out


def _profile(p):
    """A calibration profile in a few words: its cycles per TCP transaction."""
    if not isinstance(p, dict):
        return "none"
    try:
        return f"{p['tcp_rr']['same-cpu']['cycles']:,.0f} cycles per TCP transaction"
    except (KeyError, TypeError, ValueError):
        return "a profile"


def not_comparable(a, b):
    """{table: [why], None: [why]}: every reason, of the conditions
    (differences) and of the speed (speed_differences), that rows of two
    results cannot be judged against each other (None: every table)."""
    differ = differences(a, b)
    for name, why in speed_differences(a, b).items():
        differ.setdefault(name, []).extend(why)
    return differ


def notes(a, b, rows, differ=None):
    """What the comparison left out, as warnings; `differ` as for compare."""
    matched = len(rows)
    out = []
    differ = not_comparable(a, b) if differ is None else differ
    for table, why in sorted(differ.items(), key=lambda x: (x[0] is not None, x[0] or "")):
        n = sum(1 for r in rows if table is None or r["table"] == table)
        where = "every row" if table is None else f"the {table} rows"
        for w in why:
            out.append(f"{where} not judged ({n}): {w}")
    for side in (a, b):
        for r in members(side) if side.members else ():
            left = sum(1 for name, t in r.tables.items() for k in t
                       if k not in side.tables.get(name, {}))
            if left:
                out.append(f"{left} row{'s' * (left != 1)} of {r.path} "
                           f"{'are' if left != 1 else 'is'} not in every result of its side")
    for mine, other in ((a, b), (b, a)):
        left = sum(1 for name, t in mine.tables.items() for k in t
                   if k not in other.tables.get(name, {}))
        if left:
            out.append(f"{left} row{'s' * (left != 1)} of {mine.path} "
                       f"{'have' if left != 1 else 'has'} no match in {other.path}")
    both = sum(1 for name, t in a.tables.items() for k in t if k in b.tables.get(name, {}))
    if both > matched:
        n = both - matched
        out.append(f"{n} matched row{'s' * (n != 1)} without a value on one side "
                   "(nothing measured) left out")
    return out


def _kinds(result):
    return {r.kind for t in result.tables.values() for r in t.values()}


def _kinds_text(kinds):
    return ", ".join(sorted(kinds))


def _ratio(va, vb):
    if va == 0:
        return None
    try:
        r = vb / va
    except (OverflowError, ZeroDivisionError):
        return None
    return r if math.isfinite(r) else None


def _significant(ra, rb):
    """(True/False/None, how it was judged: "runs", "bootstrap", "range" or
    None), the first that the two rows allow:
    - runs: a side of several results (pooled): Student's t on each run's
      value, 3 values or more in all (stats.mean_diff_ci), so what moves
      between runs is in the noise;
    - bootstrap: MIN_SAMPLES samples a side, the difference of medians;
    - range: the two [min, max] do not overlap."""
    if ra.runs is not None or rb.runs is not None:
        x, y = ra.runs or (ra.value,), rb.runs or (rb.value,)   # 3 values or more
        try:
            with np.errstate(all="ignore"):
                return _judged(stats.mean_diff_ci(y, x)[1], "runs")
        except ValueError:      # the runs do not spread at all: nothing to judge by
            return None, None
    sa, sb = ra.samples, rb.samples
    if sa is not None and sb is not None:
        if min(len(sa), len(sb)) >= MIN_SAMPLES:
            with np.errstate(all="ignore"):
                return _judged(stats.median_diff_ci(_thin(sb), _thin(sa))[1], "bootstrap")
        if min(len(sa), len(sb)) < 2:
            return None, None   # one run a side: no spread to judge noise by
    if None in (ra.lo, ra.hi, rb.lo, rb.hi):
        return None, None       # no spread recorded: cannot tell
    return rb.hi < ra.lo or rb.lo > ra.hi, "range"


def _judged(interval, how):
    """(whether the interval lies wholly off zero, how), or (None, None)
    when it is not finite (values near a float's limit)."""
    lo, hi = interval
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None, None
    return not lo <= 0 <= hi, how


def _thin(samples):
    """At most MAX_BOOTSTRAP samples, evenly spaced through the list: the
    bootstrap's cost stays bounded (the interval only gets wider)."""
    s = np.asarray(samples, dtype=float)
    if len(s) <= MAX_BOOTSTRAP:
        return s
    return s[np.linspace(0, len(s) - 1, MAX_BOOTSTRAP).round().astype(int)]


# ------------------------------------------------------------------ output

# What each judgement held as noise, in words (docs/compare.md)
JUDGED_BY = {
    "runs": "between the runs of each side",
    "bootstrap": "between the rounds of each run only, not between runs (for that, give "
                 "several results a side: A1 A2 A3 -- B1 B2 B3)",
    "range": "by the [min, max] of each run",
}


def text(rows, a_path, b_path, warnings=()):
    from .report import table

    cells = []
    for r in rows:
        sig = ("not comparable" if r["judged_by"] == "not comparable"
               else {True: "yes", False: "no", None: "unknown"}[r["significant"]])
        cells.append((r["table"], _key_text(r["key"]), r["metric"], r["a"], r["b"],
                      None if r["ratio"] is None else f"{r['ratio']:.3f}", sig))
    out = (f"A = {_shown(a_path)}\nB = {_shown(b_path)}\n"
           + table(cells, ["table", "row", "metric", "A", "B", "B/A", "beyond noise"]))
    how = Counter(r["judged_by"] for r in rows if r["judged_by"] in JUDGED_BY)
    if how:
        out += "\n\n" + "\n".join(
            f"Noise of {n} row{'s' * (n != 1)} judged {JUDGED_BY[k]}." for k, n in how.items())
    if warnings:
        out += "\n\nNot compared:\n" + "\n".join(f"  - {w}" for w in warnings)
    return out
