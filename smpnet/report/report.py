"""Output: the JSON envelope every subcommand shares, and text tables.

Envelope (schema 3):
  {"schema": 3, "smpnet": VERSION, "command": NAME, "machine": {...},
   "params": {...}, "results": [...], "verdicts": [...], "warnings": [...]}
A verdict: {"seed", "claim", "reference", "unit", "kind", "measured",
"interval", "verdict"}, with "size" and "size_ratio" (or "margin"), "pairs",
"control" (the A/A control's result), "load", as docs/cli.md lists.

Schema 3 (smpnet 0.3) against 2: rows are unchanged; verdicts carry the new
labels and fields (stats.judge), and seed 002's "measured" is a gain in %.

Schema 2 (smpnet 0.2) against 1: rows and verdicts are unchanged; params
record "oversubscribe" where --oversubscribe applies and arp's "ncpus"; the
params of each stage of `all` are the experiment's params as its own
command records them (they were a plan of their own: "algos", "rounds"...).
docs/cli.md lists the changes.
"""
import json
import math

from .. import __version__, _core
from ..machine import load, sysinfo
from ..machine.tsc import tsc_info
from ..measure import verdict_facts
from . import plaintext

SCHEMA = 3
READABLE = (1, 2, 3)   # schemas whose rows compare reads: the rows did not change


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
    """A plain aligned text table; numbers right-aligned. Inside
    plaintext.narrow() (--format email), one wider than the width is laid
    out within it."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_num(r[i]) for r in rows) if rows else False
               for i in range(len(headers))]
    if plaintext.width():
        narrow = plaintext.table(cells[1:], cells[0], numeric, plaintext.width())
        if narrow is not None:
            return "\n".join(narrow)
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


UNRELIABLE = ("this machine produced a false difference in the A/A control: the verdict "
              "above is not reliable")


def _figure(x):
    if abs(x) < 1:
        return f"{x:+.3g}"
    return f"{x:+.2f}" if abs(x) < 1000 else f"{x:+.0f}"


def verdict_lines(v, here=None, where=None):
    """A verdict as a person reads it: the claim and the seed's figure; what
    was measured here, with its interval, pairs and label, and its size
    against the seed's; whether it is a measurement or follows from the
    model; the machine fact that sets its size (verdict_facts); the A/A
    control's answer, and the load seen (always when the control found a
    difference, else when high). `here` replaces the
    measured figure (a verdict with no interval says what it saw); `where`
    says what ran (an algorithm, a mode)."""
    lines = [f"seed {v['seed']}" + (f" ({where})" if where else "")
             + f": {v['claim']}; reference: {v['reference']}"]
    if here is None:
        lo, hi = v["interval"]
        here = (f"{_figure(v['measured'])} {v['unit']} [95 % interval {_figure(lo)} .. "
                f"{_figure(hi)}]" + (f", {v['pairs']} pairs" if v.get("pairs") else ""))
    why = []
    if "size_ratio" in v:
        r, rlo, rhi = v["size_ratio"]
        why.append(f"{r:.2f} x the seed's {v['size']:.3g} [{rlo:.2f} .. {rhi:.2f}]")
    if v.get("margin") is not None:
        why.append(f"margin +-{v['margin']:g}")
    lines.append(f"  here: {here} -> {v['verdict']}" + (f" ({'; '.join(why)})" if why else ""))
    fact = fact_line(v)
    if fact:
        lines.append(f"  machine fact: {fact}")
    if v.get("unit_note"):
        lines.append(f"  the unit: {v['unit_note']}")
    if v.get("kind") == "model":
        lines.append(f"  kind: model (it follows from the model's rules: {v['rule']})")
    elif v.get("kind"):
        lines.append("  kind: measured (the sign could come out either way on some machine)")
    c = v.get("control")
    if c:
        lo, hi = c["interval"]
        lines.append(f"  A/A control ({c['sides']}): {_figure(c['measured'])} "
                     f"[{_figure(lo)} .. {_figure(hi)}] -> {c['verdict']}")
        if not c["reliable"]:
            lines.append(f"  WARNING: {UNRELIABLE}")
            if v.get("load"):   # said whatever its size: it may or may not explain it
                lines.append(f"  {load.describe(v['load'])}")
    seen = v.get("load")
    if seen and seen.get("high"):
        lines.append(f"  WARNING: competing load: {seen['why']}")
    return lines


def fact_line(v):
    """The machine fact behind a verdict's size, in a sentence, or None."""
    fact = v.get("machine_fact")
    return verdict_facts.line(fact) if fact else None


def warnings_text(warnings):
    if not warnings:
        return ""
    return "\n\nWarnings (timings on this machine are less reliable):\n" + \
        "\n".join(f"  - {w}" for w in warnings)
