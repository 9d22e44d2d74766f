"""ARP resolution: the neighbour state machine on an injected clock, the hosts, the CLI."""
import dataclasses
import json

import numpy as np

import pytest

from smpnet import _core
from smpnet.cli import main
from smpnet.experiments import arp
from smpnet.experiments.arp import ping
from smpnet.machine import tsc

NONE, INCOMPLETE, REACHABLE, STALE, DELAY, PROBE, FAILED = 0, 1, 2, 4, 8, 16, 32


def test_none_incomplete_reachable_and_the_queue_goes_out():
    n = _core.Neigh(hz=100, probe="immediate")
    assert n.state == NONE
    assert n.event_send(1000, seq=7) == 1           # queued while unresolved
    assert n.state == INCOMPLETE and n.queued == (1, 84)
    assert n.stats["solicits"] == 1                 # immediate: sent before returning
    assert n.timer == 1000 + 100                    # retries every retrans_time (1 s)
    n.arp_reply(1003)
    assert n.state == REACHABLE and n.xmitted == [7] and n.queued == (0, 0)
    assert n.event_send(1004, seq=8) == 0           # resolved: goes at once


def test_timer_mode_solicits_only_at_the_next_tick():
    n = _core.Neigh(hz=100, probe="timer")
    n.event_send(1000)
    assert n.stats["solicits"] == 0 and n.timer == 1001
    n.tick(1000)                                    # the same jiffy: nothing yet
    assert n.stats["solicits"] == 0
    n.tick(1001)                                    # the tick boundary
    assert n.stats["solicits"] == 1 and n.stats["first_solicit_jiffies"] == 1001
    assert n.timer == 1001 + 100


def test_reachable_stale_delay_probe():
    n = _core.Neigh(hz=100, probe="immediate")
    n.event_send(1000)
    n.arp_reply(1005)                               # confirmed 1005, used 1000
    assert n.state == REACHABLE and n.timer == 1005 + 3000
    n.tick(4005)                                    # still within reachable_time
    assert n.state == REACHABLE
    n.tick(n.timer)                                 # past it, and not used lately
    assert n.state == STALE and n.timer == 0
    assert n.event_send(5000) == 0                  # STALE sends, and starts DELAY
    assert n.state == DELAY and n.timer == 5000 + 500
    solicits = n.stats["solicits"]
    n.tick(5500)                                    # no confirmation in 5 s
    assert n.state == PROBE and n.probes == 1
    assert n.stats["solicits"] == solicits + 1 and n.timer == 5500 + 100


def test_probe_fails_after_ucast_probes():
    n = _core.Neigh(hz=100, probe="immediate")
    n.event_send(1000)
    n.arp_reply(1001)
    n.tick(n.timer)                                  # reachable_time is up: re-armed by HZ/2
    n.tick(n.timer)                                  # not used lately: REACHABLE -> STALE
    assert n.state == STALE
    n.event_send(5000)                               # -> DELAY
    n.tick(5500)                                     # -> PROBE, first unicast probe
    solicits = n.stats["solicits"]
    now = 5500
    while n.state == PROBE and now < 7000:
        now += 1
        n.tick(now)
    assert n.state == FAILED
    assert n.stats["solicits"] - solicits == 2       # 3 unicast probes in all (ucast_probes)
    assert now == 5500 + 3 * 100                     # FAILED 3 s after entering PROBE


def test_delay_back_to_reachable_when_confirmed():
    n = _core.Neigh(hz=100, probe="immediate")
    n.event_send(1000)
    n.arp_reply(1001)
    n.tick(n.timer)
    n.tick(n.timer)                                  # STALE
    n.event_send(5000)                               # DELAY, timer at 5500
    assert n.state == DELAY
    n.arp_reply(5100)                                # confirmed while in DELAY
    assert n.state == REACHABLE


@pytest.mark.parametrize("probe", ["timer", "immediate"])
def test_incomplete_fails_after_mcast_probes_and_errors_every_queued_packet(probe):
    n = _core.Neigh(hz=100, probe=probe)
    for seq in (1, 2, 3):
        n.event_send(1000 + seq, seq=seq)
    now = 1000
    while n.state == INCOMPLETE and now < 2000:
        now += 1
        n.tick(now)
    assert n.state == FAILED
    assert n.stats["solicits"] == 3                 # mcast_probes, after ucast_probes
    assert n.errored == [1, 2, 3] and n.stats["failed"] == 3
    assert n.queued == (0, 0)


def test_arp_queue_byte_limit_drops_the_oldest():
    n = _core.Neigh(hz=100, probe="timer", queue_len_bytes=200)
    for seq in (1, 2, 3):
        n.event_send(1000, seq=seq, size=84)
    assert n.queued == (2, 168) and n.stats["unres_discards"] == 1
    n.arp_reply(1001)
    assert n.xmitted == [2, 3]                      # the oldest was dropped


def test_arp_delete_forgets_the_entry():
    n = _core.Neigh(hz=250, probe="immediate")
    n.event_send(1000)
    n.arp_reply(1001)
    n.delete()
    assert n.state == NONE and n.queued == (0, 0)


@pytest.mark.parametrize("hz", [0, 99, 1024])
def test_hz_validated(hz):
    with pytest.raises(ValueError, match="HZ"):
        _core.Neigh(hz=hz)


# ------------------------------------------------------------------ the two hosts

def test_hosts_resolve_and_ping(allowed):
    rows, verdicts, why, transcripts = arp.run(allowed, ["timer", "immediate"], hz=1000,
                                               trials=5, count=3, ncpus=2, oversubscribe=True)
    for r in rows:
        assert r["replies"] == 15 and r["errors"] == r["timeouts"] == 0
        assert r["solicits"] == 5 and r["peer_arp_requests"] == 5
        assert r["peer_learned_state"] == STALE     # B learned A from its request
        assert r["first_ms"]["min"] <= r["first_ms"]["median"] <= r["first_ms"]["max"]
        assert len(r["first_samples_ms"]) == 5
    assert transcripts[arp.transcript_key("timer", "uniform")][2].startswith("64 bytes from 192.168.20.108: icmp_seq=1 ttl=64")


def test_host_as_jiffy_is_the_tsc_hz_over_hz(allowed):
    # sent just after a tick boundary, the timer mode's first ping waits
    # for the next one: a whole jiffy of host A's, tsc_hz / HZ cycles. A
    # jiffy of tsc_hz / (HZ + 1) would make it 0.990 of 10 ms at HZ=100 (every
    # other check counts in host A's own jiffies). A trial preempted between
    # the boundary and its send comes out short, one preempted later long:
    # the 7th of 9 holds against the first kind on a loaded machine. A
    # longer one (tsc_hz / (HZ - 1)) no latency bounds (preemption lengthens
    # some trials, shortens others): the jiffy host A ran on, in the row
    rows, _, _, _ = arp.run(allowed, ["timer"], hz=100, trials=9, count=1, ncpus=2,
                            oversubscribe=len(allowed) < 2, phases=["tick"])
    (r,) = rows
    assert r["replies"] == 9 and 0.995 * 10.0 <= sorted(r["first_samples_ms"])[6]
    assert r["jiffy_cycles"] == pytest.approx(tsc.tsc_hz() / 100, rel=1e-9)


def test_peer_down_errors_every_queued_ping(allowed):
    rows, verdicts, why, transcripts = arp.run(allowed, ["immediate"], trials=1, count=3,
                                               peer_down=True, ncpus=2, oversubscribe=True)
    (r,) = rows
    assert r["errors"] == 3 and r["failed"] == 3 and r["replies"] == 0
    assert r["solicits"] == 3 and verdicts == [] and "peer down" in why
    assert 2.9 < r["unreachable_after_s"] < 6  # three probes, retrans_time (1 s) apart
    assert transcripts[arp.transcript_key("immediate", "uniform")][2] == \
        "From 192.168.20.1 icmp_seq=1 Destination Host Unreachable"


def test_arp_json(capsys, allowed):
    two = ["--cpus", ",".join(map(str, allowed[:2]))] if len(allowed) >= 2 else \
        ["--ncpus", "2", "--oversubscribe"]
    assert main(["arp", "--json", "--trials", "20", "--hz", "1000"] + two) == 0
    env = json.loads(capsys.readouterr().out)
    # immediate runs twice: seed 000's A/A control
    assert [r["probe"] for r in env["results"]] == ["timer", "immediate", arp.AA]
    for r in env["results"]:
        assert {"probe", "hz", "trials", "first_ms", "later_ms", "solicits", "unres_discards",
                "failed"} <= set(r)
        assert set(r["first_ms"]) == {"min", "median", "p99", "max"}
        assert r["first_ms"]["min"] <= r["first_ms"]["median"] <= r["first_ms"]["max"]
    if len(allowed) >= 2:
        (v,) = env["verdicts"]
        assert v["seed"] == "000" and v["interval"][0] <= v["measured"] <= v["interval"][1]
        assert v["kind"] == "model" and v["rule"] and v["unit"] == "ms"
        # pairs: the chunks of trials (20 trials: 10 chunks of 2); the seed's size at
        # HZ=1000 is a tenth of its 9.76 ms
        assert v["pairs"] == arp.CHUNKS and v["size"] == pytest.approx((9.91 - 0.152) / 10)
        assert v["size_ratio"][0] == pytest.approx(v["measured"] / v["size"])
        assert v["control"]["sides"] == "immediate against immediate"
        # the first ping's wait in ticks (HZ=1000: a 1 ms tick), from the timer
        # rows' own samples, and the seed's sample placed among them
        timer = np.asarray(env["results"][0]["first_samples_ms"], dtype=float)
        waits = timer[np.isfinite(timer)]          # the answered ones, as the verdict's
        w = v["timer_wait_ticks"]
        assert w["median"] == pytest.approx(float(np.median(waits)))
        assert w["max"] == pytest.approx(float(waits.max()))
        assert w["median"] <= w["p99"] <= w["max"]
        assert v["seed_wait_ticks"] == pytest.approx(0.991)
        assert v["seed_percentile"] == pytest.approx(100 * float(np.mean(waits <= 0.991)))
        assert v["label"] == "phase uniform"


def test_arp_text(capsys):
    assert main(["arp", "--trials", "3", "--hz", "1000", "--ncpus", "2",
                 "--oversubscribe"]) == 0
    out = capsys.readouterr().out
    assert "PING 192.168.20.108 (192.168.20.108) 56(84) bytes of data." in out
    # each side's first trial: timer, immediate and immediate again (the A/A control)
    assert out.count("64 bytes from 192.168.20.108: icmp_seq=") == 9
    assert "median" in out and "p99" in out


@pytest.mark.parametrize("argv", [
    ["--hz", "123"], ["--hz", "x"], ["--probe", "lazy"], ["--trials", "0"], ["--count", "0"],
    ["--count", "65"], ["--trials", "1000000"], ["--ncpus", "3"],
    ["--peer-down", "--trials", "21"],
])
def test_arp_bad_input_exit_2(capsys, argv):
    assert main(["arp", "--ncpus", "2", "--oversubscribe"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("smpnet-bench: ")


def test_the_rng_seed_starts_the_random_moments(monkeypatch, tmp_path, allowed):
    """A given rng_seed reaches host A's C loop for every probe mode (a
    benchmark's rounds then repeat); without one, a run draws one for all its
    modes (so that their trials pair by phase), and the next run another."""
    log = tmp_path / "seeds"
    real = _core.arp_ping_run

    def recording(*args):
        with open(log, "a") as f:
            f.write(f"{args[10]}\n")   # the RNG seed; then the phase, the wire costs
        return real(*args)

    monkeypatch.setattr(_core, "arp_ping_run", recording)
    two = dict(ncpus=2, oversubscribe=len(allowed) < 2, trials=3)   # 3 chunks of one trial
    arp.run(allowed, rng_seed=12345, **two)
    # chunk by chunk, every side in turn, in alternating orders: one seed per
    # chunk, the same for each side, derived from the given one
    chunk = [12345, 12345 + 0x9E3779B97F4A7C15, (12345 + 2 * 0x9E3779B97F4A7C15) % 2 ** 64]
    assert [int(x) for x in log.read_text().split()] == [c for c in chunk for _ in range(3)]
    log.unlink()
    arp.run(allowed, **two)
    arp.run(allowed, **two)
    drawn = log.read_text().split()
    assert len(drawn) == 18 and len(set(drawn[:3])) == 1 and drawn[0] != drawn[9]


def test_pairs_are_chunk_medians_of_the_trials_both_modes_answered():
    nan = float("nan")
    samples = {"timer": [np.array([5.0, 7.0, nan]), np.array([4.0, 9.0, 6.0])],
               "immediate": [np.array([1.0, 1.0, 1.0]), np.array([nan, 2.0, 2.0])]}
    # chunk 1: trials 1-2 answered by both: 4, 6 -> 5; chunk 2: trials 2-3: 7, 4 -> 5.5
    assert ping.pairs(samples, "timer", "immediate") == [5.0, 5.5]
    assert ping.pairs(samples, "timer", arp.AA) == []
    assert arp.arp_sides(["immediate", "timer"]) == ["immediate", arp.AA, "timer"]
    assert arp.arp_sides(["timer", "immediate"], peer_down=True) == ["timer", "immediate"]


def test_each_phase_reaches_host_a_and_names_its_rows(monkeypatch, tmp_path, allowed):
    # --phase runs every send phase in turn: tick asks host A to start each
    # ping just after a tick boundary, uniform at a random point of a tick
    log = tmp_path / "phases"
    real = _core.arp_ping_run

    def recording(*args):
        with open(log, "a") as f:
            f.write(f"{args[7]} {args[11]}\n")   # the probe mode, at_tick
        return real(*args)

    monkeypatch.setattr(_core, "arp_ping_run", recording)
    rows, verdicts, _, transcripts = arp.run(
        allowed, ["immediate"], trials=1, count=1, ncpus=2, oversubscribe=len(allowed) < 2,
        phases=["tick", "uniform"])
    assert log.read_text().split("\n")[:2] == ["immediate True", "immediate False"]
    assert [(r["probe"], r["phase"]) for r in rows] == [("immediate", "tick"),
                                                        ("immediate", "uniform")]
    assert set(transcripts) == {arp.transcript_key("immediate", p) for p in ("tick", "uniform")}


def test_a_result_from_before_phase_compares_as_uniform(tmp_path):
    from smpnet.report import results
    row = {"probe": "timer", "hz": 100, "first_ms": {"median": 5.0, "min": 1.0, "max": 9.0}}
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"schema": 2, "command": "arp", "results": [row]}))
    (table,) = results.load(str(p)).tables.values()
    (r,) = table.values()
    assert r.key == {"probe": "timer", "hz": 100, "phase": "uniform"}


def test_a_calibrated_wire_time_is_in_the_estimate():
    """A profile whose veth ping took seconds (a slow nested guest): its
    frames' wire time is in each trial's estimate, so 20,000 trials are
    hours, over the one-hour rule, where without it they are minutes."""
    from smpnet import bounds
    cal = {"veth_ping": {"first_us": 2.5e6, "later_us": 1e6}}
    p = dataclasses.replace(arp.plan([0, 1], True), phase=["uniform"], probe=["timer"],
                            trials=20_000, count=3)
    assert arp.seconds(dataclasses.replace(p, calibration=None), [0, 1]) < bounds.LONG_RUN_S
    assert arp.seconds(dataclasses.replace(p, calibration=cal), [0, 1]) > bounds.LONG_RUN_S


def test_all_judges_000_on_the_uniform_phase_with_tick_as_the_bound():
    """The verdict `all` puts in its table is the first: the uniform phase's
    (a shell starts the ping at a random point of a tick); tick's follows."""
    assert arp.plan([0, 1], quick=True).phase == ["uniform", "tick"]
