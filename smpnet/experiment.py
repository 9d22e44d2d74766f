"""What an experiment is: the one record each experiment module fills in.

An experiment module (smpnet/experiments/X.py, or X/__init__.py where it
has helpers of its own) owns everything about its experiment: its options,
its validated parameters, its run, its rows and verdicts, its text, its
picture, the keys that identify its rows for `compare`, its parameters
inside `all`, its run-time estimate and its exit rule. It says so by
defining one `EXPERIMENT = Experiment(...)`; the registry
(smpnet/experiments/__init__.py) lists them, and the generic commands (cli,
run_all, compare, plot) use nothing else.

The lifecycle, as the command line drives it:
  params(args, cpus)       validate the options: the experiment's Params
  seconds(params, cpus)    the estimate behind the one-hour rule and `all`'s ETA
  run(cpus, params, progress) -> Outcome
  text(env, extra)         the table a person reads (env: the JSON envelope)
  invariant_failures(rows) the model's invariants a finished run broke: exit 1
"""
import dataclasses
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Callable, Optional

from .errors import BadInput

# What `compare` matches and compares in a row: the fields that identify it,
# the value compared (a field, or a (field, key) path into a dict field), its
# per-run samples, and its low and high ends (None where a row has none);
# `defaults`: the value of a key that rows written before it existed had.
Metric = namedtuple("Metric", "keys value samples lo hi defaults", defaults=(None,))


@dataclass(frozen=True)
class Params:
    """An experiment's validated parameters: each experiment declares its
    own as a frozen dataclass of this, its fields what its JSON's "params"
    records, in that order. A run reads them and cannot change them;
    dataclasses.replace() makes a changed copy (`all` hands a stage its
    calibration profile so). OPTIONAL: fields the JSON leaves out while
    None (ab's contended settings, in a run that is not contended); a field
    with metadata {"record": False} is the run's alone (ab's loaded object)."""
    OPTIONAL = ()

    def record(self, **decided):
        """The JSON's "params": every field (an OPTIONAL one only when set),
        then what the run decided (`decided`)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.metadata.get("record", True)
               and (f.name not in self.OPTIONAL or getattr(self, f.name) is not None)}
        return {**out, **decided}


@dataclass
class Outcome:
    """What a run gives back."""
    params: dict                     # as the JSON records them (may add what the run decided)
    rows: list
    verdicts: list = field(default_factory=list)
    warnings: list = field(default_factory=list)   # e.g. why there is no verdict
    extra: dict = field(default_factory=dict)      # for the text, and kept in an `all` stage
    failures: list = field(default_factory=list)   # what failed once the figures were in: exit 1


def _nothing(*args):
    return []


@dataclass
class Experiment:
    name: str                         # its subcommand, its stage in `all`, its docs page
    help: str                         # one line, for `smpnet-bench --help`
    description: str                  # the subcommand's --help
    add_options: Callable             # (argparse parser) -> None, its own options
    params: Callable                  # (args, cpus) -> its Params; BadInput on bad input
    seconds: Callable                 # (Params, cpus) -> estimated seconds
    run: Callable                     # (cpus, Params, progress) -> Outcome
    text: Callable                    # (env, extra) -> str
    metric: Optional[Metric] = None   # what compare matches and compares
    # an experiment whose results hold rows of more than one kind (locks, with
    # --contended rows): (field, {its value: the experiment whose metric applies})
    kinds: Optional[tuple] = None
    machine_options: bool = True      # --ncpus, --oversubscribe
    plan: Optional[Callable] = None   # (cpus, quick) -> Params inside `all`; None: not in `all`
    min_cpus: int = 1                 # `all` skips it on fewer real CPUs
    seeds: tuple = ()                 # the seeds whose primary verdict it gives in `all`
    invariant_failures: Callable = _nothing   # (rows) -> what broke; the run exits 1
    plot: Optional[Callable] = None   # (matplotlib axes, rows) -> None
    # another experiment runs instead for these options (locks --contended)
    delegate: Optional[Callable] = None
    own_warnings: bool = False        # its text shows the warnings itself (info)
    # calibration (measure/calibration.py): the experiment that measures a profile,
    # (cpus, params, outcome) -> profile, which `all` hands to the later
    # stages that are `calibrated` (their params' "calibration")
    calibrates: Optional[Callable] = None
    calibrated: bool = False
    # its options as Option records, where it declares them so (the Python
    # API takes these as keywords; add_options adds them to the parser)
    options: tuple = ()


def parse_list(text, known, what):
    """'a,b' -> ['a', 'b'] checked against `known`; 'all' -> all of them."""
    if text is None or text.strip() == "all":
        return list(known)
    items = [t.strip() for t in text.split(",")]
    if not any(items):
        raise BadInput(f"empty {what} list (choose from {', '.join(known)}, or all)")
    if not all(items):      # 'none,,irq': a name left out, as numeric lists refuse it
        raise BadInput(f"an empty {what} name in {text!r} (choose from "
                       f"{', '.join(known)}, or all)")
    for t in items:
        if t not in known:
            raise BadInput(f"unknown {what} {t!r} (choose from {', '.join(known)}, or all)")
    if len(set(items)) != len(items):
        raise BadInput(f"a {what} is listed twice in {text!r}")
    return items


def bounded_value(option):
    """A numeric option's value from its text, within its bound from
    bounds.BOUNDS (a list where bounds.LISTS has it); BadInput otherwise."""
    from . import bounds

    def check(text):
        if option in bounds.LISTS:
            return bounds.parse_list(option, text)
        return bounds.parse(option, text)
    return check


def _argparse_type(check):
    """`check` (text -> value, BadInput on a bad one) as an argparse type."""
    import argparse

    def typed(text):
        try:
            return check(text)
        except BadInput as e:  # argparse puts "argument --x: " before it
            raise argparse.ArgumentTypeError(str(e)) from None
    return typed


def bounded(option):
    """The argparse type of a numeric option: its bound from bounds.BOUNDS."""
    return _argparse_type(bounded_value(option))


@dataclass(frozen=True)
class Option:
    """One option, declared once: the command line adds it to its parser
    (add_to), the Python API takes a keyword by it (value), each value
    checked by the same `type`."""
    flag: str                   # "--hold-cycles"; the keyword is hold_cycles
    help: str
    type: Optional[Callable] = None     # text -> value, BadInput on a bad one
    default: object = None
    metavar: Optional[str] = None
    choices: Optional[tuple] = None
    switch: bool = False        # on where given (store_true)
    negatable: bool = False     # --x or --no-x, None where neither

    @property
    def dest(self):
        return self.flag[2:].replace("-", "_")

    def add_to(self, parser):
        import argparse

        kw = {"help": self.help, "default": self.default}
        if self.switch:
            kw["action"] = "store_true"
        elif self.negatable:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw.update(metavar=self.metavar, choices=self.choices)
            if self.type is not None:
                kw["type"] = _argparse_type(self.type)
        parser.add_argument(self.flag, **kw)

    def value(self, given):
        """A keyword's value, checked as the command line checks the text
        (a list or tuple as its comma-separated text); None: the default."""
        if given is None:
            return self.default
        if self.switch or self.negatable:
            if not isinstance(given, bool):
                raise BadInput(f"{self.flag}: True or False, got {given!r}")
            return given
        text = ",".join(map(str, given)) if isinstance(given, (list, tuple)) else str(given)
        if self.choices is not None and text not in self.choices:
            raise BadInput(f"{self.flag}: one of {', '.join(self.choices)}, got {text!r}")
        if self.type is None:
            return text
        try:
            return self.type(text)
        except BadInput as e:   # named as argparse names it: "argument --x: ..."
            raise BadInput(f"{self.flag}: {e}") from None


# --ncpus and --oversubscribe: what every experiment with machine_options takes
MACHINE_OPTIONS = (
    Option("--ncpus", "emulated CPUs (default: one per selected real CPU)",
           bounded_value("--ncpus"), metavar="N"),
    Option("--oversubscribe", "allow more emulated CPUs than real ones (timings then not "
                              "valid)", switch=True, default=False),
)



def add_amount(p, count, help, duration):
    """How much work a run does: `count` (--skbs, --packets) or --duration
    seconds, not both; by default `duration` seconds."""
    amount = p.add_mutually_exclusive_group()
    amount.add_argument(count, type=bounded(count), metavar="N", help=help)
    amount.add_argument("--duration", type=bounded("--duration"), metavar="S",
                        help=f"seconds per run (default: {duration})")
