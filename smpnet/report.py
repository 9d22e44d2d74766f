"""Output: the JSON envelope every subcommand shares, and text tables.

Envelope (schema 1):
  {"schema": 1, "smpnet": VERSION, "command": NAME, "machine": {...},
   "params": {...}, "results": [...], "verdicts": [...], "warnings": [...]}
A verdict: {"seed", "claim", "reference", "measured", "interval", "verdict"}.
"""
import json
import os
import tempfile

from . import __version__, _core, sysinfo
from .errors import BadInput
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


def check_output_path(path):
    """Fail before a long run, not after it, if its JSON cannot be saved."""
    if path is None:
        return
    if not path.strip():
        raise BadInput("--output needs a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BadInput(f"--output {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise BadInput(f"--output {path}: directory {parent} is not writable")
    if os.path.isdir(path):
        raise BadInput(f"--output {path}: is a directory")


def write_json(env, path):
    """Write the result to PATH; never lose it.

    A regular file (or a new one) is written atomically, through a temporary
    file renamed over it, so a reader never sees half a file. Anything else
    (/dev/stdout, a FIFO) is written in place: renaming over it would
    replace the device node itself. If PATH cannot be written, the result
    goes to a file in the temporary directory and the error names it.
    """
    text = dumps(env) + "\n"
    real = os.path.realpath(path)
    try:
        if os.path.exists(real) and not os.path.isfile(real):
            with open(real, "w") as f:
                f.write(text)
            return
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(real), prefix=".smpnet-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # as open() would have made it
            os.replace(tmp, real)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        fd, saved = tempfile.mkstemp(prefix=f"smpnet-{env.get('command', 'result')}-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        raise BadInput(f"cannot write --output {path}: {e.strerror or e}; "
                       f"the result was saved to {saved}") from None


def dumps(env):
    return json.dumps(env, indent=2)


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


def time_bench_line(r):
    """A BenchResult in time_bench's own line format, which kernel people read."""
    period = r.wall_s / r.rounds if r.rounds else 0.0
    return (f"Type:{r.test} Per elem: {round(r.cycles)} cycles(tsc) {r.ns:.3f} ns "
            f"(step:0) - (measurement period time:{period:.9f} sec "
            f"time_interval:{round(period * 1e9)}) - "
            f"(invoke count:{r.loops} tsc_interval:{round(r.cycles * r.loops)})")
