"""Spinlocks and the IRQ model, uncontended, one pinned CPU.

    pytest bench/ --benchmark-only
    pytest bench/ --benchmark-only -k "qspinlock or ticket" --benchmark-group-by=param:test
"""
import pytest

from smpnet.lockbench import ALGOS
from smpnet.time_bench import SUITE

LOCK_TESTS = [t for t, v in SUITE if v]
IRQ_TESTS = ["local_BH_disable_enable", "local_IRQ_disable_enable", "local_irq_save_restore",
             "preempt_disable_enable"]


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


@pytest.mark.parametrize("test", ["cmpxchg", "this_cpu_cmpxchg"])
def test_atomic(time_bench_op, test):
    time_bench_op("atomic", test)


@pytest.mark.parametrize("test", ["function_call_cost", "func_ptr_call_cost"])
def test_call(time_bench_op, test):
    time_bench_op("call", test)
