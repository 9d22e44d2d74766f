"""The defer-free list, end to end: seed 003 in its setting.

RX CPUs run NAPI polls that receive packets (allocate skbs) and hand them to
consumer CPUs (the socket owners) through SPSC rings; the consumers read and
free them with skb_attempt_defer_free(), which sends each skb back to its RX
CPU's defer list; the RX CPU's net_rx_action() flushes the list. Each lock
strategy of the list's history runs `repeat` times, interleaved, so that the
spread between runs is the noise against which strategies are compared.
"""
from dataclasses import dataclass
from typing import Optional

from ... import _core
from ...bounds import MAX_DEFER_MAX, MAX_REPEAT, MAX_SKBS
from ...errors import BadInput, RunFailed
from ...experiment import Experiment, Metric, Outcome, Params, add_amount, bounded, parse_list
from ...machine import layout, machine, tsc
from ...machine.cpus import format_cpus
from ...machine.machine import Machine
from ...measure import stats
from ...seeds import SEED_003_RATE
from ..common import lockbench, lockpairs, lockopts, net
from . import defer_rows
from .defer_ipi import AA, MEASURED, ipi_charges, ipi_figures, ipi_wake, verdict_point
from .defer_text import plot, text

STRATEGIES = net.STRATEGIES
DEFER_MAX = _core.NET_CORE_MODEL["skb_defer_max"]   # sysctl (128 since late 2025)
BATCH = 16
REPEAT = 8
DURATION = 0.3
# For run-time estimates with --skbs: a typical rate (about 20 M skbs/s on
# 2 vCPUs). A slower run (the checker on, oversubscribed) keeps the watchdog
# waiting by its progress count.
TYPICAL_SKBS_PER_S = 1e7
STRATEGY_OF = {AA: "irq"}   # the strategy a side runs
# seed 003's per-op cost, uncontended: its two variants, irqsave's control and the A/A
OP_VARIANTS = ["irq", "irqsave"]
OP_PLAN = lockbench.suite_plan(["qspinlock"], OP_VARIANTS, locks_only=True)
OP_ROUNDS = 20   # 10 blocks of two rounds, as locks


def pool_size(ncpus, n_rx, n_consumers, defer_max):
    """Enough heads that the pool never runs dry: every ring full, every
    defer list full, every cache full, and slack."""
    return (n_rx * n_consumers * layout.SKB_RING_SIZE
            + ncpus * net.held_per_cpu(defer_max) + 1024)


def validate(rx, ncpus, skbs, duration, defer_max, batch, repeat):
    if ncpus < 2:
        raise BadInput("the defer experiment needs at least 2 CPUs: one receives, one "
                       "consumes (with one real CPU: --ncpus 2 --oversubscribe)")
    if not 1 <= rx < ncpus:
        raise BadInput(f"--rx-cpus {rx}: give 1 to {ncpus - 1}, leaving a consumer")
    if skbs is not None and duration is not None:
        raise BadInput("give --skbs or --duration, not both")
    if skbs is not None and not rx <= skbs <= MAX_SKBS:
        raise BadInput(f"--skbs {skbs}: give {rx} (one per RX CPU) to {MAX_SKBS}")
    if not 1 <= defer_max <= MAX_DEFER_MAX:
        raise BadInput(f"--defer-max {defer_max}: give 1 to {MAX_DEFER_MAX}")
    if not 1 <= batch <= layout.SKB_RING_SIZE:
        raise BadInput(f"--batch {batch}: give 1 to {layout.SKB_RING_SIZE}")
    if not 1 <= repeat <= MAX_REPEAT:
        raise BadInput(f"--repeat {repeat}: give 1 to {MAX_REPEAT}")


def defer_sides(strategies):
    """The strategies a run measures: irq's A/A control right after irq (its pair)."""
    return [x for s in strategies
            for x in ([s, AA] if s == "irq" and "irqsave" in strategies else [s])]


def skb_rate(ipi_cycles, ipi_entry_cycles, defer_max):
    """skbs a second for an estimate: TYPICAL_SKBS_PER_S, or with IPI costs
    given no more than defer_max / 2 skbs (the kernel's kick comes when a
    CPU's list reaches half of defer_max) per IPI sent and taken, at this
    TSC: both costs added, the dearest point of a sweep, so it errs high."""
    given = [c for c in ipi_cycles if isinstance(c, (int, float))]
    per_ipi = (max(given) if given else 0) + (ipi_entry_cycles or 0)
    if not per_ipi:
        return TYPICAL_SKBS_PER_S
    return min(TYPICAL_SKBS_PER_S, tsc.tsc_hz() * max(1, defer_max // 2) / per_ipi)


def estimate_seconds(n_strategies, repeat, skbs=None, duration=None, ncpus=2, real_cpus=2,
                     n_points=1, rate=TYPICAL_SKBS_PER_S):
    """The whole experiment: every run at every IPI cost, then the
    uncontended per-op suite."""
    work = machine.work_seconds(skbs, duration or (None if skbs else DURATION), rate)
    return (n_points * n_strategies * repeat * machine.run_seconds(work, ncpus, real_cpus,
                                                                   bool(skbs))
            + lockbench.suite_seconds(len(OP_PLAN), rounds=OP_ROUNDS))


def run(cpus, strategies=STRATEGIES, rx=None, skbs=None, duration=None, defer_max=DEFER_MAX,
        batch=BATCH, repeat=REPEAT, check=False, ncpus=None, oversubscribe=False,
        lock_algo="qspinlock", progress=None, ipi_cycles=(MEASURED,), ipi_entry_cycles=None,
        build="inline"):
    """Run every strategy `repeat` times at each IPI cost of `ipi_cycles`
    ("measured": what ipi_cycles() measured here, the send to the sender and
    the entry to the target; a number: that many cycles to each);
    ipi_entry_cycles, if given, is the target's throughout; the lock entry
    points are shaped as kernel build `build` makes them. Returns (rows,
    verdicts, why there is no verdict or None); the rows are the strategies
    at the first cost, then at the next, ...; the verdicts come from the
    measured cost's runs (or the first's)."""
    n = ncpus or len(cpus)
    rx = rx if rx is not None else max(1, n // 2)
    validate(rx, n, skbs, duration, defer_max, batch, repeat)
    if skbs is None and duration is None:
        duration = DURATION
    n_cons = n - rx
    regions = net.regions(pool_size(n, rx, n_cons, defer_max), n) + [
               ("rings", layout.SKB_RING, rx * n_cons),
               ("defer_ctl", layout.DEFER_CTL, 1)]
    sides = defer_sides(strategies)
    points = list(ipi_cycles)
    runs = {(pt, s): [] for pt in points for s in sides}
    # interleaved, IPI costs and sides alike, each repeat in the reverse
    # order of the one before (A B .. B A): a drift (the vCPUs' placement)
    # reaches every side and every cost alike; run r of each side at one
    # cost is a pair
    order = [(pt, s) for pt in points for s in sides]
    plan = [(pt, r, s) for r in range(repeat) for pt, s in (order if r % 2 == 0 else order[::-1])]
    with Machine(cpus=cpus, ncpus=ncpus, oversubscribe=oversubscribe, regions=regions) as m:
        names = m.segment.region_names
        idx = net.indices(m)
        ring, ctl = names.index("rings"), names.index("defer_ctl")
        overhead = _core.timer_overhead()
        # an IPI's costs, measured once on this machine from the first
        # consumer's real CPU to the first RX CPU's (the kick's direction):
        # the send, charged to the sender; the entry, handling and exit,
        # charged to the target (core/ipi.pyx); and a cross-CPU wake-up,
        # reported as an upper bound on the send (core/wakeup.pyx)
        sender, target = int(m.cpu_map[rx]), int(m.cpu_map[0])
        try:
            figures = ipi_figures(_core.ipi_cycles(sender, target), _core.syscall_cycles())
            wake = ipi_wake(_core.futex_wake_cycles(sender, target))
        except (OSError, RuntimeError) as e:   # a CPU taken away, signals refused, no time
            raise RunFailed(f"cannot measure what an IPI costs from real CPU {sender} to "
                            f"{target}: {e}") from None
        charges = {}
        for pt in points:
            send, entry, send_how, entry_how = ipi_charges(
                figures, None if pt == MEASURED else pt, ipi_entry_cycles)
            charges[pt] = {"point": pt, "send": send, "entry": entry, "send_how": send_how,
                           "entry_how": entry_how, "figures": figures, "wake": wake}
        for i, (pt, r, strategy) in enumerate(plan):
            if progress:
                at = "" if len(points) == 1 else f", IPI cost {pt}"
                progress(i, len(plan), f"{strategy} (run {r + 1} of {repeat}{at})")
            _core.net_init(m.segment.buf, idx, _core.LOCK_ALGOS[lock_algo])
            m.region("rings")[:] = 0
            m.region("defer_ctl")[:] = 0
            # the line's round trip between the kick's CPUs, now: where the
            # hypervisor runs the vCPUs sets every cross-CPU cost of the run
            try:
                line = _core.line_round_trip_cycles(target, sender)["cycles"]
            except (OSError, RuntimeError) as e:
                raise RunFailed(f"cannot time a cache line's round trip between real CPUs "
                                f"{target} and {sender}: {e}") from None
            spins0 = m.region("irq")[["spins", "ipi_send_cycles"]].copy()
            checks0 = int(m.region("irq")["lock_checks"].sum())
            bugs0 = m.region("irq")["bugs"].sum(axis=0).copy()
            out = m.run(_cpu_body, idx, ring, ctl,
                        _core.DEFER_STRATEGIES[STRATEGY_OF.get(strategy, strategy)], defer_max,
                        rx, n_cons, skbs or 0, duration or 0.0, batch, check,
                        charges[pt]["send"], charges[pt]["entry"], _core.KERNEL_BUILDS[build],
                        expected=machine.work_seconds(skbs, duration, TYPICAL_SKBS_PER_S),
                        progress=_progress)
            runs[pt, strategy].append(defer_rows.measure(m, out, rx, overhead, spins0, bugs0))
            runs[pt, strategy][-1]["line_rtt_cycles"] = line
            runs[pt, strategy][-1]["lock_checks"] = (int(m.region("irq")["lock_checks"].sum())
                                                     - checks0)
        timing_valid = m.timing_valid
        cpu_map = [int(c) for c in m.cpu_map]
    split = defer_rows.placement_split([x["line_rtt_cycles"] for rs in runs.values() for x in rs])
    rows = []
    for pt in points:
        at = [defer_rows.row(s, runs[pt, s], cpu_map, rx, defer_max, batch, overhead,
                             timing_valid, charges[pt]) for s in sides]
        defer_rows.add_gains(at, {s: runs[pt, s] for s in sides}, split)
        rows += at
    # seed 003's verdicts: at this machine's own IPI cost where it was run
    pt = verdict_point(points)
    runs = {s: runs[pt, s] for s in sides}
    if "irq" not in runs or "irqsave" not in runs:
        return rows, [], "seed 003's verdicts need the irq and irqsave strategies"
    if repeat < stats.MIN_SAMPLES:
        return rows, [], f"seed 003's verdicts need --repeat {stats.MIN_SAMPLES} or more"
    if not timing_valid:
        return rows, [], "an oversubscribed machine gives no timing verdict"
    return rows, _verdicts(runs, cpus[0], lock_algo, progress, build), None


def _progress(m):
    """What the watchdog sees rise while skbs move: allocations and frees."""
    st = m.region("skb_stats")
    return int(st["allocated"].sum()) + int(st["freed"].sum())


def invariant_failures(rows):
    """What broke the model's invariant (every skb freed exactly once), by strategy."""
    return [f"{r['strategy']}: skbs not conserved (allocated, freed and in flight disagree)"
            for r in rows if not r["conserved"]]


def _cpu_body(ctx, idx, ring, ctl, strategy, defer_max, rx, n_cons, skbs, duration, batch,
              check, ipi_send, ipi_entry, kbuild):
    if ctx.cpu < rx:
        # RX CPU i receives its share of the skbs (0: until the duration ends)
        quota = skbs // rx + (1 if ctx.cpu < skbs % rx else 0)
        return _core.defer_rx_run(ctx.seg, ctx.cpu, idx, ring, strategy, defer_max, rx, n_cons,
                                  ctl, quota, duration, check, irq_entry_cycles=round(ipi_entry),
                                  kbuild=kbuild)
    return _core.defer_consumer_run(ctx.seg, ctx.cpu, idx, ring, strategy, defer_max, rx,
                                    n_cons, ctl, batch, check, ipi_send_cycles=round(ipi_send),
                                    kbuild=kbuild)[0]


def _verdicts(runs, cpu, lock_algo, progress, build="inline"):
    """Seed 003's two claims: the per-op saving as the seed measured it
    (uncontended, the lock suite's irqsave and irq), with the flush's own
    locked section beside it (docs/experiments/defer.md), and the rate."""
    out = []
    if progress:
        progress(0, 1, "the per-op cost of irq and irqsave, uncontended")
    suite, _ = lockbench.run_suite(cpu, [lock_algo], OP_VARIANTS, rounds=OP_ROUNDS, locks_only=True,
                                   build=build)
    lockpairs.derived(suite)
    op = lockpairs.seed_003_verdict(suite, lock_algo, build)
    def values(side, key="skbs_per_s"):
        return [r[key] for r in runs.get(side, [])]

    if op is not None:
        d = stats.paired(values("irqsave", "flush_lock_cycles"), values("irq", "flush_lock_cycles"),
                         lambda a, b: a - b)
        if d:
            op["in_flush"] = {"measured": d[0], "interval": d[1],
                              "unit": "cycles per flush's locked section"}
        out.append(op)
    d = stats.paired(values("irq"), values("irqsave"), stats.gain)
    rate = stats.judge(SEED_003_RATE, *d)
    aa = stats.paired(values(AA), values("irq"), stats.gain)
    if aa:
        rate["control"] = stats.control("irq against irq", aa[0], aa[1])
    out.append(rate)
    return out


# ------------------------------------------------------------------ the command

def add_options(p):
    p.add_argument("--strategy", default="all", metavar="LIST",
                   help=f"defer list strategies: {','.join(STRATEGIES)} or all (default)")
    p.add_argument("--rx-cpus", type=bounded("--rx-cpus"), metavar="N",
                   help="how many emulated CPUs receive; the rest consume (default: half)")
    add_amount(p, "--skbs", "skbs to receive per run (default: run for --duration)", DURATION)
    p.add_argument("--defer-max", type=bounded("--defer-max"), default=DEFER_MAX, metavar="N",
                   help=f"net.core.skb_defer_max (default: {DEFER_MAX})")
    p.add_argument("--batch", type=bounded("--batch"), default=BATCH, metavar="N",
                   help=f"skbs a consumer takes from a ring at a time (default: {BATCH})")
    p.add_argument("--repeat", type=bounded("--repeat"), default=REPEAT, metavar="R",
                   help=f"runs per strategy, interleaved (default: {REPEAT})")
    p.add_argument("--lock", default="qspinlock", metavar="ALGO",
                   help="algorithm of defer_lock and the pool lock, or host, the one a kernel "
                        "here runs (default: qspinlock)")
    p.add_argument("--check", action="store_true",
                   help="run the lock/IRQ checker over every lock and flush")
    lockopts.add_kernel_build_option(p)
    p.add_argument("--ipi-cycles", type=bounded("--ipi-cycles"), metavar="LIST",
                   help="also run every strategy with each IPI charged this many TSC cycles "
                        "on each side (the sender's send, the target's entry), a sweep such as "
                        "0,1000,10000 (always run: the costs measured here)")
    p.add_argument("--ipi-entry-cycles", type=bounded("--ipi-entry-cycles"), metavar="N",
                   help="TSC cycles charged to the target of each IPI for its entry, handling "
                        "and exit (default: measured here)")


@dataclass(frozen=True)
class DeferParams(Params):
    cpus: str
    ncpus: int
    rx_cpus: Optional[list]     # None: chosen by the run (its record says which)
    kernel_build: str
    kernel_build_record: dict
    strategy: list
    skbs: Optional[int]
    duration_s: Optional[float]     # None when skbs is given
    defer_max: int
    batch: int
    repeat: int
    lock: str
    lock_host: Optional[dict]
    check: bool
    oversubscribe: bool
    ipi_cycles: list
    ipi_entry_cycles: Optional[int]     # None: measured here


def params(args, cpus):
    strategies = parse_list(args.strategy, STRATEGIES, "defer strategy")
    lock, lock_host = lockopts.one_algo("--lock", args.lock)
    n = args.ncpus or len(cpus)
    builds, record = lockopts.kernel_builds(args.kernel_build)
    return DeferParams(cpus=format_cpus(cpus), ncpus=n, rx_cpus=args.rx_cpus,
                       kernel_build=builds[0], kernel_build_record=record,
                       strategy=strategies, skbs=args.skbs,
                       duration_s=None if args.skbs else (args.duration or DURATION),
                       defer_max=args.defer_max, batch=args.batch, repeat=args.repeat,
                       lock=lock, lock_host=lock_host, check=args.check,
                       oversubscribe=args.oversubscribe,
                       ipi_cycles=[MEASURED] + list(args.ipi_cycles or []),
                       ipi_entry_cycles=args.ipi_entry_cycles)


def seconds(p, cpus):
    return estimate_seconds(len(defer_sides(p.strategy)), p.repeat, p.skbs, p.duration_s,
                            p.ncpus, len(cpus), len(p.ipi_cycles),
                            skb_rate(p.ipi_cycles, p.ipi_entry_cycles, p.defer_max))


def _run(cpus, p, progress=None):
    rows, verdicts, why_not = run(
        cpus, p.strategy, rx=p.rx_cpus, skbs=p.skbs, duration=p.duration_s,
        defer_max=p.defer_max, batch=p.batch, repeat=p.repeat, check=p.check,
        ncpus=p.ncpus, oversubscribe=p.oversubscribe, lock_algo=p.lock,
        progress=progress, ipi_cycles=p.ipi_cycles,
        ipi_entry_cycles=p.ipi_entry_cycles, build=p.kernel_build)
    return Outcome(p.record(rx_cpus=rows[0]["rx_cpus"]), rows, verdicts,
                   ([f"no verdict: {why_not}"] if why_not else [])
                   + defer_rows.placement_warnings(rows))


def plan(cpus, quick):
    return DeferParams(cpus=format_cpus(cpus), ncpus=len(cpus), rx_cpus=None,
                       strategy=list(STRATEGIES), skbs=None, duration_s=0.1 if quick else 0.3,
                       defer_max=DEFER_MAX, batch=BATCH, repeat=6 if quick else 8,
                       lock="qspinlock", check=False, oversubscribe=False,
                       ipi_cycles=[MEASURED], ipi_entry_cycles=None, lock_host=None,
                       **lockopts.host_build())


EXPERIMENT = Experiment(
    name="defer",
    help="the skb defer-free list end to end (seed 003 in its setting)",
    description="RX CPUs receive skbs in NAPI polls and hand them to consumer CPUs, which "
                "free them with skb_attempt_defer_free(); the RX CPUs flush their defer "
                "lists in net_rx_action(). Each lock strategy runs --repeat times, "
                "interleaved; ends with seed 003's two verdicts.",
    add_options=add_options, params=params, seconds=seconds, run=_run, text=text,
    metric=Metric(("strategy", "ipi_cycles"), "skbs_per_s", "skbs_per_s_samples",
                  "skbs_per_s_min", "skbs_per_s_max", defaults={"ipi_cycles": MEASURED}),
    plan=plan, min_cpus=2, invariant_failures=invariant_failures, plot=plot,
)
