"""Spinlocks and the IRQ model, uncontended, one pinned CPU.

    pytest bench/ --benchmark-only
    pytest bench/ --benchmark-only -k "qspinlock or ticket" --benchmark-group-by=param:test
    pytest bench/ --benchmark-only -k harness      # smpnet / bare C, every algorithm
"""
import statistics

import pytest

from smpnet import _core
from smpnet.experiments.common.lockbench import ALGOS, BASELINE
from smpnet.machine.tsc import tsc_hz
from smpnet.measure import stats
from smpnet.measure.time_bench import SUITE

from conftest import LOOPS

# every test of the suite, by what it needs (the time_bench table says)
LOCK_TESTS = [t for t, v in SUITE if v]
IRQ_TESTS = [t for t, _ in SUITE if _core.TIME_BENCH_NEEDS[t] == 1]
PLAIN_TESTS = [t for t, _ in SUITE if _core.TIME_BENCH_NEEDS[t] == 0 and t != "for_loop"]


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("test", LOCK_TESTS)
def test_spinlock(time_bench_op, lock_machine, test, algo):
    m, region = lock_machine
    time_bench_op("spinlock", test, seg=m.segment.buf, cpu=0, lock_region=region,
                  lock_index=ALGOS.index(algo))


HARNESS_ROUNDS = 21


@pytest.mark.parametrize("algo", ALGOS)
def test_harness_overhead(benchmark, pinned, lock_machine, algo):
    """spin_lock_unlock's specialised loop against the hand-written C loop
    of the same algorithm (reference.h), interleaved: before each timed
    smpnet round, outside the timing, one round of the bare loop. The timed
    value is smpnet's round; extra_info has harness_overhead, the median of
    the rounds' smpnet / bare ratios, with its 95 % interval (target: at
    most 1.05 for every algorithm but pthread)."""
    m, region = lock_machine
    where = dict(seg=m.segment.buf, cpu=0, lock_region=region, lock_index=ALGOS.index(algo))
    benchmark.group = "harness"
    bare, smp = [], []

    def bare_round():
        bare.append(_core.time_bench_round(BASELINE, LOOPS, **where)[0] / LOOPS)

    def smpnet_round():
        smp.append(_core.time_bench_round("spin_lock_unlock", LOOPS, **where)[0] / LOOPS)

    benchmark.pedantic(smpnet_round, setup=bare_round, rounds=HARNESS_ROUNDS, warmup_rounds=1)
    # the warm-up round ran its setup too: pair the measured rounds only
    # (with --benchmark-disable, one round ran)
    rounds = HARNESS_ROUNDS if benchmark.enabled else 1
    bare, smp = bare[-rounds:], smp[-rounds:]
    ratio, (lo, hi) = stats.median_ci([s / b for s, b in zip(smp, bare)])
    med = statistics.median(smp)
    benchmark.extra_info.update(
        algo=algo, loops=LOOPS, cycles_per_op=med, ns_per_op=med * 1e9 / tsc_hz(),
        bare_cycles_per_op=statistics.median(bare), harness_overhead=ratio,
        harness_overhead_interval=[lo, hi])
    assert len(smp) == len(bare) == rounds and lo <= ratio <= hi


@pytest.mark.parametrize("restore", ["sti", "popf"])
@pytest.mark.parametrize("test", IRQ_TESTS)
def test_irqflags(time_bench_op, lock_machine, test, restore):
    m, _ = lock_machine
    time_bench_op("irqflags", test, seg=m.segment.buf, cpu=0, popf=restore == "popf")


@pytest.mark.parametrize("test", PLAIN_TESTS)
def test_plain(time_bench_op, test):
    """Ops that need no emulated CPU: atomics and calls."""
    group = "atomic" if "cmpxchg" in test else "call" if "call" in test else "other"
    time_bench_op(group, test)
