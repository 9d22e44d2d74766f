"""smpnet-bench: the command line. `smpnet-bench --help` lists the subcommands.

Exit codes: 0 ok; 1 the run failed (a worker died); 2 bad input (one line on
stderr); 130 interrupted.
"""
import argparse
import signal
import sys

from . import __version__, report
from .cpus import allowed_cpus, format_cpus, parse_cpus
from .errors import BadInput, SmpnetError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message):
        raise BadInput(f"{message} (see {self.prog} --help)")


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
    return parser


def cmd_info(args):
    from . import sysinfo
    from .time_bench import time_bench

    cpus = parse_cpus(args.cpus)
    report.check_output_path(args.output)
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
    _emit(args, env, lambda: _info_text(facts, timers, warnings))
    return 0


def _info_text(f, timers, warnings):
    def cpulist(c):
        return format_cpus(c) if c else "none"

    siblings = "; ".join(format_cpus(g) for g in f["smt_siblings"]) or "none among the selected CPUs"
    nodes = ", ".join(f"node{n}: {format_cpus(c)}" for n, c in sorted(f["numa_nodes"].items())) or "unknown"
    govs = sorted(set(f["governor"].values()))
    turbo = {True: "on", False: "off", None: "unknown"}[f["turbo"]]
    tsc = f"{f['tsc_hz'] / 1e6:.3f} MHz ({f['tsc_source']})"
    rows = [
        ("CPU model", f["cpu_model"]),
        ("Architecture", f["arch"]),
        ("Allowed CPUs", cpulist(f["allowed_cpus"])),
        ("Selected CPUs", cpulist(f["selected_cpus"])),
        ("SMT siblings", siblings),
        ("NUMA nodes", nodes),
        ("TSC", tsc),
        ("CPU flags", " ".join(f["cpu_flags"]) or "none of interest"),
        ("Hypervisor", f["hypervisor"] or "none"),
        ("Governor", ", ".join(govs) if govs else "no cpufreq"),
        ("Turbo", turbo),
        ("isolcpus", cpulist(f["isolcpus"])),
        ("nohz_full", cpulist(f["nohz_full"])),
        ("Kernel", f["kernel"]),
        ("Python", f["python"]),
        ("Cython", f"{f['cython']} (built with)"),
        ("numpy", f["numpy"]),
        ("psutil", f["psutil"] or "not installed"),
        ("smpnet", f["smpnet"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines.append("")
    lines.append("Timer costs, measured now (median of rounds, per iteration):")
    for r in timers:
        lines.append(f"  {r.test:<9} {r.cycles:8.2f} cycles  {r.ns:8.3f} ns  "
                     f"(min {r.cycles_min:.2f}, max {r.cycles_max:.2f} cycles; "
                     f"{r.rounds} rounds of {r.loops} loops)")
    lines.append("")
    if warnings:
        lines.append("Warnings (timings on this machine are less reliable):")
        lines.extend(f"  - {w}" for w in warnings)
    else:
        lines.append("No warnings: this machine is set up for stable timings.")
    return "\n".join(lines)


def _emit(args, env, text):
    if args.output:
        report.write_json(env, args.output)
    if args.json:
        print(report.dumps(env))
    else:
        print(text())


def main(argv=None):
    parser = build_parser()
    # SIGTERM ends a run the way Ctrl-C does: workers stopped, segment removed.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
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


if __name__ == "__main__":
    sys.exit(main())
