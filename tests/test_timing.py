"""TSC calibration and the time_bench harness (behaviour, not speed)."""
import os
import time

import pytest

from smpnet import BadInput, _core
from smpnet.machine.tsc import tsc_hz, tsc_info
from smpnet.measure import time_bench as tb
from smpnet.measure.time_bench import calibrate_loops, time_bench


def test_tsc_agrees_with_clock_monotonic_within_2_percent():
    hz = tsc_hz()
    t0, m0 = _core.read_tsc(), time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    time.sleep(0.1)
    t1, m1 = _core.read_tsc(), time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    measured = (t1 - t0) * 1e9 / (m1 - m0)
    assert abs(measured - hz) / hz < 0.02


def test_tsc_info_says_where_the_frequency_came_from():
    info = tsc_info()
    assert info["tsc_hz"] > 0
    assert info["tsc_source"]
    if _core.HAVE_TSC:
        assert info["tsc_calibrated_hz"] > 0
    else:
        assert info["tsc_hz"] == 1e9 and "clock_gettime" in info["tsc_source"]


def test_tsc_is_monotonic_on_one_cpu():
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(old)})
    try:
        reads = [_core.read_tsc() for _ in range(1000)]
    finally:
        os.sched_setaffinity(0, old)
    assert reads == sorted(reads)


def test_time_bench_result_is_consistent():
    r = time_bench("tsc_read", loops=20000, rounds=4, warmup=1)
    assert r.loops == 20000 and r.rounds == 4 and len(r.samples) == 4
    assert r.cycles_min <= r.cycles <= r.cycles_max
    assert r.cycles_min == min(r.samples) and r.cycles_max == max(r.samples)
    assert r.ns == pytest.approx(r.cycles * 1e9 / r.tsc_hz)
    assert r.overhead_cycles > 0
    assert r.wall_s > 0


def test_interleaved_rounds_run_forward_then_back_and_pair(monkeypatch):
    # every entry is warmed up, then each round runs every entry once, in
    # order on even rounds and in reverse on odd ones; round k of one entry
    # is sample k of it. A cost that grows by one cycle a call (a steady
    # drift) gives paired differences that cancel over two rounds.
    calls = []

    def fake(test, loops, **where):
        calls.append((test, where.get("lock_index")))
        return (100 + len(calls)) * loops, 10**8

    monkeypatch.setattr(_core, "time_bench_round", fake)
    monkeypatch.setattr(tb, "context_switches", lambda: 0)   # no round spoiled: calls counted
    entries = [("cmpxchg", {"lock_index": 0}), ("tsc_read", {"lock_index": 1})]
    a, b = tb.interleaved(entries, loops=10, rounds=4, warmup=1)
    measured = [("cmpxchg", 0), ("tsc_read", 1)]
    assert calls[:2] == measured                                     # warm-up
    assert calls[2:10] == (measured + measured[::-1]) * 2              # the rounds
    assert all(t == "for_loop" for t, _ in calls[10:])                 # the loop overhead
    assert a.samples == [103, 106, 107, 110] and b.samples == [104, 105, 108, 109]
    diffs = [y - x for x, y in zip(a.samples, b.samples)]
    assert diffs == [1, -1, 1, -1] and sum(diffs) == 0
    assert a.rounds == 4 and a.cycles == 106.5 and a.loops == 10


def test_interleaved_calibrates_each_entry_on_its_own(monkeypatch):
    # without a loop count, each entry's loops double until its round lasts
    # min_time: an op ten times dearer gets a tenth of the loops (or so)
    def fake(test, loops, **where):
        ns = loops * (10 if test == "cmpxchg" else 1)
        return ns, ns

    monkeypatch.setattr(_core, "time_bench_round", fake)
    a, b = tb.interleaved([("cmpxchg", {}), ("tsc_read", {})], rounds=2, warmup=0,
                          min_time=1e-3)
    assert a.loops * 10 >= 1e6 and b.loops >= 1e6
    assert b.loops > a.loops


def test_a_timestamp_costs_more_than_an_empty_iteration():
    # Not a speed claim: rdtsc with two lfences cannot be cheaper than a
    # compiler barrier, on any machine.
    assert time_bench("tsc_read", loops=50000, rounds=3).cycles > \
        time_bench("for_loop", loops=50000, rounds=3).cycles


def test_loop_calibration_reaches_the_minimum_round_time():
    loops = calibrate_loops("for_loop", min_time=0.002)
    cycles, wall_ns = _core.time_bench_round("for_loop", loops)
    assert loops >= 1000 and cycles > 0
    assert time_bench("for_loop", rounds=1, min_time=0.002).loops >= 1000


def test_tests_listed():
    assert {"for_loop", "tsc_read"} <= set(tb.tests())


@pytest.mark.parametrize("kwargs,message", [
    (dict(test="nope"), "unknown time_bench test"),
    (dict(test="for_loop", loops=0), "loops must be positive"),
    (dict(test="for_loop", loops=10, rounds=0), "rounds must be positive"),
    (dict(test="for_loop", loops=10, warmup=-1), "warmup"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(BadInput, match=message):
        time_bench(**kwargs)


# The kernel's time_bench_sample suite, as smpnet has always run it: same
# names, same order, smpnet's spin_lock_unlock_bh last.
KERNEL_SUITE = (
    ("for_loop", None),
    ("spin_lock_unlock", "plain"),
    ("spin_lock_unlock_irqsave", "irqsave"),
    ("irqsave_before_lock", "irqsave_before_lock"),
    ("spin_lock_unlock_irq", "irq"),
    ("simple_irq_disable_before_lock", "irq_disable_before_lock"),
    ("local_BH_disable_enable", None),
    ("local_IRQ_disable_enable", None),
    ("local_irq_save_restore", None),
    ("preempt_disable_enable", None),
    ("cmpxchg", None),
    ("this_cpu_cmpxchg", None),
    ("function_call_cost", None),
    ("func_ptr_call_cost", None),
    ("spin_lock_unlock_bh", "bh"),
)


def test_the_suite_is_the_kernels_in_its_order():
    assert tb.SUITE == KERNEL_SUITE


def test_every_list_of_tests_comes_from_the_one_table():
    names = _core.TIME_BENCH_NAMES
    instruments = ("tsc_read", "ref_spin_lock_unlock", "spin_lock_unlock_irqsave_nopushf",
                   # the rest: the referee's
                   "atomic_fetch_add_unrolled", "cmpxchg_unrolled", "atomic_xchg_unrolled",
                   "this_cpu_inc", "function_calls_unrolled", "irq_save_restore_calls",
                   "bpf_spin_lock_pair")
    assert [t for t, _ in tb.SUITE] == [n for n in names if n not in instruments]
    assert names[-len(instruments):] == instruments   # smpnet's instruments, last
    assert dict(_core.TIME_BENCH_TESTS) == _core.TIME_BENCH_NEEDS and len(names) == len(set(names))
    assert tb.tests() == list(names)
    for test, variant in tb.SUITE:
        # a lock test needs a lock, and measures a variant the core has
        assert (variant is not None) == (_core.TIME_BENCH_NEEDS[test] == 2)
        assert variant is None or variant in _core.LOCK_VARIANTS
    assert tb.TEST_OF_VARIANT == {v: t for t, v in KERNEL_SUITE if v}
    assert set(tb.TEST_OF_VARIANT) == set(_core.LOCK_VARIANTS)   # every variant has its test


# ---------------------------------------------------------------- rounds a switch spoiled

def test_a_round_whose_thread_was_switched_out_is_rerun_with_half_the_ops():
    import time as _time

    calls = []

    def one_round(n):
        calls.append(n)
        if len(calls) == 1:
            _time.sleep(0.002)   # off the CPU: a voluntary switch, counted
        return 10 * n, 1000

    r = tb.clean_round(one_round, 64000)
    assert calls == [64000, 32000]
    assert (r.dropped, r.spoiled, r.loops, r.per_op) == (1, False, 32000, 10.0)


def test_a_round_switched_out_every_time_is_kept_and_said_so(monkeypatch):
    counter = iter(range(10 ** 6))
    monkeypatch.setattr(tb, "context_switches", lambda: next(counter))
    calls = []
    r = tb.clean_round(lambda n: (calls.append(n), (n, 1))[1], 4000)
    assert len(calls) == tb.MAX_ATTEMPTS and r.spoiled
    assert r.dropped == tb.MAX_ATTEMPTS - 1
    assert calls[:3] == [4000, 2000, 1000] and min(calls) == tb.MIN_LOOPS


def test_the_dropped_rounds_reach_the_result(monkeypatch):
    seen = {"n": 0}

    def switches():   # every 5th reading moves: some rounds spoiled, none twice in a row
        seen["n"] += 1
        return seen["n"] // 5

    monkeypatch.setattr(tb, "context_switches", switches)
    res = tb.time_bench("for_loop", loops=2000, rounds=6)
    assert res.dropped > 0 and res.spoiled == 0 and len(res.samples) == 6


def test_a_row_with_no_clean_round_is_marked(monkeypatch, capsys, tmp_path, allowed):
    """Every attempt of every round switched out (a co-runner that never
    leaves the CPU): the run completes, and each row says that its figure
    had no clean round, in the JSON and in the table, not silently."""
    import itertools
    import json

    from smpnet.cli import main

    counter = itertools.count()
    monkeypatch.setattr(tb, "context_switches", lambda: next(counter))
    out = tmp_path / "r.json"
    assert main(["locks", "--cpus", str(allowed[0]), "--algo", "tas", "--variant", "plain",
                 "--rounds", "2", "--loops", "1000", "--output", str(out)]) == 0
    text = capsys.readouterr().out
    rows = json.loads(out.read_text())["results"]
    assert rows and all(r["no_clean_round"] and r["spoiled_rounds"] == r["rounds"] == 2
                        for r in rows)
    assert "\nspin_lock_unlock [no clean round] " in text
    assert f"{len(rows)} rows had no clean round at all, marked [no clean round]" in text
