"""The cross-CPU wake-up an IPI's sender is charged: futex_wake_cycles()
measures it for real (a FUTEX_WAKE of a thread asleep in FUTEX_WAIT), with
a time bound, on two real CPUs or, with one, as a same-CPU wake-up."""
import math
import os
import time

import pytest

from smpnet import _core


def check_figure(r, rounds):
    assert math.isfinite(r["cycles"]) and r["cycles"] > 0
    assert r["min"] <= r["cycles"] <= r["max"]
    # every timed wake woke the sleeper (FUTEX_WAKE returned 1), one a round
    assert r["woken"] == r["rounds"] == len(r["samples"]) == rounds and r["complete"]
    assert r["samples"] == sorted(r["samples"]) and r["samples"][0] > 0


def test_a_cross_cpu_wake_up_is_measured(allowed):
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs")
    r = _core.futex_wake_cycles(allowed[1], allowed[0], rounds=200, timeout_s=60)
    check_figure(r, 200)
    assert r["cross_cpu"] is True
    assert (r["waker_cpu"], r["sleeper_cpu"]) == (allowed[1], allowed[0])


def test_on_one_real_cpu_it_is_a_same_cpu_wake_up(allowed):
    r = _core.futex_wake_cycles(allowed[0], allowed[0], rounds=100, timeout_s=60)
    check_figure(r, 100)
    assert r["cross_cpu"] is False


def test_it_returns_within_its_time_bound(allowed):
    # the first wake waits 20 us for the sleeper to sleep: past a 10 us
    # deadline, no wake can be timed, and both threads give up
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="no FUTEX_WAKE woke"):
        _core.futex_wake_cycles(allowed[0], allowed[0], rounds=10, timeout_s=1e-5)
    assert time.monotonic() - t0 < 5


def test_bad_arguments(allowed):
    a = allowed[0]
    with pytest.raises(ValueError):
        _core.futex_wake_cycles(a, a, rounds=0)
    with pytest.raises(ValueError):
        _core.futex_wake_cycles(-1, a)
    with pytest.raises(ValueError):
        _core.futex_wake_cycles(a, a, timeout_s=0)
    absent = (os.cpu_count() or 1) + 1     # a CPU this machine does not have
    if absent < 1024:
        with pytest.raises(OSError):
            _core.futex_wake_cycles(absent, a, rounds=1, timeout_s=5)


def test_a_thread_that_cannot_start_names_the_limit():
    """pthread_create's EAGAIN under ulimit -u (or kernel.threads-max) said
    only "Resource temporarily unavailable" (a non-root user's limit: root
    is exempt, so this checks the message pair_run's callers raise)."""
    import errno
    e = _core.pair_run_error(errno.EAGAIN)
    assert isinstance(e, OSError) and e.errno == errno.EAGAIN
    assert "ulimit -u" in str(e) and "kernel.threads-max" in str(e)
    assert "ulimit" not in str(_core.pair_run_error(errno.EPERM))
