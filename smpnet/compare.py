"""smpnet-bench compare A.json B.json: row by row, is the difference real?

Rows are matched by what identifies them in their command (a lock test by
test, algorithm, variant...; a defer row by strategy...). For each, both
values, the ratio B/A, and whether the difference exceeds the noise of both
runs: with per-run samples on both sides, when the 95 % bootstrap interval
of the difference of medians excludes zero (as pyperf's compare_to judges
significance from both runs' spread); without, when the two runs' [min, max]
ranges do not overlap.
"""
import json

from . import stats
from .errors import BadInput
from .report import SCHEMA

# command -> (key fields, value field, samples field, min field, max field)
METRICS = {
    "info": (("test",), "cycles", None, "cycles_min", "cycles_max"),
    "locks": (("test", "algo", "variant", "restore", "contended"), "cycles", "samples",
              "cycles_min", "cycles_max"),
    "contended": (("test", "algo", "variant", "cpus"), "acq_per_s", None, None, None),
    "defer": (("strategy",), "skbs_per_s", "skbs_per_s_samples", "skbs_per_s_min",
              "skbs_per_s_max"),
    "loopback": (("mode", "cpus"), "pps", "pps_samples", None, None),
    "arp": (("probe", "hz"), ("first_ms", "median"), None, ("first_ms", "min"),
            ("first_ms", "max")),
}


def load(path):
    try:
        with open(path) as f:
            env = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(env, dict) or "schema" not in env or "command" not in env:
        raise BadInput(f"{path}: not an smpnet-bench result (no schema or command)")
    if env["schema"] != SCHEMA:
        raise BadInput(f"{path}: schema {env['schema']}, this smpnet reads schema {SCHEMA}")
    return env


def _get(row, field):
    if field is None:
        return None
    if isinstance(field, tuple):
        v = row.get(field[0])
        return None if v is None else v.get(field[1])
    return row.get(field)


def _tables(env):
    """(command, rows) pairs: one for a command, one per stage for `all`."""
    if env["command"] == "all":
        out = []
        for stage in env["results"]:
            name = stage["stage"]
            out.append((name, stage.get("results", [])))
        return out
    return [(env["command"], env["results"])]


def compare(a_env, b_env):
    if a_env["command"] != b_env["command"]:
        raise BadInput(f"cannot compare a {a_env['command']!r} result with a "
                       f"{b_env['command']!r} one")
    rows = []
    for (name, a_rows), (_, b_rows) in zip(_tables(a_env), _tables(b_env)):
        metric = METRICS.get("contended" if name == "locks" and a_rows and
                             a_rows[0].get("contended") else name)
        if metric is None:
            continue
        keys, value, samples, lo_f, hi_f = metric
        b_by = {tuple(r.get(k) for k in keys): r for r in b_rows}
        for ra in a_rows:
            key = tuple(ra.get(k) for k in keys)
            rb = b_by.get(key)
            if rb is None:
                continue
            va, vb = _get(ra, value), _get(rb, value)
            if va is None or vb is None:
                continue
            rows.append({
                "table": name, "key": dict(zip(keys, key)),
                "metric": value if isinstance(value, str) else ".".join(value),
                "a": va, "b": vb, "ratio": vb / va if va else None,
                "significant": _significant(ra, rb, samples, lo_f, hi_f),
            })
    return rows


def _significant(ra, rb, samples, lo_f, hi_f):
    sa, sb = _get(ra, samples), _get(rb, samples)
    if sa and sb and min(len(sa), len(sb)) >= stats.MIN_SAMPLES:
        _, (lo, hi) = stats.median_diff_ci(sb, sa)
        return not lo <= 0 <= hi
    la, ha, lb, hb = (_get(ra, lo_f), _get(ra, hi_f), _get(rb, lo_f), _get(rb, hi_f))
    if None in (la, ha, lb, hb):
        return None   # no spread recorded: cannot tell
    return hb < la or lb > ha


def text(rows, a_path, b_path):
    cells = []
    for r in rows:
        key = " ".join(str(v) for v in r["key"].values() if v is not None)
        sig = {True: "yes", False: "no", None: "unknown"}[r["significant"]]
        cells.append((r["table"], key, r["metric"], r["a"], r["b"],
                      None if r["ratio"] is None else f"{r['ratio']:.3f}", sig))
    from .report import table
    return (f"A = {a_path}\nB = {b_path}\n"
            + table(cells, ["table", "row", "metric", "A", "B", "B/A", "beyond noise"]))
