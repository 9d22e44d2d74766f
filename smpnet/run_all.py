"""smpnet-bench all: every experiment in the registry that has a plan for
`all`, then one verdict per seed.

Experiments run in the registry's order with a progress line and an ETA on
stderr; each one's params, rows and verdicts go into the result as they
would from its own command, as one stage named after it. The verdict table
takes one verdict per seed: the first verdict of the experiment that names
the seed in its `seeds` (the per-op cost, for 003, as the seed measured it);
the seed's verdicts from other experiments are its details. A stage the
watchdog stopped (a stopped worker, or one the machine's load starved) is
recorded as failed and the next stage runs; one that crashed or was
interrupted ends `all`, with the finished stages kept.
"""
import dataclasses
import sys
import time

from .errors import Interrupted, RunTimeout, SmpnetError
from .experiments import EXPERIMENTS
from .machine import load, process, sysinfo
from .machine.cpus import format_cpus
from .measure.stats import DIFFERENCE
from .report import report
from .seeds import ORIGINAL, SEEDS

RULE = ("The rule (docs/design.md, Statistics): with the 95 % interval on the side of zero "
        "the seed claims, reproduced when it overlaps half to twice the seed's size, smaller or "
        "larger than the seed's when wholly below or above; no measurable difference when it "
        "contains zero; opposite when it lies on the other side. (model): the sign follows from "
        "the model's rules. A/A control: the same pipeline with both sides identical; passed "
        "when it finds no measurable difference.")


def stages():
    """The experiments `all` runs, in order."""
    return [e for e in EXPERIMENTS if e.plan is not None]


def estimate(e, cpus, quick):
    """Seconds an experiment should take inside `all`, for the ETA."""
    if len(cpus) < e.min_cpus:
        return 0.0
    return e.seconds(e.plan(cpus, quick), cpus)


def run(cpus, quick=True, progress=True, profile=None):
    """Returns (stage results by name, verdict table entries, warnings).
    profile: a calibration profile for the calibrated stages; None: the
    stage that calibrates measures one on the spot."""
    todo = stages()
    left = sum(estimate(e, cpus, quick) for e in todo)
    started = time.monotonic()
    done, warnings = {}, []
    for k, e in enumerate(todo):
        if progress:
            sys.stderr.write(f"smpnet-bench all: [{k + 1}/{len(todo)}] {e.name} "
                             f"(about {left:.0f} s left, {time.monotonic() - started:.0f} s "
                             f"so far)\n")
            sys.stderr.flush()
        try:
            process.check_interrupted()     # between stages: a lost interrupt ends the run
            done[e.name] = _stage(e, cpus, quick, warnings, profile)
            if e.calibrates and profile is None:
                profile = done[e.name].get("profile")
        except RunTimeout as err:
            # stopped as stuck (a worker stopped, or starved by the machine's
            # load): the stages after it may still run, and `all` exits 1
            warnings.append(f"{e.name} failed: {err}")
            done[e.name] = {"params": e.plan(cpus, quick).record(), "results": [], "verdicts": [],
                            "failed": str(err)}
        except SmpnetError as err:
            raise StageFailed(e.name, err, done, warnings) from None
        except KeyboardInterrupt:  # between two runs of a stage
            raise StageFailed(e.name, Interrupted("interrupted"), done, warnings) from None
        left -= estimate(e, cpus, quick)
    return done, verdict_table(done), warnings


class StageFailed(SmpnetError):
    """A stage of `all` failed (a worker died, Ctrl-C...): the stages that
    finished before it are kept, to be saved rather than lost."""

    def __init__(self, stage, error, finished, warnings):
        self.stage, self.error, self.finished, self.warnings = stage, error, finished, warnings
        self.exit_code = error.exit_code
        self.kept = None  # where the finished stages were saved
        super().__init__(stage, error)

    def __str__(self):
        n = len(self.finished)
        kept = (f"; the {n} finished stage{'s' if n != 1 else ''} went to {self.kept}"
                if self.kept and n else "")
        return f"stage {self.stage} failed: {self.error}{kept}"


def _stage(e, cpus, quick, warnings, profile):
    p = e.plan(cpus, quick)
    if e.calibrated:
        p = dataclasses.replace(p, calibration=profile)
    if e.calibrates and profile is not None:
        why = "--calibration gave a profile"
        warnings.append(f"{e.name} skipped: {why}")
        return {"params": p.record(), "results": [], "verdicts": [], "skipped": why}
    if len(cpus) < e.min_cpus:
        why = f"needs {e.min_cpus} CPUs"
        warnings.append(f"{e.name} skipped: it {why}")
        return {"params": p.record(), "results": [], "verdicts": [], "skipped": why}
    out, seen = load.around(cpus, lambda: e.run(cpus, p, None))
    warnings += [f"{e.name}: {w}" for w in out.warnings + load.mark(out.verdicts, seen)
                 + control_load(out.verdicts, seen)]
    stage = {"params": out.params, "results": out.rows, "verdicts": out.verdicts, **out.extra,
             "load": seen}
    if e.calibrates:   # the profile the calibrated stages after it charge
        stage["profile"] = e.calibrates(cpus, out.params, out)
    return stage


def control_load(verdicts, seen):
    """The line a stage whose A/A control found a difference gets, whatever
    the load: what load its CPUs saw (a list: none or one)."""
    found = [v["control"]["verdict"] for v in verdicts
             if v.get("control") and not v["control"]["reliable"]]
    if not found:
        return []
    return [f"A/A control found a difference ({', '.join(dict.fromkeys(found))}); "
            f"{load.describe(seen, 'the stage')}"]


def failed_stages(done):
    """Each stage that was stopped and the rest ran past, with why."""
    return [f"stage {name} failed: {d['failed']}" for name, d in done.items() if d.get("failed")]


def invariant_failures(done):
    """Every invariant a stage broke, named by stage: `all` exits 1 on any,
    as the experiment's own command would."""
    return [f"{e.name}: {f}" for e in stages()
            for f in e.invariant_failures(done.get(e.name, {}).get("results", []))]


def verdict_table(done):
    """One entry per seed, in seed order: the primary verdict, the others as details."""
    primary = {seed: [] for seed in SEEDS}
    details = {seed: [] for seed in SEEDS}
    for e in stages():
        for v in done.get(e.name, {}).get("verdicts", []):
            if v.get("seed") in SEEDS:
                (primary if v["seed"] in e.seeds else details)[v["seed"]].append(
                    dict(v, stage=e.name))
    out = []
    for seed in SEEDS:
        machine, number = ORIGINAL[seed]
        found = primary[seed] + details[seed]
        if not found:
            failed = [e.name for e in stages()
                      if seed in e.seeds and done.get(e.name, {}).get("failed")]
            out.append({"seed": seed, "claim": None, "reference": number,
                        "original_machine": machine, "measured": None, "interval": None,
                        "verdict": "not measured" + (f" ({failed[0]} failed)" if failed else ""),
                        "details": []})
            continue
        out.append(dict(found[0], original_machine=machine, details=found[1:]))
    return out


def envelope(cpus, done, verdicts, warnings, quick, calibration=None):
    facts = report.machine(cpus)
    warnings = sysinfo.timing_warnings(facts) + warnings
    results = [dict(stage=name, **data) for name, data in done.items()]
    return report.envelope("all", cpus, {"cpus": format_cpus(cpus), "quick": quick,
                                         "calibration": calibration},
                           results, verdicts, warnings, facts=facts)


def verdict_text(verdicts):
    cells = []
    for v in verdicts:
        here = _figure(v)
        size = "-"
        if "size_ratio" in v:
            r, lo, hi = v["size_ratio"]
            size = f"{r:.2f} [{lo:.2f} .. {hi:.2f}]"
        cells.append((v["seed"], v["original_machine"], ORIGINAL[v["seed"]][1], here, size,
                      v["verdict"] + (" (model)" if v.get("kind") == "model" else ""),
                      control_cell(v.get("control"))))
    return report.table(cells, ["seed", "original machine", "original number",
                                "here (95 % interval)", "x the seed's", "verdict", "A/A control"])


def control_cell(control):
    """The A/A control in a word of its own, never one of the verdicts'
    words: "no measurable difference" beside a row's "reproduced" read as
    a second, contradicting verdict of the row."""
    if not control:
        return "-"
    if control["reliable"]:
        return "passed"
    found = control["verdict"]
    # "difference found" is a past participle already: "found a difference"
    return "FAILED: found " + ("a difference" if found == DIFFERENCE else found)


def _where(v):
    """Where a verdict comes from: its stage, and the label its experiment
    gave it among the seed's verdicts (what it modelled)."""
    return v["stage"] + (f", {v['label']}" if v.get("label") else "")


def _figure(v, missing="-"):
    """A verdict's figure, measured [interval] unit; `missing` when none."""
    if v.get("measured") is None:
        return missing
    if v.get("interval"):
        lo, hi = v["interval"]
        return f"{v['measured']:.3g} [{lo:.3g} .. {hi:.3g}] {v.get('unit', '')}".strip()
    return f"{v['measured']} ({v.get('unit', '')})"


def text(env, pictures):
    """The table a person reads at the end of `all`."""
    quick = env["params"]["quick"]
    lines = [f"smpnet-bench all{' --quick' if quick else ''} on CPUs {env['params']['cpus']}: "
             f"{len(env['results'])} stages", "", verdict_text(env["verdicts"])]
    facts = [(v["seed"], report.fact_line(v)) for v in env["verdicts"]]
    # a stage's word on a seed it does not measure (kernel: the referee's lock pair)
    facts += sorted((seed, note) for r in env["results"]
                    for seed, note in r.get("seed_notes", {}).items())
    facts.sort(key=lambda f: f[0])      # stable: a seed's own fact first
    if any(fact for _, fact in facts):
        lines += ["", "What sets each size here, against the seed's:"]
        lines += [f"  seed {seed}: {fact}" for seed, fact in facts if fact]
    lines += ["", RULE]
    for v in env["verdicts"]:
        if v.get("control") and not v["control"]["reliable"]:
            lines.append(f"  seed {v['seed']}: WARNING: {report.UNRELIABLE}")
            if v.get("load"):
                lines.append(f"  seed {v['seed']} ({v['stage']}): "
                             f"{load.describe(v['load'], 'the stage')}")
        for d in v.get("details", []):
            lines.append(f"  seed {d['seed']} ({_where(d)}): {d['claim']}: {_figure(d, 'not measured')}"
                         f" -> {d['verdict']}"
                         + ("" if not d.get("control") or d["control"]["reliable"]
                            else " (WARNING: its A/A control found a false difference: "
                                 "not reliable)"))
    if pictures:
        lines += ["", "Pictures: " + ", ".join(pictures)]
    return "\n".join(lines) + report.warnings_text(env["warnings"])
