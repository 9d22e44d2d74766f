"""ab: a change of one's own, before against after, from one C file.

The file (smpnet/include/smpnet.h) declares its state and two or more
variants of one op against smpnet's kernel API; build.py compiles it at run
time into an object whose loops have the op inlined. Uncontended, each
variant runs on one CPU time_bench-style, in rounds interleaved A B .. B A;
contended (on by default with two CPUs or more), every CPU runs it at once
for --duration, round after round in the same order. Each variant is set
against the first, the baseline, as the median paired difference per op
over ABBA blocks with its 95 % interval; the baseline's second copy, run in
the same rounds, is the A/A control. Every variant (and the control) works
on its own copy of the state, and its init and check run on that copy
outside the timing.
"""
import dataclasses
import functools
import hashlib
import os
from dataclasses import dataclass
from typing import Optional

from ... import _core
from ...errors import BadInput, RunFailed, Stalled, WorkerDied
from ...experiment import Experiment, Metric, Option, Outcome, Params, bounded_value, parse_list
from ...machine import layout, tsc
from ...machine.cpus import format_cpus
from ...machine.machine import Machine, run_seconds
from ...measure import stats
from ...measure.time_bench import MIN_ROUND_S, pass_order
from ..common import lockbench, lockopts
from . import build, contain, cpu_roles, figures, rounds, skbs

ROUNDS, DURATION, REPEAT = 20, 0.05, 20
AA = " (A/A)"   # the control's label: the baseline's name and this


# ab's options, declared once: the command line's and smpnet.ab()'s keywords
OPTIONS = (
    Option("--variants", "the variants to run, the first the baseline (default: all, in the "
                         "file's order)", metavar="LIST"),
    lockopts.algo_option(several=False),
    *lockopts.restore_check_options(
        check="build with the lock/IRQ checker (timings then include it)"),
    lockopts.kernel_build_option(),
    Option("--loops", "uncontended: ops per round (default: calibrated to 10 ms a round)",
           bounded_value("--loops"), metavar="N"),
    Option("--rounds", f"uncontended: measured rounds per variant (default: {ROUNDS})",
           bounded_value("--rounds"), metavar="R"),
    Option("--builtin", "uncontended: built-in time_bench tests to run in the same rounds, "
                        "each variant's cost over each given as a ratio (e.g. "
                        "spin_lock_unlock: the harness overhead of a user's lock op)",
           metavar="LIST"),
    Option("--contended", "also run every CPU at once (default: on with 2 CPUs or more)",
           negatable=True),
    Option("--numa-nodes", "NUMA nodes to emulate, the CPUs split into that many blocks, for "
                           "cpu_to_node() and numa_node_id() (default: each CPU's real node; "
                           "the cache traffic stays this machine's)",
           bounded_value("--numa-nodes"), metavar="N"),
    Option("--roles", "contended: each emulated CPU's role, in CPU order, of the file's "
                      "SMPNET_ROLES (default: its first role on CPU 0, the next on CPU 1, ..., "
                      "the last on every CPU left)", metavar="LIST"),
    *lockopts.contended_options("contended: ", DURATION, REPEAT, sweeps=False, side="variant"),
)


def add_options(p):
    p.add_argument("file", metavar="FILE.c",
                   help="the C file of variants (docs/experiments/ab.md)")
    for option in OPTIONS:
        option.add_to(p)


def _one(option, values):
    if values is None:
        return 0
    if len(values) != 1:
        raise BadInput(f"{option} takes one value in ab (a sweep is contended's)")
    return values[0]


@dataclass(frozen=True)
class AbParams(Params):
    file: str
    source_sha256: str
    source: str
    variants: list
    cpus: str
    cpu: int
    algo: str
    algo_host: Optional[dict]
    restore: str
    check: bool
    kernel_build: str
    kernel_build_record: dict
    loops: Optional[int]
    rounds: int
    builtin: list
    contended: bool
    ncpus: int
    oversubscribe: bool
    numa_nodes: Optional[int]   # emulated; None: the real CPUs' nodes
    topology: list              # each CPU of the widest mode: its real CPU, node and LLC id
    object: str                 # the built object's path
    build_key: str
    compiled: bool
    build_s: float
    shared_bytes: int
    percpu_bytes: int
    # a contended run's own (left out of the record of one that is not)
    duration_s: Optional[float] = None
    repeat: Optional[int] = None
    hold_cycles: Optional[int] = None
    think_cycles: Optional[int] = None
    # variants on a lock algorithm of their own (SMPNET_VARIANT_ALGO): name -> algorithm
    variant_algos: dict = dataclasses.field(default_factory=dict)
    # SMPNET_UNIT's unit of work (the figures are per unit), and SMPNET_ROLES'
    # names with each contended CPU's role (None: the op is the unit, one role)
    unit: Optional[str] = None
    roles: Optional[list] = None
    cpu_roles: Optional[list] = None
    skb_defer: Optional[str] = None     # the model's skbs' defer list (smpnet_skbuff.h)
    # the object params() built and loaded, which the run takes: one build a run,
    # and one more per algorithm a variant has of its own (by the algorithm's name)
    loaded: object = dataclasses.field(default=None, repr=False, compare=False,
                                       metadata={"record": False})
    loaded_by_algo: dict = dataclasses.field(default_factory=dict, repr=False, compare=False,
                                             metadata={"record": False})
    OPTIONAL = ("duration_s", "repeat", "hold_cycles", "think_cycles", "unit", "roles",
                "cpu_roles", "skb_defer")


def params(args, cpus):
    """Read and build the file (BadInput for a file that cannot run, before
    anything runs) and validate the options. args.source: the file's text
    when the caller has it (smpnet.ab()), args.file then names it."""
    args.algo, algo_host = lockopts.one_algo("--algo", args.algo)
    ncpus = getattr(args, "ncpus", None) or len(cpus)
    contended = ncpus >= 2 if args.contended is None else args.contended
    if contended and ncpus < 2:
        raise BadInput("--contended needs 2 CPUs or more (--cpus, or --ncpus with "
                       "--oversubscribe)")
    if not contended:
        for option in ("duration", "repeat", "hold_cycles", "think_cycles"):
            if getattr(args, option) is not None:
                raise BadInput(f"--{option.replace('_', '-')}: for a contended run only")
    numa_nodes = getattr(args, "numa_nodes", None)
    if numa_nodes is not None and numa_nodes > ncpus:
        raise BadInput(f"--numa-nodes {numa_nodes}: more nodes than the {ncpus} emulated CPU(s)"
                       " (each node needs one)")
    oversubscribe = getattr(args, "oversubscribe", False)
    topology = _topology(cpus, ncpus if contended else 1, oversubscribe, numa_nodes)
    source = getattr(args, "source", None)
    if source is None:
        source = build.read_source(args.file)
    builds, record = lockopts.kernel_builds(args.kernel_build)
    obj = build.build(source, args.file, _core.LOCK_ALGOS[args.algo], args.check,
                      args.restore == "popf", kbuild=_core.KERNEL_BUILDS[builds[0]])
    names = [v.name for v in obj.variants]
    chosen = names if args.variants is None else parse_list(args.variants, names, "variant")
    if len(chosen) < 2:
        raise BadInput(f"--variants {args.variants}: ab compares two or more")
    # a variant on an algorithm of its own runs from a build of the file for that
    # algorithm, as a kernel of that lock: the build's every lock is it
    algo_names = {a: n for n, a in _core.LOCK_ALGOS.items()}
    variant_algos = {v.name: algo_names[v.algo] for v in obj.variants
                     if v.name in chosen and v.algo >= 0}
    skbs.validate(obj, args.file, variant_algos)     # before the other algorithms' builds
    by_algo = {args.algo: obj}
    for algo in sorted(set(variant_algos.values()) - set(by_algo)):
        more = build.build(source, args.file, _core.LOCK_ALGOS[algo], args.check,
                           args.restore == "popf", kbuild=_core.KERNEL_BUILDS[builds[0]])
        if (more.shared_size, more.percpu_size, len(more.pcpu_template)) != \
                (obj.shared_size, obj.percpu_size, len(obj.pcpu_template)):
            raise BadInput(f"{args.file}: its state is of another size when built for {algo}: "
                           "variants on their own algorithms share one state layout")
        by_algo[algo] = more
        obj = dataclasses.replace(obj, build_s=obj.build_s + more.build_s,
                                  compiled=obj.compiled or more.compiled)
    builtins = [] if args.builtin is None else parse_list(args.builtin, _core.TIME_BENCH_NAMES,
                                                            "time_bench test")
    if builtins and obj.unit:
        raise BadInput(f"--builtin: {args.file} counts its cost per {obj.unit} (SMPNET_UNIT), "
                       "the built-in tests per op: no ratio between the two")
    contended_only = {}
    if contended:
        contended_only = dict(duration_s=args.duration or DURATION,
                              repeat=args.repeat or REPEAT,
                              hold_cycles=_one("--hold-cycles", args.hold_cycles),
                              think_cycles=_one("--think-cycles", args.think_cycles))
        for option in ("hold_cycles", "think_cycles"):
            if contended_only[option] > contended_only["duration_s"] * tsc.tsc_hz() / 10:
                raise BadInput(f"--{option.replace('_', '-')} {contended_only[option]}: over a "
                               f"tenth of --duration {contended_only['duration_s']:g} s")
    roles = cpu_roles.assign(obj, getattr(args, "roles", None), ncpus, contended)
    p = AbParams(file=args.file, source_sha256=hashlib.sha256(source.encode()).hexdigest(),
                 source=source, variants=chosen, cpus=format_cpus(cpus), cpu=cpus[0],
                 algo=args.algo, algo_host=algo_host, restore=args.restore, check=args.check,
                 kernel_build=builds[0], kernel_build_record=record, loops=args.loops,
                 rounds=args.rounds or ROUNDS, builtin=builtins, contended=contended,
                 ncpus=ncpus, oversubscribe=oversubscribe, numa_nodes=numa_nodes,
                 topology=topology, object=obj.path, build_key=obj.key, compiled=obj.compiled,
                 build_s=obj.build_s, shared_bytes=obj.shared_size,
                 percpu_bytes=obj.percpu_size, variant_algos=variant_algos, loaded=obj,
                 loaded_by_algo=by_algo, unit=obj.unit or None,
                 roles=list(obj.cpu_roles) or None, cpu_roles=roles,
                 skb_defer=obj.skb_defer or None, **contended_only)
    need = rounds.state_bytes(obj, len(chosen) + 1, max(1, ncpus if contended else 1))
    if need > build.MAX_STATE_BYTES:
        raise BadInput(f"{args.file}: its state takes {need} bytes for {len(chosen) + 1} copies "
                       f"(shared {obj.shared_size}, per CPU {obj.percpu_size}), over the "
                       f"{build.MAX_STATE_BYTES}-byte bound on the segment's state")
    return p


def _topology(cpus, ncpus, oversubscribe, numa_nodes):
    """Each emulated CPU's real CPU, node and LLC id, as the run's machine
    will set them (Machine.topology)."""
    m = Machine(cpus=cpus, ncpus=ncpus, oversubscribe=oversubscribe, numa_nodes=numa_nodes)
    return [{"cpu": i, "real_cpu": r, "node": node, "llc": llc}
            for i, (r, (node, llc)) in enumerate(zip(m.cpu_map, m.topology()))]


def _entries(obj, p):
    """The variants run, the baseline's second copy (the A/A control) last,
    each from its object (a variant on an algorithm of its own, from that
    algorithm's build), their labels and their roles; and the objects."""
    objects = [p.loaded_by_algo.get(p.variant_algos.get(n), obj) for n in p.variants]
    chosen = [next(v for v in o.variants if v.name == n) for n, o in zip(p.variants, objects)]
    return (chosen + [chosen[0]], p.variants + [p.variants[0] + AA],
            [figures.VARIANT] * len(chosen) + [figures.CONTROL], objects + [objects[0]])


def _uncontended_s(p):
    """Every entry's calibration (doubling up to MIN_ROUND_S), warm-up and
    rounds, at the slowest op's pace where --loops is given."""
    n = len(p.variants) + 1 + len(p.builtin)
    per = p.loops * 200e-9 if p.loops else MIN_ROUND_S * 2
    return n * (p.rounds + 8) * per


def seconds(p, cpus):
    n = len(p.variants) + 1
    s = run_seconds(_uncontended_s(p), 1, 1)
    if p.contended:
        s += (n * p.repeat + 2) * run_seconds(p.duration_s, p.ncpus, len(cpus), False)
    return s


def _run(m, labels, fn, *args, expected, entry=None):
    """m.run(fn, *args); a worker that dies or stalls has the variant it was
    running (`entry`, or the one it marked in ab_now) put before its message."""
    try:
        return m.run(fn, *args, expected=expected)
    except (WorkerDied, Stalled) as e:
        if entry is None:
            entry = int(m.region("ab_now")[e.cpu]["entry"])
        if 0 <= entry < len(labels):
            e.args = (f"variant {labels[entry]!r}: {e.args[0]}",)
        if isinstance(e, WorkerDied) and e.how.endswith("SIGSYS"):
            e.args = (e.args[0].replace("; run stopped", f": {contain.WHY}; run stopped"),)
        elif isinstance(e, WorkerDied) and e.how.endswith("SIGILL") and _bad_magic(m, e.cpu):
            e.args = (e.args[0].replace("; run stopped", f": {BAD_MAGIC}; run stopped"),)
        raise


BAD_MAGIC = ("it took a lock spin_lock_init() never saw (DEBUG_SPINLOCK's \"bad magic\"): "
             "initialise every lock the variant takes in its SMPNET_INIT")


def _bad_magic(m, cpu):
    """Whether CPU `cpu` stopped at a lock the checker does not know."""
    return m.region("irq")["bugs"][cpu][layout.LOCKDEP_BUGS.index("bad_magic")] > 0


def _init(m, entries, labels, where):
    bad = _run(m, labels, rounds.init_all, entries, where, expected=1.0)[0]
    if bad and isinstance(bad[1], str):
        raise RunFailed(f"variant {labels[bad[0]]!r}: its SMPNET_INIT failed: {bad[1]}; "
                        "run stopped")
    if bad:
        raise RunFailed(f"variant {labels[bad[0]]!r}: its SMPNET_INIT failed (error {bad[1]}: "
                        f"{os.strerror(bad[1])}); run stopped")


def _check(m, entries, labels, where, ops, mode):
    bad = _run(m, labels, rounds.check_all, entries, where, ops, expected=1.0)[0]
    if bad:
        raise RunFailed(f"variant {labels[bad[0]]!r}: its SMPNET_CHECK failed after the "
                        f"{mode} rounds: {bad[1]}")
    skbs.check(m, where.objects[0], mode)      # the checks' frees too


def run(cpus, p, progress=None):
    obj = p.loaded
    entries, labels, roles, objects = _entries(obj, p)
    tsc_hz = tsc.tsc_hz()
    steps = 1 + (len(entries) * p.repeat if p.contended else 0)
    if progress:
        progress(0, steps, f"uncontended: {len(entries)} variants on CPU {p.cpu}")
    regions = rounds.regions(obj, len(entries), 1) + lockbench.locks_region(1)
    with Machine(cpus=[p.cpu], regions=regions, numa_nodes=p.numa_nodes) as m:
        lockbench.init_locks(m, [p.algo])   # the built-in tests' lock
        where = rounds.Where(m, objects)
        _init(m, entries, labels, where)
        counts, samples, ops, empty, dropped, warned = _run(
            m, labels, rounds.uncontended, entries, where, p.loops, p.rounds,
            p.builtin, expected=_uncontended_s(p))[0]
        _check(m, entries, labels, where, ops, "uncontended")
    rows = figures.uncontended_rows(labels, roles, p.builtin, p.cpu, counts, samples,
                                    empty, tsc_hz)
    for r, d in zip(rows, dropped):
        r.update(d)
    verdicts = figures.verdicts(rows, tsc_hz)
    warnings = _warned(labels, warned, "uncontended")
    if p.contended:
        con, warned = _contended(cpus, p, entries, labels, roles, objects, progress, steps,
                                 tsc_hz)
        rows += con
        verdicts += figures.verdicts(con, tsc_hz)
        warnings += _warned(labels, warned, "contended")
    if not verdicts:
        warnings.append(f"no verdict: it needs --rounds (and --repeat) {2 * stats.MIN_SAMPLES} "
                        f"or more ({stats.MIN_SAMPLES} ABBA blocks)")
    if p.numa_nodes:
        warnings.append(f"--numa-nodes {p.numa_nodes}: nodes emulated, "
                        f"{_nodes_of(p.topology)}; the cache traffic between them is this "
                        "machine's, not a remote node's")
    return Outcome(p.record(), rows, verdicts, warnings)


def _nodes_of(topology):
    """'node 0: CPU(s) 0-1, node 1: CPU(s) 2-3' of a run's topology."""
    nodes = sorted({t["node"] for t in topology})
    return ", ".join(f"node {n}: CPU(s) {format_cpus([t['cpu'] for t in topology if t['node'] == n])}"
                     for n in nodes)


def _warned(labels, warned, mode):
    """A warning per variant whose WARN_ON()s fired: where first, how often."""
    return [f"variant {lab!r}, {mode}: {w[0]} fired {w[1]} time{'s' * (w[1] != 1)}"
            for lab, w in zip(labels, warned) if w]


def _contended(cpus, p, entries, labels, roles, objects, progress, steps, tsc_hz):
    runs = [[] for _ in entries]
    n = 1
    role_of = [p.roles.index(name) for name in p.cpu_roles or ()]   # each CPU's, by number
    with Machine(cpus=cpus, ncpus=p.ncpus, oversubscribe=p.oversubscribe,
                 regions=rounds.regions(objects[0], len(entries), p.ncpus),
                 numa_nodes=p.numa_nodes) as m:
        where = rounds.Where(m, objects)
        _init(m, entries, labels, where)
        tally = skbs.Tally(m, objects[0], len(entries))
        for r in range(p.repeat):
            for i in pass_order(len(entries), r):
                if progress:
                    progress(n, steps, f"contended round {r + 1} of {p.repeat}: {labels[i]}")
                n += 1
                runs[i].append(tally.round(i, lambda: _run(
                    m, labels, rounds.contended, entries[i], i, where, p.duration_s,
                    p.hold_cycles, p.think_cycles, role_of, expected=p.duration_s, entry=i)))
                rounds.counted(sum(c[4] for c in runs[i][-1]), p.unit,
                               f"variant {labels[i]!r}: a contended round")
        ops = [sum(c[0] for per in rs for c in per) for rs in runs]
        _check(m, entries, labels, where, ops, "contended")
        warned = [functools.reduce(rounds.merge_warnings, (c[3] for per in rs for c in per), None)
                  for rs in runs]
        rows = figures.contended_rows(labels, roles, m.cpu_map, runs, tsc_hz, p.record(),
                                      m.timing_valid)
        tally.attach(rows)
        return rows, warned


def text(env, extra):
    return figures.text(env, extra)


EXPERIMENT = Experiment(
    name="ab",
    help="your own change: the variants of one C file against the first, paired",
    description="Builds FILE.c (its variants written against smpnet's kernel API, "
                "smpnet/include/smpnet.h) and times each against the first: uncontended "
                "on one CPU in ABBA rounds, and contended on every selected CPU at once, "
                "each as a median paired difference per op with its 95 % interval, an A/A "
                "control beside it, and a verdict (faster, slower, no measurable "
                "difference). docs/experiments/ab.md walks through a first file.",
    add_options=add_options, params=params, seconds=seconds, run=run, text=text,
    metric=Metric(("mode", "variant"), "cycles", "samples", "cycles_min", "cycles_max"),
    plot=figures.plot, options=OPTIONS,
)
