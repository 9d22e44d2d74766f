"""The kernel as referee, contended: the lock pair and the atomics on every
selected CPU at once, in the kernel (BPF test runs) and in the model,
kernel and model in alternate order round by round. Docs:
docs/experiments/kernel.md, "The kernel as referee".
"""
import contextlib
import mmap
import statistics
import struct
import time

from ... import _core
from ...machine import layout, workers
from ...machine.machine import Machine
from ...measure import stats
from ..common import bpf, lockbench
from . import referee_text
from .referee import PLACEMENT, TESTS, UNROLL, _figures, _repeat, map_programs, programs

CONTENDED_S = 0.2       # each side's hammer in a lock pair's round, every CPU at once
# Lines a round, fresh each round. A contended op's cost depends on which
# cache line it hammers, the same line giving the same figure run after run
# (here a lock pair 630-1100 cycles, fetch_add 99-140, by slot): one line
# would compare two placements, not two ops. The atomics' lines are the
# same on both sides (mapped maps). The lock pair's cannot be (a map with
# a bpf_spin_lock is not mmapable): the model's lock takes the line at the
# kernel's lock's page offset (LOCK_ADDRESS_AT), whose low address bits
# are the physical ones; a lock pair's cost went with the line's offset in
# 512 bytes (Zen 4: 322-392 cycles by offset, the same offset the same).
LINES = {"spin_lock_pair": 8}
# The kernel's maps of a round lie in a slab page or two, a run's in
# twenty or more; the model's lock slots, a page's worth, in a page or two
# of its segment. Where the host runs the two CPUs on two dies, a line's
# cost turns on its page (a Zen 4 guest: one segment's model / kernel 1.30
# where seven in turn gave 1.17, the same minutes; twelve segments' pages,
# the same all run, were cheap in 0 % to 65 % of their lines, the kernel's
# fresh maps in 41 %): so the model's round r takes its lines in a segment
# of its own, a fresh page as the kernel's fresh maps, up to LOCK_PAGES
# (past that, segment r % LOCK_PAGES).
LOCK_PAGES = 64
LOCK_ADDRESS_AT = bpf.LINE_VALUE - 8    # where a map's value address is stored: past its lock
SHARED_LINES = 4
# A timed run, each side. Between two runs a CPU does other work, and the
# other CPUs run uncontended meanwhile, several times faster: a kernel test
# run's set-up took 3 % of the time at 0.3 ms runs, the model's 1 %, and
# the figures part by that (model / kernel fetch_add 1.20 at 0.5 ms runs,
# 1.15 at 2 ms, 1.11 at 4 ms, with the lines shared).
CHUNK_S = 0.004
KERNEL_CHUNK = 12       # a kernel test run contended: the uncontended repeat (RUN_NS) over this
START_S = 0.002         # from the barrier to the first line's turn


def _in_turn(chunk, lines, seconds):
    """In every worker at once: chunk(line) -> cycles per op (and ops) over
    and over on each of `lines` in turn, `seconds` each, every CPU on the
    same line at the same CLOCK_MONOTONIC times (from the barrier that
    released them together). [[(start, end, (cycles per op, ops)), ...]
    per line]."""
    t0 = time.monotonic() + START_S
    out = []
    for i, line in enumerate(lines):
        begin, end = t0 + i * seconds, t0 + (i + 1) * seconds
        while time.monotonic() < begin:
            pass
        runs = []
        while not runs or runs[-1][1] < end:
            start = time.monotonic()
            got = chunk(line)
            runs.append((start, time.monotonic(), got))
        out.append(runs)
        workers.heartbeat()
    return out


def _overlapped(per_cpu):
    """Cycles per op on each CPU from its runs that lie wholly inside the
    time every CPU was running them: a CPU that started first or ended
    last ran alone for a while, uncontended, and that is not this row's op."""
    start = max(runs[0][0] for runs in per_cpu)
    end = min(runs[-1][1] for runs in per_cpu)
    out = []
    for runs in per_cpu:
        inside = [cycles for t0, t1, (cycles, _) in runs if t0 >= start and t1 <= end]
        if inside:
            out.append(sum(inside) / len(inside))
    return out


def _kernel_chunk(progs, repeat, tsc_hz):
    """A kernel test run of line i's program: (its cycles per op, its ops),
    the line's empty twin's run (timed uncontended, before) subtracted. The
    test run's own cost may hide beside the ops, as uncontended (referee.
    programs()), but it is under 0.6 cycles an op of the 20 or more a
    contended op costs: the chunks keep the empty twin."""
    def chunk(i):
        prog, empty_ns = progs[i]
        ns, _ = bpf.test_run(prog, repeat)
        return (ns - empty_ns) / UNROLL * tsc_hz / 1e9, repeat * UNROLL
    return chunk


def _kernel_side(ctx, progs, repeat, seconds, tsc_hz):
    progs = [(prog, bpf.test_run(empty, repeat)[0]) for prog, empty in progs]
    return _in_turn(_kernel_chunk(progs, repeat, tsc_hz), range(len(progs)), seconds)


def _model_side(ctx, region, lines, seconds, test, kbuild):
    """The model's lock pair (bpf_spin_lock() and bpf_spin_unlock(), two
    calls deep, the flags restored by a test of them, as the kernel's
    helpers; its slot's counter + 1 inside) on each lock slot of
    `lines` in turn, or its locked RMW `test` on the word of each mapped
    line of `lines` (the kernel's own, its program's word)."""
    if test == "spin_lock_pair":
        variant = _core.LOCK_VARIANTS["irqsave"]

        def chunk(slot):
            n, cycles, _, _ = _core.lock_hammer(ctx.seg, ctx.cpu, region, slot, variant, 0,
                                                CHUNK_S, 0, False, False, -1, 0, kbuild,
                                                bpf_spin_lock=True)
            return cycles / n, n
    else:
        def chunk(line):
            n, cycles = _core.atomic_hammer(ctx.seg, region, 0, test, CHUNK_S, line,
                                            bpf.SPIN_LOCK_CNT)
            return cycles / n, n
    return _in_turn(chunk, lines, seconds)


def counted_programs(k):
    """(the contended lock pair's program, its empty twin, their map): UNROLL
    lock pairs, each with the value's counter + 1 inside, as lock_hammer's;
    the lock and its counter alone in one cache line, as a lock slot's."""
    m = bpf.spin_lock_map(k, k.line_start())
    pair = bpf.spin_lock_pair(k.line_start(), counted=True)
    return (k.prog(bpf.lookup_or_exit(m, pair * UNROLL),
                   b"pair_counted"), k.prog(bpf.lookup_or_exit(m, b""), b"pair_counted"), m)


def lock_slots_by_offset(m, slots):
    """{page offset: a lock slot of machine m's lock region there}: every
    line of a page, given slots enough (a page's worth, or more)."""
    locks = m.region("locks")
    return {(locks.ctypes.data + s * locks.strides[0]) % mmap.PAGESIZE: s for s in range(slots)}


def counted_pages(machines):
    """The pages the model's lock pair ran in: those of a lock slot whose
    counter moved, in the lock regions of `machines`."""
    pages = set()
    for pm in machines:
        locks = pm.region("locks")
        for s in locks["counter"].nonzero()[0]:
            pages.add((locks.ctypes.data + int(s) * locks.strides[0]) // mmap.PAGESIZE)
    return len(pages)


def lock_page_offset(k, m):
    """The page offset of the line that holds map `m`'s lock (a
    counted_programs() map: the lock begins it, where line_start() holds)."""
    offset = (k.value_address(m, LOCK_ADDRESS_AT) + k.line_start()) % mmap.PAGESIZE
    return offset - offset % bpf.LINE


def kernel_count(k, m):
    """The counter of the counted programs' map value."""
    return struct.unpack_from("<q", k.lookup(m), k.line_start() + bpf.SPIN_LOCK_CNT)[0]


# The contended rows: the lock pair (a counter + 1 inside, as lock_hammer
# counts its critical sections), then the atomics on a shared word; and
# how long each side runs in a round.
CONTENDED = ("spin_lock_pair", "fetch_add", "cmpxchg", "xchg")
CONTENDED_ATOMIC_S = 0.1


def lock_segments(rounds):
    """The lock pair's segments in a run of `rounds`, each a page or two of
    lock slots: one a round, LOCK_PAGES at most (then round r takes r's
    modulo them)."""
    return max(1, min(rounds, LOCK_PAGES))


def contended_seconds(rounds, tests=CONTENDED):
    return rounds * 2 * sum((CONTENDED_S if t == "spin_lock_pair" else CONTENDED_ATOMIC_S) + 0.3
                            for t in tests)


def measure_contended(cpus, tsc_hz, algo, build, rounds, tests=CONTENDED, progress=None):
    """The contended rows: each op of `tests` (of CONTENDED) on every CPU
    of `cpus` at once, in the kernel (its BPF program's test runs on a map
    value) and in the model (lock_hammer of a lock; atomic_hammer of a
    word), on fresh cache lines each round (LINES), kernel and model in
    alternate order round by round: cycles per op while all contend, the
    mean over the CPUs, then over the lines. The lock pair's counters, on
    each side, must sum to the ops it ran (`counted`: a lost update would
    be a broken lock, or a miscount). progress(i): tests[i] begins."""
    rows = []
    if len(cpus) < 2:
        raise ValueError("the contended rows need two CPUs or more")
    # as many lock slots as the lock side table holds: a page's, or more
    slots = len(cpus) * layout.LOCK_INFO_PER_CPU
    with bpf.Bpf() as k, contextlib.ExitStack() as machines:
        # the lock pair's pages, a segment a round: [(machine, its lock slot at each page offset)]
        lock_region = lockbench.locks_region(slots, dense=True)   # slots picked by page offset
        pages = [machines.enter_context(Machine(cpus=cpus, regions=lock_region))
                 for _ in range(lock_segments(rounds) if "spin_lock_pair" in tests else 1)]
        m = pages[0]
        for pm in pages:
            region = lockbench.init_locks(pm, [algo] * slots)     # the same in each
        pages = [(pm, lock_slots_by_offset(pm, slots)) for pm in pages]
        if len(pages[0][1]) < mmap.PAGESIZE // bpf.LINE:
            raise ValueError(f"{slots} lock slots do not cover a page's lines")
        for i, test in enumerate(tests):
            if progress:
                progress(i)
            seconds = CONTENDED_S if test == "spin_lock_pair" else CONTENDED_ATOMIC_S
            lines = LINES.get(test, SHARED_LINES)
            ops = {"kernel": 0, "model": 0}
            for pm, _ in pages:
                pm.region("locks")["counter"] = 0     # the lock pair's count starts here
            made = {}       # round -> its lines: [(program, empty twin, map, mapping)]

            def round_lines(r):
                """Round r's lines, fresh: the lock pair's a new map each (the
                model's the lock slot at its lock's page offset, in round r's
                segment), an atomic's mapped maps, each hammered by the
                kernel's program and, through the mapping, the model's loop."""
                if r not in made:
                    made[r] = []
                    slot_at = pages[r % len(pages)][1]
                    for _ in range(lines):
                        if test == "spin_lock_pair":
                            prog, empty, fd = counted_programs(k)
                            made[r].append((prog, empty, fd, slot_at[lock_page_offset(k, fd)]))
                        else:
                            fd, mapping = k.mapped(bpf.LINE_VALUE)
                            made[r].append((*map_programs(k, fd, 0, test), fd, mapping))
                return made[r]

            def kernel_side(r):
                return (m, _kernel_side, [(prog, empty) for prog, empty, *_ in round_lines(r)],
                        repeat, seconds / lines, tsc_hz)

            def model_side(r):
                turn = [slot_or_mapping for *_, slot_or_mapping in round_lines(r)]
                return (pages[r % len(pages)][0] if test == "spin_lock_pair" else m, _model_side,
                        region, turn, seconds / lines, test, _core.KERNEL_BUILDS[build])

            # a contended test run about CHUNK_S: several a line, each long beside
            # the test run's own set-up between two; calibrated on a program of
            # its own (a round's counted pair would count the calibration's runs)
            # (programs()' twin runs UNROLL ops, as a contended program)
            repeat = max(1, _repeat((counted_programs(k)[0] if test == "spin_lock_pair"
                                     else programs(k, test)[1])) // KERNEL_CHUNK)
            trips = []
            kernel, modelled, spans = _contended_rounds(m, kernel_side, model_side, seconds,
                                                        rounds, ops, trips)
            row = {"test": f"{test}_contended", "placement": PLACEMENT, "contended": True,
                   "cpus": ",".join(map(str, cpus)),
                   "kernel_runs": f"{KERNEL_RUNS[test]}, on CPUs {','.join(map(str, cpus))} at "
                                  f"once, {lines} "
                                  + ("new maps a round (the model: the lock slot at each "
                                     "one's lock's page offset, in a segment of its "
                                     "own each round)" if test == "spin_lock_pair"
                                     else "fresh cache lines a round, each hammered by both "
                                     "sides (mmapable maps)")
                                  + f", {seconds / lines * 1e3:g} ms a line: cycles per op, "
                                  "the mean over the CPUs, then over the lines",
                   "model_test": MODEL_CONTENDED[test], "algo": algo if test ==
                   "spin_lock_pair" else None, "kernel_build": build,
                   **_placed_figures(kernel, modelled, spans), "repeat": repeat,
                   "rounds": rounds, "lines": lines, "ops": ops, **_trip_fields(trips)}
            if test == "spin_lock_pair":
                counts = sum(kernel_count(k, fd) for lns in made.values() for _, _, fd, _ in lns)
                model = sum(int(pm.region("locks")["counter"].sum()) for pm, _ in pages)
                row["counted"] = {"kernel": counts == ops["kernel"], "model": model == ops["model"]}
                row["model_pages"] = counted_pages(pm for pm, _ in pages)
            rows.append(row)
    return rows


def _trip_fields(trips):
    """A row's line round trips: the median and the extremes, in cycles, and
    each one taken (before each round, and after the last: None where none
    could be)."""
    got = [t for t in trips if t is not None]
    return {"line_round_trip_cycles": statistics.median(got),
            "line_round_trip_cycles_min": min(got), "line_round_trip_cycles_max": max(got),
            "line_round_trip_cycles_samples": trips} if got else {}


def placement_group(spans):
    """Where the host moved the CPUs during a row (its round trips part by
    more than TRIP_MOVED): (the placement, [the rounds run wholly at it]),
    the nearer or the farther, whichever has more rounds (the nearer on a
    tie), a round being at one where the round trips before and after it
    both are; None where nothing moved or neither has stats.MIN_SAMPLES."""
    got = [t for span in spans for t in span if t is not None]
    least = min(got, default=None)
    if least is None or not referee_text.trips_apart(least, max(got)):
        return None
    at = {"nearer": [], "farther": []}
    for r, span in enumerate(spans):
        if None in span:
            continue
        near = [not referee_text.trips_apart(least, t) for t in span]
        if near[0] == near[1]:
            at["nearer" if near[0] else "farther"].append(r)
    name = max(at, key=lambda k: len(at[k]))    # the nearer on a tie: first
    return (name, at[name]) if len(at[name]) >= stats.MIN_SAMPLES else None


def _placed_figures(kernel, model, spans):
    """A contended row's figures: over its rounds, or where the host moved
    the CPUs during the row, over those at one placement (placement_group();
    a round that spans a move pairs two placements). The samples stay
    every round's; `judged_rounds` says which the figures are over."""
    group = placement_group(spans)
    if group is None:
        return _figures(kernel, model)
    name, rounds = group
    return {**_figures([kernel[r] for r in rounds], [model[r] for r in rounds]),
            "kernel_samples": kernel, "model_samples": model, "judged_rounds": rounds,
            "judged_placement": name}


def moved(rows):
    """A warning per contended row whose rounds mixed two placements of the
    CPUs (referee_text.placements_mixed()): judged on one placement's rounds
    where it had enough of them (judged_rounds), else not judged."""
    return [f"kernel referee: {r['test']}: a cache line's round trip between the CPUs went "
            f"from {r['line_round_trip_cycles_min']:.0f} to "
            f"{r['line_round_trip_cycles_max']:.0f} cycles during the row: the host moved "
            "them, and its rounds mix two placements "
            + (f"(judged on its {len(r['judged_rounds'])} rounds at the "
               f"{r['judged_placement']} placement)" if r.get("judged_rounds") else "(not judged)")
            for r in rows if referee_text.placements_mixed(r)]


def miscounted(rows):
    """A warning per contended row whose counter, on a side, is not the ops
    that side ran: its figures count something else than its ops."""
    return [f"kernel referee: {r['test']}: the {side}'s counter is not the ops it ran "
            f"({r['ops'][side]}): its figures are not one op's"
            for r in rows for side, ok in r.get("counted", {}).items() if not ok]


# what each contended row runs, kernel and model
KERNEL_RUNS = {**{t.name: t.kernel for t in TESTS if t.name in CONTENDED},
               "spin_lock_pair": "bpf_spin_lock() + bpf_spin_unlock() of a map value, its "
                                 "counter + 1 inside"}
MODEL_CONTENDED = {"spin_lock_pair": "lock_hammer bpf_spin_lock, a counter + 1 inside",
                   "fetch_add": "atomic_hammer fetch_add", "cmpxchg": "atomic_hammer cmpxchg",
                   "xchg": "atomic_hammer xchg"}


def _contended_rounds(m, kernel_side, model_side, seconds, rounds, ops, trips):
    """`rounds` rounds of one contended op, each side on every CPU at once
    (kernel_side(r), model_side(r): round r's machine, function and arguments), in
    alternate order: ([kernel cycles per op], [model's], [(the round trips
    before and after it)]), a round counted whole so that the ratios pair
    its sides; `ops` gains each side's ops, `trips` a cache line's round
    trip between the first two CPUs before each round and after the last
    (where the host runs them, which can change under a run; None where it
    could not be timed, and none on one CPU)."""
    kernel, model, spans = [], [], []
    sides = [("kernel", kernel_side), ("model", model_side)]
    trip = _trip if len(m.real_cpus) > 1 else None
    if trip:
        trips.append(trip(m))
    for r in range(rounds):
        got = {}
        for side, args in (sides if r % 2 == 0 else sides[::-1]):
            machine, fn, *args = args(r)
            per_cpu = machine.run(fn, *args, expected=seconds + 0.3)
            ops[side] += sum(n for lines in per_cpu for runs in lines for *_, (_, n) in runs)
            per_line = [_overlapped([lines[i] for lines in per_cpu])
                        for i in range(len(per_cpu[0]))]
            per_line = [sum(c) / len(c) for c in per_line if c]
            if per_line:
                got[side] = sum(per_line) / len(per_line)
        if trip:
            trips.append(trip(m))
        if len(got) == 2:
            kernel.append(got["kernel"])
            model.append(got["model"])
            spans.append(tuple(trips[-2:]) if trip else (None, None))
    return kernel, model, spans


def _trip(m):
    """A cache line's round trip between m's first two CPUs, in cycles, or
    None: a diagnostic beside the row, whose figures stand without it."""
    try:
        return _core.line_round_trip_cycles(*m.real_cpus[:2], blocks=10)["cycles"]
    except (OSError, RuntimeError):
        return None
