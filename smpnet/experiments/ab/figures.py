"""`ab`'s figures: the rows of each mode, each variant's paired effect
against the baseline with its verdict, the A/A control, and the text."""
import statistics

from ...machine import kernel_build
from ...measure import stats
from ...report.report import table
from ..common import locktext
from . import skbs

FASTER, SLOWER = "faster", "slower"
UNIT = "cycles"


def label(interval):
    """faster (the whole interval below 0: the variant costs less per op),
    slower (wholly above), or no measurable difference."""
    lo, hi = interval
    if hi < 0:
        return FASTER
    if lo > 0:
        return SLOWER
    return stats.NO_MEASURABLE


def _summary(samples, tsc_hz):
    med = statistics.median(samples)
    return {"cycles": med, "cycles_min": min(samples), "cycles_max": max(samples),
            "ns": med * 1e9 / tsc_hz, "samples": samples, "rounds": len(samples)}


BUILTIN = "built-in "   # a built-in time_bench test's label: this, then its name
# Each row's role: a variant of the file (the first the baseline), the A/A
# control (the baseline's second copy), or a built-in time_bench test.
VARIANT, CONTROL, BUILTIN_ROLE = "variant", "control", "builtin"


def uncontended_rows(labels, roles, builtins, cpu, counts, samples, empty, tsc_hz):
    """The entries' rows (labels, roles), then the built-in tests'
    (builtins, their `test` named); each variant's cost over each built-in,
    paired over ABBA blocks (`over_builtin`: the harness's overhead for a
    user's op, where the two are the same op), the A/A control's left out."""
    entries = list(zip(labels, roles, [None] * len(labels)))
    entries += [(BUILTIN + b, BUILTIN_ROLE, b) for b in builtins]
    rows = [dict(mode="uncontended", variant=lab, role=role, cpus=[cpu], loops=n,
                 overhead_cycles=empty, **({"test": test} if test else {}),
                 **_summary(s, tsc_hz))
            for (lab, role, test), n, s in zip(entries, counts, samples)]
    for r in (r for r in rows if r["role"] == VARIANT):
        for b in (b for b in rows if b["role"] == BUILTIN_ROLE):
            ratio = stats.paired_abba(r["samples"], b["samples"], lambda x, y: x / y)
            if ratio:
                r.setdefault("over_builtin", {})[b["test"]] = {
                    "ratio": ratio[0], "interval": ratio[1], "pairs": ratio[2]}
    return rows


def contended_rows(labels, roles, cpus, runs, tsc_hz, p, timing_valid):
    """runs[entry]: a list of rounds, each the per-CPU (ops, cycles, spins,
    warnings, units of work). A round's cost per op is the CPUs' cycles over
    their ops together (what one op costs a CPU while every CPU runs it);
    its throughput, all ops over the longest CPU's time. Where the file
    names a unit of work (p["unit"]), units take the ops' place: the cycles
    of every CPU, whatever its role, per unit done, units per second. Where
    it gives CPUs roles (p["cpu_roles"]), fairness is within a role (the
    lowest role's Jain index of its CPUs' ops: a consumer and a producer do
    not do the same thing), and each role has its figures (per_role)."""
    unit, cpu_roles = p.get("unit"), p.get("cpu_roles")
    done_of = (lambda r: r[4]) if unit else (lambda r: r[0])
    rows = []
    for lab, role, rounds in zip(labels, roles, runs):
        cost, total, fair, per_cpu = [], [], [], [[] for _ in cpus]
        for per in rounds:
            done = [done_of(r) for r in per]
            cost.append(sum(r[1] for r in per) / max(1, sum(done)))
            total.append(sum(done) / (max(r[1] for r in per) / tsc_hz))
            fair.append(_fairness([r[0] for r in per], cpu_roles))
            for i, r in enumerate(per):
                per_cpu[i].append(done_of(r) / (r[1] / tsc_hz) if r[1] else 0.0)
        row = dict(mode="contended", variant=lab, role=role, cpus=list(cpus),
                   duration_s=p["duration_s"], hold_cycles=p["hold_cycles"],
                   think_cycles=p["think_cycles"], timing_valid=timing_valid,
                   ops=sum(r[0] for per in rounds for r in per), **_summary(cost, tsc_hz))
        if unit:
            row["unit"], row["units"] = unit, sum(r[4] for per in rounds for r in per)
        for name, values in (("ops_per_s", total), ("fairness", fair)):
            row[name], row[f"{name}_interval"] = stats.median_ci(values)
        row["ops_per_s_samples"] = total
        each = [stats.median_ci(x) for x in per_cpu]
        row["ops_per_s_per_cpu"] = [med for med, _ in each]
        row["ops_per_s_per_cpu_interval"] = [list(ci) for _, ci in each]
        if cpu_roles:
            row["per_role"] = _per_role(rounds, cpu_roles, tsc_hz)
        rows.append(row)
    return rows


def _fairness(ops, cpu_roles):
    """Jain's index of the CPUs' ops, or with roles the lowest of each
    role's over its own CPUs."""
    if not cpu_roles:
        return stats.jain_fairness(ops)
    return min(stats.jain_fairness([o for o, r in zip(ops, cpu_roles) if r == name])
               for name in dict.fromkeys(cpu_roles))


def _per_role(rounds, cpu_roles, tsc_hz):
    """{role: its emulated CPUs, its ops and units of work per second (its CPUs
    together, over the longest one's time: the median of the rounds with
    its interval), and the cycles one of its ops costs its CPU}."""
    out = {}
    for name in dict.fromkeys(cpu_roles):
        mine = [i for i, r in enumerate(cpu_roles) if r == name]
        ops_s, units_s, cost = [], [], []
        for per in rounds:
            rs = [per[i] for i in mine]
            longest = max(r[1] for r in rs) / tsc_hz
            ops_s.append(sum(r[0] for r in rs) / longest if longest else 0.0)
            units_s.append(sum(r[4] for r in rs) / longest if longest else 0.0)
            cost.append(sum(r[1] for r in rs) / max(1, sum(r[0] for r in rs)))
        fig = {"emulated_cpus": mine}
        for key, values in (("ops_per_s", ops_s), ("units_per_s", units_s),
                            ("cycles_per_op", cost)):
            fig[key], ci = stats.median_ci(values)
            fig[f"{key}_interval"] = list(ci)
        out[name] = fig
    return out


def _paired(a, b):
    """a - b per op over ABBA blocks (stats.abba_blocks): (median, interval, pairs) or None."""
    return stats.paired_abba(a["samples"], b["samples"], stats.per_op_diff)


def verdicts(rows, tsc_hz):
    """Each variant against the baseline (the first variant row of one
    mode), and the A/A control (the row whose role is the control, the
    baseline's second copy) beside every one; built-in rows take no part.
    Empty when the rounds are too few for an interval (stats.MIN_SAMPLES
    blocks)."""
    variants = [r for r in rows if r["role"] == VARIANT]
    base, aa = variants[0], next(r for r in rows if r["role"] == CONTROL)
    ctl = _paired(aa, base)
    if ctl is None:
        return []
    control = stats.control(f"{base['variant']} twice", ctl[0], ctl[1])
    out = []
    for r in variants[1:]:
        d, ci, pairs = _paired(r, base)
        v = {"mode": r["mode"], "variant": r["variant"], "baseline": base["variant"],
             "seed": None, "claim": f"{r['variant']} against {base['variant']}, {r['mode']}",
             "reference": "the baseline, in the same rounds", "unit": UNIT,
             "kind": "measured", "measured": d, "interval": ci, "pairs": pairs,
             "ns": d * 1e9 / tsc_hz, "ns_interval": [x * 1e9 / tsc_hz for x in ci],
             "verdict": label(ci), "control": control}
        if r["mode"] == "contended":
            g = stats.paired_abba(r["ops_per_s_samples"], base["ops_per_s_samples"], stats.gain)
            if g:
                v["ops_per_s_gain_pct"], v["ops_per_s_gain_interval"] = g[0], g[1]
        out.append(v)
    return out


def _f(x, digits=2):
    return f"{x:+.{digits}f}"


def effect_lines(vs, per="op"):
    lines = []
    for v in vs:
        lo, hi = v["interval"]
        nlo, nhi = v["ns_interval"]
        line = (f"  {v['variant']} - {v['baseline']}: {_f(v['measured'])} cycles "
                f"[{_f(lo)} .. {_f(hi)}], {_f(v['ns'])} ns [{_f(nlo)} .. {_f(nhi)}] per {per}, "
                f"{v['pairs']} pairs -> {v['verdict']}")
        if "ops_per_s_gain_pct" in v:
            glo, ghi = v["ops_per_s_gain_interval"]
            line += (f"; {per}s/s {_f(v['ops_per_s_gain_pct'], 1)} % "
                     f"[{_f(glo, 1)} .. {_f(ghi, 1)}]")
        lines.append(line)
    if vs:
        c = vs[0]["control"]
        lo, hi = c["interval"]
        lines.append(f"  A/A control ({c['sides']}): {_f(c['measured'])} cycles "
                     f"[{_f(lo)} .. {_f(hi)}] -> {c['verdict']}")
        if not c["reliable"]:
            lines.append("  WARNING: the A/A control found a difference between identical "
                         "sides: the verdicts above are not reliable on this run")
    return lines


def text(env, extra):
    p, rows = env["params"], env["results"]
    vs = env["verdicts"]
    per = p.get("unit") or "op"     # what the figures are per: SMPNET_UNIT's, or the op
    built = (f"built in {p['build_s']:.2f} s" if p["compiled"]
             else f"found in the cache in {p['build_s']:.3f} s (not compiled)")
    own = p.get("variant_algos") or {}
    algo = p["algo"] + "".join(f", {n} on {a}" for n, a in own.items())
    out = [f"# ab: {p['file']}, variants {', '.join(p['variants'])} (the first is the "
           f"baseline), {algo}, {built}",
           "# kernel build: " + kernel_build.describe_model(p.get("kernel_build", "inline"),
                                                            p.get("kernel_build_record"))]
    unc = [r for r in rows if r["mode"] == "uncontended"]
    if unc:
        out.append(f"\nuncontended, CPU {unc[0]['cpus'][0]}: {p['rounds']} rounds per variant "
                   f"in ABBA order; the harness's empty loop: {unc[0]['overhead_cycles']:.2f} "
                   + ("cycles per op (in every figure below)" if per == "op" else
                      f"cycles per loop turn (in every figure below, which are per {per})"))
        if p.get("roles"):
            out.append(f"each op: every role in turn on this CPU ({', '.join(p['roles'])})")
        out.append(table([(locktext.row_name(r, r["variant"]), r["loops"], r["cycles"],
                           r["cycles_min"], r["cycles_max"], r["ns"]) for r in unc],
                         ["variant", "ops/round", f"cycles/{per}", "min", "max", f"ns/{per}"]))
        dropped = locktext.dropped_line(unc)
        if dropped:
            out.append(dropped)
        for r in unc:
            for name, o in r.get("over_builtin", {}).items():
                out.append(f"{r['variant']} / {BUILTIN}{name}: {o['ratio']:.3f} "
                           f"[{o['interval'][0]:.3f} .. {o['interval'][1]:.3f}] "
                           f"({o['pairs']} ABBA blocks)")
    con = [r for r in rows if r["mode"] == "contended"]
    if con:
        out.append(f"\ncontended, CPUs {','.join(map(str, con[0]['cpus']))} at once: "
                   f"{p['repeat']} rounds of {p['duration_s']:g} s per variant in ABBA order, "
                   f"hold {p['hold_cycles']} and think {p['think_cycles']} TSC cycles")
        out.append(table([(r["variant"], f"{r['ops_per_s'] / 1e6:.2f} "
                           f"[{r['ops_per_s_interval'][0] / 1e6:.2f} .. "
                           f"{r['ops_per_s_interval'][1] / 1e6:.2f}]",
                           " ".join(f"{x / 1e6:.2f}" for x in r["ops_per_s_per_cpu"]),
                           f"{r['fairness']:.3f} [{r['fairness_interval'][0]:.3f} .. "
                           f"{r['fairness_interval'][1]:.3f}]", r["cycles"], r["ns"])
                          for r in con],
                         ["variant", f"M{per}s/s total [95 %]", f"M{per}s/s per CPU",
                          "fairness (Jain) [95 %]", f"cycles/{per} per CPU", f"ns/{per}"]))
        if p.get("cpu_roles"):
            out.append(_roles_text(p, con))
        if "skbs" in con[0]:
            out.append(_skbs_text(con))
    for mode in ("uncontended", "contended"):
        mine = [v for v in vs if v["mode"] == mode]
        if mine:
            out.append(f"\n{mode}: each variant against {mine[0]['baseline']} (median paired "
                       "difference over ABBA blocks of two rounds, 95 % interval)")
            out += effect_lines(mine, per)
    if rows and not vs:
        out.append("\nno verdict (see the warnings)")
    return "\n".join(out)


def _roles_text(p, con):
    """Each role's CPUs and figures, per variant (the rows' per_role)."""
    roles = p["cpu_roles"]
    cpus = ", ".join(f"{n}: emulated CPU(s) "
                     f"{','.join(str(i) for i, r in enumerate(roles) if r == n)}"
                     for n in dict.fromkeys(roles))
    out = [f"roles: {cpus}; fairness is within a role (the lowest role's Jain index); a "
           "role's figures are its CPUs' together"]
    lines = []
    for r in con:
        for name, f in r["per_role"].items():
            lines.append((r["variant"], name, f"{f['ops_per_s'] / 1e6:.2f} "
                          f"[{f['ops_per_s_interval'][0] / 1e6:.2f} .. "
                          f"{f['ops_per_s_interval'][1] / 1e6:.2f}]",
                          f"{f['units_per_s'] / 1e6:.2f}" if p.get("unit") else "-",
                          f"{f['cycles_per_op']:.1f}"))
    out.append(table(lines, ["variant", "role", "Mops/s [95 %]",
                             f"M{p.get('unit') or 'unit'}s/s", "cycles/op of its CPU"]))
    return "\n".join(out)


def _skbs_text(con):
    """What the model's skb life cycle did in each variant's contended rounds."""
    lines = [(r["variant"], *(f"{r['skbs'][f] / 1e6:.3f}" for f in skbs.FIELDS)) for r in con]
    return ("the model's skbs (smpnet_skbuff.h), every CPU's in each variant's contended "
            "rounds, in millions:\n" + table(lines, ["variant", "allocated", "freed remotely",
                                                     "deferred", "nodefer (list full)",
                                                     "flushes", "flushed", "defer IPIs"]))


def plot(ax, rows):
    """Every round's cost per op, by mode and variant (a point per round, a
    bar at the median): the spread the paired intervals come from."""
    rows = [r for r in rows if r.get("samples")]
    for x, r in enumerate(rows):
        s = r["samples"]
        ax.scatter([x] * len(s), s, s=12, alpha=0.6,
                   color="C0" if r["mode"] == "uncontended" else "C1")
        ax.hlines(r["cycles"], x - 0.3, x + 0.3, color="black")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['variant']}\n{r['mode']}" for r in rows], fontsize=8)
    values = [v for r in rows for v in r["samples"] if v > 0]
    if values and max(values) > 20 * min(values):
        ax.set_yscale("log")
    ax.set_ylabel("TSC cycles per op, each round (bar: median)")
    ax.set_title("ab: every variant's rounds, uncontended (blue) and contended (orange)")
