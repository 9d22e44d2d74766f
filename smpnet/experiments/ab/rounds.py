"""What the workers run for `ab`: each variant's SMPNET_INIT on its own copy
of the file's state, its timed rounds (uncontended: one CPU, ABBA order;
contended: every CPU at once), its SMPNET_CHECK. The loops are the user's
object's (build.py); the core calls them (core/ab.pyx), in workers that
may not make a process (contain.py)."""
import mmap

import numpy as np

from ... import _core
from ...errors import RunFailed
from ...machine import layout
from ...measure.time_bench import (MIN_ROUND_S, calibrate, clean_round, loop_overhead,
                                   pass_order, round_counts)
from . import skbs
from .contain import contain

# which entry each CPU is running, for the message when one dies (-1: none)
NOW = np.dtype([("entry", "<i4")])


def _record(size):
    """A state record of `size` bytes (one at least), as the segment holds it."""
    return np.dtype([("bytes", "u1", (max(1, size),))])


# Every copy of the state lies at the same page offset: a copy's shared
# record is whole pages, and its per-CPU records too, together. A contended
# line's cost goes with where it lies in a page (Zen 4: a lock pair's by the
# line's offset in 512 bytes, docs/experiments/kernel.md): with copies a
# line apart, an A/A control's two copies of one contended atomic (26
# cycles an op) came out up to 8.5 cycles apart, and a variant's verdict
# had the same part of its copy's place in it. docs/experiments/ab.md.
PAGE = mmap.PAGESIZE


# ...and each kind of record at a page offset of its own: the shared
# records begin pages, the per-CPU records half a page in (after ab_colour),
# the per-CPU section's this_cpu_off and alloc_percpu() room a quarter in
# (smpnet_percpu.ld). Where two began pages alike, an op that stored to the
# first field of one and then loaded the first of the other (this_cpu->n++,
# then shared->p) waited on the store (4K aliasing): 1.8 cycles an op in
# some runs, 7.8-12.6 in others, A/A controls apart. docs/experiments/ab.md.
PERCPU_COLOUR = PAGE // 2


def _whole_pages(size):
    return -(-max(1, size) // PAGE) * PAGE


def percpu_records(obj, nr_cpus):
    """Per-CPU records a copy takes: nr_cpus, and more to fill its last
    page (each a whole number of cache lines, layout.stride)."""
    stride, n = layout.stride(_record(obj.percpu_size)), nr_cpus
    while n * stride % PAGE:
        n += 1
    return n


def regions(obj, copies, nr_cpus):
    """The state's regions: one shared record per copy (whole pages),
    PERCPU_COLOUR bytes, percpu_records() per copy, where each CPU is, and
    nr_cpus copies per copy of the object's per-CPU section (DEFINE_PER_CPU, alloc_percpu; every
    object has one, this_cpu_off at least), on whole pages (the segment
    starts them on a page); the model's skb pool where the file takes it.
    The core finds a copy's per-CPU records by the shared region's count
    (core/ab.pyx)."""
    return [("ab_shared", _record(_whole_pages(obj.shared_size)), copies),
            ("ab_colour", _record(PERCPU_COLOUR), 1),
            ("ab_percpu", _record(obj.percpu_size), copies * percpu_records(obj, nr_cpus)),
            ("ab_now", NOW, nr_cpus),
            ("ab_pcpu_area", _record(len(obj.pcpu_template)), copies * nr_cpus)] + \
        skbs.regions(obj, nr_cpus)


def state_bytes(obj, copies, nr_cpus):
    """What the state's regions take in the segment."""
    return PERCPU_COLOUR + copies * (_whole_pages(obj.shared_size)
                                     + percpu_records(obj, nr_cpus)
                                     * layout.stride(_record(obj.percpu_size))
                                     + nr_cpus * len(obj.pcpu_template))


class Where:
    """A copy of the state on one machine: the arguments of every core call.
    `objects`: each entry's object (a variant on a lock algorithm of its
    own runs from its algorithm's build), the first the run's own."""

    def __init__(self, machine, objects):
        names = machine.segment.region_names
        self.shared, self.percpu = names.index("ab_shared"), names.index("ab_percpu")
        self.pcpu_area = names.index("ab_pcpu_area")
        self.objects = list(objects)
        # the run's build options: the built-in tests run as it was built (each
        # entry's core call reads its own object's, build_info)
        self.options = self.objects[0].options
        # the model's skbs, set up for the run (every variant shares one kernel's pool)
        self.net = skbs.setup(machine, self.objects[0])
        # take_warnings()' answer, one per object (each its own ffi)
        self._count = {id(o): o.module.ffi.new("unsigned long *") for o in self.objects}

    def check_bug(self):
        """RunFailed naming the BUG_ON() (file:line) that ended an op of
        an object in this process, if one did."""
        for obj in {id(o): o for o in self.objects}.values():
            ffi, lib = obj.module.ffi, obj.module.lib
            bug = lib.smpnet_bug_report()
            if bug != ffi.NULL:
                raise RunFailed(ffi.string(bug).decode(errors="replace"))

    def take_warnings(self, copy):
        """(the first WARN_ON()'s place, how many fired) in entry `copy`'s
        object since the last take in this process, or None."""
        obj = self.objects[copy]
        ffi, lib, count = obj.module.ffi, obj.module.lib, self._count[id(obj)]
        first = lib.smpnet_warn_take(count)
        return (ffi.string(first).decode(errors="replace"), int(count[0])) if count[0] else None

    def init_failure(self, copy):
        """The message of the expect() that failed entry `copy`'s init here."""
        ffi, lib = self.objects[copy].module.ffi, self.objects[copy].module.lib
        return ffi.string(lib.smpnet_init_failure()).decode(errors="replace")

    def state(self, copy):
        return dict(copy=copy, shared_region=self.shared, percpu_region=self.percpu,
                    build_info=self.objects[copy].build_info, pcpu_area_region=self.pcpu_area,
                    **self.net)

    def copy_template(self, machine):
        """Every CPU's copy of the per-CPU section, of every copy of the
        state, from its object's own (what DEFINE_PER_CPU initialised it
        to), as the kernel's setup_per_cpu_areas() copies .data..percpu."""
        area = machine.region("ab_pcpu_area")["bytes"]
        per = len(area) // len(self.objects)
        for copy, obj in enumerate(self.objects):
            area[copy * per:(copy + 1) * per] = np.frombuffer(obj.pcpu_template, np.uint8)


def _mark(ctx, entry):
    """This CPU now runs `entry` (-1: none), for the message should it die
    or stall. Not once the run is being stopped: a stalled variant's loop
    returns at the stop, and what runs after it (the next entries, the end
    of the rounds) must not take the blame from it."""
    if not ctx.machine.header["stop"]:
        ctx.machine.region("ab_now")[ctx.cpu]["entry"] = entry


def init_all(ctx, entries, where):
    """Every entry's init on its copy, on CPU 0 (the others wait at the end):
    the first that fails, (entry, errno), or None."""
    contain()
    if ctx.cpu != 0:
        return None
    where.copy_template(ctx.machine)
    for i, v in enumerate(entries):
        if v.init:
            _mark(ctx, i)
            rc = _core.ab_init(v.init, ctx.seg, **where.state(i))
            where.check_bug()
            if rc == -1:    # an expect() failed: its message
                return (i, where.init_failure(i))
            if rc:
                return (i, rc)
    _mark(ctx, -1)
    return None


def check_all(ctx, entries, where, ops):
    """Every entry's check on its copy, with the ops it ran: the first that
    fails, (entry, message), or None."""
    contain()
    if ctx.cpu != 0:
        return None
    for i, v in enumerate(entries):
        if v.check:
            _mark(ctx, i)
            msg = _core.ab_check(v.check, ctx.seg, ops=ops[i], **where.state(i))
            where.check_bug()
            if msg is not None:
                return (i, msg)
    _mark(ctx, -1)
    return None


def uncontended(ctx, entries, where, loops, rounds, builtins=(), warmup=1):
    """The entries on this CPU, time_bench-style, and the built-in
    time_bench tests `builtins` beside them (on lock 0 of the machine's lock
    region where they take a lock): each calibrated to a round of
    MIN_ROUND_S (or `loops`), warmed up, then `rounds` rounds, each running
    every one once, forwards on even rounds and backwards on odd ones
    (A B .. B A), a round switched out rerun shorter (clean_round). Returns
    (loops of each, per-op cycles per round of each, ops run per entry, the
    empty loop's cycles per op, round_counts of each, each entry's WARNs:
    merge_warnings()): entries first, then builtins."""
    contain()
    ops = [0] * len(entries)
    warned = [None] * len(entries)
    lock = {}
    if builtins:
        lock = dict(lock_region=ctx.machine.segment.region_names.index("locks"), lock_index=0)

    def one(i, n):
        if i >= len(entries):   # a built-in test
            o = where.options
            return _core.time_bench_round(builtins[i - len(entries)], n, seg=ctx.seg, cpu=0,
                                          check=bool(o["check"]), popf=bool(o["popf"]),
                                          kbuild=o["kbuild"], **lock)
        _mark(ctx, i)
        cycles, wall_ns, work = _core.ab_round(entries[i].loop, n, ctx.seg, 0,
                                               **where.state(i))
        where.check_bug()
        warned[i] = merge_warnings(warned[i], where.take_warnings(i))
        ops[i] += n
        return per_unit(cycles, n, work, where.objects[i].unit), wall_ns

    every = len(entries) + len(builtins)
    counts = [loops or calibrate(lambda n, i=i: one(i, n), MIN_ROUND_S) for i in range(every)]
    for _ in range(warmup):
        for i, n in enumerate(counts):
            one(i, n)
    kept = [[] for _ in range(every)]
    for r in range(rounds):
        for i in pass_order(every, r):
            kept[i].append(clean_round(lambda n, i=i: one(i, n), counts[i]))
    _mark(ctx, -1)
    return (counts, [[k.per_op for k in ks] for ks in kept], ops, loop_overhead(max(counts)),
            [round_counts(ks) for ks in kept], warned)


def per_unit(cycles, ops, work, unit):
    """A round's cycles scaled so that over its ops they are per unit of
    work (SMPNET_UNIT), or as they are where the op is the unit; RunFailed
    for a round that counted none."""
    if not unit:
        return cycles
    counted(work, unit, f"a round of {ops} ops")
    return cycles * ops / work


def counted(work, unit, what):
    """RunFailed where `what` (a round, uncontended or contended) counted
    no unit of work though the file names one (SMPNET_UNIT)."""
    if unit and not work:
        raise RunFailed(f"{what} counted no {unit}: SMPNET_WORK() was never reached (the "
                        "unit of work is counted where it is done)")


def merge_warnings(a, b):
    """Two (first WARN's place, count), either None: the first place, the sum."""
    if a is None or b is None:
        return a or b
    return a[0], a[1] + b[1]


def contended(ctx, entry, index, where, duration, hold, think, cpu_roles=()):
    """One entry on every CPU at once for `duration`, each CPU in its role
    (cpu_roles[cpu], an index into SMPNET_ROLES; () without): (ops, cycles,
    spins, its WARNs: merge_warnings(), units of work)."""
    contain()
    _mark(ctx, index)
    ops, cycles, spins, stopped, work = _core.ab_contended(
        entry.contended, duration, ctx.seg, ctx.cpu, hold_cycles=hold, think_cycles=think,
        role=cpu_roles[ctx.cpu] if cpu_roles else 0, **where.state(index))
    where.check_bug()
    if stopped:
        raise RunFailed("stopped")
    _mark(ctx, -1)
    return ops, cycles, spins, where.take_warnings(index), work
