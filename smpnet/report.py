"""Output: the JSON envelope every subcommand shares, and text tables.

Envelope (schema 2):
  {"schema": 2, "smpnet": VERSION, "command": NAME, "machine": {...},
   "params": {...}, "results": [...], "verdicts": [...], "warnings": [...]}
A verdict: {"seed", "claim", "reference", "measured", "interval", "verdict"}.

Schema 2 (smpnet 0.2) against 1: rows and verdicts are unchanged; params
record "oversubscribe" where --oversubscribe applies and arp's "ncpus"; the
params of each stage of `all` are the experiment's params as its own
command records them (they were a plan of their own: "algos", "rounds"...).
docs/cli.md lists the changes.
"""
import json
import math

from . import __version__, _core, sysinfo
from .tsc import tsc_info

SCHEMA = 2
READABLE = (1, 2)   # schemas whose rows compare reads: the rows did not change


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


def warnings_text(warnings):
    if not warnings:
        return ""
    return "\n\nWarnings (timings on this machine are less reliable):\n" + \
        "\n".join(f"  - {w}" for w in warnings)
