"""null, the A/A control: both sides run alike, in ABBA order, compared per
ABBA block; a real difference is found, a steady drift is not taken for one.

The mechanism tests replace the timed C round with a fake whose cost is set
per side and per call, and which records every call: what the run does is
then exact, not a timing."""
import json

import pytest

from smpnet import _core
from smpnet.cli import main
from smpnet.experiments import null


def test_rounds_alternate_abba_and_blocks_pair_them():
    assert null.order(4) == [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")]
    # rounds 1-2 and 3-4 are blocks; a fifth round has no partner
    assert null.blocks([1, 3, 5, 7, 9], [2, 6, 6, 10, 0]) == [2.0, 2.0]


def test_both_sides_run_the_same_op_on_a_real_machine(capsys, allowed):
    assert main(["null", "--json", "--rounds", "12", "--loops", "2000",
                 "--test", "spin_lock_unlock_irq", "--algo", "ticket"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["command"] == "null" and env["params"]["cpu"] == allowed[0]
    a, b = env["results"]
    assert (a["side"], b["side"]) == ("A", "B")
    assert a["test"] == "spin_lock_unlock_irq" and a["algo"] == "ticket" and a["loops"] == 2000
    assert len(a["samples"]) == len(b["samples"]) == 12
    (v,) = env["verdicts"]
    assert v["seed"] is None and v["unit"] == "cycles"
    assert v["interval"][0] <= v["measured"] <= v["interval"][1]


@pytest.fixture
def fake_rounds(monkeypatch, tmp_path):
    """Install a fake _core.time_bench_round costing cost(side, call) cycles
    per op (side 0 is A's lock slot, 1 B's; call counts from 1) and a
    recorder of lock_init. install() returns a function giving the recorded
    calls (the worker, a fork, writes them to a file) and the lock inits."""
    log = tmp_path / "calls"
    inits = []
    real_init = _core.lock_init

    def install(cost, wall_ns=lambda side, loops: 10**9):
        count = [0]

        def fake(test, loops, seg=None, cpu=0, lock_region=-1, lock_index=0, **kw):
            count[0] += 1
            with open(log, "a") as f:
                f.write(json.dumps([test, loops, cpu, lock_region, lock_index,
                                    sorted(kw.items())]) + "\n")
            return cost(lock_index, count[0]) * loops, wall_ns(lock_index, loops)

        def init(seg, region, index, algo, lock_id):
            inits.append((index, algo))
            return real_init(seg, region, index, algo, lock_id)

        monkeypatch.setattr(_core, "time_bench_round", fake)
        monkeypatch.setattr(_core, "lock_init", init)
        # a fake round is never spoiled: a real switch (its log write, a
        # preemption) would rerun it and shift the calls its cost counts
        from smpnet.measure import time_bench
        monkeypatch.setattr(time_bench, "context_switches", lambda: 0)
        return lambda: [json.loads(ln) for ln in log.read_text().splitlines()], inits
    return install


def _run(capsys, *argv):
    assert main(["null", "--json", "--algo", "ticket", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_and_b_differ_only_in_their_lock_slot(capsys, fake_rounds, allowed):
    calls, inits = fake_rounds(lambda side, call: 20.0)
    _run(capsys, "--rounds", "12", "--loops", "100")
    assert [i for i, _ in inits] == [0, 1]
    assert inits[0][1] == inits[1][1] == _core.LOCK_ALGOS["ticket"]
    by_side = {0: [], 1: []}
    for c in calls():
        by_side[c[4]].append(json.dumps(c[:4] + c[5:]))
    assert len(by_side[0]) == len(by_side[1]) == 1 + 12  # a warm-up round each, then 12
    assert set(by_side[0]) == set(by_side[1]) and len(set(by_side[0])) == 1


def test_both_sides_use_the_loops_calibrated_once(capsys, fake_rounds, allowed):
    # a round of B would look ten times faster: calibrating it apart would
    # give it other loops
    calls, _ = fake_rounds(lambda side, call: 20.0,
                           wall_ns=lambda side, loops: loops * (100 if side == 0 else 10))
    env = _run(capsys, "--rounds", "12")
    loops = {c[1] for c in calls()[-24:]}
    assert len(loops) == 1 and env["results"][0]["loops"] == env["results"][1]["loops"]


def test_a_real_difference_is_found(capsys, fake_rounds, allowed):
    fake_rounds(lambda side, call: 20.0 + 2.0 * side)
    (v,) = _run(capsys, "--rounds", "12", "--loops", "100")["verdicts"]
    assert v["measured"] == pytest.approx(2.0) and v["interval"] == pytest.approx([2.0, 2.0])
    assert v["verdict"] == "difference found" and v["pairs"] == 6


def test_identical_sides_give_no_difference(capsys, fake_rounds, allowed):
    fake_rounds(lambda side, call: 20.0)
    (v,) = _run(capsys, "--rounds", "12", "--loops", "100")["verdicts"]
    assert v["measured"] == 0.0 and v["verdict"] == "no measurable difference"


@pytest.mark.parametrize("rounds", [12, 13, 14, 17])
def test_a_steady_drift_is_not_taken_for_a_difference(capsys, fake_rounds, allowed, rounds):
    """Each call costs one cycle more than the last (the machine warming up):
    per ABBA block the drift cancels exactly, whatever the number of rounds."""
    fake_rounds(lambda side, call: 20.0 + call)
    (v,) = _run(capsys, "--rounds", str(rounds), "--loops", "100")["verdicts"]
    assert v["measured"] == 0.0 and v["interval"] == [0.0, 0.0]
    assert v["verdict"] == "no measurable difference"


def test_a_difference_is_found_through_a_drift(capsys, fake_rounds, allowed):
    """B dearer by half a cycle while every call drifts by one: per block,
    exactly 0.5 (a round-by-round or unpaired difference would drown it)."""
    fake_rounds(lambda side, call: 20.0 + call + 0.5 * side)
    (v,) = _run(capsys, "--rounds", "12", "--loops", "100")["verdicts"]
    assert v["measured"] == pytest.approx(0.5) and v["interval"] == pytest.approx([0.5, 0.5])
    assert v["verdict"] == "difference found"


@pytest.mark.parametrize("argv, says", [
    (["--test", "nope"], "unknown time_bench test 'nope'"),
    (["--algo", "nope"], "--algo takes one lock algorithm"),
    (["--rounds", "0"], "out of range"),
    (["--rounds", "11"], "--rounds 11 gives no verdict: it needs 12 or more (6 ABBA blocks)"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, says):
    assert main(["null"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
