"""The life of the two network namespaces the kernel experiment pings across.

    reason = can_admin_net()          # None, or why it cannot be done here
    removed = sweep()                 # namespaces a killed run left behind
    with VethPair() as link:          # smpnet-<pid>-a and -b, joined by a veth pair
        link.flush_neighbour()        # as `arp -d` before each trial
        ...

The namespaces are named `smpnet-<pid>-a` and `smpnet-<pid>-b`, the pid
being the process that made them, so that a later run can tell one whose
owner is gone (SIGKILL runs no cleanup) from one a live run is using, and
remove only the first. Their addresses come from TEST-NET-1 (192.0.2.0/24,
RFC 5737: documentation only, never routed) and never leave them: the veth
pair is made inside A with its peer in B, so nothing of it is in the host's
namespace at any moment. Removal is in a `finally` of the context manager,
so it runs on every exit path Python sees: an error, Ctrl-C, and the
SIGTERM, SIGHUP and SIGQUIT that smpnet's command line (cli.main) and
Machine.run turn into KeyboardInterrupt.

Everything here goes through pyroute2 (netlink, and mount/unshare for the
namespaces, as iproute2 does): no `ip` binary is run.
"""
import contextlib
import os
import re
import signal

from ...machine.process import INTERRUPTS

PREFIX = "smpnet-"
NAME = re.compile(r"smpnet-([0-9]{1,10})-[ab]")
NETNS_DIR = "/run/netns"             # where iproute2 and pyroute2 bind-mount them
ADDR_A, ADDR_B, PREFIXLEN = "192.0.2.1", "192.0.2.2", 24
IFNAME = "veth0"                     # each end, inside its own namespace
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21
# Neighbour states (include/net/neighbour.h's NUD_*), for what a check saw.
NUD_NAMES = {0x01: "INCOMPLETE", 0x02: "REACHABLE", 0x04: "STALE", 0x08: "DELAY",
             0x10: "PROBE", 0x20: "FAILED", 0x40: "NOARP", 0x80: "PERMANENT"}
NUD_INCOMPLETE, NUD_FAILED = 0x01, 0x20
ENOENT = 2


class Unavailable(Exception):
    """The namespaces could not be made here; the message says why."""


@contextlib.contextmanager
def signals_held():
    """pyroute2 forks short-lived children (to make a namespace, to open a
    netlink socket inside one) that keep this process's signal handlers:
    a stop signal reaching one (pyroute2 itself ends them with SIGTERM)
    raised KeyboardInterrupt there, and the child ran on as a copy of this
    process, removing the namespaces under it. Blocked across the forks,
    a signal waits until they are over and is taken here alone."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def names(pid=None):
    pid = os.getpid() if pid is None else pid
    return f"{PREFIX}{pid}-a", f"{PREFIX}{pid}-b"


def _cap_eff(status="/proc/self/status"):
    try:
        with open(status) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def can_admin_net(status="/proc/self/status"):
    """None when this process can make namespaces and veth pairs; else the
    one-line reason. Making a namespace (unshare, mount) takes
    CAP_SYS_ADMIN, configuring its links CAP_NET_ADMIN: root has both."""
    try:
        import pyroute2  # noqa: F401 (only whether it is there)
    except ImportError:
        return "pyroute2 is not installed (pip install 'smpnet[kernel]')"
    caps = _cap_eff(status)
    missing = [name for bit, name in ((CAP_NET_ADMIN, "CAP_NET_ADMIN"),
                                      (CAP_SYS_ADMIN, "CAP_SYS_ADMIN"))
               if not caps >> bit & 1]
    if missing:
        return (f"it needs root ({' and '.join(missing)} to make network namespaces "
                f"and a veth pair)")
    return None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:    # a zombie still answers kill(0) but will never clean up
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def leftovers(netns_dir=NETNS_DIR):
    """Our namespaces whose owning process is gone, sorted."""
    try:
        found = os.listdir(netns_dir)
    except FileNotFoundError:
        return []
    return sorted(n for n in found if (m := NAME.fullmatch(n)) and not _alive(int(m.group(1))))


def remove(name):
    """Remove one namespace; one already gone is not an error."""
    from pyroute2 import netns
    try:
        netns.remove(name)
    except FileNotFoundError:
        pass


def sweep():
    """Remove the namespaces killed runs left; returns their names."""
    gone = leftovers()
    for name in gone:
        remove(name)
    return gone


class VethPair:
    """Namespaces A and B, a veth pair between them (veth0 in each),
    192.0.2.1/24 in A and 192.0.2.2/24 in B, every link up. Removed on
    every exit path (see the module docstring)."""

    def __init__(self, pid=None):
        self.a, self.b = names(pid)
        self.index_a = None
        self.ipa = None     # a netlink socket inside A, kept for the run
    def __enter__(self):
        from pyroute2.netlink.exceptions import NetlinkError
        try:
            with signals_held():
                self._create()
        except (OSError, NetlinkError) as e:
            # root in a container may still be refused (seccomp, a
            # read-only /run): the experiment says so and goes on
            self.close()
            raise Unavailable(f"cannot make the namespaces: {e}") from None
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _create(self):
        from pyroute2 import IPRoute, netns
        for name in (self.a, self.b):
            netns.create(name)
        # Netlink sockets made inside each namespace (pyroute2 makes them in
        # a child it moves there); closed before the namespaces are removed,
        # as a socket keeps its namespace alive.
        self.ipa = ipa = IPRoute(netns=self.a)
        with IPRoute(netns=self.b) as ipb:
            ipa.link("add", ifname=IFNAME, kind="veth",
                     peer={"ifname": IFNAME, "net_ns_fd": self.b})
            for ip, addr in ((ipa, ADDR_A), (ipb, ADDR_B)):
                index = ip.link_lookup(ifname=IFNAME)[0]
                ip.addr("add", index=index, address=addr, prefixlen=PREFIXLEN)
                ip.link("set", index=index, state="up")
                ip.link("set", index=ip.link_lookup(ifname="lo")[0], state="up")
            self.index_a = ipa.link_lookup(ifname=IFNAME)[0]

    def close(self):
        """Remove both namespaces (the veth pair goes with them), whatever
        state the netlink socket is in: a stop signal taken inside one of
        pyroute2's calls can leave its event loop unusable, and its close()
        then fails; the namespaces must go all the same."""
        with signals_held():
            try:
                if self.ipa is not None:
                    self.ipa.close()
            except Exception:       # noqa: BLE001 (see the docstring)
                pass
            finally:
                self.ipa = None
                try:
                    remove(self.a)
                finally:
                    remove(self.b)

    def neighbour_state(self, dst=ADDR_B):
        """A's neighbour entry for `dst`: its NUD state, 0 when there is none."""
        with signals_held():    # a stop signal lands between pyroute2's calls
            entries = self.ipa.get_neighbours(dst=dst, ifindex=self.index_a)
        return entries[0]["state"] if entries else 0

    def flush_neighbour(self, dst=ADDR_B):
        """As `arp -d dst` in A: the next packet to it must resolve it first.
        Returns the state the entry had (0: none)."""
        from pyroute2.netlink.exceptions import NetlinkError
        with signals_held():    # a stop signal lands between pyroute2's calls
            entries = self.ipa.get_neighbours(dst=dst, ifindex=self.index_a)
            try:
                self.ipa.neigh("del", dst=dst, ifindex=self.index_a)
            except NetlinkError as e:
                if e.code != ENOENT:
                    raise
        return entries[0]["state"] if entries else 0

    def set_peer_up(self, up):
        """B's end up or down (tests: a peer that answers nothing)."""
        from pyroute2 import IPRoute
        with signals_held(), IPRoute(netns=self.b) as ipb:
            ipb.link("set", index=ipb.link_lookup(ifname=IFNAME)[0],
                     state="up" if up else "down")


def state_name(state):
    return NUD_NAMES.get(state, "none") if state else "none"
