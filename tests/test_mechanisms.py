"""Tests that pin each experiment's mechanism, so that an inverted or
short-circuited experiment fails here whatever the machine's timing: every
assertion is on counts and jiffies the emulated kernel recorded, none on a
duration."""
import itertools
import re
from pathlib import Path

from smpnet import Machine, _core, run_all
from smpnet.experiments import arp, defer, loopback
from smpnet.experiments.defer import defer_rows
from smpnet.machine import layout

HOST_B_IP = 0xC0A8146C   # 192.168.20.108, link.h's HOST_B_IP


# ------------------------------------------------------------------ arp: the two hosts

def _arp_once(monkeypatch, allowed, probe):
    """One trial of `arp -d; ping -c 1` by host A, in `probe` mode: (the
    jiffy of the ping's neigh_event_send, the jiffy of the first ARP request,
    the requests host B saw), as the run left them in host A's neighbour
    table and the link's control block."""
    seen = {}
    real = arp._row

    def recording(m, *args):
        tbl = m.region("neigh")[0]
        (entry,) = [n for n in tbl["tbl"] if int(n["ip"]) == HOST_B_IP]
        # with one ping a trial, the entry's `used` is that ping's event:
        # neigh_update() (the reply) and the timer leave it alone
        seen.update(event=int(entry["used"]),
                    solicit=int(tbl["stats"]["first_solicit_jiffies"]),
                    solicits=int(tbl["stats"]["solicits"]),
                    requests=int(m.region("arp_ctl")[0]["b_arp_requests"]))
        return real(m, *args)

    monkeypatch.setattr(arp, "_row", recording)
    rows, _, _, _ = arp.run(allowed, [probe], hz=100, trials=1, count=1, ncpus=2,
                            oversubscribe=len(allowed) < 2)
    assert rows[0]["replies"] == 1           # resolved, and the ping answered
    assert seen["solicits"] == seen["requests"] == 1
    return seen["event"], seen["solicit"]


def test_immediate_mode_solicits_at_the_events_jiffy_on_the_host(monkeypatch, allowed):
    event, solicit = _arp_once(monkeypatch, allowed, "immediate")
    assert solicit == event                  # neigh_probe() inside neigh_event_send()


def test_timer_mode_solicits_at_the_tick_after_the_event_on_the_host(monkeypatch, allowed):
    # The request leaves from the timer armed at jiffies + 1, which host A's
    # timer wheel runs at the first tick boundary it observes. At HZ=100 that
    # is the next jiffy unless host A was off its CPU for a whole 10 ms tick
    # right after the ping; only then is the trial run again (a timer armed
    # later, or a probe sent at once, fails every time).
    for _ in range(3):
        event, solicit = _arp_once(monkeypatch, allowed, "timer")
        assert solicit > event               # never from neigh_event_send() itself
        if solicit == event + 1:
            return
    assert solicit == event + 1


# ------------------------------------------------------------------ loopback: refcnt atomics

def test_direct_takes_refcnt_atomics_only_for_the_queued_acks_and_unguarded_none(allowed):
    rows, _, _ = loopback.run(allowed, list(loopback.MODES), packets=20000, repeat=1, ncpus=2,
                              protocol="ack-every", oversubscribe=True)
    by = {r["mode"]: r for r in rows}
    for r in rows:
        assert r["drops"] == 0 and r["conserved"] and r["refcnt_returns_to_0"]
        assert r["acks"] > 0 and r["requests"] + r["replies"] + r["acks"] == r["packets"]

    def atomics(r):                          # the row gives them per packet
        return round(r["refcnt_atomics"] * r["packets"])

    base = by["netif_rx"]                    # the baseline: every packet queued, hold + put
    assert base["direct"] == 0 and base["queued"] == base["packets"]
    assert atomics(base) == 2 * base["packets"]
    d = by["direct"]
    # requests and replies go inline at depth 0; only the ACK sent from inside
    # their receive (depth 1) takes netif_rx(), with its dev_hold and dev_put
    assert d["direct"] == d["requests"] + d["replies"] and d["queued"] == d["acks"]
    assert atomics(d) == 2 * d["queued"]
    assert d["refcnt_atomics"] <= 1.0        # at most one a packet
    for mode in ("direct-unguarded", "direct-xmit-recursion"):   # every packet inline
        u = by[mode]
        assert u["direct"] == u["packets"] and u["queued"] == 0
        assert atomics(u) == 0 and u["refcnt_atomics"] == 0 and u["softirqs"] == 0


def test_under_tbench_direct_queues_nothing_and_raises_no_softirq(allowed):
    # delayed ACKs ride on the next data segment: no transmit nests in a
    # receive, so the guard never sends a packet the long way
    rows, _, _ = loopback.run(allowed, ["netif_rx", "direct"], packets=20000, repeat=1,
                              ncpus=2, protocol="tbench", oversubscribe=True)
    by = {r["mode"]: r for r in rows}
    base, d = by["netif_rx"], by["direct"]
    assert base["acks"] == d["acks"] == 0
    assert base["queued"] == base["packets"] and base["softirqs"] > 0
    assert d["direct"] == d["packets"] and d["queued"] == 0 and d["max_depth"] == 1
    assert d["refcnt_atomics"] == 0 and d["softirqs"] == 0


# ------------------------------------------------------------------ defer: the flush's lock

def _defer_runs(monkeypatch, allowed, strategies):
    """One checked run per strategy, on a ticket lock (whose word counts its
    acquisitions): per strategy, the row, defer_lock's acquisitions and
    usage bits on the RX CPU, and the real flags saves on each CPU."""
    seen, before, softirqs_before = {}, [0, 0], [0]
    real = defer_rows.measure

    def recording(m, *args):
        lock = m.softnet[0]["defer_lock"]    # emulated CPU 0 receives (rx=1)
        saves = [int(x) for x in m.region("irq")["flags_saves"]]   # since the machine began
        softirqs = int(m.region("irq")["do_softirqs"].sum())
        seen[len(seen)] = dict(acquisitions=int(lock["val"]) & 0xFFFF,
                               usage=int(m.segment.lock_info("softnet", 0, "defer_lock")["usage"]),
                               saves=[a - b for a, b in zip(saves, before)],
                               do_softirqs=softirqs - softirqs_before[0],
                               pool=int(m.region("skb_pool")[0]["lock"]["val"]) & 0xFFFF)
        before[:] = saves
        softirqs_before[0] = softirqs
        return real(m, *args)

    monkeypatch.setattr(defer_rows, "measure", recording)
    rows, _, _ = defer.run(allowed, strategies, rx=1, skbs=20000, repeat=1, check=True,
                           ncpus=2, oversubscribe=True, lock_algo="ticket")
    # one run a side (repeat 1: in the sides' order, the rows'): irq's A/A
    # control among them, as a side of its own
    return {r["strategy"]: dict(seen[i], row=r) for i, r in enumerate(rows)}


LOCK_USED_IN_SOFTIRQ = 0x4    # lockdep.h


def test_irq_flush_runs_with_irqs_on_and_llist_flush_takes_no_lock(monkeypatch, allowed):
    runs = _defer_runs(monkeypatch, allowed, list(defer.STRATEGIES))
    for s, r in runs.items():
        row = r["row"]
        if s == "none":     # nothing deferred, nothing flushed: every skb freed remotely
            assert row["conserved"] and row["deferred"] == row["flushes"] == 0
            assert row["remote_frees"] == row["received"] > 0 and r["acquisitions"] == 0
        else:
            assert row["conserved"] and row["flushes"] > 0 and row["deferred"] > 0, s
        assert row["checker_lock_checks"] > 0, s            # the checker was on
        assert row["checker_reports"] == {}, s              # lock_irq_with_irqs_off above all
    for s in ("irqsave", "irq", "bh"):
        r = runs[s]
        # every defer and every flush took defer_lock once; the flush in softirq
        assert r["acquisitions"] == r["row"]["deferred"] + r["row"]["flushes"], s
        assert r["usage"] & LOCK_USED_IN_SOFTIRQ, s
    assert runs["llist"]["acquisitions"] == 0 and runs["llist"]["usage"] == 0
    # the real flags saves (pushf; pop) of a run: one per pool-lock take
    # (spin_lock_irqsave), one per defer whose producer saves, one per flush
    # whose flush saves (the irq flush is spin_lock_irq, with none), and
    # one per do_softirq(), as the kernel's
    for s, r in runs.items():
        row, strategy = r["row"], defer.STRATEGY_OF.get(s, s)
        assert r["do_softirqs"] > 0, s
        assert sum(r["saves"]) == (r["pool"] + PRODUCER_SAVES[strategy] * row["deferred"]
                                   + FLUSH_SAVES[strategy] * row["flushes"]
                                   + r["do_softirqs"]), s


PRODUCER_SAVES = {"none": 0, "irqsave": 1, "irq": 1, "bh": 0, "llist": 0}
FLUSH_SAVES = {"none": 0, "irqsave": 1, "irq": 0, "bh": 0, "llist": 0}


# ------------------------------------------------------------------ locks: the flags save

SAVES = {"spin_lock_unlock_irqsave": 1, "irqsave_before_lock": 1,
         "spin_lock_unlock_irqsave_nopushf": 0, "spin_lock_unlock_irq": 0,
         "spin_lock_unlock": 0, "simple_irq_disable_before_lock": 0,
         "spin_lock_unlock_bh": 0}


def test_the_irqsave_path_executes_the_flags_save_and_its_control_does_not(allowed):
    loops = 1000

    def body(ctx):
        irq = ctx.machine.region("irq")[ctx.cpu]
        locks = ctx.machine.segment.region_names.index("locks")
        out = []
        for test, check, popf in itertools.product(SAVES, (False, True), (False, True)):
            before = int(irq["flags_saves"])
            _core.time_bench_round(test, loops, seg=ctx.seg, cpu=ctx.cpu, lock_region=locks,
                                   lock_index=0, check=check, popf=popf)
            out.append((test, check, popf, int(irq["flags_saves"]) - before))
        return out

    with Machine(cpus=[allowed[0]], regions=[("locks", layout.LOCK_SLOT, 1)]) as m:
        _core.lock_init(m.segment.buf, m.segment.region_names.index("locks"), 0,
                        _core.LOCK_ALGOS["qspinlock"], 0)
        rows = m.run(body)[0]
    for test, check, popf, saves in rows:
        assert saves == (SAVES[test] * loops if check else 0), (test, check, popf)


# ------------------------------------------------------------------ all: the verdict table

def _docs_primary_stage():
    """docs/all.md's verdict-table section: seed -> the stage it names."""
    text = (Path(__file__).parent.parent / "docs" / "all.md").read_text()
    section = text.split("## The verdict table", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d{3}) \| `(\w+)` \|", section, re.M)
    assert rows, "docs/all.md has no seed -> stage table"
    return dict(rows)


def test_the_verdict_table_takes_each_seeds_primary_verdict_from_the_stage_the_docs_name():
    primary = _docs_primary_stage()
    assert set(primary) == set(run_all.SEEDS)
    names = [e.name for e in run_all.stages()]
    # every stage gives a verdict for every seed, each with its own label:
    # stages that come earlier than the documented one included, so that
    # "the first verdict found" is not the documented stage's by accident
    done = {name: {"params": {}, "results": [],
                   "verdicts": [{"seed": seed, "claim": f"{seed} by {name}", "measured": k,
                                 "interval": [k, k], "verdict": f"{seed} from {name}"}
                                for k, seed in enumerate(run_all.SEEDS)]}
            for name in names}
    table = run_all.verdict_table(done)
    assert [v["seed"] for v in table] == list(run_all.SEEDS)
    for v in table:
        stage = primary[v["seed"]]
        assert (v["verdict"], v["stage"]) == (f"{v['seed']} from {stage}", stage)
        assert sorted(d["stage"] for d in v["details"]) == sorted(set(names) - {stage})
    # and the documented stage alone still gives the primary verdict
    for seed, stage in primary.items():
        alone = run_all.verdict_table({stage: done[stage]})
        (v,) = [v for v in alone if v["seed"] == seed]
        assert v["verdict"] == f"{seed} from {stage}" and v["details"] == []
