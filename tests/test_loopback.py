"""The loopback fast path: lstats, the depth guard, the stack overflow, the backlog."""
import json
import re

import numpy as np
import pytest

from conftest import X86
from smpnet import Machine, _core
from smpnet.cli import main
from smpnet.experiments import loopback
from smpnet.experiments.common import net
from smpnet.experiments.loopback import kstack
from smpnet.machine import layout

MODES = loopback.MODES
ROW_KEYS = {"mode", "cpus", "packets", "pps", "cycles_per_packet", "refcnt_atomics",
            "softirqs", "max_depth", "drops", "lstats_packets", "lstats_bytes", "overflow"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("protocol", loopback.PROTOCOLS)
def test_lstats_count_every_packet_sent(allowed, mode, protocol):
    rows, _, _ = loopback.run(allowed, [mode], packets=20000, size=123, protocol=protocol,
                              repeat=1, ncpus=2, oversubscribe=True)
    (r,) = rows
    assert r["packets"] >= 20000 and r["lstats_packets"] == r["packets"]
    # requests and replies carry 123 bytes, ACKs 52
    assert r["lstats_bytes"] == 123 * (r["requests"] + r["replies"]) + 52 * r["acks"]
    # ack-every ACKs each data segment; tbench's delayed ACK rides on the
    # next data segment, and request/response never leaves two unACKed
    assert r["acks"] == (r["requests"] + r["replies"] if protocol == "ack-every" else 0)
    assert r["depth_returns_to_0"] and r["refcnt_returns_to_0"] and r["conserved"]
    assert not r["overflow"] and r["recursion_drops"] == 0
    assert r["stack_work_cycles"] == 0      # uncalibrated: no stack work
    if mode == "netif_rx":
        assert r["direct"] == 0 and r["refcnt_atomics"] == pytest.approx(2.0, abs=0.01)
    if mode in ("direct-unguarded", "direct-xmit-recursion"):
        assert r["queued"] == 0 and r["refcnt_atomics"] == 0


@pytest.mark.parametrize("protocol,acks,backlogged", [("tbench", 1, 1), ("ack-every", 2, 0)])
def test_tbench_acks_past_a_full_segment_into_the_owners_backlog(one_cpu, protocol, acks,
                                                                 backlogged):
    # a request of 20000 bytes goes as two segments (16384 and 3616): the
    # server has measured a full segment, and the second leaves more than
    # one unACKed, so tbench's TCP ACKs at once, nested in that receive, to
    # the client, which is inside sendmsg (owned): it waits on the socket's
    # backlog until release_sock. ack-every ACKs each segment as it comes.
    m, c = one_cpu
    names = m.segment.region_names
    c.attach_loopback(names.index("net_device"), names.index("lo_stats"), "direct-unguarded",
                      proto=protocol)
    assert c.tcp_sendmsg("client", "request", 20000)
    lo = m.region("lo_stats")[0]
    assert int(lo["requests"]) == 2 and int(lo["server_pending"]) == 1   # one message
    assert int(lo["acks"]) == acks and int(lo["sk_backlogged"]) == backlogged
    assert int(lo["delivered"]) == 2 + acks     # the backlog was processed at release
    c.loopback_purge()


def test_tbench_never_acks_from_a_receive_for_messages_up_to_a_segment(one_cpu):
    m, c = one_cpu
    names = m.segment.region_names
    c.attach_loopback(names.index("net_device"), names.index("lo_stats"), "direct-unguarded",
                      proto="tbench")
    for _ in range(5):      # small segments never reach rcv_mss (536 unmeasured)
        assert c.tcp_sendmsg("client", "request", 100)
    lo = m.region("lo_stats")[0]
    assert int(lo["acks"]) == 0 and int(lo["server_pending"]) == 5
    c.loopback_purge()


def test_guarded_mode_never_nests_direct_delivery(allowed):
    rows, _, _ = loopback.run(allowed, ["direct", "direct-unguarded"], packets=20000,
                              protocol="ack-every", repeat=1, ncpus=2, oversubscribe=True)
    guarded, unguarded = rows
    assert guarded["max_rx_nest"] == 1 and guarded["queued"] > 0  # the ACK went the long way
    assert unguarded["max_rx_nest"] == 2                          # the ACK nested


@pytest.mark.parametrize("stack,depth", [("8k", 6), ("16k", 14)])
def test_ack_storm_overflows_only_without_the_guard(allowed, stack, depth):
    rows, verdicts, _ = loopback.run(allowed, MODES, duration=0.05, ack_storm=True,
                                     stack=stack, repeat=1, ncpus=2, oversubscribe=True)
    by = {r["mode"]: r for r in rows}
    for mode in ("netif_rx", "direct"):
        assert not by[mode]["overflow"] and by[mode]["conserved"]
        assert by[mode]["lstats_packets"] == by[mode]["packets"] > 0
        assert by[mode]["depth_returns_to_0"] and by[mode]["refcnt_returns_to_0"]
    # the guard bounds the nesting: a packet from the backlog (depth 0) may
    # deliver its ACK inline once, never more
    assert by["direct"]["max_rx_nest"] <= 2 and by["direct"]["queued"] > 0
    u = by["direct-unguarded"]
    assert u["overflow"] and u["overflow_depth"] == depth  # 2 KiB base, 1 KiB per level
    assert u["stack_max"] <= loopback.STACKS[stack] and u["conserved"]
    # the kernel's answer: at most XMIT_RECURSION_LIMIT + 1 nested
    # transmits, then a drop ends the chain; 9 levels of 1 KiB fit in 16k,
    # not in 8k
    x = by["direct-xmit-recursion"]
    assert x["conserved"] and x["refcnt_returns_to_0"] and x["queued"] == 0
    assert x["overflow"] == (stack == "8k")
    if stack == "16k":
        assert x["recursion_drops"] > 0 and x["max_depth"] == _core.XMIT_RECURSION_LIMIT + 1
    (v,) = verdicts
    assert v["verdict"] == "reproduced" and v["measured"] == depth
    assert v["xmit_recursion"]["overflow"] == x["overflow"]


def trace_bytes(trace):
    """The emulated stack a recorded trace stands for: its frames and the base."""
    return _core.STACK_BASE + sum(_core.STACK_FRAME_BYTES[f] for f in trace)


@pytest.mark.parametrize("stack", ["8k", "16k"])
def test_the_oops_records_the_frames_on_the_emulated_stack(allowed, stack):
    rows, _, _ = loopback.run(allowed, ["direct", "direct-unguarded"], duration=0.05,
                              ack_storm=True, stack=stack, repeat=1, ncpus=2, oversubscribe=True)
    guarded, u = rows
    assert not guarded["overflow"]
    assert (guarded["oops_trace"], guarded["oops_frames"], guarded["oops_refused"]) == ([], 0, None)
    trace, size = u["oops_trace"], loopback.STACKS[stack]
    assert u["overflow"] and u["oops_frames"] == len(trace) > 0
    # innermost first: the receive whose ACK (tcp_send_ack) was refused, then
    # transmit and receive in turn, down to the client's loopback_xmit
    assert trace[0] == "netif_receive_skb" and trace[-1] == "loopback_xmit"
    assert all(a != b for a, b in zip(trace, trace[1:]))
    assert trace.count("loopback_xmit") == u["overflow_depth"]
    assert u["oops_refused"] == "loopback_xmit"
    # the frames fill the stack: the refused one would have passed its end
    assert trace_bytes(trace) <= size < trace_bytes(trace) + _core.STACK_FRAME_BYTES["loopback_xmit"]
    assert size - trace_bytes(trace) < max(_core.STACK_FRAME_BYTES.values())


def test_the_oops_trace_leaves_out_the_frames_already_left(one_cpu):
    # guarded, with ACKs of ACKs, on a stack of 4000 bytes: the request's
    # transmit, receive and ACK (queued at depth 1) fit, and are left; then
    # the backlog's receive of that ACK, the ACK of it sent directly (depth
    # 0) and its receive are entered, and their ACK is refused. The oops
    # holds these three frames, not the six entered in all
    m, c = one_cpu
    names = m.segment.region_names
    c.attach_loopback(names.index("net_device"), names.index("lo_stats"), "direct",
                      ack_storm=True, thread_size=4000)
    c.loopback_send("request")
    lo = m.region("lo_stats")[0]
    n = int(lo["oops_frames"])
    trace = [kstack.FRAME_NAMES[int(k)] for k in lo["oops_trace"][:n]]
    refused = kstack.FRAME_NAMES[int(lo["oops_refused"])]
    assert int(lo["overflow"]) and int(lo["xmits"]) > 1
    assert trace == ["netif_receive_skb", "loopback_xmit", "netif_receive_skb"]
    assert refused == "loopback_xmit"
    assert trace_bytes(trace) <= 4000 < trace_bytes(trace) + _core.STACK_FRAME_BYTES[refused]
    assert not lo["oops_trace"][n:].any()    # nothing kept past the frames recorded
    c.loopback_purge()


@pytest.fixture
def one_cpu(allowed):
    regions = net.regions(4096, 1) + [
        ("net_device", layout.NET_DEVICE, 1), ("lo_stats", layout.LO_STATS, 1)]
    with Machine(cpus=[allowed[0]], regions=regions) as m:
        names = m.segment.region_names
        idx = net.indices(m)
        _core.net_init(m.segment.buf, idx, _core.LOCK_ALGOS["qspinlock"])
        c = _core.Cpu(m.segment.buf, 0)
        c.attach_net(idx, _core.DEFER_STRATEGIES["irq"], 64)
        c.attach_loopback(names.index("net_device"), names.index("lo_stats"), "netif_rx",
                          proto="no-ack")
        yield m, c


def test_backlog_drops_exactly_when_full(one_cpu):
    m, c = one_cpu
    sd = m.softnet[0:1]
    full = _core.NETDEV_MAX_BACKLOG + 1  # queued while qlen <= netdev_max_backlog
    c.local_bh_disable()                 # no softirq: nothing leaves the queue
    for i in range(full):
        assert c.loopback_send("request", bh=False), i
    assert int(sd["input_qlen"][0]) == full and int(sd["dropped"][0]) == 0
    assert not c.loopback_send("request", bh=False)
    assert int(sd["dropped"][0]) == 1 and int(sd["input_qlen"][0]) == full
    assert int(m.region("net_device")[0]["refcnt"]) == full  # one dev_hold per queued skb
    c.local_bh_enable()                  # NET_RX runs: a budget's worth is delivered
    assert int(sd["input_qlen"][0]) < full
    c.loopback_purge()
    assert int(sd["input_qlen"][0]) == 0 and int(m.region("net_device")[0]["refcnt"]) == 0
    assert int(m.lstats[0]["packets"]) == full + 1  # counted before netif_rx, drop included


def test_netif_rx_schedules_the_backlog_once(one_cpu):
    m, c = one_cpu
    c.local_bh_disable()
    for _ in range(5):
        c.loopback_send("request", bh=False)
    lo = m.region("lo_stats")[0]
    assert int(lo["softirq_raises"]) == 1  # NAPI_STATE_SCHED was already set for the rest
    c.local_bh_enable()
    assert int(lo["delivered"]) == 5 and int(m.softnet[0]["input_qlen"]) == 0
    assert int(m.softnet[0]["backlog_state"]) == 0  # the poll completed


def test_loopback_json_and_verdict(capsys, allowed):
    two = ["--cpus", ",".join(map(str, allowed[:2]))] if len(allowed) >= 2 else \
        ["--ncpus", "2", "--oversubscribe"]
    assert main(["loopback", "--json", "--duration", "0.03", "--repeat", "6"] + two) == 0
    env = json.loads(capsys.readouterr().out)
    # netif_rx runs twice, the second just before it: seed 002's A/A control
    assert [r["mode"] for r in env["results"]] == [loopback.AA] + list(MODES)
    for r in env["results"]:
        assert ROW_KEYS <= set(r) and r["lstats_packets"] == r["packets"]
    if len(allowed) < 2:
        assert env["verdicts"] == []
        return
    vc, v = env["verdicts"]
    by = {r["mode"]: r for r in env["results"]}
    # first, what the patch changes: cycles saved per transaction, paired run
    # by run, with no seed size (the seed's +5 % cannot be put in cycles)
    assert vc["seed"] == "002" and vc["unit"] == "cycles saved per transaction"
    assert "size" not in vc and vc["pairs"] == 6 and vc["label"] == "cycles saved per transaction"
    saved = [a - d for a, d in zip(by["netif_rx"]["cpt_samples"],
                                   by["direct"]["cpt_samples"])]
    assert vc["measured"] == pytest.approx(np.median(saved))
    assert vc["control"]["sides"] == "netif_rx against netif_rx"
    assert v["seed"] == "002" and v["interval"][0] <= v["measured"] <= v["interval"][1]
    # then a gain in % against the seed's +5 %, paired run by run
    assert v["pairs"] == 6 and v["size"] == 5.0 and v["kind"] == "measured"
    assert v["label"].startswith("% of this host's transaction (")
    gains = [d / n * 100 - 100 for d, n in zip(by["direct"]["tps_samples"],
                                                by["netif_rx"]["tps_samples"])]
    assert v["measured"] == pytest.approx(np.median(gains))
    assert v["control"]["sides"] == "netif_rx against netif_rx"


def test_loopback_scaling(capsys):
    assert main(["loopback", "--json", "--scaling", "--duration", "0.02", "--repeat", "1",
                 "--ncpus", "2", "--oversubscribe", "--mode", "netif_rx,direct"]) == 0
    env = json.loads(capsys.readouterr().out)
    # the A/A control only at the verdict's CPU count
    assert [(r["mode"], r["cpus"]) for r in env["results"]] == \
        [("netif_rx", 1), ("direct", 1), (loopback.AA, 2), ("netif_rx", 2), ("direct", 2)]


def test_loopback_text_shows_the_oops_and_the_verdict(capsys):
    assert main(["loopback", "--ack-storm", "--stack", "8k", "--repeat", "1", "--duration",
                 "0.03", "--ncpus", "2", "--oversubscribe"]) == 0
    out = capsys.readouterr().out
    assert "oops (direct-unguarded" in out and "depth 6" in out
    assert "direct survived by queueing" in out and "-> reproduced" in out


def test_the_tables_drops_are_the_verdicts(capsys):
    # on a 16k stack direct-xmit-recursion survives the storm by dropping
    # past XMIT_RECURSION_LIMIT: the table counts those drops where the
    # verdict does (its one drops column showed the backlog's 0)
    assert main(["loopback", "--ack-storm", "--repeat", "1", "--duration", "0.03",
                 "--ncpus", "2", "--oversubscribe"]) == 0
    out = capsys.readouterr().out
    said = int(re.search(r"survived by dropping \((\d+) drops past", out).group(1))
    head = next(x for x in out.splitlines() if x.startswith("mode "))
    row = next(x for x in out.splitlines() if x.startswith("direct-xmit-recursion "))
    end = head.index("recursion drops") + len("recursion drops")
    assert said > 0 and int(row[:end].split()[-1]) == said


def test_the_oops_text_prints_the_recorded_chain(capsys):
    assert main(["loopback", "--json", "--ack-storm", "--stack", "8k", "--repeat", "1",
                 "--duration", "0.03", "--ncpus", "2", "--oversubscribe",
                 "--mode", "direct-unguarded"]) == 0
    env = json.loads(capsys.readouterr().out)
    (r,) = env["results"]
    line = next(x for x in loopback.text(env, None).splitlines() if x.startswith("oops"))
    assert r["oops_trace"][:2] == ["netif_receive_skb", "loopback_xmit"]
    assert line.endswith(" <- ".join(["loopback_xmit (refused)"] + r["oops_trace"][:8])
                         + " <- ... (12 frames, 6 loopback_xmit)")
    # the chain is the row's, whatever it holds
    r.update(oops_trace=["netif_receive_skb", "netif_receive_skb", "loopback_xmit"],
             oops_frames=3, oops_refused="netif_receive_skb")
    line = next(x for x in loopback.text(env, None).splitlines() if x.startswith("oops"))
    assert line.endswith(": netif_receive_skb (refused) <- netif_receive_skb <- "
                         "netif_receive_skb <- loopback_xmit (3 frames, 1 loopback_xmit)")


def test_packets_are_met_in_whole_transactions(allowed):
    # with ACKs in rx a transaction is 4 packets; each CPU stops at its share or just past
    rows, _, _ = loopback.run(allowed, ["netif_rx"], packets=1002, repeat=1, ncpus=2,
                              oversubscribe=True)
    assert 1002 <= rows[0]["packets"] < 1002 + 2 * 4


def test_api_refuses_a_stack_that_could_overflow_the_real_one(one_cpu):
    m, c = one_cpu
    names = m.segment.region_names
    with pytest.raises(ValueError, match="thread_size"):
        c.attach_loopback(names.index("net_device"), names.index("lo_stats"),
                          "direct-unguarded", ack_storm=True, thread_size=10**8)


@pytest.mark.parametrize("argv", [
    ["--ack-storm", "--protocol", "tbench"], ["--protocol", "quic"],
    ["--calibration", "/nonexistent/profile.json"],
    ["--mode", "napi"], ["--mode", ""], ["--packets", "0"], ["--packets", "10", "--duration", "1"],
    ["--size", "0"], ["--size", "70000"], ["--stack", "4k"], ["--repeat", "0"],
    ["--packets", "1"],
])
def test_loopback_bad_input_exit_2(capsys, argv):
    assert main(["loopback", "--ncpus", "2", "--oversubscribe"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("smpnet-bench: ")


@pytest.mark.skipif(not X86, reason="reads x86 code")
def test_net_rx_action_reads_jiffies_and_do_softirq_saves_and_restores_flags(core_functions):
    """net_rx_action() reads jiffies as the kernel does, a variable (no
    rdtsc, no divide: what netif_rx mode paid per packet and direct did
    not, until 2026-12-04); do_softirq() saves the flags (a real pushf) and
    restores them with a popf where the kernel is 2.6.24's, as
    arch/x86/kernel/irq_64.c's did."""
    rx = core_functions["net_rx_action"] + core_functions.get("net_rx_action.cold", "")
    assert "net_jiffies" not in core_functions     # inlined: its load is in rx
    assert not re.search(r"\t(rdtsc|rdtscp|div[lq]?)\b", rx)
    softirq = core_functions["do_softirq"]
    assert re.search(r"\tpushf", softirq) and re.search(r"\tpopf", softirq)
    assert "__do_softirq" in softirq                # the handlers on the "softirq stack"


def test_the_picture_shows_the_paired_saving_the_verdict_judges(capsys, allowed):
    """loopback.png's middle panel: netif_rx - direct run by run, its
    median the verdict's cycles saved per transaction (the old picture, pkt/s
    by CPU count at one CPU count, showed no effect at all)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if len(allowed) < 2:
        pytest.skip("one real CPU: two emulated ones are oversubscribed, with no verdict")
    assert main(["loopback", "--json", "--mode", "netif_rx,direct", "--duration", "0.02",
                 "--repeat", "6", "--cpus", ",".join(map(str, allowed[:2]))]) == 0
    env = json.loads(capsys.readouterr().out)
    fig, ax = plt.subplots()
    loopback.plot(ax, env["results"])
    cost, saved = fig.axes
    by = {r["mode"]: r["cpt_samples"] for r in env["results"]}
    dots = saved.collections[0].get_offsets()[:, 0]
    assert sorted(dots) == pytest.approx(sorted(a - b for a, b in zip(by["netif_rx"], by["direct"])
                                                if a is not None and b is not None))
    (median,) = [ln.get_xdata()[0] for ln in saved.lines if ln.get_marker() == "|"]
    v = next(v for v in env["verdicts"] if v["unit"] == "cycles saved per transaction")
    assert median == pytest.approx(v["measured"])
    assert [t.get_text() for t in saved.get_yticklabels()] == ["the model alone"]
    plt.close(fig)
