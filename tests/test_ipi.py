"""What an IPI costs, measured the kernel's way: ipi_cycles() times the send
(tgkill with a kick less without, in pairs), the target's entry (the gap a
membarrier IPI leaves in a spinning thread) and the round trip against its
floor, on two real CPUs, within a time bound; with one real CPU nothing."""
import os
import signal
import time

import pytest

from smpnet import _core


def test_the_send_and_the_entry_are_measured_on_two_cpus(allowed):
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs")
    r = _core.ipi_cycles(allowed[1], allowed[0], rounds=50, timeout_s=60)
    assert (r["sender_cpu"], r["target_cpu"]) == (allowed[1], allowed[0])
    assert r["cross_cpu"] is True and r["complete"] is True
    # one pair a round; a send sample is the kick's tgkill less the plain
    # one's, averaged over two rounds of opposite order
    assert len(r["queued"]) == len(r["kicked"]) == 50 and len(r["send"]) == 25
    d = [k - q for q, k in zip(r["queued"], r["kicked"])]
    assert r["send"] == [(d[i] + d[i + 1]) / 2 for i in range(0, 50, 2)]
    assert all(q > 0 and k > 0 for q, k in zip(r["queued"], r["kicked"]))
    if r["membarrier"]:
        assert len(r["entry"]) == len(r["round_trip"]) == len(r["floor"]) == 50
        assert all(x > 0 for x in r["entry"] + r["round_trip"] + r["floor"])


def test_on_one_real_cpu_nothing_crosses_cpus(allowed):
    r = _core.ipi_cycles(allowed[0], allowed[0], rounds=10)
    assert r["cross_cpu"] is False
    assert all(r[k] == [] for k in ("send", "queued", "kicked", "entry", "round_trip", "floor"))


def test_it_returns_within_its_time_bound(allowed):
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs")
    # every round pauses 20 us: 100000 rounds cannot finish in 1 ms; either
    # none did (with membarrier, its floor and its rounds come first) or some
    t0 = time.monotonic()
    try:
        r = _core.ipi_cycles(allowed[1], allowed[0], rounds=100000, timeout_s=1e-3)
    except RuntimeError as e:
        assert "no IPI's send was measured" in str(e)
    else:
        assert r["complete"] is False and len(r["queued"]) < 100000
    assert time.monotonic() - t0 < 60


def test_the_kick_signal_handler_is_put_back(allowed):
    # a handler of the caller's on the kick's signal still runs afterwards
    # (signal.getsignal would only say what Python remembers)
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs (with one, no handler is touched)")
    sig, seen = signal.SIGRTMIN + 1, []
    old = signal.signal(sig, lambda *_: seen.append(1))
    try:
        _core.ipi_cycles(allowed[1], allowed[0], rounds=5, timeout_s=60)
        signal.raise_signal(sig)
        assert seen == [1]
    finally:
        signal.signal(sig, old)


def test_a_caller_that_blocks_the_kick_signal_still_gets_the_send(allowed):
    # the peer thread inherits the caller's mask: it must unblock the kick
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs")
    sig = signal.SIGRTMIN + 1
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
    try:
        r = _core.ipi_cycles(allowed[1], allowed[0], rounds=10, timeout_s=60)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert r["complete"] is True and len(r["send"]) == 5


def test_bad_arguments(allowed):
    a = allowed[0]
    with pytest.raises(ValueError):
        _core.ipi_cycles(a, a, rounds=0)
    with pytest.raises(ValueError):
        _core.ipi_cycles(-1, a)
    with pytest.raises(ValueError):
        _core.ipi_cycles(a, a, timeout_s=0)
    absent = (os.cpu_count() or 1) + 1     # a CPU this machine does not have
    if absent < 1024:
        with pytest.raises(OSError):
            _core.ipi_cycles(absent, a, rounds=1, timeout_s=5)
