"""An experiment's run as both front ends make it (the command line, the
Python API): the machine's timing warnings, the load sampled around the run,
the verdicts marked with it. Docs: docs/api.md, docs/output.md."""
from .machine import load, sysinfo
from .report import report


def measured(e, cpus, params, progress=None):
    """Run experiment `e` on `cpus` with its validated `params`:
    (its Outcome, whose warnings are now every warning the run has, the
    machine's facts, the load seen around it). Each verdict gets the load
    as "load"."""
    facts = report.machine(cpus)
    oversubscribed = (getattr(params, "ncpus", None) or len(cpus)) > len(cpus)
    warnings = sysinfo.timing_warnings(facts, oversubscribed=oversubscribed)
    if getattr(params, "check", False):
        warnings.append("the checker is on: timings include its checks")
    out, seen = load.around(cpus, lambda: e.run(cpus, params, progress))
    out.warnings = warnings + out.warnings + load.mark(out.verdicts, seen)
    return out, facts, seen
