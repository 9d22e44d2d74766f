"""The watchdog (machine/watchdog.py): a run that makes no progress is
stopped a little past its estimate, naming the worker and its state; one
that still works, its count or its heartbeats rising, is slow, not stuck."""
import os
import signal
import time

import pytest

from smpnet import Machine, _core

from conftest import assert_all_gone


@pytest.mark.parametrize("how,state", [("stop", "stopped"), ("sleep", "sleeping")])
def test_the_watchdog_names_the_worker_that_makes_no_progress(allowed, monkeypatch, how, state):
    from smpnet.machine import machine
    from smpnet.errors import Stalled

    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 0.3)

    def body(ctx):
        if ctx.cpu == 1:
            if how == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
            else:
                time.sleep(60)
        return _core.idle_poll(ctx.seg, 0.1)

    with Machine(cpus=allowed, ncpus=2, oversubscribe=True) as m:
        with pytest.raises(Stalled) as e:
            m.run(body, expected=0.1)
        assert e.value.cpu == 1 and e.value.state == state
        assert e.value.pid == int(m.cpu_state["pid"][1]) and e.value.exit_code == 1
        assert f"emulated CPU 1 (real CPU {m.cpu_map[1]}, pid {e.value.pid}) made no progress: " \
               f"{state}" in str(e.value)
        assert_all_gone(m)


def test_the_watchdog_waits_for_a_run_that_keeps_its_estimate(allowed, monkeypatch):
    from smpnet.machine import machine

    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 2.0)
    with Machine(cpus=allowed) as m:
        # 0.3 s of work against an estimate of 0.3 s (and 2 s of slack): no watchdog
        assert m.run(lambda ctx: _core.idle_poll(ctx.seg, 0.3), expected=0.3) == \
            [False] * m.nr_cpus


def test_a_run_past_its_estimate_goes_on_while_its_progress_count_rises(allowed, monkeypatch):
    """A slow run (oversubscribed, loaded) is not stopped while it works; the
    same run stopped by its count standing still is named."""
    from smpnet.machine import machine
    from smpnet.errors import Stalled

    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 0.4)
    monkeypatch.setattr(machine, "WATCHDOG_POLL_S", 0.05)

    def work(ctx, steps, stall_at):
        for i in range(steps):
            if i == stall_at:
                time.sleep(60)
            ctx.machine.lstats[ctx.cpu]["packets"] += 1
            time.sleep(0.05)
        return True

    count = lambda m: int(m.lstats["packets"].sum())  # noqa: E731
    with Machine(cpus=allowed) as m:
        # 30 steps of 50 ms, 1.5 s, against an estimate of 0.1 s and 0.4 s of slack
        assert m.run(work, 30, -1, expected=0.1, progress=count) == [True] * m.nr_cpus
        with pytest.raises(Stalled, match="made no progress: sleeping"):
            m.run(work, 30, 10, expected=0.1, progress=count)
        assert_all_gone(m)


def _rerun_rounds(ctx, n, stop_at):
    """n rounds of the harness, each attempt 2 ms and every one thrown out
    as switched out (the test's context_switches): a loaded CPU's rounds.
    CPU 1 stops itself (SIGSTOP) before round `stop_at`."""
    from smpnet.measure import time_bench

    kept = []
    for i in range(n):
        if ctx.cpu == 1 and i == stop_at:
            os.kill(os.getpid(), signal.SIGSTOP)
        kept.append(time_bench.clean_round(lambda loops: (time.sleep(0.002), (loops, 1))[1],
                                           1000))
    return time_bench.round_counts(kept)


def test_a_run_whose_rounds_are_all_rerun_is_slow_not_stuck(allowed, monkeypatch):
    """A co-runner on the CPU spoils every round, so each is rerun up to
    MAX_ATTEMPTS times and the run takes far longer than its estimate: its
    workers' heartbeats keep the watchdog off it. A worker that stops
    (SIGSTOP) among the same rounds is still found and named."""
    import itertools

    from smpnet.errors import Stalled
    from smpnet.machine import machine
    from smpnet.measure import time_bench

    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 0.4)
    monkeypatch.setattr(machine, "WATCHDOG_POLL_S", 0.05)
    switches = itertools.count()
    monkeypatch.setattr(time_bench, "context_switches", lambda: next(switches))
    rounds = 60   # 60 x 8 attempts of 2 ms: about 1 s, against 0.2 s and the 0.4 s slack
    with Machine(cpus=allowed, ncpus=2, oversubscribe=True) as m:
        out = m.run(_rerun_rounds, rounds, -1, expected=0.1)
        assert out == [{"dropped_rounds": rounds * (time_bench.MAX_ATTEMPTS - 1),
                        "spoiled_rounds": rounds, "no_clean_round": True}] * 2
        with pytest.raises(Stalled) as e:
            m.run(_rerun_rounds, rounds, 5, expected=0.1)
        assert (e.value.cpu, e.value.state) == (1, "stopped")
        assert_all_gone(m)
