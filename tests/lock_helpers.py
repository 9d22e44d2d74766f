"""What the lock tests share: a machine with a lock region, whether a lock
word reads free for its algorithm, and the checker's counts."""
from smpnet import Machine, _core
from smpnet.machine import layout

MCS_NODES = _core.c_constants()["MCS_NODES"]


def lock_machine(cpus, n=1, **kw):
    return Machine(cpus=cpus, regions=[("locks", layout.LOCK_SLOT, n)], **kw)


def region(m):
    return m.segment.region_names.index("locks")


def is_free(val, algo, m=None):
    if algo == "ticket":
        return val & 0xFFFF == val >> 16  # now serving == next ticket
    if algo == "clh" and val:
        # the last release's node, left as the next acquirer's predecessor
        # (mcs_spinlock.h): released, when the machine is there to look
        cpu, idx = (val >> (MCS_NODES.bit_length() - 1)) - 1, val & (MCS_NODES - 1)
        if m is None:
            return cpu >= 0
        node = m.region("qnodes")["mcs"][cpu][idx]
        return bool(node["lock"]) and node["locked"] == 0 and node["next"] == 0xffffffff
    return algo == "pthread" or val == 0


def bugs(m):
    irq = m.region("irq")[0]
    return {name: int(irq["bugs"][k]) for k, name in enumerate(layout.LOCKDEP_BUGS)
            if irq["bugs"][k]}
