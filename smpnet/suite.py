"""smpnet-bench all: every experiment, one verdict per seed.

Stages run in order with a progress line and an ETA on stderr; each stage's
rows and verdicts go into the result as they would from its own command.
The verdict table takes one verdict per seed: 000 from arp, 002 from
loopback, 003 from locks (the per-op cost, as the seed measured it); the
other verdicts of a seed (defer's two, loopback's storm) are its details.
"""
import sys
import time

from . import report, sysinfo
from .errors import Interrupted, SmpnetError
from .cpus import format_cpus
from .scenarios import arp, defer, locks, loopback
from .time_bench import time_bench

# (quick, default) parameters per stage; durations are per run
PLANS = {
    "quick": {
        "locks": dict(algos=["qspinlock", "ticket", "tas"], variants=["plain", "irq", "irqsave"],
                      rounds=7),
        "contended": dict(algos=["qspinlock", "ticket", "tas"], variants=["plain"],
                          duration=0.1),
        "defer": dict(repeat=3, duration=0.1),
        "loopback": dict(repeat=5, duration=0.1),
        "arp": dict(trials=60),
    },
    "full": {
        "locks": dict(algos=list(locks.ALGOS), variants=list(locks.VARIANTS), rounds=10),
        "contended": dict(algos=list(locks.ALGOS), variants=["plain", "irq"], duration=0.3),
        "defer": dict(repeat=5, duration=0.3),
        "loopback": dict(repeat=5, duration=0.2),
        "arp": dict(trials=200),
    },
}
STAGES = ("info", "locks", "contended", "defer", "loopback", "arp")
SEEDS = ("000", "002", "003")
ORIGINAL = {
    "000": ("first ping after arp -d, HZ=100 (2011)", "9.91 ms -> 0.152 ms"),
    "002": ("tbench on Eric Dumazet's machine (2008)", "+5 %"),
    "003": ("E5-1650 v4 @ 3.60GHz, time_bench (2023)", "irqsave - irq = 14 cycles"),
}


def estimate(stage, plan, ncpu):
    """Seconds a stage should take, for the ETA: each experiment's own estimate."""
    p = PLANS[plan].get(stage, {})
    if stage == "info":
        return 0.5
    if stage == "locks":
        return locks.suite_seconds(len(locks.suite_plan(p["algos"], p["variants"])),
                                   rounds=p["rounds"])
    if stage == "contended":
        return sum(locks.contended_seconds(len(p["algos"]) * len(p["variants"]),
                                           p["duration"], k, ncpu) for k in range(1, ncpu + 1))
    if stage == "defer":
        return defer.estimate_seconds(len(defer.STRATEGIES), p["repeat"], duration=p["duration"],
                                      ncpus=ncpu, real_cpus=ncpu)
    if stage == "loopback":
        return loopback.estimate_seconds(ncpu, len(loopback.MODES), p["repeat"], real_cpus=ncpu,
                                         duration=p["duration"], scaling=True)
    return len(arp.PROBES) * arp.probe_seconds(100, p["trials"], arp.COUNT) + 0.5


def run(cpus, quick=True, progress=True):
    """Returns (stage results, verdict table entries, warnings)."""
    plan = "quick" if quick else "full"
    ncpu = len(cpus)
    left = sum(estimate(s, plan, ncpu) for s in STAGES)
    started = time.monotonic()
    stages, warnings = {}, []
    for k, stage in enumerate(STAGES):
        if progress:
            sys.stderr.write(f"smpnet-bench all: [{k + 1}/{len(STAGES)}] {stage} "
                             f"(about {left:.0f} s left, {time.monotonic() - started:.0f} s "
                             f"so far)\n")
            sys.stderr.flush()
        try:
            stages[stage] = _stage(stage, cpus, PLANS[plan].get(stage, {}), warnings)
        except SmpnetError as e:
            raise StageFailed(stage, e, stages, warnings) from None
        except KeyboardInterrupt:  # between two runs of a stage
            raise StageFailed(stage, Interrupted("interrupted"), stages, warnings) from None
        left -= estimate(stage, plan, ncpu)
    return stages, verdict_table(stages), warnings


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


def _stage(stage, cpus, p, warnings):
    if stage == "info":
        timers = [time_bench(t) for t in ("for_loop", "tsc_read")]
        return {"params": {}, "results": [
            {"test": r.test, "cycles": r.cycles, "cycles_min": r.cycles_min,
             "cycles_max": r.cycles_max, "ns": r.ns, "loops": r.loops, "rounds": r.rounds}
            for r in timers], "verdicts": []}
    if stage == "locks":
        rows, reports = locks.run_suite(cpus[0], p["algos"], p["variants"], rounds=p["rounds"])
        v = locks.seed_003_verdict(rows, "qspinlock")
        return {"params": p, "results": rows, "verdicts": [v] if v else []}
    if stage == "contended":
        rows = []
        for k in range(1, len(cpus) + 1):   # throughput by CPU count
            r, _ = locks.run_contended(cpus[:k], p["algos"], p["variants"],
                                       duration=p["duration"])
            rows += r
        return {"params": p, "results": rows, "verdicts": []}
    if stage == "defer":
        if len(cpus) < 2:
            warnings.append("defer skipped: it needs 2 CPUs")
            return {"params": p, "results": [], "verdicts": [], "skipped": "needs 2 CPUs"}
        rows, verdicts, why = defer.run(cpus, duration=p["duration"], repeat=p["repeat"])
        if why:
            warnings.append(f"defer: no verdict: {why}")
        return {"params": p, "results": rows, "verdicts": verdicts}
    if stage == "loopback":
        rows, verdicts, why = loopback.run(cpus, duration=p["duration"], repeat=p["repeat"],
                                           scaling=True)
        if why:
            warnings.append(f"loopback: no verdict: {why}")
        return {"params": p, "results": rows, "verdicts": verdicts}
    if len(cpus) < 2:
        warnings.append("arp skipped: it needs 2 CPUs")
        return {"params": p, "results": [], "verdicts": [], "skipped": "needs 2 CPUs"}
    rows, verdicts, why, transcripts = arp.run(cpus, trials=p["trials"])
    if why:
        warnings.append(f"arp: no verdict: {why}")
    return {"params": p, "results": rows, "verdicts": verdicts, "transcripts": transcripts}


def invariant_failures(stages):
    """Every invariant a stage broke, named by stage: `all` exits 1 on any,
    as the stage's own command would."""
    out = []
    for stage, check in (("contended", locks.invariant_failures),
                         ("defer", defer.invariant_failures),
                         ("loopback", loopback.invariant_failures)):
        out += [f"{stage}: {f}" for f in check(stages.get(stage, {}).get("results", []))]
    return out


def verdict_table(stages):
    """One entry per seed, in seed order: the primary verdict, the others as details."""
    found = {seed: [] for seed in SEEDS}
    for stage in ("arp", "loopback", "locks", "defer"):
        for v in stages.get(stage, {}).get("verdicts", []):
            found[v["seed"]].append(dict(v, stage=stage))
    out = []
    for seed in SEEDS:
        machine, number = ORIGINAL[seed]
        if not found[seed]:
            out.append({"seed": seed, "claim": None, "reference": number,
                        "original_machine": machine, "measured": None, "interval": None,
                        "verdict": "not measured", "details": []})
            continue
        primary = found[seed][0]
        out.append(dict(primary, original_machine=machine, details=found[seed][1:]))
    return out


def envelope(cpus, stages, verdicts, warnings, quick):
    facts = report.machine(cpus)
    warnings = sysinfo.timing_warnings(facts) + warnings
    results = [dict(stage=name, **data) for name, data in stages.items()]
    return report.envelope("all", cpus, {"cpus": format_cpus(cpus), "quick": quick},
                           results, verdicts, warnings, facts=facts)


def verdict_text(verdicts):
    cells = []
    for v in verdicts:
        if v["measured"] is None:
            here = "-"
        elif v.get("interval"):
            lo, hi = v["interval"]
            here = f"{v['measured']:.3g} [{lo:.3g} .. {hi:.3g}] {v.get('unit', '')}".strip()
        else:
            here = f"{v['measured']} ({v.get('unit', '')})"
        cells.append((v["seed"], v["original_machine"], ORIGINAL[v["seed"]][1], here,
                      v["verdict"]))
    return report.table(cells, ["seed", "original machine", "original number",
                                "here (95 % interval)", "verdict"])
