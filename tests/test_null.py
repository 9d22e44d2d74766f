"""null, the A/A control: both sides run alike, in ABBA order, paired; a
difference between them is found, and drift is not mistaken for one."""
import json

import pytest

from smpnet import _core
from smpnet.cli import main
from smpnet.experiments import null


def test_rounds_alternate_abba():
    assert null.order(4) == [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")]


def test_both_sides_run_the_same_op_alike(capsys, allowed):
    assert main(["null", "--json", "--rounds", "4", "--loops", "2000",
                 "--test", "spin_lock_unlock_irq", "--algo", "ticket"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["command"] == "null" and env["params"]["cpu"] == allowed[0]
    a, b = env["results"]
    assert (a["side"], b["side"]) == ("A", "B")
    for k in ("test", "algo", "loops", "rounds"):
        assert a[k] == b[k]
    assert a["test"] == "spin_lock_unlock_irq" and a["algo"] == "ticket" and a["loops"] == 2000
    assert len(a["samples"]) == len(b["samples"]) == 4
    (v,) = env["verdicts"]
    assert v["seed"] is None and v["unit"] == "cycles"
    assert v["interval"][0] <= v["measured"] <= v["interval"][1]


def _fake_rounds(monkeypatch, cost):
    """_core.time_bench_round replaced: `cost(side, call)` cycles per op, side
    0 for A's lock slot, 1 for B's. The workers fork after this, so they see it."""
    calls = []

    def fake(test, loops, seg=None, cpu=0, lock_region=-1, lock_index=0, **kw):
        calls.append(lock_index)
        return cost(lock_index, len(calls)) * loops, 1000

    monkeypatch.setattr(_core, "time_bench_round", fake)


def _verdict(capsys, rounds=8):
    assert main(["null", "--json", "--rounds", str(rounds), "--loops", "100"]) == 0
    return json.loads(capsys.readouterr().out)["verdicts"][0]


def test_a_real_difference_between_the_sides_is_found(capsys, monkeypatch, allowed):
    _fake_rounds(monkeypatch, lambda side, call: 20.0 + 2.0 * side)
    v = _verdict(capsys)
    assert v["measured"] == pytest.approx(2.0) and v["interval"] == pytest.approx([2.0, 2.0])
    assert v["verdict"] == "not reproduced"


def test_identical_sides_give_no_difference(capsys, monkeypatch, allowed):
    _fake_rounds(monkeypatch, lambda side, call: 20.0)
    v = _verdict(capsys)
    assert v["measured"] == 0.0 and v["verdict"] == "no measurable difference"


def test_a_steady_drift_is_not_taken_for_a_difference(capsys, monkeypatch, allowed):
    """Each round costs one cycle more than the last (the machine warming up):
    in ABBA order the paired differences are +1, -1, ...: median 0. In AB
    order every pair would say B is dearer."""
    _fake_rounds(monkeypatch, lambda side, call: 20.0 + call)
    v = _verdict(capsys)
    assert v["measured"] == 0.0 and v["verdict"] == "no measurable difference"


@pytest.mark.parametrize("argv, says", [
    (["--test", "nope"], "unknown time_bench test 'nope'"),
    (["--algo", "nope"], "--algo takes one lock algorithm"),
    (["--rounds", "0"], "out of range"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, says):
    assert main(["null"] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_too_few_rounds_give_no_verdict_and_say_why(capsys, allowed):
    assert main(["null", "--json", "--rounds", "2", "--loops", "1000"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["verdicts"] == [] and any("--rounds 3" in w for w in env["warnings"])
