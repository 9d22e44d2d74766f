"""The skb defer-free list: conservation, the IPI kick, the fallback, the
checker, net_rx_action(). The command line: test_defer_cli.py."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smpnet import Machine, _core
from smpnet.experiments import defer
from smpnet.experiments.common import net
from smpnet.machine import layout

STRATEGIES = defer.STRATEGIES
LISTS = [s for s in STRATEGIES if s != "none"]   # the strategies that defer


# ------------------------------------------------------------------ end to end

@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(defer_max=st.integers(1, 300), batch=st.integers(1, 64), ncpus=st.integers(2, 4),
       data=st.data())
def test_conservation(allowed, strategy, defer_max, batch, ncpus, data):
    rx = data.draw(st.integers(1, ncpus - 1), label="rx")
    skbs = data.draw(st.integers(rx, 8000), label="skbs")  # at least one per RX CPU
    rows, verdicts, _ = defer.run(allowed, [strategy], rx=rx, skbs=skbs, defer_max=defer_max,
                                  batch=batch, repeat=1, ncpus=ncpus, oversubscribe=True)
    (r,) = rows
    assert r["received"] == skbs
    assert r["allocated"] == r["freed"] == skbs
    assert r["lost"] == 0 and r["double_free"] == 0 and r["missing_after_run"] == 0
    assert r["conserved"]
    # every skb was freed away from its CPU: deferred home, or freed remotely
    # (none's every skb, the others' fallbacks)
    assert r["deferred"] + r["remote_frees"] == skbs
    assert r["remote_frees"] == (skbs if strategy == "none" else r["fallback_frees"])
    assert verdicts == []  # one run, one strategy: no verdict


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_conservation_in_duration_mode(allowed, strategy):
    rows, _, _ = defer.run(allowed, [strategy], duration=0.05, repeat=2, ncpus=3,
                           oversubscribe=True, rx=1)
    (r,) = rows
    assert r["received"] > 0 and r["allocated"] == r["freed"] == r["received"]
    assert r["conserved"] and r["missing_after_run"] == 0


# ------------------------------------------------------------------ one skb at a time

@pytest.fixture
def two_cpus(allowed):
    """CPU 1 allocates, CPU 0 frees; driven from Python, no workers."""
    n = 512
    regions = net.regions(n, 2)
    with Machine(cpus=allowed, ncpus=2, oversubscribe=True, regions=regions) as m:
        idx = net.indices(m)
        _core.net_init(m.segment.buf, idx, _core.LOCK_ALGOS["qspinlock"])

        def cpus(strategy, defer_max, check=False):
            c0 = _core.Cpu(m.segment.buf, 0, check=check)
            c1 = _core.Cpu(m.segment.buf, 1, check=check)
            for c in (c0, c1):
                c.attach_net(idx, _core.DEFER_STRATEGIES[strategy], defer_max)
            return c0, c1
        yield m, cpus


def stat(m, cpu, name):
    return int(m.region("skb_stats")[cpu][name])


# softnet_data's defer fields as each strategy's kernel version names them
# (percpu.h): 5.19 to 6.17 for the locked strategies, 844c9db7f7f5 for llist
LLIST_FIELDS = {"defer_list": "defer_llist", "defer_count": "defer_llist_count",
                "defer_ipi_scheduled": "defer_llist_ipi_scheduled"}


def sd_field(sd, strategy, name):
    """softnet_data field `name`, as `strategy`'s kernel version lays it out."""
    return int(sd[LLIST_FIELDS[name] if strategy == "llist" else name])


def kick_at(strategy, defer_max):
    """The n-th remote free (1-based) that sends the kick, or None."""
    n = defer_max // 2 + 1          # the count goes from defer_max / 2 to one more
    if strategy == "llist":         # counted before the test: defers only below defer_max
        return n if n < defer_max else None
    return n if n <= defer_max else None


@pytest.mark.parametrize("strategy", LISTS)
@pytest.mark.parametrize("defer_max", [1, 2, 7, 8, 64])
def test_ipi_kick_threshold(two_cpus, strategy, defer_max):
    m, cpus = two_cpus
    c0, c1 = cpus(strategy, defer_max)
    c1.local_irq_disable()  # keep the kick in flight
    expected = kick_at(strategy, defer_max)
    for i in range(1, defer_max + 3):
        c0.skb_attempt_defer_free(c1.napi_alloc_skb())
        assert stat(m, 0, "ipis") == (1 if expected is not None and i >= expected else 0), i
    assert sd_field(m.softnet[1], strategy, "defer_ipi_scheduled") == (expected is not None)
    # the other kernel version's fields are not touched
    other = "irq" if strategy == "llist" else "llist"
    for name in LLIST_FIELDS:
        assert sd_field(m.softnet[1], other, name) == 0, name


@pytest.mark.parametrize("strategy", LISTS)
def test_ipi_kick_exactly_at_half_and_one_in_flight(two_cpus, strategy):
    m, cpus = two_cpus
    c0, c1 = cpus(strategy, 8)
    sd1 = m.softnet[1]   # a view: it follows the segment

    def field(name):
        return sd_field(sd1, strategy, name)

    skbs = [c1.napi_alloc_skb() for _ in range(20)]
    for i, h in enumerate(skbs[:5]):
        assert stat(m, 0, "ipis") == 0, f"kicked early, at skb {i}"
        c0.skb_attempt_defer_free(h)
    # the 5th skb took the count from 4 (= defer_max / 2) to 5: one kick
    assert stat(m, 0, "ipis") == 1 and field("defer_ipi_scheduled") == 1
    assert m.region("irq")[1]["irq_pending"] != 0
    if strategy == "irq":
        # its flush turns IRQs on at unlock (that is the strategy's premise),
        # so the kick is taken with the flush: nothing stays in flight
        c1.skb_defer_free_flush()
        assert field("defer_ipi_scheduled") == 0 and field("defer_list") == 0
        return
    # CPU 1 flushes with IRQs off, so the kick stays in flight
    c1.local_irq_disable()
    c1.skb_defer_free_flush()
    assert field("defer_list") == 0 and field("defer_count") == 0
    assert field("defer_ipi_scheduled") == 1
    for h in skbs[5:10]:
        c0.skb_attempt_defer_free(h)
    assert stat(m, 0, "ipis") == 1  # the threshold again, but one is in flight
    c1.local_irq_enable()           # the IPI runs: NET_RX flushes, the flag clears
    assert field("defer_ipi_scheduled") == 0 and field("defer_list") == 0
    assert stat(m, 1, "flushed") == 10 and stat(m, 1, "freed") == 10


def remote_free_list(m, cpu):
    """The handles on CPU `cpu`'s slab's remote-free list."""
    skb, out = m.region("skb"), []
    h = int(m.region("skb_slab")[cpu]["remote_free"])
    while h and len(out) <= len(skb):
        out.append(h)
        h = int(skb[h - 1]["next"])
    return out


@pytest.mark.parametrize("strategy", LISTS)
def test_fallback_when_the_owner_stops_flushing(two_cpus, strategy):
    m, cpus = two_cpus
    c0, c1 = cpus(strategy, 16)
    c1.local_irq_disable()  # CPU 1 takes no IPI, runs no NET_RX: it never flushes
    for _ in range(40):
        c0.skb_attempt_defer_free(c1.napi_alloc_skb())
    # the lock strategies defer while count < defer_max; llist counts first
    deferred = 16 if strategy != "llist" else 15
    assert stat(m, 0, "deferred") == deferred
    assert stat(m, 0, "fallback_frees") == stat(m, 0, "remote_frees") == 40 - deferred
    # freed on CPU 0, remotely: back to CPU 1's slab, through its remote-free list
    assert stat(m, 0, "freed") == 40 - deferred
    assert int(m.region("napi_cache")[0]["count"]) == 0
    assert len(remote_free_list(m, 1)) == 40 - deferred
    c1.local_irq_enable()
    assert stat(m, 1, "freed") == deferred        # the owner's flush brings the rest home


def test_none_frees_every_skb_remotely_and_the_owner_takes_them_back(two_cpus):
    m, cpus = two_cpus
    c0, c1 = cpus("none", 16)
    handles = [c1.napi_alloc_skb() for _ in range(20)]
    data = m.region("skb_data")
    assert all(int(data[h - 1]["dataref"]) == 1 for h in handles)   # build_skb() set it
    for h in handles:
        c0.skb_attempt_defer_free(h)
    assert stat(m, 0, "remote_frees") == stat(m, 0, "freed") == 20
    assert stat(m, 0, "deferred") == 0 and int(m.softnet[1]["defer_list"]) == 0
    assert all(int(data[h - 1]["dataref"]) == 0 for h in handles)   # released on CPU 0
    assert sorted(remote_free_list(m, 1)) == sorted(handles)
    # CPU 1's cache and slab run dry: it takes its remote-free list back first
    cache = m.region("napi_cache")[1]
    for _ in range(int(cache["count"]) + int(m.region("skb_slab")[1]["count"])):
        c1.napi_alloc_skb()
    again = c1.napi_alloc_skb()
    assert again in handles and remote_free_list(m, 1) == []


def test_every_free_drops_its_data_pages_refcount_and_allocation_pays_in_bulk(two_cpus):
    m, cpus = two_cpus
    c0, c1 = cpus("none", 16)
    pages, caches = m.region("skb_page"), m.region("napi_cache")
    per = layout.SKB_FRAGS_PER_PAGE

    def live_plus_bias():
        return len(handles) - freed + int(caches["pagecnt_bias"].sum())

    handles, freed = [c1.napi_alloc_skb() for _ in range(per + 4)], 0
    # two page_ref_add()s of a page's worth: 2 * per frags paid for, per + 4 used
    assert int(pages["refcount"].sum()) == 2 * per == live_plus_bias()
    assert int(caches[1]["pagecnt_bias"]) == per - 4
    for h in handles:
        page = (h - 1) // per
        before = int(pages[page]["refcount"])
        c0.skb_attempt_defer_free(h)        # a remote free: CPU 0 drops CPU 1's page
        freed += 1
        assert int(pages[page]["refcount"]) == before - 1
        assert int(pages["refcount"].sum()) == live_plus_bias()
    assert net.audit(m) == 0


def test_local_skb_is_freed_on_the_spot(two_cpus):
    m, cpus = two_cpus
    c0, c1 = cpus("irq", 8)
    c1.skb_attempt_defer_free(c1.napi_alloc_skb())
    assert stat(m, 1, "freed_local") == 1 and stat(m, 1, "deferred") == 0
    assert int(m.softnet[1]["defer_count"]) == 0


def test_double_free_is_counted_not_corrupting(two_cpus):
    m, cpus = two_cpus
    c0, c1 = cpus("bh", 8)
    h = c1.napi_alloc_skb()
    c1.kfree_skb(h)
    c1.kfree_skb(h)
    assert stat(m, 1, "double_free") == 1 and stat(m, 1, "freed") == 1


# ------------------------------------------------------------------ the checker

def test_irq_strategy_flush_runs_with_irqs_on(allowed):
    rows, _, _ = defer.run(allowed, ["irq"], skbs=20000, repeat=1, check=True, ncpus=2,
                           oversubscribe=True)
    assert rows[0]["checker_reports"] == {} and rows[0]["conserved"]
    assert rows[0]["flushes"] > 0
    # the checker looked at every acquisition, flushes' included
    assert rows[0]["checker_lock_checks"] >= rows[0]["flushes"] + rows[0]["deferred"]
    rows, _, _ = defer.run(allowed, ["irq"], skbs=2000, repeat=1, ncpus=2, oversubscribe=True)
    assert rows[0]["checker_lock_checks"] == 0  # and nothing when it is off


def test_an_ipi_charges_its_sender_the_measured_send_and_its_target_the_entry(allowed):
    rows, _, _ = defer.run(allowed, ["irq"], skbs=20000, repeat=1, ncpus=2, oversubscribe=True)
    (r,) = rows
    ipi, w = r["ipi"], r["ipi_wake"]
    # measured once, from the consumer's real CPU to the RX CPU's
    assert (ipi["sender_cpu"], ipi["target_cpu"]) == (r["cpus"][1], r["cpus"][0])
    assert ipi["cross_cpu"] == (r["cpus"][0] != r["cpus"][1])
    assert r["ipi_cycles"] == "measured"
    if ipi["cross_cpu"]:
        # the send is what the sender is charged; the target, the entry
        assert ipi["send_charged_how"] == "measured"
        assert r["ipi_send_charged"] == max(0.0, ipi["send"]["cycles"])
        if ipi["membarrier"]:
            assert r["irq_entry_cycles"] == ipi["entry"]["cycles"] > 0
    else:   # one real CPU: no IPI crosses CPUs; the target a kernel entry
        assert ipi["send"] is None and r["ipi_send_charged"] == 0
        assert r["irq_entry_cycles"] == ipi["syscall_cycles"] > 0
    # the cross-CPU wake-up, reported beside it as an upper bound
    assert w["woken"] == w["rounds"] and w["complete"] and w["cycles"] > 0
    assert (w["waker_cpu"], w["sleeper_cpu"]) == (r["cpus"][1], r["cpus"][0])
    if r["ipis"]:   # each IPI's sender spun at least the charge (a floor, whatever the load)
        assert r["ipi_send_cycles"] >= int(r["ipi_send_charged"])


def test_ipi_cycles_and_ipi_entry_cycles_change_what_is_charged(allowed):
    rows, _, _ = defer.run(allowed, ["none", "irq"], skbs=20000, repeat=1, ncpus=2,
                           oversubscribe=True, ipi_cycles=["measured", 7000, 0],
                           ipi_entry_cycles=3000)
    assert [(r["ipi_cycles"], r["strategy"]) for r in rows] == [
        ("measured", "none"), ("measured", "irq"), (7000, "none"), (7000, "irq"),
        (0, "none"), (0, "irq")]
    at = {(r["ipi_cycles"], r["strategy"]): r for r in rows}
    assert at[7000, "irq"]["ipi_send_charged"] == 7000
    assert at[7000, "irq"]["ipi"]["send_charged_how"] == "--ipi-cycles"
    assert at[0, "irq"]["ipi_send_charged"] == 0
    assert all(r["irq_entry_cycles"] == 3000 for r in rows)     # the target's, throughout
    assert all(r["ipi"]["entry_charged_how"] == "--ipi-entry-cycles" for r in rows)
    if at[7000, "irq"]["ipis"]:     # spun at least the charge per IPI
        assert at[7000, "irq"]["ipi_send_cycles"] >= 7000
    if at[0, "irq"]["ipis"]:        # and nothing: the send's own spin is skipped
        assert at[0, "irq"]["ipi_send_cycles"] == 0
    # each point has its own gain over none, paired within the point
    assert {r["ipi_cycles"] for r in rows if "gain_over_none" in r} == {"measured", 7000, 0}
    # the text: the sweep's table (no A/A line), the flushes at the measured point
    env = {"params": {"skbs": 20000, "duration_s": None, "defer_max": 64, "batch": 16,
                      "repeat": 1, "lock": "qspinlock", "check": True},
           "results": rows, "verdicts": []}
    text = defer.text(env, {})
    sweep = text[text.index("% over none at IPI cost"):].split("\n")
    assert [ln.split()[0] for ln in sweep[2:4]] == ["irq", "(TSC"]
    assert "Flush sizes (skbs per flush: flushes) at IPI cost" in text and "(measured)" in text
    assert "checker (irq at IPI cost 7,000): no reports" in text
    # without --ipi-entry-cycles a point charges both sides; measured, the entry measured
    rows, _, _ = defer.run(allowed, ["irq"], skbs=5000, repeat=1, ncpus=2, oversubscribe=True,
                           ipi_cycles=["measured", 7000])
    assert rows[1]["irq_entry_cycles"] == rows[1]["ipi_send_charged"] == 7000
    assert rows[1]["ipi"]["entry_charged_how"] == "--ipi-cycles"
    assert rows[0]["ipi"]["entry_charged_how"] in ("measured", "a kernel entry and exit (getppid)")


def test_ipis_sent_never_exceed_the_kernels_rule_at_that_load(allowed):
    # one kick per cycle of the list that passed defer_max / 2, fewer when
    # one is still in flight at the flush: never more
    # (the locked lists: llist zeroes its count before it takes the list, so
    # a free between the two counts toward the next cycle)
    rows, _, _ = defer.run(allowed, ["irqsave", "bh"], skbs=30000, repeat=1, ncpus=2,
                           oversubscribe=True, defer_max=16)
    for r in rows:
        assert r["ipis"] <= r["ipis_by_rule"], r["strategy"]


@pytest.mark.parametrize("strategy", ["irq", "irqsave"])
def test_the_flushs_locked_take_leaves_out_the_ipi_its_unlock_takes(two_cpus, strategy):
    """The kick is pending on CPU 1 when it flushes: spin_unlock_irq(restore)
    re-enables IRQs and takes it inside the timed take. Its handling (an
    entry charged 2,000,000 cycles) is counted as the take's IRQ, not in
    the take's own cycles."""
    m, cpus = two_cpus
    c0, c1 = cpus(strategy, 8)
    entry = 2_000_000
    c1.set_ipi_costs(entry_cycles=entry)
    for _ in range(5):                      # the 5th sends the kick: pending on CPU 1
        c0.skb_attempt_defer_free(c1.napi_alloc_skb())
    assert stat(m, 0, "ipis") == 1 and int(m.region("irq")[1]["irq_pending"]) != 0
    c1.skb_defer_free_flush()
    assert int(m.region("irq")[1]["irq_pending"]) == 0          # taken in the flush
    assert stat(m, 1, "flush_irq_replays") == 1
    assert stat(m, 1, "flush_irq_cycles") >= entry
    take = int(m.region("skb_stats")[1]["flush_lock_sample"][0])
    assert 0 < take < entry // 10
    assert stat(m, 1, "flush_cycles") >= entry                   # the whole flush holds it


@pytest.fixture
def rx_cpu(allowed):
    """One RX CPU (CPU 0) with two consumers' rings (512 slots), and the backlog."""
    regions = net.regions(2048, 3) + [
        ("rings", layout.SKB_RING, 2), ("net_device", layout.NET_DEVICE, 1),
        ("lo_stats", layout.LO_STATS, 3)]
    with Machine(cpus=allowed, ncpus=3, oversubscribe=True, regions=regions) as m:
        names = m.segment.region_names
        idx = net.indices(m)
        _core.net_init(m.segment.buf, idx, _core.LOCK_ALGOS["qspinlock"])

        def cpu(budget=0):
            c = _core.Cpu(m.segment.buf, 0)
            c.attach_net(idx, _core.DEFER_STRATEGIES["irq"], 64, budget)
            c.attach_rings(names.index("rings"), 1, 2)
            return c
        yield m, cpu


def test_net_rx_action_polls_each_instance_once_and_repolls(rx_cpu):
    m, cpu = rx_cpu
    c = cpu()
    c.napi_schedule(10_000)
    sd, irq = m.softnet[0], m.region("irq")[0]
    net_rx = 1 << _core.SOFTIRQS["net_rx"]
    c.net_rx_action()
    # one poll of dev_rx_weight: it used its whole weight, so it is on the
    # repoll list, NET_RX raised again; the budget (300) was not spent: no squeeze
    assert int(sd["processed"]) == 64 and int(sd["poll_list"]) == 1
    assert int(irq["softirq_pending"]) & net_rx and int(sd["time_squeeze"]) == 0
    for _ in range(7):
        c.net_rx_action()
    # the 8th poll filled the rings with a whole weight: polled once more, it
    # finds them full, receives nothing and completes
    assert int(sd["processed"]) == 512 and int(sd["poll_list"]) == 1
    c.net_rx_action()
    assert int(sd["processed"]) == 512
    assert int(sd["poll_list"]) == 0 and int(sd["time_squeeze"]) == 0


def test_net_rx_action_squeezes_only_when_the_budget_runs_out(rx_cpu):
    m, cpu = rx_cpu
    names = m.segment.region_names
    c = cpu(budget=100)
    c.attach_loopback(names.index("net_device"), names.index("lo_stats"), "netif_rx",
                      proto="no-ack")
    c.local_bh_disable()                 # the backlog fills; no softirq runs yet
    for _ in range(80):
        c.loopback_send("request", bh=False)
    c.napi_schedule(10_000)              # and the fake NIC is scheduled too
    sd = m.softnet[0]
    c.net_rx_action()
    # the NIC's poll (64), then the backlog's (64): 128 of a budget of 100
    assert int(sd["processed"]) == 128 and int(sd["time_squeeze"]) == 1
    c.local_bh_enable()
    c.loopback_purge()


def test_python_driven_calls_time_out_on_a_held_lock(two_cpus):
    m, cpus = two_cpus
    c0, _ = cpus("irq", 8)
    c0.timeout = 0.2
    m.region("skb_pool")[0:1]["lock"]["val"] = 1  # somebody holds the pool lock forever
    with pytest.raises(RuntimeError, match="timeout"):
        c0.napi_alloc_skb()


def test_defer_of_a_freed_or_queued_skb_is_counted(two_cpus):
    m, cpus = two_cpus
    c0, c1 = cpus("llist", 8)
    c1.local_irq_disable()
    h = c1.napi_alloc_skb()
    c0.skb_attempt_defer_free(h)
    c0.skb_attempt_defer_free(h)   # queued already: must not loop the list
    assert stat(m, 0, "double_free") == 1 and stat(m, 0, "deferred") == 1
    c1.local_irq_enable()
    c1.skb_defer_free_flush()
    assert stat(m, 1, "freed") == 1


def test_checker_catches_a_flush_with_irqs_off(two_cpus):
    m, cpus = two_cpus
    c0, c1 = cpus("irq", 8, check=True)
    c0.skb_attempt_defer_free(c1.napi_alloc_skb())
    c1.local_irq_disable()   # a wrong call site: the seed's argument does not hold here
    c1.skb_defer_free_flush()
    c1.local_irq_enable()
    irq = m.region("irq")[1]
    assert irq["bugs"][layout.LOCKDEP_BUGS.index("lock_irq_with_irqs_off")] == 1
