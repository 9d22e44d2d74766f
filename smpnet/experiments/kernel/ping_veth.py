"""ARP on a real link: `arp -d; ping -c N` over a veth pair, on the host kernel.

The kernel experiment's second part (issue 14; seed 000's own test, run on
this machine's kernel). Two namespaces joined by a veth pair (netns.py);
before each trial A's neighbour entry for B is deleted, then one pinned
worker, moved into A, sends `count` ICMP echoes from the C core
(core/icmp.pyx) on a raw socket, one after another. The first echo waits
for ARP; the later ones find the neighbour resolved. Each trial is checked:
no entry for B before it, a resolved one after, so the first figure cannot
be a cached-neighbour ping. The coordinator never changes namespace.
"""
import os
import socket
import statistics
import struct

from ... import _core
from ...errors import RunFailed
from ...machine.machine import Machine
from ...measure import stats
from . import netns

# net.ipv4.neigh.default.*: the ARP parameters the arp model takes its
# defaults from (core/arp.pyx's parms_init), in the sysctls' own units
NEIGH_SYSCTLS = ("ucast_solicit", "app_solicit", "mcast_solicit", "retrans_time_ms",
                 "base_reachable_time_ms", "delay_first_probe_time", "gc_stale_time")
NEIGH_UNITS = {"retrans_time_ms": "ms", "base_reachable_time_ms": "ms",
               "delay_first_probe_time": "s", "gc_stale_time": "s"}
NEIGH_DIR = "/proc/sys/net/ipv4/neigh/default"
LINK_NEIGH_DIR = f"/proc/sys/net/ipv4/neigh/{netns.IFNAME}"
ECHO_TIMEOUT_MS = 1000      # per reply; ARP gives up after mcast_solicit x retrans = 3 s
SOL_RAW, ICMP_FILTER = 255, 1   # linux/icmp.h: a raw ICMP socket's type filter
RESOLVED = 0x02 | 0x04 | 0x08 | 0x10   # REACHABLE, STALE, DELAY, PROBE: B's address known
TRIAL_S = 0.03              # a trial's fork, flush and checks, measured ~20 ms on 2 vCPUs
SETUP_S = 0.3               # two namespaces and the veth pair


def read_neigh_sysctls(folder=NEIGH_DIR):
    """{name: int} for the NEIGH_SYSCTLS readable in `folder`."""
    out = {}
    for name in NEIGH_SYSCTLS:
        try:
            with open(os.path.join(folder, name)) as f:
                out[name] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out


def seconds(trials, count):
    return SETUP_S + (trials + 1) * (TRIAL_S + count * 1e-3)


def echo_socket(dst=netns.ADDR_B):
    """A raw ICMP socket connected to `dst` (so only its packets come in)
    that lets only echo replies through."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(SOL_RAW, ICMP_FILTER, struct.pack("I", ~(1 << 0) & 0xffffffff))
    s.connect((dst, 0))
    return s


def echo_in(ctx, ns_name, count, seq0, timeout_ms):
    """The worker: move into namespace `ns_name`, ping B `count` times.
    Returns (cycles, ns, err, the neighbour sysctls of A's veth0: a new
    namespace has no `default` set, only its links' own)."""
    from pyroute2 import netns as pyroute2_netns
    pyroute2_netns.setns(ns_name, flags=0)     # flags 0: never create it
    with echo_socket() as s:
        cycles, ns, err = _core.icmp_echo(s.fileno(), count, os.getpid() & 0xffff,
                                          seq0, timeout_ms)
    return cycles, ns, err, read_neigh_sysctls(LINK_NEIGH_DIR)


def _median_row(placement, cpus, trials, count, cycles, us):
    return {"test": "veth_ping", "placement": placement, "cpus": cpus, "trials": trials,
            "count": count, **stats.median_fields("cycles", cycles),
            **stats.median_fields("us", us), "cycles_samples": cycles, "us_samples": us}


def run(cpu, trials, count, progress=None, warnings=None):
    """The ARP part: (rows, facts for params, warnings), the warnings
    appended to `warnings` as they come (what the sweep removed is said even
    if the namespaces cannot be made). Rows: "veth first" (each trial's
    first echo) and, with count > 1, "veth later" (the median of each
    trial's later echoes)."""
    warnings = [] if warnings is None else warnings
    removed = netns.sweep()
    if removed:
        warnings.append(f"removed {len(removed)} network namespace(s) a killed run left: "
                        + ", ".join(removed))
    first = ([], [])      # cycles, us: one per trial
    later = ([], [])
    expected = 0.5 + count * ECHO_TIMEOUT_MS / 1000
    facts = {}
    with netns.VethPair() as link, Machine(cpus=[cpu], ncpus=1) as m:
        facts["namespaces"] = [link.a, link.b]
        for t in range(-1, trials):     # -1: a warm-up trial, not kept
            if progress:
                progress(t + 1, trials + 1, "veth ping " + ("warm-up" if t < 0
                                                            else f"trial {t + 1}"))
            link.flush_neighbour()
            before = link.neighbour_state()
            if before:
                raise RunFailed(f"veth ping: the neighbour entry for {netns.ADDR_B} is "
                                f"{netns.state_name(before)} after the flush")
            seq0 = ((t + 1) * count + 1) & 0xffff   # as ping's icmp_seq, never repeated
            cycles, ns, err, sysctls = m.run(echo_in, link.a, count, seq0, ECHO_TIMEOUT_MS,
                                             expected=expected)[0]
            if err:
                raise RunFailed(f"veth ping: {os.strerror(err)} after {len(cycles)} of "
                                f"{count} echo replies")
            after = link.neighbour_state()
            if not after & RESOLVED:
                raise RunFailed(f"veth ping: the neighbour entry for {netns.ADDR_B} is "
                                f"{netns.state_name(after)} after the echoes, not resolved")
            if t < 0:
                facts["neigh_sysctls_netns"] = sysctls
                continue
            first[0].append(cycles[0])
            first[1].append(ns[0] / 1e3)
            if count > 1:
                later[0].append(statistics.median(cycles[1:]))
                later[1].append(statistics.median(ns[1:]) / 1e3)
    cpus = str(cpu)
    rows = [_median_row("veth first", cpus, trials, count, *first)]
    if count > 1:
        rows.append(_median_row("veth later", cpus, trials, count, *later))
        rows[0]["first_over_later"] = rows[0]["cycles"] / rows[1]["cycles"]
    else:
        warnings.append("veth later skipped: --count 1 sends no later echo")
    if trials < stats.MIN_SAMPLES:
        warnings.append(f"the veth intervals cover less than 95 %: give --trials "
                        f"{stats.MIN_SAMPLES} or more")
    return rows, facts, warnings


def neigh_params():
    """The host's net.ipv4.neigh.default.* and the model's values, for params."""
    return {"neigh_sysctls": read_neigh_sysctls(),
            "neigh_model": _core.neigh_parms_defaults()}


def neigh_text(p):
    """One line per parameter: the host's, the namespace's, the model's."""
    host, inner = p.get("neigh_sysctls") or {}, p.get("neigh_sysctls_netns") or {}
    model = p.get("neigh_model") or {}
    lines = []
    for name in NEIGH_SYSCTLS:
        unit = NEIGH_UNITS.get(name, "packets")
        cells = [f"host {host.get(name, '?')}"]
        if inner:
            cells.append(f"veth0 in A {inner.get(name, '?')}")
        cells.append(f"model {model.get(name, '?')}")
        lines.append(f"  net.ipv4.neigh.default.{name} ({unit}): " + ", ".join(cells))
    return "\n".join(lines)
