"""The Python API's calls that run an experiment the way the command line
does, with keyword arguments for its options: smpnet.ab()."""
import argparse
import os

from .errors import BadInput


def _args(experiment, positional, options):
    """The experiment's argparse namespace for `positional` and `options`
    (keyword names of its options, --hold-cycles as hold_cycles), each value
    checked by the option's own type, as on the command line."""
    from .cli import add_machine_options

    p = argparse.ArgumentParser(prog=f"smpnet.{experiment.name}", add_help=False)
    add_machine_options(p)   # --ncpus, --oversubscribe, as the command line checks them
    experiment.add_options(p)
    args = p.parse_args(positional)
    actions = {a.dest: a for a in p._actions}
    for key, value in options.items():
        if key not in actions or key == "file":
            raise BadInput(f"smpnet.{experiment.name}() takes no option {key!r}")
        action = actions[key]
        if value is not None and action.type is not None:
            text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            try:
                value = action.type(text)
            except argparse.ArgumentTypeError as e:
                raise BadInput(f"--{key.replace('_', '-')}: {e}") from None
        setattr(args, key, value)
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
    too), as the command line's JSON carries them. BadInput for a file or option that cannot run."""
    from . import runner
    from .experiments import get
    from .machine.cpus import parse_cpus

    e = get("ab")
    if (path is None) == (source is None):
        raise BadInput("smpnet.ab() takes a file's path or its text as source=, one of the two")
    name = "<source>" if source is not None else os.fspath(path)
    if variants is not None and not isinstance(variants, str):
        variants = ",".join(variants)
    args = _args(e, [name], dict(options, variants=variants))
    args.source = source
    cpus = parse_cpus(cpus)
    p = e.params(args, cpus)
    return runner.measured(e, cpus, p, progress)[0]
