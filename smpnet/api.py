"""The Python API's calls that run an experiment the way the command line
does, with keyword arguments for its options: smpnet.ab(). Docs: docs/api.md."""
import os
import types

from .errors import BadInput
from .experiment import MACHINE_OPTIONS


def _args(experiment, options, **given):
    """The experiment's arguments: every option it declares (its Option
    records, and --ncpus, --oversubscribe) at its default, then `options`
    (keyword names: --hold-cycles as hold_cycles), each value checked by
    the option's own type, as the command line checks its text; `given`
    set as they are (the positional file, the source)."""
    declared = {o.dest: o for o in MACHINE_OPTIONS + experiment.options}
    args = types.SimpleNamespace(**{d: o.default for d, o in declared.items()}, **given)
    for key, value in options.items():
        if key not in declared:
            raise BadInput(f"smpnet.{experiment.name}() takes no option {key!r}")
        setattr(args, key, declared[key].value(value))
    return args


def ab(path=None, *, source=None, variants=None, cpus=None, progress=None, **options):
    """Measure the variants of one C file (docs/experiments/ab.md) as
    `smpnet-bench ab FILE.c` does: the file at `path`, or its text as
    `source=` (one of the two); `variants` the names to run, the first the
    baseline (default: all, in the file's order); `cpus` the --cpus syntax
    or a list (default: every allowed CPU). The other options by their long
    names, e.g. rounds=20, contended=False, builtin=["spin_lock_unlock"],
    hold_cycles=100. Returns the Outcome: params, rows, verdicts (each with
    the load seen around the run), warnings (the machine's and the load's
    too), as the command line's JSON carries them. BadInput for a file or
    option that cannot run."""
    from . import runner
    from .experiments import get
    from .machine.cpus import parse_cpus

    e = get("ab")
    if (path is None) == (source is None):
        raise BadInput("smpnet.ab() takes a file's path or its text as source=, one of the two")
    args = _args(e, dict(options, variants=variants),
                 file="<source>" if source is not None else os.fspath(path), source=source)
    cpus = parse_cpus(cpus)
    p = e.params(args, cpus)
    return runner.measured(e, cpus, p, progress)[0]
