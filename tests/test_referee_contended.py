"""The kernel as referee, contended: the model's hammers on the kernel's
own lines, the runs every CPU overlapped, the lines' turns, the counter's
check. Timing is the benchmarks' and the note's, never asserted here."""
import mmap
import statistics
import struct
import time

import pytest

from conftest import bpf_root as root
from smpnet import _core
from smpnet.experiments.common import bpf
from smpnet.experiments.kernel import referee, referee_contended, referee_text


def test_all_quick_runs_no_contended_rows(allowed, monkeypatch):
    from smpnet.experiments import kernel
    monkeypatch.setattr(referee.bpf, "refused", lambda: None)     # as where it can run
    quick, full = kernel.plan(allowed[:2], True), kernel.plan(allowed[:2], False)
    assert quick.referee_contended == [] and quick.referee_rounds
    assert full.referee_contended == list(referee_contended.CONTENDED)
    # none run, none warned of (not "they need two CPUs"), on one CPU or two
    monkeypatch.setattr(kernel.referee, "measure", lambda *a: [{"test": "xchg"}])
    monkeypatch.setattr(kernel.kernel_text, "listing", lambda: ({}, None))
    monkeypatch.setattr(kernel.referee_contended, "measure_contended",
                        lambda *a, **k: pytest.fail("no contended rows planned"))
    for cpus in (allowed[:1], allowed[:2]):
        warnings = []
        assert kernel.referee_part(cpus, quick, warnings, {}, lambda i: None) == [
            {"test": "xchg"}]
        assert warnings == []


def test_a_contended_row_whose_counter_is_off_is_warned_of():
    rows = [{"test": "spin_lock_pair_contended", "ops": {"kernel": 10, "model": 7},
             "counted": {"kernel": True, "model": False}}, {"test": "xchg_contended"}]
    (w,) = referee_contended.miscounted(rows)
    assert "spin_lock_pair_contended: the model's counter is not the ops it ran (7)" in w
    assert referee_contended.miscounted(rows[1:]) == []


def test_the_models_atomic_hammer_runs_its_op_on_the_shared_word(allowed):
    from smpnet import Machine
    from smpnet.experiments.common import lockbench
    with Machine(cpus=allowed[:1], regions=lockbench.locks_region(2)) as m:
        region = lockbench.init_locks(m, ["qspinlock"])
        n, cycles = _core.atomic_hammer(m.segment.buf, region, 1, "fetch_add", 0.01)
        # the clock read every program's worth of ops, as the kernel's loop runs them
        assert n > 0 and n % _core.TB_PROG_OPS == 0 and cycles > 0
        # and the lock pair, bpf_spin_lock()'s, every program's worth of pairs
        irqsave = _core.LOCK_VARIANTS["irqsave"]
        pairs, _, _, aborted = _core.lock_hammer(m.segment.buf, 0, region, 0, irqsave, 0, 0.01,
                                                 0, bpf_spin_lock=True)
        assert pairs > 0 and pairs % _core.TB_PROG_OPS == 0 and not aborted
        assert int(m.region("locks")[0]["counter"]) == pairs
        _core.lock_init(m.segment.buf, region, 0, _core.LOCK_ALGOS["qspinlock"], 0)
        assert int(m.region("locks")[1]["counter"]) & 0xffffffff == n & 0xffffffff
        n2, _ = _core.atomic_hammer(m.segment.buf, region, 1, "cmpxchg", 0.01)
        # uncontended, every cmpxchg succeeds: the word rose by each
        assert int(m.region("locks")[1]["counter"]) & 0xffffffff == (n + n2) & 0xffffffff
        assert int(m.region("locks")[0]["counter"]) == 0       # the lock's slot untouched
        with pytest.raises(ValueError, match="no atomic op 'add'"):
            _core.atomic_hammer(m.segment.buf, region, 1, "add", 0.01)
        # on a line of the caller's: its word, and nothing of the slot's
        line = bytearray(64)
        n3, _ = _core.atomic_hammer(m.segment.buf, region, 1, "fetch_add", 0.01, line, 8)
        assert struct.unpack_from("<I", line, 8)[0] == n3 & 0xffffffff and n3 > 0
        assert not any(line[:8]) and not any(line[12:])
        assert int(m.region("locks")[1]["counter"]) & 0xffffffff == (n + n2) & 0xffffffff
        for offset in (12, 64):
            with pytest.raises(ValueError, match=f"offset {offset}: not an aligned word"):
                _core.atomic_hammer(m.segment.buf, region, 1, "xchg", 0.01, line, offset)


@root
def test_the_model_hammers_the_very_line_the_kernels_program_does(allowed):
    """An atomic's lines are shared: the model's loop, through the mapping,
    and the kernel's program count on one word."""
    from smpnet import Machine
    from smpnet.experiments.common import lockbench
    with bpf.Bpf() as k, Machine(cpus=allowed[:1], regions=lockbench.locks_region(1)) as m:
        region = lockbench.init_locks(m, ["qspinlock"])
        fd, mapping = k.mapped(bpf.LINE_VALUE)
        prog, _ = referee.map_programs(k, fd, 0, "fetch_add")
        n, _ = _core.atomic_hammer(m.segment.buf, region, 0, "fetch_add", 0.01, mapping,
                                   bpf.SPIN_LOCK_CNT)
        assert bpf.test_run(prog, 10)[1] == bpf.DONE
        word, = struct.unpack_from("<q", k.lookup(fd), bpf.SPIN_LOCK_CNT)
        assert word == n + 10 * referee.UNROLL
    assert mapping.closed


def test_a_contended_op_counts_only_the_runs_every_cpu_overlapped():
    """A CPU that started first or ended last ran alone for a while: its
    runs outside the common window are not contended and not counted."""
    a = [(0.0, 1.0, (1000, 1)), (1.0, 2.0, (20, 1)), (2.0, 3.0, (40, 1))]
    b = [(0.5, 1.5, (100, 1)), (1.5, 2.5, (300, 1)), (2.5, 3.5, (7000, 1))]
    # the window is [0.5, 3.0]: a's last two runs, b's first two
    assert referee_contended._overlapped([a, b]) == [30, 200]


def test_each_line_takes_its_turn_on_every_cpu_at_once(monkeypatch):
    """The lines in turn, each for its time slot, chunks run until its end:
    every CPU on the same line at the same times, whatever its chunks cost."""
    monkeypatch.setattr(referee_contended.workers, "heartbeat", lambda: None)
    seen = []

    def chunk(line):
        seen.append(line)
        return (1.0, 1)

    # the slots start START_S after the call, or later: bounds that hold however
    # late the scheduler lets this process run (a first run's own start does not)
    t0 = time.monotonic() + referee_contended.START_S
    turns = referee_contended._in_turn(chunk, ["a", "b", "c"], 0.01)
    assert len(turns) == 3 and sorted(set(seen)) == ["a", "b", "c"]
    assert seen == sorted(seen)         # a's runs, then b's, then c's
    for i, runs in enumerate(turns):
        # each line's runs begin in its slot and go on until its end
        assert runs[0][0] >= t0 + i * 0.01
        assert runs[-1][1] >= t0 + (i + 1) * 0.01
        if i:
            assert runs[0][0] >= turns[i - 1][-1][0]


def test_the_model_has_a_lock_slot_at_every_line_of_a_page(allowed):
    """The contended pair's model side takes the slot at the kernel's lock's
    page offset: with a page's worth of slots, every line of a page has one,
    at the offset its address says."""
    from smpnet import Machine
    from smpnet.experiments.common import lockbench
    from smpnet.machine import layout
    slots = 2 * layout.LOCK_INFO_PER_CPU    # what the rows take on two CPUs
    with Machine(cpus=allowed[:1], regions=lockbench.locks_region(slots, dense=True)) as m:
        at = referee_contended.lock_slots_by_offset(m, slots)
        assert sorted(at) == list(range(0, mmap.PAGESIZE, bpf.LINE))
        locks = m.region("locks")
        for offset, s in at.items():
            assert locks[s:s + 1].ctypes.data % mmap.PAGESIZE == offset
        assert len(referee_contended.lock_slots_by_offset(m, 8)) == 8


@root
def test_the_kernel_says_where_a_maps_lock_lies():
    """value_address(): the value's kernel address, from a program that
    stores it in the value; the counted programs' lock begins a line there."""
    with bpf.Bpf() as k:
        _, _, a = referee_contended.counted_programs(k)
        _, _, b = referee_contended.counted_programs(k)
        at = referee_contended.LOCK_ADDRESS_AT
        address = k.value_address(a, at)
        assert address >= 0xffff800000000000 and address != k.value_address(b, at)
        assert (address + k.line_start()) % bpf.LINE == 0
        assert referee_contended.lock_page_offset(k, a) == ((address + k.line_start())
                                                             % mmap.PAGESIZE)
        # stored past the lock and its counter: the counted program still counts
        prog = referee_contended.counted_programs(k)
        assert bpf.test_run(prog[0], 1)[1] == bpf.DONE
        k.value_address(prog[2], at)
        assert referee_contended.kernel_count(k, prog[2]) == referee.UNROLL


def test_each_contended_round_times_a_line_round_trip_first(allowed, monkeypatch):
    """Where the host runs the CPUs can change under a run (here a line's
    round trip went from 140 to 900 cycles and back): each round measures
    it before its sides, and the last after them too; a row whose trips
    part several-fold is warned of."""
    class FakeMachine:
        real_cpus = allowed[:2]

        def run(self, fn, *args, expected):
            return fn(*args)

    def side(cycles):
        return lambda r: (FakeMachine(), lambda: [[[(0.0, 1.0, (cycles, 4))]]] * 2)

    ops, trips = {"kernel": 0, "model": 0}, []
    kernel, model, spans = referee_contended._contended_rounds(
        FakeMachine(), side(100.0), side(90.0), 0.1, 3, ops, trips)
    assert kernel == [100.0] * 3 and model == [90.0] * 3 and ops == {"kernel": 24, "model": 24}
    two = len(allowed) > 1
    assert len(trips) == (4 if two else 0)
    assert all(t > 0 for t in trips)
    # each round's trips: the one before it and the one after
    assert spans == (list(zip(trips, trips[1:])) if two else [(None, None)] * 3)
    # a round trip that cannot be timed leaves the round's figures standing
    def fails(*args, **kwargs):
        raise RuntimeError("no cache line round trip finished")
    monkeypatch.setattr(referee_contended._core, "line_round_trip_cycles", fails)
    trips = []
    assert referee_contended._contended_rounds(FakeMachine(), side(100.0), side(90.0), 0.1, 2,
                                               ops, trips) == ([100.0] * 2, [90.0] * 2,
                                                               [(None, None)] * 2)
    assert trips == ([None] * 3 if two else []) and referee_contended._trip_fields(trips) == {}
    row = {"test": "x_contended", **referee_contended._trip_fields([140.0, None, 150.0, 900.0])}
    assert row["line_round_trip_cycles"] == 150.0 and row["line_round_trip_cycles_min"] == 140.0
    assert row["line_round_trip_cycles_samples"] == [140.0, None, 150.0, 900.0]
    (w,) = referee_contended.moved([row])
    assert "went from 140 to 900 cycles" in w and w.endswith("(not judged)")
    assert referee_contended.moved([{**row, "line_round_trip_cycles_max": 200.0}]) == []
    assert referee_contended.moved([{"test": "y_contended"}]) == []
    # such a row is not judged: its figure is neither placement's
    judged = {"kernel_cycles": 400.0, "contended": True, "model_over_kernel_lo": 0.9,
              "model_over_kernel_hi": 1.1}
    assert referee_text.within({**judged, **row}) is None
    assert referee_text.within({**judged, **row, "line_round_trip_cycles_max": 200.0}) is True
    assert referee_text._judged({**judged, **row, "model_over_kernel_hi": 2.0}) == \
        "placements mixed"
    # unless it had enough rounds at one placement: judged on those, and says so
    at_one = {**judged, **row, "judged_rounds": list(range(6)), "judged_placement": "nearer"}
    assert referee_text.within(at_one) is True
    assert referee_text._judged(at_one) == "yes (6 rounds, nearer)"
    assert referee_text._judged({**at_one, "model_over_kernel_hi": 2.0}) == \
        "no (6 rounds, nearer)"
    (w,) = referee_contended.moved([at_one])
    assert w.endswith("(judged on its 6 rounds at the nearer placement)")


NEAR, FAR, MOVED = (140.0, 150.0), (880.0, 900.0), (150.0, 880.0)


@pytest.mark.parametrize("spans, group", [
    ([NEAR] * 10, None),                                    # nothing moved: every round
    ([NEAR] * 7 + [MOVED] + [FAR] * 2, ("nearer", list(range(7)))),
    ([FAR] * 2 + [MOVED] + [FAR] * 5 + [NEAR] * 2, ("farther", [0, 1, 3, 4, 5, 6, 7])),
    ([NEAR] * 4 + [MOVED] * 2 + [FAR] * 4, None),           # neither has 6 rounds
    ([NEAR] * 6 + [FAR] * 6, ("nearer", list(range(6)))),  # a tie: the nearer
    ([NEAR] * 5 + [(None, 150.0)] + [FAR] * 4, None),       # a trip not taken: not placed
    ([(None, None)] * 10, None),                            # one CPU: no trips
])
def test_a_row_whose_cpus_moved_is_figured_on_one_placements_rounds(spans, group):
    assert referee_contended.placement_group(spans) == group
    kernel = [100.0 + r for r in range(len(spans))]
    model = [90.0] * len(spans)
    fig = referee_contended._placed_figures(kernel, model, spans)
    # the samples stay every round's; the figures are over the judged rounds
    assert fig["kernel_samples"] == kernel and fig["model_samples"] == model
    rounds = group[1] if group else list(range(len(spans)))
    assert fig["kernel_cycles"] == statistics.median(kernel[r] for r in rounds)
    # `cycles` (compare's) with the samples it is the median of
    assert fig["cycles_samples"] == [kernel[r] for r in rounds]
    assert fig.get("judged_rounds") == (group and group[1])
    assert fig.get("judged_placement") == (group and group[0])


def test_lock_segments_are_one_a_round_up_to_the_bound():
    assert [referee_contended.lock_segments(r) for r in (1, 6, 10, 20)] == [1, 6, 10, 20]
    cap = referee_contended.LOCK_PAGES
    assert referee_contended.lock_segments(cap + 5) == cap


@root
def test_the_model_takes_a_fresh_segment_each_round_as_the_kernel_fresh_maps(allowed, monkeypatch):
    # its lock pair's lines in a segment of its own each round, past the 8 it
    # once cycled through; the rounds themselves not run (what each side ran
    # is another test's)
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs")
    made, sides = [], []
    real = referee_contended.Machine

    def counted(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    def rounds(m, kernel_side, model_side, seconds, n, ops, trips):
        sides.extend(model_side(r)[0] for r in range(n))
        return [1.0] * n, [1.0] * n, [(None, None)] * n
    monkeypatch.setattr(referee_contended, "Machine", counted)
    monkeypatch.setattr(referee_contended, "_contended_rounds", rounds)
    (row,) = referee_contended.measure_contended(allowed[:2], 1e9, "pvqspinlock", "inline", 10,
                                                 ("spin_lock_pair",))
    assert len(made) == 10 and [id(m) for m in sides] == [id(m) for m in made]
    assert row["rounds"] == 10 and row["counted"] == {"kernel": True, "model": True}


def test_the_contended_rows_refuse_one_cpu_before_they_load_anything():
    with pytest.raises(ValueError, match="need two CPUs or more"):
        referee_contended.measure_contended([0], 1e9, "qspinlock", "inline", 6)
