"""info: the machine's facts, what makes timings unreliable here (like
pyperf system show), and what a timestamp and an empty loop iteration cost,
measured now: every later figure carries them."""
import textwrap
from dataclasses import dataclass
from typing import Optional

from ..experiment import Experiment, Metric, Outcome, Params
from ..machine import kernel_build
from ..machine.cpus import format_cpus
from ..measure.time_bench import time_bench
from .common import bpf

TIMERS = ("for_loop", "tsc_read")


@dataclass(frozen=True)
class InfoParams(Params):
    cpus: str
    # None where `smpnet-bench kernel` can time the kernel's own lock and
    # atomics here, else why not (one BPF program loaded and closed)
    kernel_referee_refused: Optional[str]


def params(args, cpus):
    return InfoParams(cpus=format_cpus(cpus), kernel_referee_refused=bpf.refused())


def run(cpus, p, progress=None):
    rows = []
    for r in (time_bench(t) for t in TIMERS):
        rows.append({"test": r.test, "cycles": r.cycles, "cycles_min": r.cycles_min,
                     "cycles_max": r.cycles_max, "ns": r.ns, "loops": r.loops,
                     "rounds": r.rounds})
    return Outcome(p.record(), rows)


def text(env, extra):
    f, warnings = env["machine"], env["warnings"]

    def cpulist(c):
        return format_cpus(c) if c else "none"

    siblings = "; ".join(format_cpus(g) for g in f["smt_siblings"]) or "none among the selected CPUs"
    nodes = ", ".join(f"node{n}: {format_cpus(c)}"
                      for n, c in sorted(f["numa_nodes"].items())) or "unknown"
    govs = sorted(set(f["governor"].values()))
    turbo = {True: "on", False: "off", None: "unknown"}[f["turbo"]]
    facts = [
        ("CPU model", f["cpu_model"]),
        ("Architecture", f["arch"]),
        ("Allowed CPUs", cpulist(f["allowed_cpus"])),
        ("Selected CPUs", cpulist(f["selected_cpus"])),
        ("SMT siblings", siblings),
        ("NUMA nodes", nodes),
        ("TSC", f"{f['tsc_hz'] / 1e6:.3f} MHz ({f['tsc_source']})"),
        ("CPU flags", " ".join(f["cpu_flags"]) or "none of interest"),
        ("Hypervisor", f["hypervisor"] or "none"),
        ("Governor", ", ".join(govs) if govs else "no cpufreq"),
        ("Turbo", turbo),
        ("isolcpus", cpulist(f["isolcpus"])),
        ("nohz_full", cpulist(f["nohz_full"])),
        ("Kernel", f["kernel"]),
        ("Kernel's locks", kernel_build.describe(f["kernel_build"]) if "kernel_build" in f
         else "not recorded"),
        ("Kernel's lock", (f"{f['kernel_lock']['algo']} ({f['kernel_lock']['why']}); "
                           "--algo host runs it") if f.get("kernel_lock") else "not known"),
        ("Kernel referee", env["params"]["kernel_referee_refused"] or
         "available: `smpnet-bench kernel` times the kernel's own lock pair and atomics "
         "beside the model's"),
        ("Return thunk", "; ".join(f"{k}: {v}" for k, v in
                                   f.get("kernel_build", {}).get("return_thunk", {}).items())
         or "not reported"),
        ("Python", f["python"]),
        ("Cython", f"{f['cython']} (built with)"),
        ("numpy", f["numpy"]),
        ("psutil", f["psutil"] or "not installed"),
        ("smpnet", f["smpnet"]),
    ]
    width = max(len(k) for k, _ in facts)
    # long values (the CPU flags, the kernel's locks) wrap under their column
    lines = [textwrap.fill(f"{k.ljust(width)}  {v}", 80, subsequent_indent=" " * (width + 2),
                           break_on_hyphens=False) for k, v in facts]
    lines.append("")
    lines.append("Timer costs, measured now (median of rounds, per iteration):")
    for r in env["results"]:
        lines.append(f"  {r['test']:<9} {r['cycles']:8.2f} cycles  {r['ns']:8.3f} ns  "
                     f"(min {r['cycles_min']:.2f}, max {r['cycles_max']:.2f} cycles; "
                     f"{r['rounds']} rounds of {r['loops']} loops)")
    lines.append("")
    if warnings:
        lines.append("Warnings (timings on this machine are less reliable):")
        lines.extend(f"  - {w}" for w in warnings)
    else:
        lines.append("No warnings: this machine is set up for stable timings.")
    return "\n".join(lines)


EXPERIMENT = Experiment(
    name="info",
    help="machine facts and what makes timings unreliable here",
    description="CPU, topology, TSC, hypervisor, governor, isolation, versions, and "
                "warnings (like pyperf system show).",
    add_options=lambda p: None, params=params, seconds=lambda p, cpus: 0.5, run=run,
    text=text, metric=Metric(("test",), "cycles", None, "cycles_min", "cycles_max"),
    machine_options=False, plan=lambda cpus, quick: params(None, cpus),
    own_warnings=True,
)
