"""Spinlocks and the IRQ model, uncontended, one pinned CPU.

    pytest bench/ --benchmark-only
    pytest bench/ --benchmark-only -k "qspinlock or ticket" --benchmark-group-by=param:test
"""
import pytest

from smpnet import _core
from smpnet.lockbench import ALGOS
from smpnet.time_bench import SUITE

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


def test_spinlock_hand_written_c(time_bench_op, lock_machine):
    """The baseline for spin_lock_unlock[qspinlock]: the same instructions in C."""
    m, region = lock_machine
    time_bench_op("spinlock", "ref_spin_lock_unlock", seg=m.segment.buf, cpu=0,
                  lock_region=region, lock_index=ALGOS.index("qspinlock"))


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
