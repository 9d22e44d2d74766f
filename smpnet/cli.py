"""smpnet-bench: the command line. `smpnet-bench --help` lists the subcommands.

Exit codes: 0 ok; 1 the run failed (a worker died); 2 bad input (one line on
stderr); 130 interrupted.
"""
import argparse
import errno
import signal
import sys

from . import __version__
from .errors import BadInput, OutputFailed, SmpnetError
from .experiment import MACHINE_OPTIONS
from .machine import process
from .machine.cpus import parse_cpus
from .measure import calibration
from .report import output, plaintext, report


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message):
        raise BadInput(f"{message} (see {self.prog} --help)")


def add_machine_options(p):
    for option in MACHINE_OPTIONS:
        option.add_to(p)


def _common(p):
    p.add_argument("--cpus", default="all", metavar="LIST",
                   help="real CPUs to use: 0,1 or 0-3 or all (default: all allowed)")
    p.add_argument("--json", action="store_true", help="print the JSON result to stdout")
    p.add_argument("--output", metavar="PATH", help="write the JSON result to PATH too (with --json, to PATH alone)")
    _format_option(p)


def _format_option(p):
    p.add_argument("--format", choices=("text", "email"), default="text",
                   help="text: as wide as the tables come (default); email: within 80 "
                        "columns, the machine in two lines on top, for a patch review")


def build_parser():
    from .report import compare
    from .experiments import EXPERIMENTS

    parser = _Parser(prog="smpnet-bench",
                     description="Reproduce Linux per-CPU and locking patches as "
                                 "before/after experiments, in user space.")
    parser.add_argument("--version", action="version", version=f"smpnet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    for e in EXPERIMENTS:
        p = sub.add_parser(e.name, help=e.help, description=e.description)
        _common(p)
        if e.machine_options:
            add_machine_options(p)
        p.add_argument("--long", action="store_true",
                       help="allow a run estimated at over an hour (refused without it)")
        if e.plot is not None:
            p.add_argument("--plot", metavar="DIR",
                           help="also write its picture to DIR/NAME.png, NAME the experiment "
                                "that ran (needs matplotlib)")
        e.add_options(p)
        p.set_defaults(func=cmd_experiment, experiment=e)

    p = sub.add_parser(
        "all", help="every experiment, and a verdict per seed",
        description="Every experiment with a plan for all, in order (see docs/all.md), "
                    "then a verdict table: each seed's claim, its original machine and "
                    "number, the number measured here with its interval and its size against "
                    "the seed's, the verdict, and the A/A control's answer.")
    p.add_argument("--cpus", default="all", metavar="LIST",
                   help="real CPUs to use: 0,1 or 0-3 or all (default: all allowed)")
    p.add_argument("--quick", action="store_true",
                   help="fewer rounds and shorter runs: under a minute on 2 CPUs")
    p.add_argument("--json", action="store_true", help="print the JSON result to stdout")
    p.add_argument("--output", metavar="PATH", help="write the JSON result to PATH too (with --json, to PATH alone)")
    _format_option(p)
    p.add_argument("--plot", metavar="DIR",
                   help="write PNG pictures of each experiment to DIR (needs matplotlib)")
    calibration.add_option(p, "(default: one measured on the spot, by the stage that "
                              "calibrates)")
    p.set_defaults(func=cmd_all)

    p = sub.add_parser(
        "compare", help="compare results of the same command: A B, or A1 A2 A3 -- B1 B2 B3",
        description="For each result row of A and B (matched by what identifies it; an "
                    "`all` result stage by stage): both values, the ratio B/A, and whether "
                    "the difference exceeds the noise: between the runs of each side when a "
                    "side has several (A1 A2 A3 -- B1 B2 B3, which holds what moves between "
                    "two runs of one build), else between the rounds of each run. Reads results of "
                    f"{', '.join(compare.commands())}, up to {compare.MAX_BYTES >> 20} "
                    "MiB each; anything else is one line and exit code 2. "
                    "See docs/compare.md.")
    p.usage = ("smpnet-bench compare [--json] [--format {text,email}] "
               "A.json B.json | A1.json [A2.json ...] -- B1.json [B2.json ...] "
               "(--vs is the same as --)")
    p.add_argument("a", metavar="RESULT.json", nargs="+",
                   help="A.json B.json; or A's results, `--`, then B's (each side's runs "
                        "are judged against their own spread)")
    p.add_argument("--vs", dest="b", metavar="B.json", nargs="+", default=[], action="extend",
                   help="B's results, after A's (the same as `--`)")
    p.add_argument("--json", action="store_true",
                   help="print the comparison as JSON (the common envelope; results are "
                        "the rows)")
    _format_option(p)
    p.set_defaults(func=cmd_compare)
    return parser


def _output_target(args):
    """--output's target, prepared before the run (a bad path costs nothing)."""
    return output.prepare(args.output)


def cmd_experiment(args):
    """Any experiment of the registry: validate, estimate, run, save, show."""
    from . import bounds, runner
    from .experiments import get
    from .report.progress import printer

    e = args.experiment
    instead = e.delegate(args) if e.delegate else None
    if instead:   # locks --contended runs the contended experiment
        e = get(instead)
    cpus = parse_cpus(args.cpus)
    params = e.params(args, cpus)
    args.output_target = _output_target(args)
    picture = getattr(args, "plot", None)
    if picture is not None:
        from .report import plot
        plot.require()
        plot.check_dir(picture)
    bounds.check_run_time(e.seconds(params, cpus), args.long)
    out, facts, seen = runner.measured(e, cpus, params, printer(args.command))
    warnings = out.warnings
    env = report.envelope(args.command, cpus, out.params, out.rows, out.verdicts, warnings,
                          facts=facts)
    _emit(args, env, lambda: e.text(env, out.extra)
          + ("" if e.own_warnings else report.warnings_text(warnings)))
    problems = _broken(e.invariant_failures(out.rows)) + out.failures
    if picture is not None and out.rows:   # after the result is saved: a picture is extra
        from .report import plot
        try:
            plot.write(e, out.rows, picture, env["machine"], seen)
        except OSError as err:
            problems.append(f"picture not written to {picture}: {err.strerror or err}")
    return _exit_rule(args.command, problems)


def cmd_all(args):
    from . import run_all
    from .report import plot

    cpus = parse_cpus(args.cpus)
    profile = calibration.from_args(args)
    args.output_target = _output_target(args)
    if args.plot is not None:
        plot.require()
        plot.check_dir(args.plot)
    try:
        done, verdicts, warnings = run_all.run(cpus, quick=args.quick, profile=profile)
    except run_all.StageFailed as e:
        _save_finished_stages(args, cpus, e)
    env = run_all.envelope(cpus, done, verdicts, warnings, args.quick,
                           profile and profile["source"])
    # The JSON first: a picture that cannot be drawn must not lose the run.
    failed = _save(args, env)
    pictures = []
    problems = run_all.failed_stages(done) + _broken(run_all.invariant_failures(done))
    if args.plot is not None:
        try:
            pictures = plot.write_all(env, args.plot)
        except OSError as e:
            problems.append(f"pictures not written to {args.plot}: {e.strerror or e}")
    _show(args, env, lambda: run_all.text(env, pictures), failed)
    return _exit_rule("all", problems)


def _save_finished_stages(args, cpus, failed):
    """`all` stopped in a stage: keep the stages that finished, in --output
    or a saved file, with the stage that failed named in the result."""
    from . import run_all

    if not failed.finished:
        raise failed  # nothing to keep: --output is left as it was
    env = run_all.envelope(cpus, failed.finished, run_all.verdict_table(failed.finished),
                           failed.warnings, args.quick)
    env["params"].update(failed_stage=failed.stage, error=str(failed.error))
    try:
        if args.output_target is None:
            failed.kept = output.save(env)
        else:
            output.write(env, args.output_target)
            failed.kept = args.output
    except output.OutputFailed as e:
        failed.kept = e.saved
    raise failed


def _exit_rule(command, problems):
    """Exit 1, naming each, when a finished run has problems: a broken
    invariant of the model (conservation, lstats, refcnt: its figures
    cannot be trusted), pictures that could not be drawn."""
    for p in problems:
        print(f"smpnet-bench {command}: {p}", file=sys.stderr)
    return 1 if problems else 0


def _broken(invariants):
    return [f"invariant failed: {f}" for f in invariants]


def _compare_sides(argv):
    """compare's `A1 A2 -- B1 B2`: argparse drops a `--`, so the one that
    splits compare's sides becomes its --vs first."""
    at = argv.index("compare") if "compare" in argv else None
    if at is not None and "--" in argv[at:]:
        i = argv.index("--", at)
        if i > at + 1:   # `compare -- A B`: the usual end of options
            return argv[:i] + ["--vs"] + argv[i + 1:]
    return argv


def cmd_compare(args):
    from .report import compare

    a_paths, b_paths = (args.a, args.b) if args.b else (args.a[:1], args.a[1:])
    if not args.b and len(args.a) != 2:
        raise BadInput("compare: give two results, A.json B.json, or several a side: "
                       "A1.json A2.json -- B1.json B2.json")
    a = compare.pooled([compare.load(x) for x in a_paths])
    b = compare.pooled([compare.load(x) for x in b_paths])
    differ = compare.not_comparable(a, b)   # judged once, for the rows and the notes
    rows = compare.compare(a, b, differ)   # a BadInput when nothing matches
    notes = compare.notes(a, b, rows, differ)
    paths = {"a": [r.path for r in compare.members(a)] if len(a_paths) > 1 else a.path,
             "b": [r.path for r in compare.members(b)] if len(b_paths) > 1 else b.path}
    env = report.envelope("compare", parse_cpus("all"), dict(paths, command=a.command),
                          rows, warnings=notes)
    _show(args, env, lambda: compare.text(rows, a.path, b.path, notes))
    return 0


def _emit(args, env, text):
    """Write --output, then print the text (or the JSON); raise afterwards
    if the file could not be written (the result was saved elsewhere). An
    interrupted run writes nothing, even if its interrupt got lost."""
    process.check_interrupted()
    _show(args, env, text, _save(args, env))


def _save(args, env):
    """Write the result to --output; the OutputFailed to raise later, if any."""
    try:
        output.write(env, args.output_target)  # prepared before the run
    except output.OutputFailed as e:
        return e  # saved elsewhere: still print the result, then say so
    return None


def _show(args, env, text, failed=None):
    """Print the text (or the JSON: not when --output holds it, unless that
    write failed). A reader of stdout that is gone is a
    BrokenPipeError main() answers; a stdout that cannot take it (closed,
    /dev/full) saves the result and says where, as a failed --output does."""
    if args.json and failed is None and getattr(args, "output_target", None) is not None:
        return  # --json --output: the JSON goes to the file alone, once
    try:
        if process.stdout_closed:
            target = getattr(args, "output_target", None)
            if failed is None and target is not None and getattr(target, "named_fd", None) != 1:
                return  # nowhere to print, but --output holds the result
            # (an --output of our stdout went where the closed stdout goes: nowhere)
            raise OSError(errno.EBADF, "stdout is closed")
        print(report.dumps(env) if args.json else _text(args, env, text), flush=True)
    except BrokenPipeError:
        if failed is not None:  # the reader left; the --output failure still counts
            raise failed from None
        raise
    except OSError as e:
        if failed is None:  # a failed --output has saved it already
            saved = output.save(env)
            raise OutputFailed(f"cannot print the result: {e.strerror or e}; "
                               f"{output.saved_text(saved)}", saved) from None
    if failed is not None:
        raise failed


def _text(args, env, text):
    """The text report, narrowed for a mail with --format email."""
    if getattr(args, "format", "text") != "email":
        return text()
    with plaintext.narrow():
        return plaintext.render(text(), env.get("machine"))


def main(argv=None):
    """Run one command; returns its exit code. The first SIGINT, SIGTERM,
    SIGHUP or SIGQUIT stops the run cleanly (workers stopped and reaped,
    exit 130); any more are ignored until that is done. The caller's
    handlers are back when it returns."""
    interrupted = process.interrupted
    interrupted.clear()

    def interrupt(signum, frame):
        if not interrupted:
            interrupted.append(signum)
            raise KeyboardInterrupt

    old = {sig: signal.signal(sig, interrupt) for sig in process.INTERRUPTS}
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(
            _compare_sides(sys.argv[1:] if argv is None else list(argv)))
        if extra:   # argparse finds them at the top: point at the subcommand's help
            where = f"{parser.prog} {args.command}" if getattr(args, "command", None) \
                else parser.prog
            raise BadInput(f"unrecognized arguments: {' '.join(extra)} (see {where} --help)")
        if args.json and args.format != "text":
            raise BadInput(f"--json and --format {args.format}: choose one")
        return args.func(args)
    except SmpnetError as e:
        print(f"smpnet-bench: {e}", file=sys.stderr)
        process.said_interrupted = e.exit_code == 130
        return e.exit_code
    except KeyboardInterrupt:
        print("smpnet-bench: interrupted", file=sys.stderr)
        process.said_interrupted = True
        return 130
    except BrokenPipeError:
        return 0
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        interrupted.clear()


if __name__ == "__main__":
    sys.exit(main())
