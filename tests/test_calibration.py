"""Calibration profiles: they round-trip, bad ones are refused in one line,
and loading one changes what the models charge. Behaviour, not timing."""
import dataclasses
import json
import tempfile

import pytest

from smpnet.cli import main
from smpnet.errors import BadInput
from smpnet.experiments import arp, loopback
from smpnet.measure import calibration

# rows shaped as the kernel experiment's
ROWS = [{"test": "tcp_rr", "placement": "same-cpu", "cycles": 12000.0, "cycles_lo": 11000.0,
         "cycles_hi": 13000.0, "us": 4.6},
        {"test": "tcp_rr", "placement": "two-cpus", "cycles": 170000.0, "cycles_lo": 160000.0,
         "cycles_hi": 180000.0, "us": 68.0}]


def profile(tmp_path, **changes):
    p = calibration.from_kernel(ROWS, {"sysctls": {"net.core.netdev_budget": 300}}, 2.6e9)
    p.update(changes)
    path = tmp_path / "profile.json"
    path.write_text(calibration.dumps(p))
    return p, str(path)


def test_a_profile_round_trips(tmp_path):
    p, path = profile(tmp_path)
    assert calibration.load(path) == p
    assert calibration.tcp_rr_cycles(calibration.load(path)) == 12000.0
    assert p["tcp_rr"]["two-cpus"]["us"] == 68.0 and p["sysctls"] == {"net.core.netdev_budget": 300}


def test_a_profile_keeps_the_referees_figures_and_says_none_without_them(tmp_path):
    ref = {"test": "spin_lock_pair", "placement": "in-kernel", "cpus": "1",
           "kernel_cycles": 48.0, "kernel_cycles_lo": 47.0, "kernel_cycles_hi": 49.0,
           "model_cycles": 46.0, "model_over_kernel": 0.96, "model_over_kernel_lo": 0.95,
           "model_over_kernel_hi": 0.97, "kernel_samples": [48.0],
           "model_test": "spin_lock_unlock_irqsave", "algo": "qspinlock",
           "kernel_build": "x86-preempt"}
    p = calibration.from_kernel(ROWS + [ref], {}, 2.6e9)
    assert p["referee"] == {"spin_lock_pair": {k: v for k, v in ref.items()
                                               if k not in ("test", "placement",
                                                            "kernel_samples")}}
    assert profile(tmp_path)[0]["referee"] is None
    path = tmp_path / "with.json"
    path.write_text(calibration.dumps(p))
    assert calibration.load(str(path))["referee"]["spin_lock_pair"]["model_over_kernel"] == 0.96
    # the pair with IRQs off keeps its flag, which locks reads (not run there)
    off = {**ref, "test": "spin_lock_pair_irqs_off", "irqs_off": True}
    kept = calibration.from_kernel(ROWS + [ref, off], {}, 2.6e9)["referee"]
    assert kept["spin_lock_pair_irqs_off"]["irqs_off"] is True
    assert "irqs_off" not in kept["spin_lock_pair"]
    # a row whose model figure is one test less another keeps the other
    less = {**ref, "test": "irq_save_restore_in_pair", "model_less": "spin_lock_unlock"}
    kept = calibration.from_kernel(ROWS + [ref, less], {}, 2.6e9)["referee"]
    assert kept["irq_save_restore_in_pair"]["model_less"] == "spin_lock_unlock"
    assert "model_less" not in kept["spin_lock_pair"]
    assert (calibration.referee_model_test(kept["irq_save_restore_in_pair"])
            == "spin_lock_unlock_irqsave less spin_lock_unlock")
    assert calibration.referee_model_test(kept["spin_lock_pair"]) == "spin_lock_unlock_irqsave"


@pytest.mark.parametrize("change,why", [
    ({"kind": "something else"}, "not a calibration profile"),
    ({"version": 99}, "profile version 99"),
    ({"tcp_rr": {}}, "tcp_rr same-cpu cycles must be a number"),
    ({"tcp_rr": {"same-cpu": {"cycles": float("inf")}}}, "must be a number in"),
    ({"tcp_rr": {"same-cpu": {"cycles": 1e13}}}, "must be a number in"),
    ({"tcp_rr": None}, "must be a number in"),
    ({"veth_ping": {"first_us": "fast", "later_us": 3.0}}, "veth_ping first_us"),
    ({"veth_ping": {"first_us": 30.0, "later_us": -1.0}}, "veth_ping first_us"),
    ({"machine": None}, "no machine facts"),
    ({"machine": {"cpu_model": "a CPU from elsewhere", "kernel": "0.0"}}, "measured with cpu_model"),
])
def test_a_bad_profile_is_refused(tmp_path, change, why):
    _, path = profile(tmp_path, **change)
    with pytest.raises(BadInput, match=why):
        calibration.load(path)


def test_a_file_that_is_not_json_is_refused_in_one_line(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text("{not json")
    assert main(["loopback", "--calibration", str(path), "--repeat", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not JSON" in err[0]


def test_stack_work_is_the_kernels_cost_less_the_models_never_negative():
    s = calibration.stack_work(12000.0, 2000.0)
    assert s["work_cycles"] == 10000.0 and s["per_call"] == 2500
    assert calibration.stack_work(1000.0, 2000.0)["per_call"] == 0


def test_loading_a_profile_makes_every_transaction_do_the_stack_work(allowed):
    kernel_cycles = 40000.0
    # one emulated CPU per real one (one or two): not oversubscribed, so the
    # verdict, which records the sizing, is given
    cpus = allowed[:2]
    rows, verdicts, _ = loopback.run(cpus, ["netif_rx", "direct"], duration=0.03, repeat=6,
                                     ncpus=len(cpus), kernel_cycles=kernel_cycles)
    by = {r["mode"]: r for r in rows}
    # the calibrated sides, the A/A control and the raw model beside them
    assert set(by) == {"netif_rx", "direct", loopback.AA, "netif_rx (raw)", "direct (raw)"}
    for mode in ("netif_rx (raw)", "direct (raw)"):
        assert by[mode]["stack_work_cycles"] == 0 and by[mode]["transactions"] > 0
    for mode in ("netif_rx", "direct", loopback.AA):
        r = by[mode]
        assert r["conserved"] and r["transactions"] > 0
        # each send and receive spins until its share has passed: a floor
        assert r["stack_work_per_call"] > 0
        assert r["stack_work_cycles"] >= 4 * r["transactions"] * r["stack_work_per_call"]
    for v in verdicts:
        cal = v["calibration"]
        assert cal["kernel_cycles"] == kernel_cycles
        assert cal["work_cycles"] == pytest.approx(kernel_cycles - cal["model_cycles"])
        # each calibrated run spun exactly the sizing's share per call: the
        # floor above lets a run that applied it twice through
        for mode in ("netif_rx", "direct", loopback.AA):
            assert by[mode]["stack_work_per_call"] == cal["per_call"]
    assert verdicts


def test_each_send_and_receive_spins_at_least_its_share(allowed):
    rows, _, _ = loopback.run(allowed, ["netif_rx"], packets=40, repeat=1, ncpus=1,
                              kernel_cycles=4e6)   # far above the model's own cost
    (r,) = rows
    assert r["stack_work_per_call"] > 9e5
    # four calls a transaction (two sends, two receives), each a floor
    assert r["stack_work_cycles"] >= 4 * r["transactions"] * r["stack_work_per_call"]


def test_a_calibrated_loopback_records_the_profile_it_used(tmp_path, capsys, allowed):
    _, path = profile(tmp_path)
    assert main(["loopback", "--json", "--calibration", path, "--mode", "netif_rx",
                 "--repeat", "1", "--duration", "0.02", "--ncpus", "1"]) == 0
    env = json.loads(capsys.readouterr().out)
    cal = env["params"]["calibration"]
    assert cal["tcp_rr"]["same-cpu"]["cycles"] == 12000.0 and cal["source"] == path
    assert env["results"][0]["stack_work_cycles"] > 0


def test_a_calibrated_link_charges_each_frame_its_wire_cost(allowed):
    # an echo frame 100 us each way, an ARP frame 50 us: the receiver spins
    # at least that long before handling it, so these are floors
    rows, _, _, _ = arp.run(allowed, ["immediate"], trials=3, count=3, ncpus=2,
                            oversubscribe=True, wire_us=(50.0, 100.0))
    (r,) = rows
    assert r["replies"] == 9
    assert r["later_ms"]["min"] >= 0.2              # echo and reply
    assert r["first_ms"]["min"] >= 0.3              # ARP request and reply, then both
    plain, _, _, _ = arp.run(allowed, ["immediate"], trials=3, count=3, ncpus=2,
                             oversubscribe=True)
    assert plain[0]["replies"] == 9


def test_arp_wire_costs_come_from_the_veth_ping():
    cal = {"veth_ping": {"first_us": 43.0, "later_us": 38.0}}
    assert calibration.arp_wire_us(cal) == (2.5, 19.0)
    assert calibration.arp_wire_us({"veth_ping": None}) is None
    assert calibration.arp_wire_us(None) is None


def test_kernel_saves_a_profile_that_loopback_loads(tmp_path, capsys, allowed):
    path = tmp_path / "profile.json"
    assert main(["kernel", "--json", "--transactions", "50", "--rounds", "1", "--trials", "1",
                 "--no-referee", "--cpus", str(allowed[0]), "--save", str(path)]) == 0
    env = json.loads(capsys.readouterr().out)
    p = calibration.load(str(path))
    same = next(r for r in env["results"] if r["placement"] == "same-cpu")
    assert p["tcp_rr"]["same-cpu"]["cycles"] == same["cycles"]
    veth = [r for r in env["results"] if r.get("test") == "veth_ping"]
    assert (p["veth_ping"] is None) == (not veth)
    assert main(["loopback", "--calibration", str(path), "--mode", "netif_rx", "--repeat", "1",
                 "--duration", "0.02", "--ncpus", "1"]) == 0


def test_kernel_refuses_a_save_path_it_cannot_write_before_the_run(capsys):
    assert main(["kernel", "--save", "/nonexistent/dir/p.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--save /nonexistent/dir/p.json" in err[0]


def test_a_calibration_with_the_storm_is_refused_in_one_line(tmp_path, capsys):
    _, path = profile(tmp_path)
    assert main(["loopback", "--ack-storm", "--calibration", path, "--repeat", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--calibration" in err[0] and "storm" in err[0]


def test_a_profile_that_never_ends_is_refused_not_read_for_ever(capsys):
    # read as compare reads a result: bounded, so /dev/zero is refused
    assert main(["loopback", "--calibration", "/dev/zero", "--repeat", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("smpnet-bench: --calibration /dev/zero: ")


def test_a_save_path_gone_during_the_run_loses_neither_the_run_nor_the_profile(
        tmp_path, capsys, allowed, monkeypatch):
    """--save's directory removed while kernel runs: the rows are printed,
    the profile goes to a new file that the one line names (rc 1), and the
    text does not say it was written where asked."""
    from smpnet.experiments import kernel

    # the referee is test_referee.py's: here bpf(2) is refused (3-4 s saved)
    monkeypatch.setattr(kernel.referee.bpf, "refused", lambda: "not under test here")
    d = tmp_path / "d"
    d.mkdir()
    real_save = kernel.save_profile

    def save_after_rmdir(path, text):
        d.rmdir()
        return real_save(path, text)
    monkeypatch.setattr(kernel, "save_profile", save_after_rmdir)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["kernel", "--transactions", "50", "--rounds", "1", "--trials", "1",
                 "--cpus", str(allowed[0]), "--save", str(d / "p.json")]) == 1
    out = capsys.readouterr().out
    assert "same-cpu" in out and "calibration profile written to" not in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("calibration profile not written")]
    saved = line.split("it was saved to ")[1]
    assert calibration.load(saved)["tcp_rr"]["same-cpu"]["cycles"] > 0


def test_save_and_output_on_one_file_are_refused(tmp_path, capsys):
    p = str(tmp_path / "p.json")
    assert main(["kernel", "--save", p, "--output", p]) == 2
    assert "the result would overwrite the profile" in capsys.readouterr().err


def test_a_calibrated_packet_count_is_estimated_at_the_charged_rate(tmp_path):
    """--packets with a profile: each packet is charged up to a transaction's
    12,000 cycles, so 10^9 packets cannot be estimated at the raw model's
    10 M packets/s (100 s a side, allowed) but at most tsc_hz / 12,000 a
    second: over the one-hour rule, so refused without --long."""
    from smpnet import bounds
    from smpnet.experiments import loopback
    from smpnet.machine import tsc

    _, path = profile(tmp_path)
    cal = calibration.load(path)
    assert loopback.packet_rate(None) == loopback.TYPICAL_PPS
    assert loopback.packet_rate(cal) == pytest.approx(min(loopback.TYPICAL_PPS,
                                                          tsc.tsc_hz() / 12000.0))
    p = dataclasses.replace(loopback.plan([0], True), mode=["netif_rx"], ncpus=1, repeat=1,
                            packets=10 ** 9, duration_s=None, scaling=False)
    assert loopback.seconds(dataclasses.replace(p, calibration=None), [0]) < bounds.LONG_RUN_S
    assert loopback.seconds(dataclasses.replace(p, calibration=cal), [0]) > bounds.LONG_RUN_S
