"""The veth part of `kernel`: its namespaces exist only while a run uses
them (removed on every exit path; a killed run's found and removed by the
next), the C core's ICMP loop answers exactly what it was asked or an error
code (never a hang), and a trial's first echo really resolved ARP.
Behaviour, not timing. Most tests need root (CI runs as root)."""
import errno
import os
import socket
import threading

import pytest

from smpnet import _core
from smpnet.errors import RunFailed
from smpnet.experiments.kernel import netns, ping_veth

GUARD_S = 10.0
root = pytest.mark.skipif(os.geteuid() != 0 or netns.can_admin_net() is not None,
                          reason="needs root: network namespaces and a veth pair")


def listed(netns_dir=netns.NETNS_DIR):
    """Every namespace, by /run/netns and by pyroute2."""
    from pyroute2 import netns as pyroute2_netns
    try:
        found = set(os.listdir(netns_dir))
    except FileNotFoundError:
        found = set()
    return found | set(pyroute2_netns.listnetns())


def ours(pid=None):
    """The namespaces a run in process `pid` (this one) made: another
    run as root on this machine may hold its own meanwhile."""
    prefix = f"{netns.PREFIX}{os.getpid() if pid is None else pid}-"
    return sorted(n for n in listed() if n.startswith(prefix))


def dead_pid():
    """A pid that was a process a moment ago and is none now."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def in_thread(fn, *args):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", fn(*args)), daemon=True)
    t.start()
    t.join(GUARD_S)
    assert not t.is_alive(), "the ICMP loop hung"
    return out["r"]


def test_the_icmp_checksum_is_rfc_1071s():
    assert _core.icmp_checksum(bytes([8, 0, 0, 0, 0, 1, 0, 1])) == 0xf7fd
    # a packet carrying its own checksum sums to zero; an odd length pads with a zero byte
    data = bytes([8, 0, 0xf7, 0xfd, 0, 1, 0, 1])
    assert _core.icmp_checksum(data) == 0
    assert _core.icmp_checksum(b"\x01") == _core.icmp_checksum(b"\x01\x00")


def test_no_privilege_is_one_line_saying_why(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t0000000000000000\n")
    reason = netns.can_admin_net(str(status))
    assert "root" in reason and "CAP_NET_ADMIN" in reason and "\n" not in reason
    status.write_text("CapEff:\t000001ffffffffff\n")
    assert netns.can_admin_net(str(status)) is None


def test_the_icmp_loop_refuses_bad_arguments():
    with pytest.raises(ValueError):
        _core.icmp_echo(-1, 3, 1)
    with pytest.raises(ValueError):
        _core.icmp_echo(0, 0, 1)
    with pytest.raises(ValueError):
        _core.icmp_echo(0, _core.ICMP_ECHO_MAX + 1, 1)


@pytest.fixture
def link():
    with netns.VethPair() as lk:
        yield lk
    assert ours() == []


def sock_in(name, dst):
    """A raw ICMP socket made inside namespace `name` (pyroute2 moves a
    child there; this process stays where it is), connected to `dst`."""
    from pyroute2 import netns as pyroute2_netns
    s = pyroute2_netns.create_socket(name, socket.AF_INET, socket.SOCK_RAW,
                                     socket.IPPROTO_ICMP, flags=0)
    s.connect((dst, 0))
    return s


@root
def test_a_link_is_made_and_removed_with_nothing_left(link):
    assert sorted(ours()) == [link.a, link.b] == list(netns.names())
    assert link.flush_neighbour() == 0        # nothing resolved yet


@root
@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_the_namespaces_go_on_an_error_and_on_an_interrupt(exc):
    with pytest.raises(exc):
        with netns.VethPair():
            assert len(ours()) == 2
            raise exc
    assert ours() == []


@root
def test_the_loop_gets_exactly_count_replies_on_a_working_link(link):
    with sock_in(link.a, netns.ADDR_B) as s:
        cycles, ns, err = in_thread(_core.icmp_echo, s.fileno(), 7, 4242, 1, 1000)
    assert err == 0 and len(cycles) == len(ns) == 7
    assert all(c > 0 for c in cycles) and all(n > 0 for n in ns)


@root
@pytest.mark.parametrize("peer", ["no host", "peer down"])
def test_no_reply_is_an_error_code_within_the_timeout_not_a_hang(link, peer):
    dst = "192.0.2.3" if peer == "no host" else netns.ADDR_B
    if peer == "peer down":
        link.set_peer_up(False)
    with sock_in(link.a, dst) as s:
        cycles, ns, err = in_thread(_core.icmp_echo, s.fileno(), 3, 4242, 1, 200)
    assert cycles == [] and err in (errno.EAGAIN, errno.EHOSTUNREACH)


@root
def test_the_first_echo_after_a_flush_resolves_arp(link):
    with sock_in(link.a, netns.ADDR_B) as s:
        assert in_thread(_core.icmp_echo, s.fileno(), 2, 4242, 1, 1000)[2] == 0
        assert link.neighbour_state() & ping_veth.RESOLVED
        assert link.flush_neighbour() & ping_veth.RESOLVED   # it was resolved, and is gone
        assert link.neighbour_state() == 0
        assert in_thread(_core.icmp_echo, s.fileno(), 1, 4242, 3, 1000)[2] == 0
    assert link.neighbour_state() & ping_veth.RESOLVED


@root
def test_a_run_checks_each_trial_resolved_arp(monkeypatch):
    rows, facts, _ = ping_veth.run(0, 2, 3)
    assert [r["placement"] for r in rows] == ["veth first", "veth later"]
    assert all(len(r["cycles_samples"]) == 2 for r in rows) and ours() == []
    assert facts["neigh_sysctls_netns"]["mcast_solicit"] >= 0
    # without the flush the first echo finds B cached: the run must refuse it
    monkeypatch.setattr(netns.VethPair, "flush_neighbour", lambda self, dst=None: 0)
    with pytest.raises(RunFailed, match="after the flush"):
        ping_veth.run(0, 2, 3)
    assert ours() == []


@root
def test_sweep_removes_only_namespaces_whose_run_is_gone():
    from pyroute2 import netns as pyroute2_netns
    dead = f"{netns.PREFIX}{dead_pid()}-a"
    live = f"{netns.PREFIX}{os.getpid()}-b"
    for name in (dead, live):
        pyroute2_netns.create(name)
    try:
        assert dead in netns.sweep()
        assert dead not in listed() and ours() == [live]
    finally:
        for name in (dead, live):
            netns.remove(name)
    assert ours() == []


@root
def test_a_run_sweeps_first_and_says_what_it_removed():
    from pyroute2 import netns as pyroute2_netns
    dead = f"{netns.PREFIX}{dead_pid()}-b"
    pyroute2_netns.create(dead)
    try:
        _, _, warnings = ping_veth.run(0, 1, 2)
    finally:
        netns.remove(dead)
    assert any(dead in w and "killed run" in w for w in warnings)
    assert ours() == []


def test_without_pyroute2_the_reason_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyroute2", None)   # import fails
    reason = netns.can_admin_net()
    assert "pyroute2" in reason and "smpnet[kernel]" in reason
