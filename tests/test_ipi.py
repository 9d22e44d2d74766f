"""What an IPI costs, measured the kernel's way: ipi_cycles() times the send
(tgkill with a kick less without, in pairs), the target's entry (the gap a
membarrier IPI leaves in a spinning thread) and the round trip against its
floor, on two real CPUs, within a time bound; with one real CPU nothing."""
import os

import pytest

from smpnet import _core


def test_the_send_and_the_entry_are_measured_on_two_cpus(allowed):
    if len(allowed) < 2:
        pytest.skip("needs two real CPUs")
    r = _core.ipi_cycles(allowed[1], allowed[0], rounds=50, timeout_s=60)
    assert (r["sender_cpu"], r["target_cpu"]) == (allowed[1], allowed[0])
    assert r["cross_cpu"] is True and r["complete"] is True
    # one pair a round, its send the kick's tgkill less the plain one's
    assert len(r["queued"]) == len(r["kicked"]) == len(r["send"]) == 50
    assert r["send"] == [k - q for q, k in zip(r["queued"], r["kicked"])]
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
    # every round pauses 20 us: 100000 rounds cannot finish in 1 ms
    with pytest.raises(RuntimeError, match="no IPI's send was measured"):
        _core.ipi_cycles(allowed[1], allowed[0], rounds=100000, timeout_s=1e-3)


def test_the_kick_signal_handler_is_put_back(allowed):
    import signal
    sig = signal.SIGRTMIN + 1
    before = signal.getsignal(sig)
    _core.ipi_cycles(allowed[-1], allowed[0], rounds=5, timeout_s=60)
    assert signal.getsignal(sig) == before


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
