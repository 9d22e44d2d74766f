"""Reading an smpnet-bench result back, as `compare` does: a bounded read
(a FIFO or a pipe too, with a time limit), JSON, and a check of the whole
file before anything is compared. Anything that is not an smpnet-bench
result, or a result with a broken row, is a BadInput naming the file and
what is wrong (docs/compare.md says the same for users).
"""
import json
import math
import os
from collections import namedtuple

from ..errors import BadInput
from ..jsonfile import oneline as _oneline
from ..jsonfile import read_json
from ..jsonfile import shown as _shown
from .report import READABLE, SCHEMA


# What identifies a row and what is compared: each experiment's own Metric
# (smpnet/experiment.py); a result of `all` holds one table per experiment.
def _experiments():
    from .. import experiments
    return experiments.BY_NAME


def commands():
    return tuple(_experiments()) + ("all",)


def metric(kind):
    """The Metric of the experiment called `kind`."""
    return _experiments()[kind].metric


# One checked row: its kind (an experiment name), its key (a dict, lists as
# tuples), its position for messages, and the numbers compared (None where
# the result has none): value, samples, lo, hi; `runs`, each run's value
# where a row stands for several results (pooled).
Row = namedtuple("Row", "kind key where value samples lo hi runs", defaults=(None,))
# One checked file: its path, its command, {table name: {match key: Row}},
# and the conditions it ran under (conditions()); for several results pooled
# into one side, `members` are those results.
Result = namedtuple("Result", "path command tables conditions members",
                    defaults=(None, None))


def load(path):
    """Read and check one result file; a Result, or a BadInput naming the file."""
    shown = _shown(path)
    return _check(shown, read_json(path, shown))


def _check(shown, env):
    if not isinstance(env, dict) or "schema" not in env or "command" not in env:
        raise BadInput(f"{shown}: not an smpnet-bench result (no schema or command)")
    schema = env["schema"]
    if type(schema) is not int or schema not in READABLE:
        shown_schema = _short(schema) if type(schema) is int else _type(schema)
        raise BadInput(f"{shown}: schema {shown_schema}, this smpnet reads schemas "
                       f"{', '.join(map(str, READABLE))} (it writes {SCHEMA})")
    command = env["command"]
    if not isinstance(command, str):
        raise BadInput(f"{shown}: command is {_type(command)}, not a string")
    if command not in commands():
        raise BadInput(f"{shown}: command {_short(command)}: compare reads results of "
                       f"{', '.join(commands())}")
    if "results" not in env:
        raise BadInput(f"{shown}: not an smpnet-bench result (no results)")
    results = env["results"]
    if not isinstance(results, list):
        raise BadInput(f"{shown}: results is {_type(results)}, not a list")
    if command != "all":
        return Result(shown, command, {command: _check_rows(shown, command, results, "results")},
                      conditions(env, {command: env.get("params")}))
    tables, seen, params = {}, set(), {}
    for i, stage in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(stage, dict):
            raise BadInput(f"{shown}: {where} is {_type(stage)}, not a stage object")
        name = stage.get("stage")
        if not isinstance(name, str):
            raise BadInput(f"{shown}: {where} has no stage name (a string)")
        if "results" not in stage:
            raise BadInput(f"{shown}: stage {_short(name)} has no results")
        rows = stage["results"]
        if not isinstance(rows, list):
            raise BadInput(f"{shown}: stage {_short(name)}: results is {_type(rows)}, not a list")
        if name in seen:
            raise BadInput(f"{shown}: stage {_short(name)} appears twice")
        seen.add(name)
        if name in _experiments():   # a stage compare does not know has nothing to compare
            tables[name] = _check_rows(shown, name, rows, f"stage {_short(name)} results")
            params[name] = stage.get("params")
    return Result(shown, command, tables, conditions(env, params))


# The warnings that say a result's figures hold a condition another run
# need not share: (what, a phrase the warning carries)
# (load.mark's, when the load was high; defer's, when the placement moved)
CONDITION_WARNINGS = (("load", "competing load"),
                      ("placement", "the hypervisor ran the vCPUs closer or further apart"))


def conditions(env, params):
    """What a result's figures depend on beyond the code measured: the
    machine ({cpu_model, kernel, hypervisor}) and the smpnet that modelled
    it (`machine.smpnet`: its version), each table's calibration
    profile (its params' `calibration`, None without), and its warnings of
    load or placement ([(what, warning)]). Fields of the wrong type count as
    absent: conditions only decide whether rows are judged."""
    machine = env.get("machine") if isinstance(env.get("machine"), dict) else {}
    warnings = env.get("warnings") if isinstance(env.get("warnings"), list) else []
    return {
        "machine": {k: machine.get(k) for k in ("cpu_model", "kernel", "hypervisor", "smpnet")
                    if isinstance(machine.get(k), (str, type(None)))},
        "calibration": {name: (p.get("calibration") if isinstance(p, dict) else None)
                        for name, p in params.items()},
        "warnings": [(what, w) for w in warnings if isinstance(w, str)
                     for what, phrase in CONDITION_WARNINGS if phrase in w],
    }


def _check_rows(shown, table, rows, where):
    out = {}
    for i, row in enumerate(rows):
        r = _check_row(shown, table, row, f"{where}[{i}]")
        match = (r.kind,) + tuple(r.key.values())
        if match in out:
            raise BadInput(f"{shown}: {r.where}: same key as {out[match].where} "
                           f"({_key_text(r.key)[:80]})")
        out[match] = r
    return out


def _check_row(shown, table, row, where):
    if not isinstance(row, dict):
        raise BadInput(f"{shown}: {where} is {_type(row)}, not a row object")
    kind = _kind(shown, where, _experiments()[table], row)
    m = metric(kind)
    key = {}
    for field in m.keys:
        if field not in row and field in (m.defaults or {}):
            key[field] = m.defaults[field]
            continue
        if field not in row:
            raise BadInput(f"{shown}: {where}: no {field!r} field")
        key[field] = _key_value(shown, where, field, row[field])
    value = _field(shown, where, row, m.value, required=True)
    samples = None
    if m.samples is not None and row.get(m.samples) is not None:
        samples = row[m.samples]
        if not isinstance(samples, list) or not all(_is_number(x) for x in samples):
            raise BadInput(f"{shown}: {where}: {m.samples} is not a list of finite numbers")
    lo = _field(shown, where, row, m.lo)
    hi = _field(shown, where, row, m.hi)
    # every experiment's value is a cost or a rate: below zero is no result
    for name, x in ((m.value, value), (m.lo, lo), (m.hi, hi)):
        if x is not None and x < 0:
            raise BadInput(f"{shown}: {where}: {field_name(name)} {x!r} is negative "
                           "(a cost or a rate)")
    if lo is not None and hi is not None and lo > hi:
        raise BadInput(f"{shown}: {where}: {field_name(m.lo)} {lo!r} is above {field_name(m.hi)} {hi!r}")
    return Row(kind, key, where, value, samples, lo, hi)


def field_name(field):
    """A compared field's name: a field, or a (field, key) path as 'field.key'."""
    return field if isinstance(field, str) else ".".join(field)


def pooled(results):
    """Several results of one command as one side of a comparison: a Result
    whose rows are those every result has, each with its runs' values
    (`runs`), their median as its value and their [min, max] as its range.
    One result is returned as it is."""
    if len(results) == 1:
        return results[0]
    first, seen = results[0], {}
    for r in results:
        where = os.path.realpath(r.path) if os.path.exists(r.path) else r.path
        if where in seen:
            raise BadInput(f"{r.path}: {os.path.basename(r.path)} twice on one side (as "
                           f"{seen[where]}): two copies of a run have no spread between them")
        seen[where] = r.path
    for r in results[1:]:
        if r.command != first.command:
            raise BadInput(f"cannot pool {first.path} (a result of {first.command}) with "
                           f"{r.path} (a result of {r.command}): one side's results must "
                           "be of one command")
    tables = {}
    for name, rows in first.tables.items():
        for match, row in rows.items():
            same = [r.tables.get(name, {}).get(match) for r in results]
            if any(x is None for x in same):
                continue
            values = None if any(x.value is None for x in same) else tuple(x.value for x in same)
            tables.setdefault(name, {})[match] = row._replace(
                value=values and _median(values), samples=None,
                lo=values and min(values), hi=values and max(values), runs=values)
    return Result(" + ".join(r.path for r in results), first.command, tables, None,
                  tuple(results))


def _median(values):
    """The median, its two middle values halved before they are added, so
    that two values near a float's limit give no infinity."""
    x = sorted(values)
    k = len(x) // 2
    return x[k] if len(x) % 2 else x[k - 1] / 2 + x[k] / 2


def members(result):
    """The results a side holds: itself, or those pooled into it."""
    return result.members or (result,)


def _kind(shown, where, experiment, row):
    """The experiment whose metric applies to `row`: its own, or for a result
    holding rows of several kinds (locks, with --contended rows) the one its
    kind field names."""
    if experiment.kinds is None:
        return experiment.name
    field, by_value = experiment.kinds
    if field not in row:
        raise BadInput(f"{shown}: {where}: no {field!r} field")
    v = row[field]
    for value, kind in by_value.items():
        if type(v) is type(value) and v == value:
            return kind
    allowed = " or ".join(json.dumps(k) for k in by_value)
    raise BadInput(f"{shown}: {where}: {field} is {_type(v)}, not {allowed}")


def _key_value(shown, where, field, v):
    """A key field's value, hashable: a scalar, or a list of scalars as a tuple."""
    if isinstance(v, list):
        if all(_is_scalar(x) for x in v):
            return tuple(v)
    elif _is_scalar(v):
        return v
    what = "a string that is not text (a lone surrogate)" if isinstance(v, str) else _type(v)
    raise BadInput(f"{shown}: {where}: {field} is {what}, "
                   "not a string, number, true/false, null or a list of them")


def _is_scalar(v):
    if v is None or isinstance(v, (bool, int)):
        return True
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, str):
        try:
            v.encode("utf-8")   # a lone surrogate ("\ud800") is not text
        except UnicodeEncodeError:
            return False
        return True
    return False


def _is_number(v):
    """A finite number (not a bool) that a float can hold."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:   # an int beyond a float's range
        return False


def _field(shown, where, row, field, required=False):
    """A compared number: None where the result has none; a BadInput when
    the field is missing (if required) or holds anything but a number."""
    if field is None:
        return None
    name = field_name(field)
    if isinstance(field, tuple):   # (object field, its member), as arp's first_ms.median
        outer = row.get(field[0])
        if field[0] not in row and required:
            raise BadInput(f"{shown}: {where}: no {field[0]!r} field")
        if outer is None:
            return None
        if not isinstance(outer, dict):
            raise BadInput(f"{shown}: {where}: {field[0]} is {_type(outer)}, not an object")
        row, field = outer, field[1]
    if field not in row:
        if required:
            raise BadInput(f"{shown}: {where}: no {name!r} field")
        return None
    v = row[field]
    if v is None:
        return None
    if not _is_number(v):
        raise BadInput(f"{shown}: {where}: {name} is {_type(v)}, not a finite number")
    return v


def _key_text(key):
    parts = []
    for field, v in key.items():
        if v is None or v is False:
            continue
        if v is True:
            parts.append(field)
        elif isinstance(v, str):
            parts.append(_oneline(v))
        elif isinstance(v, tuple):
            parts.append(f"{field}={','.join(_oneline(str(x)) for x in v)}")
        else:
            parts.append(f"{field}={v}")
    return " ".join(parts)


def _short(v, width=40):
    """A value from the file, for a message: short, and only a scalar's repr."""
    if not (v is None or isinstance(v, (str, int, float))):
        return _type(v)
    s = repr(v) if not isinstance(v, int) or abs(v) < 10 ** 30 else "a number that long"
    return s if len(s) <= width else s[:width - 3] + "..."


def _type(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN or infinite"
    if isinstance(v, int) and not isinstance(v, bool) and not _is_number(v):
        return "a number too large for a float"
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)
