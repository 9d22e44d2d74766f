"""smpnet-bench defer from the command line: its JSON rows, seed 003's two
verdicts and their A/A controls, bad input, the estimate. The model under
it: test_defer.py."""
import dataclasses
import json

import numpy as np

import pytest

from smpnet.cli import main
from smpnet.experiments import defer
from smpnet.measure import stats

STRATEGIES = defer.STRATEGIES
ROW_KEYS = {"strategy", "cpus", "allocated", "freed", "lost", "double_free", "skbs_per_s",
            "defer_cycles", "flush_cycles", "ipis", "fallback_frees", "lock_spins"}


def test_defer_json(capsys, allowed):
    two = ["--cpus", ",".join(map(str, allowed[:2]))] if len(allowed) >= 2 else \
        ["--ncpus", "2", "--oversubscribe"]
    assert main(["defer", "--json", "--skbs", "5000", "--repeat", "6"] + two) == 0
    env = json.loads(capsys.readouterr().out)
    # irq runs twice, the second right after it: seed 003's A/A control
    sides = [s for x in STRATEGIES for s in ([x, defer.AA] if x == "irq" else [x])]
    assert [r["strategy"] for r in env["results"]] == sides
    for r in env["results"]:
        assert ROW_KEYS <= set(r)
        assert r["allocated"] == r["freed"] == 6 * 5000 and r["lost"] == 0
    if len(allowed) < 2:  # one real CPU: oversubscribed, so rows but no verdict
        assert env["verdicts"] == []
        pytest.skip("one real CPU: the verdicts' checks need two (oversubscribed runs "
                    "give none, checked above)")
    claims = [v["claim"] for v in env["verdicts"]]
    assert len(claims) == 2 and all(v["seed"] == "003" for v in env["verdicts"])
    op, rate = env["verdicts"]
    for v in env["verdicts"]:
        assert v["interval"][0] <= v["measured"] <= v["interval"][1]
        assert v["kind"] == "measured"
        # each label is the one its interval gives, the control's too
        assert v["verdict"] == stats.judge(v, v["measured"], v["interval"])["verdict"]
        c = v["control"]
        assert c["verdict"] == stats.equivalence(c["interval"])
        assert c["reliable"] == (c["verdict"] == stats.NO_MEASURABLE)
    # the per-op cost against the seed's 14 cycles; the rate within a 1 % margin
    assert op["size"] == 14 and op["size_ratio"][0] == pytest.approx(op["measured"] / 14)
    assert op["pairs"] == defer.OP_ROUNDS // 2
    assert rate["margin"] == 1.0 and rate["pairs"] == 6 and "size_ratio" not in rate
    # the rate is irq's gain over irqsave, run r against run r (the samples' order)
    by = {r["strategy"]: r["skbs_per_s_samples"] for r in env["results"]}
    gains = [(a - b) / b * 100 for a, b in zip(by["irq"], by["irqsave"])]
    assert rate["measured"] == pytest.approx(np.median(gains))
    aa = [(a - b) / b * 100 for a, b in zip(by[defer.AA], by["irq"])]
    assert rate["control"]["measured"] == pytest.approx(np.median(aa))
    assert rate["verdict"] == stats.equivalence(rate["interval"], 1.0)


def test_defer_oversubscribed_gives_rows_but_no_verdict(capsys):
    assert main(["defer", "--json", "--skbs", "600", "--repeat", "3", "--ncpus", "3",
                 "--oversubscribe"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert len(env["results"]) == len(STRATEGIES) + 1 and env["verdicts"] == []
    assert any("no verdict" in w for w in env["warnings"])


@pytest.mark.parametrize("argv", [
    ["--strategy", "rcu"], ["--rx-cpus", "0"], ["--rx-cpus", "2"], ["--skbs", "0"],
    ["--skbs", "10", "--duration", "1"], ["--defer-max", "0"], ["--defer-max", "100000"],
    ["--batch", "0"], ["--batch", "1000"], ["--repeat", "0"], ["--lock", "rwlock"],
    ["--duration", "0"], ["--lock", "all"], ["--lock", "tas,ticket"],
    ["--skbs", "99999999999999999999999"], ["--ncpus", "100000"],
])
def test_defer_bad_input_exit_2(capsys, argv):
    assert main(["defer", "--ncpus", "2", "--oversubscribe"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("smpnet-bench: ")


def test_defer_text_when_a_strategy_never_flushes(capsys):
    # defer_max 1: llist never defers (its count reaches 1 at once), so never flushes
    assert main(["defer", "--skbs", "2000", "--repeat", "1", "--defer-max", "1",
                 "--strategy", "llist", "--ncpus", "2", "--oversubscribe"]) == 0
    out = capsys.readouterr().out
    assert "no flush ran" in out and "no verdict" in out


def test_defer_needs_two_cpus(capsys, allowed):
    assert main(["defer", "--cpus", str(allowed[0])]) == 2
    assert "at least 2 CPUs" in capsys.readouterr().err


def test_dear_ipis_are_in_the_estimate():
    """20,000,000 skbs with IPIs of 10^7 cycles each way: at most defer_max / 2
    skbs an IPI, so hours, not the seconds of the typical rate; without
    IPI costs given the typical rate stands."""
    from smpnet import bounds
    from smpnet.experiments import defer as d
    from smpnet.machine import tsc

    p = dataclasses.replace(d.plan([0, 1], True), strategy=["irq"], repeat=1, skbs=20_000_000,
                            duration_s=None, ncpus=2)
    assert d.seconds(p, [0, 1]) < 60
    dear = dataclasses.replace(p, ipi_cycles=[10 ** 7], ipi_entry_cycles=10 ** 7)
    assert d.skb_rate(dear.ipi_cycles, 10 ** 7, d.DEFER_MAX) == pytest.approx(
        tsc.tsc_hz() * (d.DEFER_MAX // 2) / 2e7)
    assert d.seconds(dear, [0, 1]) > bounds.LONG_RUN_S
