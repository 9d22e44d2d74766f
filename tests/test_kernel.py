"""kernel: the C core's TCP request/response loop does exactly the
transactions asked, turns every failure into an error code (never a hang),
and the experiment's run leaves no process behind. Behaviour, not timing."""
import errno
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import psutil
import pytest

from conftest import drop_capabilities
from smpnet import _core
from smpnet.cli import main
from smpnet.experiments import kernel
from smpnet.experiments.kernel import netns

GUARD_S = 10.0   # no test may hang: a loop still running after this has failed


@pytest.fixture(autouse=True)
def no_referee(monkeypatch):
    """The referee is tests/test_referee.py's: in process, `kernel` runs here
    as where bpf(2) is refused (about 4 s a run saved, ten runs)."""
    monkeypatch.setattr(kernel.referee.bpf, "refused", lambda: "not under test here")


def in_thread(fn, *args):
    """Run fn(*args) in a thread (the C loop lets the GIL go); a join()
    that returns its result or fails the test past GUARD_S."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn(*args)), daemon=True)
    t.start()

    def join():
        t.join(GUARD_S)
        assert not t.is_alive(), "the loop hung"
        return out["r"]
    return join


def echo_counting(sock, limit):
    """A Python server: answer each byte with one, count the bytes until EOF."""
    n = 0
    while n < limit:
        b = sock.recv(1)
        if not b:
            break
        n += 1
        sock.sendall(b)
    return n


def test_the_client_loop_does_exactly_n_transactions_on_a_socketpair():
    a, b = socket.socketpair()
    with a, b:
        server = in_thread(echo_counting, b, 10**6)
        cycles, wall_ns, done, err = _core.tcp_rr(a.fileno(), 257, True)
        a.shutdown(socket.SHUT_WR)
        assert (done, err) == (257, 0) and cycles > 0 and wall_ns > 0
        assert server() == 257


@pytest.fixture
def loopback_pair():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        c = socket.create_connection(listener.getsockname())
        s, _ = listener.accept()
    for x in (c, s):
        x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with c, s:
        yield c, s


def test_the_server_loop_answers_exactly_n_on_a_real_loopback_connection(loopback_pair):
    c, s = loopback_pair
    server = in_thread(_core.tcp_rr, s.fileno(), 100, False)
    for _ in range(100):
        c.sendall(b"q")
        assert c.recv(1) == b"q"   # the byte it got, sent back
    assert server()[2:] == (100, 0)
    # the server stopped at 100: a 101st request gets no answer
    c.sendall(b"q")
    c.settimeout(0.2)
    with pytest.raises(socket.timeout):
        c.recv(1)


def test_a_closed_peer_is_an_error_code_not_a_hang(loopback_pair):
    c, s = loopback_pair
    s.close()
    cycles, wall_ns, done, err = in_thread(_core.tcp_rr, c.fileno(), 1000, True)()
    assert done == 0 and err in (_core.RR_PEER_CLOSED, errno.ECONNRESET, errno.EPIPE)


def test_a_silent_peer_times_out_as_an_error_code(loopback_pair):
    c, s = loopback_pair
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 100_000))
    _, _, done, err = in_thread(_core.tcp_rr, c.fileno(), 5, True)()
    assert done == 0 and err in (errno.EAGAIN, errno.EWOULDBLOCK)
    assert s.recv(1) == b"x"   # the request went out; no reply came


def test_a_peer_that_closes_midway_stops_the_loop_there():
    a, b = socket.socketpair()
    with a, b:
        server = in_thread(lambda: (echo_counting(b, 7), b.close()))
        _, _, done, err = _core.tcp_rr(a.fileno(), 100, True)
        server()
        assert done == 7 and err != 0


def test_placements_alternate_and_sysctls_are_read(tmp_path):
    assert kernel.order(3, ["same-cpu", "two-cpus"]) == [
        ("same-cpu", "two-cpus"), ("two-cpus", "same-cpu"), ("same-cpu", "two-cpus")]
    (tmp_path / "dev_weight").write_text("64\n")
    (tmp_path / "netdev_budget").write_text("junk\n")
    assert kernel.read_sysctls(str(tmp_path)) == {"net.core.dev_weight": 64}


def tcp_rows(env):
    return [r for r in env["results"] if r["test"] == "tcp_rr"]


def test_the_json_has_its_rows_and_leaves_no_process(capsys, allowed):
    assert main(["kernel", "--json", "--transactions", "50", "--rounds", "2",
                 "--trials", "2"]) == 0
    env = json.loads(capsys.readouterr().out)
    p = env["params"]
    assert env["command"] == "kernel" and env["verdicts"] == []
    assert p["transactions"] == 50 and p["rounds"] == 2 and isinstance(p["sysctls"], dict)
    placements = ["same-cpu", "two-cpus"] if len(allowed) >= 2 else ["same-cpu"]
    assert [r["placement"] for r in tcp_rows(env)] == p["placements"] == placements
    for r in tcp_rows(env):
        assert r["transactions"] == 50 and len(r["cycles_samples"]) == len(r["tps_samples"]) == 2
        assert r["cycles_lo"] <= r["cycles"] <= r["cycles_hi"] and r["cycles"] > 0
        assert r["tps_lo"] <= r["tps"] <= r["tps_hi"]
    assert env["results"][0]["cpus"] == str(allowed[0])
    assert psutil.Process().children(recursive=True) == []


def test_one_cpu_skips_two_cpus_with_a_warning(capsys, allowed):
    assert main(["kernel", "--json", "--cpus", str(allowed[0]), "--transactions", "20",
                 "--rounds", "1", "--trials", "1"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert [r["placement"] for r in tcp_rows(env)] == ["same-cpu"]
    assert any("two-cpus skipped" in w for w in env["warnings"])


@pytest.mark.parametrize("argv", [["--transactions", "0"], ["--transactions", "1e3"],
                                  ["--rounds", "0"], ["--transactions", "100000001"],
                                  ["--trials", "0"], ["--count", "65"], ["--count", "x"]])
def test_bad_input_is_one_line_and_exit_2(capsys, argv):
    assert main(["kernel"] + argv) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_failing_end_stops_the_run_and_leaves_no_process(monkeypatch, capsys):
    real = _core.tcp_rr

    def failing_client(fd, n, client):   # the workers are forked: they see this
        return (0, 0, 0, errno.EIO) if client else real(fd, n, client)

    monkeypatch.setattr(_core, "tcp_rr", failing_client)
    assert main(["kernel", "--transactions", "20", "--rounds", "1", "--trials", "1"]) == 1
    err = capsys.readouterr().err
    # whichever end the coordinator hears from first: the client's error, or
    # the server's end of file when the client's process has gone
    assert "run stopped" in err and ("Input/output error" in err or "peer closed" in err)
    assert psutil.Process().children(recursive=True) == []


# ------------------------------------------------------------ the veth part

root = pytest.mark.skipif(os.geteuid() != 0 or netns.can_admin_net() is not None,
                          reason="needs root: network namespaces and a veth pair")
QUICK = ["kernel", "--transactions", "20", "--rounds", "1", "--trials", "2"]


def ours(pid):
    try:
        found = os.listdir(netns.NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in found if n.startswith(f"{netns.PREFIX}{pid}-"))


@root
def test_as_root_the_veth_rows_follow_and_the_namespaces_are_gone(capsys):
    assert main(QUICK + ["--count", "3", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    veth = [r for r in env["results"] if r["test"] == "veth_ping"]
    assert [r["placement"] for r in veth] == ["veth first", "veth later"]
    for r in veth:
        assert r["trials"] == 2 and r["count"] == 3 and len(r["cycles_samples"]) == 2
        assert r["cycles_lo"] <= r["cycles"] <= r["cycles_hi"] and r["us"] > 0
    p = env["params"]
    assert p["veth_skipped"] is None and p["namespaces"] == list(netns.names())
    assert p["neigh_model"]["mcast_solicit"] == 3 and "retrans_time_ms" in p["neigh_sysctls"]
    assert not any("veth ping skipped" in w for w in env["warnings"])
    assert ours(os.getpid()) == [] and psutil.Process().children(recursive=True) == []


@root
def test_progress_counts_both_parts_once_to_its_end(capsys):
    # the TCP rounds and the veth ping's trials on one counter: it counted
    # [1/N] .. [N/N], then began again at [1/M] for the veth part
    from smpnet.cli import build_parser
    from smpnet.machine.cpus import parse_cpus
    args = build_parser().parse_args(QUICK)
    cpus = parse_cpus(args.cpus)
    seen = []
    kernel.run(cpus, kernel.params(args, cpus), lambda i, n, what: seen.append((i, n, what)))
    assert [i for i, _, _ in seen] == list(range(len(seen)))
    assert {n for _, n, _ in seen} == {len(seen)}
    assert seen[-1][2].startswith("veth ping") and not seen[0][2].startswith("veth")


def test_without_privilege_the_veth_part_is_one_skip_line(monkeypatch, capsys):
    monkeypatch.setattr(netns, "can_admin_net", lambda: "it needs root (as the test says)")
    assert main(QUICK) == 0
    out = capsys.readouterr().out
    assert out.count("veth ping skipped") == 1
    assert "veth ping skipped: it needs root (as the test says)" in out
    assert "same-cpu" in out and "veth first" not in out
    assert "net.ipv4.neigh.default.mcast_solicit (packets): host" in out


def test_a_namespace_that_cannot_be_made_skips_the_part(monkeypatch, capsys):
    def refuse(self):
        raise OSError(errno.EPERM, "Operation not permitted")
    monkeypatch.setattr(netns, "can_admin_net", lambda: None)
    monkeypatch.setattr(netns.VethPair, "_create", refuse)
    assert main(QUICK + ["--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert any(w.startswith("veth ping skipped: cannot make the namespaces")
               for w in env["warnings"])
    assert [r["test"] for r in env["results"] if r["placement"] != "in-kernel"] == \
        ["tcp_rr"] * len(env["params"]["placements"])
    assert ours(os.getpid()) == []


def _bench(argv, tmp_path, **kw):
    return subprocess.Popen([sys.executable, "-m", "smpnet"] + argv, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, **kw)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop its capabilities")
def test_a_real_run_without_capabilities_skips_the_veth_part(tmp_path):
    p = _bench(QUICK, tmp_path, preexec_fn=drop_capabilities)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "veth ping skipped: it needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN" in out
    assert "kernel referee skipped: bpf(2) not permitted" in out
    assert "same-cpu" in out and "veth first" not in out


# a run that pings for long, the referee left out: the veth ping begins about 0.5 s in
# (it began 2-3 s in after the referee's uncontended rows)
PINGING = ["kernel", "--cpus", "0", "--transactions", "20", "--rounds", "1", "--trials", "5000",
           "--no-referee"]


def _until_pinging(p):
    """Read p's progress lines until the veth trials have begun."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        if "veth ping trial" in line:
            return
    p.kill()
    pytest.fail(f"it never started pinging: {p.stderr.read()}")


@root
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])   # SIGHUP's handler is theirs
def test_a_signal_while_pinging_leaves_no_namespace(tmp_path, sig):
    p = _bench(PINGING,
               tmp_path)
    _until_pinging(p)
    assert ours(p.pid), "no namespace while pinging?"
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 130 and "interrupted" in err
    assert ours(p.pid) == []


@root
def test_a_killed_runs_namespaces_are_removed_by_the_next_run(tmp_path, capsys):
    p = _bench(PINGING,
               tmp_path, start_new_session=True)
    _until_pinging(p)
    os.killpg(p.pid, signal.SIGKILL)     # nothing of it runs any cleanup
    p.communicate(timeout=30)
    left = ours(p.pid)
    assert left == list(netns.names(p.pid))
    assert main(QUICK + ["--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert ours(p.pid) == []
    assert any(all(n in w for n in left) for w in env["warnings"]), env["warnings"]
