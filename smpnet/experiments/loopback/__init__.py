"""The loopback fast path: seed 002's +5 % and its reviewer's stack overflow.

Every emulated CPU runs a tbench-like client and server over the one
loopback device, in the chosen mode; all CPUs share the device's refcnt
line, which netif_rx() writes twice per packet (dev_hold, dev_put) and the
direct path not at all. Each mode runs `repeat` times, interleaved.

With a calibration profile (the `kernel` experiment's), every send and
receive also does the host kernel's per-transaction cost less the model's
own, as real work (measure/calibration.py): the saving of direct delivery
is then weighed against a transaction that costs what the host kernel's
costs.
"""
import statistics
from dataclasses import dataclass
from typing import Optional

from ... import _core
from ...bounds import MAX_PACKETS, MAX_REPEAT
from ...errors import BadInput, RunFailed
from ...experiment import Experiment, Metric, Outcome, Params, add_amount, bounded, parse_list
from ...machine import layout, machine, tsc
from ...machine.cpus import format_cpus
from ...machine.machine import Machine
from ...measure import calibration
from ..common import net
from . import kstack, loopback_rows, seed002
from .loopback_text import plot, text

MODES = tuple(sorted(_core.LOOPBACK_MODES, key=_core.LOOPBACK_MODES.get))
PROTOCOLS = tuple(sorted(_core.LOOPBACK_PROTOS, key=_core.LOOPBACK_PROTOS.get))
STACKS = {"8k": 8192, "16k": 16384}
SIZE = 100
DURATION = 0.2
REPEAT = 8
AA = seed002.AA
# the raw model beside a calibrated run: no stack work
RAW = dict(zip(seed002.RAW, ("netif_rx", "direct")))
MODE_OF = {AA: "netif_rx", **RAW}   # the mode a side runs
# For run-time estimates with --packets: a typical rate (15-19 M packets/s per CPU
# on 2 vCPUs). A slower run keeps the watchdog waiting by its progress count.
TYPICAL_PPS = 1e7
POOL = 16384  # skb heads, at least: see pool_size()


def pool_size(ncpus):
    """Every CPU's backlog full (1001) and its cache full (64), and slack."""
    return max(POOL, ncpus * (_core.NETDEV_MAX_BACKLOG + 1 + 64) + 1024)


def validate(ncpus, packets, duration, size, repeat, protocol, ack_storm, calibrated=False):
    if packets is not None and duration is not None:
        raise BadInput("give --packets or --duration, not both")
    if duration is not None and not 0 < duration <= 3600:
        raise BadInput(f"--duration {duration}: give (0, 3600] seconds")
    if protocol not in PROTOCOLS:
        raise BadInput(f"--protocol {protocol}: choose {', '.join(PROTOCOLS)}")
    if ack_storm and protocol != "ack-every":
        raise BadInput("--ack-storm needs --protocol ack-every: the storm starts from an ACK")
    if ack_storm and calibrated:
        raise BadInput("--calibration sizes seed 002's gain; the storm's verdict is the "
                       "overflow: give one or the other")
    if packets is not None and not ncpus <= packets <= MAX_PACKETS:
        raise BadInput(f"--packets {packets}: give {ncpus} (one per CPU) to {MAX_PACKETS}")
    if not 1 <= size <= 65535:
        raise BadInput(f"--size {size}: give 1 to 65535 bytes")
    if not 1 <= repeat <= MAX_REPEAT:
        raise BadInput(f"--repeat {repeat}: give 1 to {MAX_REPEAT}")


def packet_rate(cal):
    """Packets a second for an estimate: TYPICAL_PPS, or with a calibration
    no more than one packet per charged transaction (the profile's cycles
    per transaction at this TSC): a transaction is several packets, so this
    errs high, as an estimate behind the one-hour rule must."""
    cycles = calibration.tcp_rr_cycles(cal)
    return min(TYPICAL_PPS, tsc.tsc_hz() / cycles) if cycles else TYPICAL_PPS


def estimate_seconds(ncpus, n_modes, repeat, packets=None, duration=None, scaling=False,
                     real_cpus=2, rate=TYPICAL_PPS):
    work = machine.work_seconds(packets, duration or (None if packets else DURATION), rate)
    counts = range(1, ncpus + 1) if scaling else [ncpus]
    return sum(n_modes * repeat * machine.run_seconds(work, k, real_cpus, bool(packets))
               for k in counts)


def default_protocol(ack_storm):
    """tbench's, but for the storm, which starts from an ACK of every segment."""
    return "ack-every" if ack_storm else "tbench"


def has_control(modes, ack_storm):
    """Whether a run adds seed 002's A/A control (netif_rx a second time)."""
    return {"netif_rx", "direct"} <= set(modes) and not ack_storm


def extra_sides(modes, ack_storm, calibrated):
    """The sides a run adds at the verdict's CPU count: the A/A control,
    and with a calibration the raw model's netif_rx and direct."""
    if not has_control(modes, ack_storm):
        return []
    return [AA] + (list(RAW) if calibrated else [])


def run(cpus, modes=MODES, packets=None, duration=None, size=SIZE, protocol=None,
        ack_storm=False, stack="16k", repeat=REPEAT, ncpus=None, oversubscribe=False,
        scaling=False, kernel_cycles=None, progress=None):
    """Returns (rows, verdicts, why there is no verdict or None).
    kernel_cycles: the host kernel's cycles per TCP transaction on one CPU
    (a calibration profile's); None runs the raw model."""
    n = ncpus or len(cpus)
    protocol = protocol or default_protocol(ack_storm)
    validate(n, packets, duration, size, repeat, protocol, ack_storm, kernel_cycles is not None)
    if stack not in STACKS:
        raise BadInput(f"--stack {stack}: choose {' or '.join(STACKS)}")
    if packets is None and duration is None:
        duration = DURATION
    counts = list(range(1, n + 1)) if scaling else [n]
    extra = extra_sides(modes, ack_storm, kernel_cycles is not None)

    def sides(k):   # the added sides right before netif_rx, which runs next to them
        return [x for m in modes for x in ((extra if k == n else []) + [m] if m == "netif_rx"
                                          else [m])]

    # interleaved, each repeat in the reverse order of the one before (A B ..
    # B A), so a drift reaches every mode alike; run r of one mode pairs
    # with run r of another
    plan = [(k, r, mode) for k in counts for r in range(repeat)
            for mode in (sides(k) if r % 2 == 0 else sides(k)[::-1])]
    runs = {(k, mode): [] for k in counts for mode in sides(k)}
    machines, sizing = {}, None

    def one(k, mode, work):
        if k not in machines:
            machines[k] = _open(cpus, k, oversubscribe or k > len(cpus))
        return _one_run(machines[k], MODE_OF.get(mode, mode), packets, duration, size, protocol,
                        ack_storm, STACKS[stack], work)

    try:
        if kernel_cycles is not None:
            # the model's own cost of a transaction, on the verdict's CPU
            # count, in the baseline the host kernel runs (netif_rx)
            if progress:
                progress(0, len(plan) + 1, "sizing the stack work: netif_rx, raw")
            own = one(n, "netif_rx", 0)["cycles_per_transaction"]
            if own is None:
                raise RunFailed("the sizing run (netif_rx, no stack work) completed no "
                                "transaction: nothing to size the stack work against")
            sizing = calibration.stack_work(kernel_cycles, own)
        work = sizing["per_call"] if sizing else 0
        for i, (k, r, mode) in enumerate(plan):
            if progress:
                progress(i + bool(sizing), len(plan) + bool(sizing),
                         f"{mode} on {k} CPU(s) (run {r + 1} of {repeat})")
            runs[(k, mode)].append(one(k, mode, 0 if mode in RAW else work))
        rows = [loopback_rows.row(mode, k, runs[(k, mode)], machines[k])
                for k in counts for mode in sides(k)]
    finally:
        for m in machines.values():
            m.close()
    return (rows,) + seed002.verdicts(rows, runs, n, modes, repeat, ack_storm, sizing)


INVARIANTS = (
    ("conserved", "skbs not conserved"),
    ("lstats_equal_packets", "lstats packets differ from packets sent"),
    ("depth_returns_to_0", "lstats depth did not return to 0"),
    ("refcnt_returns_to_0", "dev->refcnt did not return to 0"),
)


def _progress(m):
    """What the watchdog sees rise while packets move."""
    st = m.region("lo_stats")
    return int(st["xmits"].sum()) + int(st["delivered"].sum())


def invariant_failures(rows):
    """What broke the model's invariants, by mode and CPU count."""
    out = []
    for r in rows:
        held = dict(r, lstats_equal_packets=r["lstats_packets"] == r["packets"])
        out += [f"{r['mode']} on {r['cpus']} CPU(s): {what}"
                for key, what in INVARIANTS if not held[key]]
    return out


def _open(cpus, k, oversubscribe):
    regions = net.regions(pool_size(k), k) + [
        ("net_device", layout.NET_DEVICE, 1), ("lo_stats", layout.LO_STATS, k)]
    real = cpus if k > len(cpus) else cpus[:k]
    return Machine(cpus=real, ncpus=k, oversubscribe=oversubscribe, regions=regions).open()


def _one_run(m, mode, packets, duration, size, protocol, ack_storm, thread_size, work):
    names = m.segment.region_names
    idx = net.indices(m)
    dev, lo = names.index("net_device"), names.index("lo_stats")
    _core.net_init(m.segment.buf, idx, _core.LOCK_ALGOS["qspinlock"])
    m.region("lo_stats")[:] = 0
    m.region("net_device")[:] = 0
    m.lstats[:] = 0
    softirqs0 = m.region("irq")["softirqs"].copy()
    cycles = m.run(_cpu_body, idx, dev, lo, _core.LOOPBACK_MODES[mode],
                   _core.LOOPBACK_PROTOS[protocol], ack_storm, size, packets or 0,
                   duration or 0.0, thread_size, work,
                   expected=machine.work_seconds(packets, duration, TYPICAL_PPS),
                   progress=_progress)
    st = m.region("lo_stats")
    tsc_hz = float(m.header["tsc_hz"])
    xmits = [int(x) for x in st["xmits"]]
    skb = m.region("skb_stats")
    return {
        "cycles": [int(c) for c in cycles],
        "seconds": max(cycles) / tsc_hz,
        "packets": sum(xmits),
        "transactions": int(st["transactions"].sum()),
        "requests": int(st["requests"].sum()), "replies": int(st["replies"].sum()),
        "acks": int(st["acks"].sum()),
        "cycles_per_packet": statistics.median(c / x for c, x in zip(cycles, xmits) if x)
        if any(xmits) else None,
        "cycles_per_transaction": statistics.median(
            c / t for c, t in zip(cycles, st["transactions"]) if t)
        if st["transactions"].any() else None,
        "stack_work_cycles": int(st["stack_work_cycles"].sum()),
        "stack_work_per_call": work,
        "sk_backlogged": int(st["sk_backlogged"].sum()),
        "recursion_drops": int(st["recursion_drops"].sum()),
        "refcnt_atomics": int(st["refcnt_atomics"].sum()),
        "softirqs": int((m.region("irq")["softirqs"] - softirqs0).sum()),
        "backlog_schedules": int(st["softirq_raises"].sum()),
        "alloc_failed": int(skb["alloc_failed"].sum()),
        "direct": int(st["direct"].sum()), "queued": int(st["queued"].sum()),
        "max_depth": int(st["max_depth"].max()),
        "max_rx_nest": int(st["max_rx_nest"].max()),
        "stack_max": int(st["stack_max"].max()),
        "overflow": bool(st["overflow"].any()),
        "overflow_depth": int(st["overflow_depth"].max()),
        **kstack.recorded_oops(st),
        "drops": int(m.softnet["dropped"].sum()),
        "purged": int(st["purged"].sum()),
        "lstats_packets": int(m.lstats["packets"].sum()),
        "lstats_bytes": int(m.lstats["bytes"].sum()),
        "depth_after": [int(d) for d in m.lstats["depth"]],
        "refcnt_after": int(m.region("net_device")[0]["refcnt"]),
        "allocated": int(skb["allocated"].sum()), "freed": int(skb["freed"].sum()),
    }


def _cpu_body(ctx, idx, dev, lo, mode, protocol, ack_storm, size, packets, duration,
              thread_size, work):
    # CPU i sends its share of the packets, in whole transactions
    quota = packets // ctx.nr_cpus + (1 if ctx.cpu < packets % ctx.nr_cpus else 0)
    return _core.loopback_run(ctx.seg, ctx.cpu, idx, dev, lo, mode, protocol, ack_storm,
                              size, quota, duration, thread_size, work)


# ------------------------------------------------------------------ the command

def add_options(p):
    p.add_argument("--mode", default="all", metavar="LIST",
                   help=f"loopback modes: {','.join(MODES)} or all (default)")
    add_amount(p, "--packets", "packets per run, all CPUs together (default: --duration)",
               DURATION)
    p.add_argument("--size", type=bounded("--size"), default=SIZE, metavar="BYTES",
                   help=f"request and reply size (default: {SIZE})")
    p.add_argument("--protocol", default=None, metavar="NAME",
                   help="when the receive path ACKs: tbench (2.6.24's delayed ACKs and socket "
                        "backlog; the default), ack-every (a pure ACK for every data segment, "
                        "from inside the receive: the recursion stress; the default with "
                        "--ack-storm) or no-ack")
    p.add_argument("--ack-storm", action="store_true",
                   help="inject the ACK-of-ACK bug: a transmit in every receive")
    calibration.add_option(p)
    p.add_argument("--stack", choices=tuple(STACKS), default="16k",
                   help="emulated THREAD_SIZE (default: 16k)")
    p.add_argument("--repeat", type=bounded("--repeat"), default=REPEAT, metavar="R",
                   help=f"runs per mode, interleaved (default: {REPEAT})")
    p.add_argument("--scaling", action="store_true",
                   help="run on 1, 2, ... N CPUs: the shared refcnt line's cost as CPUs are added")


@dataclass(frozen=True)
class LoopbackParams(Params):
    cpus: str
    ncpus: int
    mode: list
    packets: Optional[int]
    duration_s: Optional[float]     # None when packets is given
    size: int
    ack_storm: bool
    protocol: str
    calibration: Optional[dict]     # the profile whose kernel costs are charged
    stack: str
    repeat: int
    scaling: bool
    oversubscribe: bool


def params(args, cpus):
    return LoopbackParams(
        cpus=format_cpus(cpus), ncpus=args.ncpus or len(cpus),
        mode=parse_list(args.mode, MODES, "loopback mode"), packets=args.packets,
        duration_s=None if args.packets else (args.duration or DURATION),
        size=args.size, ack_storm=args.ack_storm,
        protocol=args.protocol or default_protocol(args.ack_storm),
        calibration=calibration.from_args(args),
        stack=args.stack, repeat=args.repeat, scaling=args.scaling,
        # loopback runs more emulated CPUs than real ones without being asked
        oversubscribe=args.oversubscribe or (args.ncpus or len(cpus)) > len(cpus))


def seconds(p, cpus):
    # (the A/A control counted at every CPU count: it runs at one; an estimate errs high)
    extra = len(extra_sides(p.mode, p.ack_storm, bool(p.calibration)))
    return estimate_seconds(p.ncpus, len(p.mode) + extra + bool(p.calibration),
                            p.repeat, p.packets, p.duration_s, p.scaling, len(cpus),
                            packet_rate(p.calibration))


def _run(cpus, p, progress=None):
    rows, verdicts, why_not = run(
        cpus, p.mode, packets=p.packets, duration=p.duration_s, size=p.size,
        protocol=p.protocol, ack_storm=p.ack_storm, stack=p.stack,
        repeat=p.repeat, ncpus=p.ncpus, oversubscribe=p.oversubscribe,
        scaling=p.scaling, kernel_cycles=calibration.tcp_rr_cycles(p.calibration),
        progress=progress)
    seed002.name_the_cost(verdicts, p.calibration)
    return Outcome(p.record(), rows, verdicts, [f"no verdict: {why_not}"] if why_not else [])


def plan(cpus, quick):
    return LoopbackParams(cpus=format_cpus(cpus), ncpus=len(cpus), mode=list(MODES),
                          packets=None, duration_s=0.1 if quick else 0.2, size=SIZE,
                          ack_storm=False, protocol="tbench", calibration=None, stack="16k",
                          repeat=6 if quick else 8, scaling=True, oversubscribe=False)


EXPERIMENT = Experiment(
    name="loopback",
    help="the loopback fast path (seed 002: +5 %% and the stack overflow)",
    description="Every emulated CPU runs a tbench-like client and server over the one "
                "loopback device, per mode: netif_rx (2008), direct (the patch, with its "
                "depth guard), direct-unguarded (the reviewer's case). Ends with seed "
                "002's verdict; with --ack-storm, the overflow verdict.",
    add_options=add_options, params=params, seconds=seconds, run=_run, text=text,
    metric=Metric(("mode", "cpus"), "pps", "pps_samples", None, None),
    plan=plan, calibrated=True, seeds=("002",), invariant_failures=invariant_failures, plot=plot,
)
