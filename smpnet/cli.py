"""smpnet-bench: the command line. `smpnet-bench --help` lists the subcommands.

Exit codes: 0 ok; 1 the run failed (a worker died); 2 bad input (one line on
stderr); 130 interrupted.
"""
import argparse
import errno
import signal
import sys

from . import __version__, entry, output, report
from .cpus import format_cpus, parse_cpus
from .errors import BadInput, OutputFailed, SmpnetError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message):
        raise BadInput(f"{message} (see {self.prog} --help)")


def _bounded(option):
    """The argparse type of a numeric option: its bound from bounds.BOUNDS."""
    from . import bounds

    def check(text):
        try:
            return bounds.parse(option, text)
        except BadInput as e:  # argparse puts "argument --x: " before it
            raise argparse.ArgumentTypeError(str(e)) from None
    return check


def _machine_options(p):
    p.add_argument("--ncpus", type=_bounded("--ncpus"), metavar="N",
                   help="emulated CPUs (default: one per selected real CPU)")
    p.add_argument("--oversubscribe", action="store_true",
                   help="allow more emulated CPUs than real ones (timings then not valid)")
    p.add_argument("--long", action="store_true",
                   help="allow a run estimated at over an hour (refused without it)")


def _common(p):
    p.add_argument("--cpus", default="all", metavar="LIST",
                   help="real CPUs to use: 0,1 or 0-3 or all (default: all allowed)")
    p.add_argument("--json", action="store_true", help="print the JSON result to stdout")
    p.add_argument("--output", metavar="PATH", help="also write the JSON result to PATH")


def build_parser():
    parser = _Parser(prog="smpnet-bench",
                     description="Reproduce kernel per-CPU and locking patches as "
                                 "before/after experiments, in user space.")
    parser.add_argument("--version", action="version", version=f"smpnet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("info", help="machine facts and what makes timings unreliable here",
                       description="CPU, topology, TSC, hypervisor, governor, isolation, "
                                   "versions, and warnings (like pyperf system show).")
    _common(p)
    p.set_defaults(func=cmd_info)

    from .scenarios import locks
    p = sub.add_parser(
        "locks", help="spinlock and IRQ-flag costs (seed 003: irqsave vs irq)",
        description="The time_bench_sample suite, uncontended, on the first selected CPU, "
                    "in time_bench's line format, then a summary and seed 003's verdict. "
                    "With --contended, every selected CPU hammers one shared lock instead.")
    _common(p)
    _machine_options(p)
    p.add_argument("--algo", default="qspinlock", metavar="LIST",
                   help=f"lock algorithms: {','.join(locks.ALGOS)} or all (default: qspinlock)")
    p.add_argument("--variant", default="all", metavar="LIST",
                   help=f"lock variants: {','.join(locks.VARIANTS)} or all (default: all)")
    p.add_argument("--loops", type=_bounded("--loops"), metavar="N",
                   help="ops per round (default: calibrated to 10 ms per round)")
    p.add_argument("--rounds", type=_bounded("--rounds"), default=10, metavar="R",
                   help="measured rounds per test, after one warm-up round (default: 10)")
    p.add_argument("--restore", choices=locks.RESTORES, default="sti",
                   help="local_irq_restore: sti = Linux 5.12+ (default), popf = older kernels")
    p.add_argument("--check", action="store_true",
                   help="run the lock/IRQ checker and report what it finds")
    p.add_argument("--contended", action="store_true",
                   help="every selected CPU hammers one shared lock")
    p.add_argument("--hold-cycles", type=_bounded("--hold-cycles"), default=0, metavar="N",
                   help="with --contended: critical-section length in TSC cycles (default: 0)")
    p.add_argument("--duration", type=_bounded("--duration"), default=0.5, metavar="S",
                   help="with --contended: seconds per algorithm and variant (default: 0.5)")
    p.set_defaults(func=cmd_locks)

    from .scenarios import defer
    p = sub.add_parser(
        "defer", help="the skb defer-free list end to end (seed 003 in its setting)",
        description="RX CPUs receive skbs in NAPI polls and hand them to consumer CPUs, "
                    "which free them with skb_attempt_defer_free(); the RX CPUs flush their "
                    "defer lists in net_rx_action(). Each lock strategy runs --repeat times, "
                    "interleaved; ends with seed 003's two verdicts.")
    _common(p)
    _machine_options(p)
    p.add_argument("--strategy", default="all", metavar="LIST",
                   help=f"defer list strategies: {','.join(defer.STRATEGIES)} or all (default)")
    p.add_argument("--rx-cpus", type=_bounded("--rx-cpus"), metavar="N",
                   help="how many emulated CPUs receive; the rest consume (default: half)")
    amount = p.add_mutually_exclusive_group()
    amount.add_argument("--skbs", type=_bounded("--skbs"), metavar="N",
                        help="skbs to receive per run (default: run for --duration)")
    amount.add_argument("--duration", type=_bounded("--duration"), metavar="S",
                        help=f"seconds per run (default: {defer.DURATION})")
    p.add_argument("--defer-max", type=_bounded("--defer-max"), default=defer.DEFER_MAX, metavar="N",
                   help=f"net.core.skb_defer_max (default: {defer.DEFER_MAX})")
    p.add_argument("--batch", type=_bounded("--batch"), default=defer.BATCH, metavar="N",
                   help=f"skbs a consumer takes from a ring at a time (default: {defer.BATCH})")
    p.add_argument("--repeat", type=_bounded("--repeat"), default=defer.REPEAT, metavar="R",
                   help=f"runs per strategy, interleaved (default: {defer.REPEAT})")
    p.add_argument("--lock", default="qspinlock", metavar="ALGO",
                   help="algorithm of defer_lock and the pool lock (default: qspinlock)")
    p.add_argument("--check", action="store_true",
                   help="run the lock/IRQ checker over every lock and flush")
    p.set_defaults(func=cmd_defer)

    from .scenarios import loopback
    p = sub.add_parser(
        "loopback", help="the loopback fast path (seed 002: +5 %% and the stack overflow)",
        description="Every emulated CPU runs a tbench-like client and server over the one "
                    "loopback device, per mode: netif_rx (2008), direct (the patch, with its "
                    "depth guard), direct-unguarded (the reviewer's case). Ends with seed "
                    "002's verdict; with --ack-storm, the overflow verdict.")
    _common(p)
    _machine_options(p)
    p.add_argument("--mode", default="all", metavar="LIST",
                   help=f"loopback modes: {','.join(loopback.MODES)} or all (default)")
    amount = p.add_mutually_exclusive_group()
    amount.add_argument("--packets", type=_bounded("--packets"), metavar="N",
                        help="packets per run, all CPUs together (default: --duration)")
    amount.add_argument("--duration", type=_bounded("--duration"), metavar="S",
                        help=f"seconds per run (default: {loopback.DURATION})")
    p.add_argument("--size", type=_bounded("--size"), default=loopback.SIZE, metavar="BYTES",
                   help=f"request and reply size (default: {loopback.SIZE})")
    ack = p.add_mutually_exclusive_group()
    ack.add_argument("--ack-in-rx", dest="ack_in_rx", action="store_true", default=True,
                     help="the receive path ACKs requests and replies (default)")
    ack.add_argument("--no-ack-in-rx", dest="ack_in_rx", action="store_false",
                     help="no ACK from the receive path: no recursion")
    p.add_argument("--ack-storm", action="store_true",
                   help="inject the ACK-of-ACK bug: a transmit in every receive")
    p.add_argument("--stack", choices=tuple(loopback.STACKS), default="16k",
                   help="emulated THREAD_SIZE (default: 16k)")
    p.add_argument("--repeat", type=_bounded("--repeat"), default=loopback.REPEAT, metavar="R",
                   help=f"runs per mode, interleaved (default: {loopback.REPEAT})")
    p.add_argument("--scaling", action="store_true",
                   help="run on 1, 2, ... N CPUs: the shared refcnt line's cost as CPUs are added")
    p.set_defaults(func=cmd_loopback)

    from .scenarios import arp
    p = sub.add_parser(
        "arp", help="ARP resolution latency (seed 000: the first ping, timer vs immediate)",
        description="Two emulated hosts on an emulated Ethernet. Each trial deletes host A's "
                    "neighbour entry (arp -d), then pings host B (ping -c COUNT), with the "
                    "first ARP request sent from the timer at the next tick (timer, before "
                    "the patch) or at once (immediate, after).")
    _common(p)
    _machine_options(p)
    p.add_argument("--probe", default="all", metavar="LIST",
                   help="probe modes: timer,immediate or all (default)")
    p.add_argument("--hz", type=_bounded("--hz"), default=100, metavar="N",
                   help=f"the kernel's HZ: {', '.join(map(str, arp.HZ_VALUES))} (default: 100)")
    p.add_argument("--trials", type=_bounded("--trials"), metavar="N",
                   help=f"arp -d + ping rounds per mode (default: {arp.TRIALS}, "
                        f"{arp.PEER_DOWN_TRIALS} with --peer-down)")
    p.add_argument("--count", type=_bounded("--count"), default=arp.COUNT, metavar="N",
                   help=f"pings per trial, as ping -c (default: {arp.COUNT})")
    p.add_argument("--peer-down", action="store_true",
                   help="host B answers nothing: 3 probes, then FAILED and an error to each "
                        "queued ping (about 3 s per trial)")
    p.set_defaults(func=cmd_arp)

    p = sub.add_parser(
        "all", help="every experiment, and a verdict per seed",
        description="info, locks, locks --contended (by CPU count), defer, loopback "
                    "(by CPU count) and arp, then a verdict table: each seed's claim, its "
                    "original machine and number, the number measured here with its interval, "
                    "and reproduced / not reproduced / no measurable difference.")
    p.add_argument("--cpus", default="all", metavar="LIST",
                   help="real CPUs to use: 0,1 or 0-3 or all (default: all allowed)")
    p.add_argument("--quick", action="store_true",
                   help="fewer rounds and shorter runs: under a minute on 2 CPUs")
    p.add_argument("--json", action="store_true", help="print the JSON result to stdout")
    p.add_argument("--output", metavar="PATH", help="also write the JSON result to PATH")
    p.add_argument("--plot", metavar="DIR",
                   help="write PNG pictures of each experiment to DIR (needs matplotlib)")
    p.set_defaults(func=cmd_all)

    from . import compare
    p = sub.add_parser(
        "compare", help="compare two results of the same command",
        description="For each result row of A and B (matched by what identifies it; an "
                    "`all` result stage by stage): both values, the ratio B/A, and whether "
                    "the difference exceeds the noise of both runs. Reads results of info, "
                    f"locks, defer, loopback, arp and all, up to {compare.MAX_BYTES >> 20} "
                    "MiB each; anything else is one line and exit code 2. "
                    "See docs/compare.md.")
    p.add_argument("a", metavar="A.json")
    p.add_argument("b", metavar="B.json")
    p.add_argument("--json", action="store_true",
                   help="print the comparison as JSON (the common envelope; results are "
                        "the rows)")
    p.set_defaults(func=cmd_compare)
    return parser


def cmd_info(args):
    from . import sysinfo
    from .time_bench import time_bench

    cpus = parse_cpus(args.cpus)
    args.output_target = output.prepare(args.output)
    facts = report.machine(cpus)
    warnings = sysinfo.timing_warnings(facts)
    # What a timestamp and an empty loop iteration cost here, measured now:
    # every later figure carries them.
    timers = [time_bench(t) for t in ("for_loop", "tsc_read")]
    results = [{"test": r.test, "cycles": r.cycles, "cycles_min": r.cycles_min,
                "cycles_max": r.cycles_max, "ns": r.ns, "loops": r.loops,
                "rounds": r.rounds} for r in timers]
    env = report.envelope("info", cpus, {"cpus": format_cpus(cpus)}, results,
                          warnings=warnings, facts=facts)
    _emit(args, env, lambda: report.info_text(facts, timers, warnings))
    return 0


def cmd_locks(args):
    from . import bounds, sysinfo
    from .scenarios import locks

    cpus = parse_cpus(args.cpus)
    algos = locks.parse_list(args.algo, locks.ALGOS, "lock algorithm")
    variants = locks.parse_list(args.variant, locks.VARIANTS, "lock variant")
    args.output_target = output.prepare(args.output)
    params = {"cpus": format_cpus(cpus), "algo": algos, "variant": variants,
              "restore": args.restore, "check": args.check, "contended": args.contended}
    facts = report.machine(cpus)
    oversubscribed = (args.ncpus or len(cpus)) > len(cpus)
    warnings = sysinfo.timing_warnings(facts, oversubscribed=oversubscribed)
    if args.check:
        warnings.append("the checker is on: timings include its checks")
    verdicts = []
    if args.contended:
        bounds.check_run_time(locks.contended_seconds(len(algos) * len(variants), args.duration,
                                                      args.ncpus or len(cpus), len(cpus)),
                              args.long)
        params.update(duration_s=args.duration, hold_cycles=args.hold_cycles,
                      ncpus=args.ncpus or len(cpus))
        rows, reports = locks.run_contended(
            cpus, algos, variants, duration=args.duration, hold_cycles=args.hold_cycles,
            restore=args.restore, check=args.check, ncpus=args.ncpus,
            oversubscribe=args.oversubscribe, progress=locks.progress_printer("locks"))
        text = lambda: report.locks_contended_text(rows, reports, args)  # noqa: E731
    else:
        if args.ncpus or args.oversubscribe:
            raise BadInput("--ncpus and --oversubscribe apply to --contended runs only")
        bounds.check_run_time(locks.suite_seconds(len(locks.suite_plan(algos, variants)),
                                                  args.loops, args.rounds), args.long)
        params.update(loops=args.loops, rounds=args.rounds, cpu=cpus[0])
        rows, reports = locks.run_suite(
            cpus[0], algos, variants, loops=args.loops, rounds=args.rounds,
            restore=args.restore, check=args.check, progress=locks.progress_printer("locks"))
        algo = "qspinlock" if "qspinlock" in algos else algos[0]
        v = locks.seed_003_verdict(rows, algo)
        if v:
            verdicts.append(v)
        text = lambda: report.locks_suite_text(rows, reports, verdicts, args, cpus[0])  # noqa: E731
    if args.check:
        params["checker_reports"] = reports
    env = report.envelope("locks", cpus, params, rows, verdicts, warnings, facts=facts)
    _emit(args, env, lambda: text() + report.warnings_text(warnings))
    return _exit_rule("locks", _broken(locks.invariant_failures(rows)))


def cmd_defer(args):
    from . import bounds, sysinfo
    from .scenarios import defer, locks

    cpus = parse_cpus(args.cpus)
    strategies = locks.parse_list(args.strategy, defer.STRATEGIES, "defer strategy")
    if args.lock not in locks.ALGOS:
        raise BadInput(f"--lock takes one lock algorithm: {', '.join(locks.ALGOS)}")
    args.output_target = output.prepare(args.output)
    ncpus = args.ncpus or len(cpus)
    bounds.check_run_time(defer.estimate_seconds(len(strategies), args.repeat, args.skbs,
                                                 args.duration, ncpus, len(cpus)),
                          args.long)
    facts = report.machine(cpus)
    warnings = sysinfo.timing_warnings(facts, oversubscribed=ncpus > len(cpus))
    if args.check:
        warnings.append("the checker is on: timings include its checks")
    rows, verdicts, why_not = defer.run(
        cpus, strategies, rx=args.rx_cpus, skbs=args.skbs, duration=args.duration,
        defer_max=args.defer_max, batch=args.batch, repeat=args.repeat, check=args.check,
        ncpus=args.ncpus, oversubscribe=args.oversubscribe, lock_algo=args.lock,
        progress=locks.progress_printer("defer"))
    params = {"cpus": format_cpus(cpus), "ncpus": ncpus, "rx_cpus": rows[0]["rx_cpus"],
              "strategy": strategies, "skbs": args.skbs,
              "duration_s": None if args.skbs else (args.duration or defer.DURATION),
              "defer_max": args.defer_max, "batch": args.batch, "repeat": args.repeat,
              "lock": args.lock, "check": args.check}
    if why_not:
        warnings.append(f"no verdict: {why_not}")
    env = report.envelope("defer", cpus, params, rows, verdicts, warnings, facts=facts)
    _emit(args, env, lambda: report.defer_text(rows, verdicts, params, args.check)
          + report.warnings_text(warnings))
    return _exit_rule("defer", _broken(defer.invariant_failures(rows)))


def cmd_loopback(args):
    from . import bounds, sysinfo
    from .scenarios import locks, loopback

    cpus = parse_cpus(args.cpus)
    modes = locks.parse_list(args.mode, loopback.MODES, "loopback mode")
    args.output_target = output.prepare(args.output)
    ncpus = args.ncpus or len(cpus)
    bounds.check_run_time(loopback.estimate_seconds(ncpus, len(modes), args.repeat, args.packets,
                                                    args.duration, args.scaling, len(cpus)),
                          args.long)
    facts = report.machine(cpus)
    warnings = sysinfo.timing_warnings(facts, oversubscribed=ncpus > len(cpus))
    rows, verdicts, why_not = loopback.run(
        cpus, modes, packets=args.packets, duration=args.duration, size=args.size,
        ack_in_rx=args.ack_in_rx, ack_storm=args.ack_storm, stack=args.stack,
        repeat=args.repeat, ncpus=args.ncpus, oversubscribe=args.oversubscribe,
        scaling=args.scaling, progress=locks.progress_printer("loopback"))
    if why_not:
        warnings.append(f"no verdict: {why_not}")
    params = {"cpus": format_cpus(cpus), "ncpus": ncpus, "mode": modes,
              "packets": args.packets,
              "duration_s": None if args.packets else (args.duration or loopback.DURATION),
              "size": args.size, "ack_in_rx": args.ack_in_rx, "ack_storm": args.ack_storm,
              "stack": args.stack, "repeat": args.repeat, "scaling": args.scaling}
    env = report.envelope("loopback", cpus, params, rows, verdicts, warnings, facts=facts)
    _emit(args, env, lambda: report.loopback_text(rows, verdicts, params)
          + report.warnings_text(warnings))
    return _exit_rule("loopback", _broken(loopback.invariant_failures(rows)))


def cmd_arp(args):
    from . import bounds, sysinfo
    from .scenarios import arp, locks

    cpus = parse_cpus(args.cpus)
    probes = locks.parse_list(args.probe, arp.PROBES, "probe mode")
    args.output_target = output.prepare(args.output)
    if args.ncpus not in (None, 2):
        raise BadInput("the ARP experiment runs two hosts: --ncpus 2 or nothing")
    trials = arp.default_trials(args.trials, args.peer_down)
    arp.validate(args.hz, trials, args.count, args.peer_down)
    bounds.check_run_time(len(probes) * arp.probe_seconds(args.hz, trials, args.count,
                                                          args.peer_down),
                          args.long)
    facts = report.machine(cpus)
    oversubscribed = len(cpus) < 2
    if oversubscribed and not args.oversubscribe:
        raise BadInput("the ARP experiment needs 2 CPUs, one per host "
                       "(with one real CPU: --ncpus 2 --oversubscribe)")
    warnings = sysinfo.timing_warnings(facts, oversubscribed=oversubscribed)
    rows, verdicts, why_not, transcripts = arp.run(
        cpus, probes, hz=args.hz, trials=args.trials, count=args.count,
        peer_down=args.peer_down, ncpus=2, oversubscribe=args.oversubscribe,
        progress=locks.progress_printer("arp"))
    if why_not:
        warnings.append(f"no verdict: {why_not}")
    params = {"cpus": format_cpus(cpus), "probe": probes, "hz": args.hz,
              "trials": rows[0]["trials"], "count": args.count, "peer_down": args.peer_down}
    env = report.envelope("arp", cpus, params, rows, verdicts, warnings, facts=facts)
    _emit(args, env, lambda: report.arp_text(rows, verdicts, transcripts, params)
          + report.warnings_text(warnings))
    return 0


def cmd_all(args):
    from . import plot, suite

    cpus = parse_cpus(args.cpus)
    args.output_target = output.prepare(args.output)
    if args.plot is not None:
        plot.require()
        plot.check_dir(args.plot)
    try:
        stages, verdicts, warnings = suite.run(cpus, quick=args.quick)
    except suite.StageFailed as e:
        _save_finished_stages(args, cpus, e)
    env = suite.envelope(cpus, stages, verdicts, warnings, args.quick)
    # The JSON first: a picture that cannot be drawn must not lose the run.
    failed = _save(args, env)
    pictures, problems = [], _broken(suite.invariant_failures(stages))
    if args.plot is not None:
        try:
            pictures = plot.write_all(env, args.plot)
        except OSError as e:
            problems.append(f"pictures not written to {args.plot}: {e.strerror or e}")

    def text():
        lines = [f"smpnet-bench all{' --quick' if args.quick else ''} on CPUs "
                 f"{format_cpus(cpus)}: {len(stages)} stages", ""]
        lines.append(suite.verdict_text(verdicts))
        lines.append("")
        lines.append("The rule: reproduced when the 95 % interval lies on the side of zero "
                     "the seed claims (for 002, a ratio above 1); no measurable difference "
                     "when it contains zero; not reproduced when it lies on the other side.")
        for v in verdicts:
            for d in v.get("details", []):
                lines.append(f"  seed {d['seed']} ({d['stage']}): {d['claim']} -> {d['verdict']}")
        if pictures:
            lines.append("")
            lines.append("Pictures: " + ", ".join(pictures))
        return "\n".join(lines) + report.warnings_text(env["warnings"])

    _show(args, env, text, failed)
    return _exit_rule("all", problems)


def _save_finished_stages(args, cpus, failed):
    """`all` stopped in a stage: keep the stages that finished, in --output
    or a saved file, with the stage that failed named in the result."""
    from . import suite

    if not failed.finished:
        raise failed  # nothing to keep: --output is left as it was
    env = suite.envelope(cpus, failed.finished, suite.verdict_table(failed.finished),
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


def cmd_compare(args):
    from . import compare

    a, b = compare.load(args.a), compare.load(args.b)
    rows = compare.compare(a, b)   # a BadInput when nothing matches
    notes = compare.notes(a, b, rows)
    env = report.envelope("compare", parse_cpus("all"), {"a": a.path, "b": b.path,
                                                         "command": a.command},
                          rows, warnings=notes)
    _show(args, env, lambda: compare.text(rows, args.a, args.b, notes))
    return 0


def _emit(args, env, text):
    """Write --output, then print the text (or the JSON); raise afterwards
    if the file could not be written (the result was saved elsewhere)."""
    _show(args, env, text, _save(args, env))


def _save(args, env):
    """Write the result to --output; the OutputFailed to raise later, if any."""
    try:
        output.write(env, args.output_target)  # prepared before the run
    except output.OutputFailed as e:
        return e  # saved elsewhere: still print the result, then say so
    return None


def _show(args, env, text, failed=None):
    """Print the text (or the JSON). A reader of stdout that is gone is a
    BrokenPipeError main() answers; a stdout that cannot take it (closed,
    /dev/full) saves the result and says where, as a failed --output does."""
    try:
        if entry.stdout_closed:
            if failed is None and getattr(args, "output", None):
                return  # nowhere to print, but --output holds the result
            raise OSError(errno.EBADF, "stdout is closed")
        print(report.dumps(env) if args.json else text(), flush=True)
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


def main(argv=None):
    """Run one command; returns its exit code. The first SIGINT, SIGTERM,
    SIGHUP or SIGQUIT stops the run cleanly (workers stopped and reaped,
    exit 130); any more are ignored until that is done. The caller's
    handlers are back when it returns."""
    interrupted = []

    def interrupt(signum, frame):
        if not interrupted:
            interrupted.append(signum)
            raise KeyboardInterrupt

    old = {sig: signal.signal(sig, interrupt) for sig in entry.INTERRUPTS}
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        return args.func(args)
    except SmpnetError as e:
        print(f"smpnet-bench: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("smpnet-bench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
