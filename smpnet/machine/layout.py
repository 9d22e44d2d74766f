"""The shared segment's records as numpy dtypes, built from what the C
compiler laid out.

smpnet/kernel/*.h declare the records as C structs; smpnet/kernel/layout.h
lists each field once, with what the compiler knows of it: offset and size
(offsetof, sizeof), its type (numpy's code, which _Generic picks from the C
type) and an array's length. The compiled core reports that table
(smpnet._core.c_structs()) and the dtypes below are built from it at import,
so numpy reads each field where C writes it, by construction. The layout
version, the magic and the other constants are read from the headers too
(smpnet._core.c_constants()): each has one home, in C.

The layout hash that a segment carries follows from the dtypes: it changes
when any field moves or changes type, in the header or in any region.
"""
import hashlib

import numpy as np

from .. import _core

_C = _core.c_constants()

CACHELINE = _C["SMP_CACHE_BYTES"]
MAGIC = _C["SMPNET_MAGIC"]  # "SMPNET"
VERSION = _C["SMPNET_LAYOUT_VERSION"]  # bumped in percpu.h on any change to a record
MAX_REGIONS = _C["SMPNET_MAX_REGIONS"]
REGION_NAME = _C["SMPNET_REGION_NAME"]
F_OVERSUBSCRIBED = _C["SMP_F_OVERSUBSCRIBED"]

# cpu_state.state
CPU_OFFLINE, CPU_ONLINE, CPU_RUNNING, CPU_DONE = (
    _C["CPU_OFFLINE"], _C["CPU_ONLINE"], _C["CPU_RUNNING"], _C["CPU_DONE"])


def build_dtypes(c_structs):
    """{struct: dtype} from a c_structs() report: each field at its offset,
    nested records and arrays of them as sub-dtypes, itemsize = sizeof."""
    built = {}

    def field_format(field, offset, size, ftype, record, count):
        if record is not None:
            base = dtype_of(record)
        elif ftype in ("S", "V"):       # bytes: one field of the member's size
            return np.dtype(f"{ftype}{size}")
        else:
            base = np.dtype(ftype)
        return (base, (count,)) if count else base

    def dtype_of(name):
        if name not in built:
            size, fields = c_structs[name]
            built[name] = np.dtype({
                "names": [f[0] for f in fields],
                "formats": [field_format(*f) for f in fields],
                "offsets": [f[1] for f in fields],
                "itemsize": size,
            })
        return built[name]

    return {name: dtype_of(name) for name in c_structs}


# C struct name -> dtype, in layout.h's order
STRUCTS = build_dtypes(_core.c_structs())

SMP_HEADER = STRUCTS["smp_header"]          # the region table is its `regions` array
SMP_REGION = STRUCTS["smp_region"]
CPU_STATE = STRUCTS["cpu_state"]
SOFTNET_DATA = STRUCTS["softnet_data"]
PCPU_LSTATS = STRUCTS["pcpu_lstats"]
IRQ_CPUSTAT = STRUCTS["irq_cpustat"]        # `bugs`: one count per LOCKDEP_BUGS kind
QNODES = STRUCTS["qnodes"]
QNODE = STRUCTS["qnode"]
MCS_NODE = STRUCTS["mcs_node"]
SPINLOCK = STRUCTS["spinlock"]             # the 4-byte word; the rest in LOCK_INFO
LOCK_INFO = STRUCTS["lock_info"]           # spinlock_t's side table (lockdep.h)
LOCK_INFOS = STRUCTS["lock_infos"]
LOCK_SLOT = STRUCTS["lock_slot"]
SK_BUFF = STRUCTS["sk_buff"]
SKB_DATA = STRUCTS["skb_data"]
SKB_PAGE = STRUCTS["skb_page"]
SKB_SLAB = STRUCTS["skb_slab"]
SKB_POOL = STRUCTS["skb_pool"]
NAPI_ALLOC_CACHE = STRUCTS["napi_alloc_cache"]
SKB_STATS = STRUCTS["skb_stats"]
SKB_RING = STRUCTS["skb_ring"]
DEFER_CTL = STRUCTS["defer_ctl"]
NET_DEVICE = STRUCTS["net_device"]
LO_STATS = STRUCTS["lo_stats"]
NEIGHBOUR = STRUCTS["neighbour"]
NEIGH_PARMS = STRUCTS["neigh_parms"]
NEIGH_STATS = STRUCTS["neigh_stats"]
NEIGH_TABLE = STRUCTS["neigh_table"]
FRAME = STRUCTS["frame"]
LINK_RING = STRUCTS["link_ring"]
PING_RESULT = STRUCTS["ping_result"]
ARP_CTL = STRUCTS["arp_ctl"]

# checker report kinds (irq_cpustat.bugs[]), in LOCKDEP_* order (percpu.h's LOCKDEP_BUG_TABLE)
LOCKDEP_BUGS = _core.LOCKDEP_BUGS

MAX_NODES = _C["MAX_NODES"]
LOCK_INFO_PER_CPU = _C["LOCK_INFO_PER_CPU"]

# The network model (skbuff.h, fake_nic.h)
NAPI_SKB_CACHE_SIZE = _C["NAPI_SKB_CACHE_SIZE"]
SLAB_CPU_MAX = _C["SLAB_CPU_MAX"]
SKB_FRAGS_PER_PAGE = _C["SKB_FRAGS_PER_PAGE"]
FLUSH_HIST_BUCKETS = _C["FLUSH_HIST_BUCKETS"]
SKB_RING_SIZE = _C["SKB_RING_SIZE"]
SKB_FREE, SKB_LIVE, SKB_DEFERRED = _C["SKB_FREE"], _C["SKB_LIVE"], _C["SKB_DEFERRED"]
FLUSH_SAMPLES = _C["FLUSH_SAMPLES"]

# The ARP experiment (neighbour.h, link.h)
ARPQ_SLOTS = _C["ARPQ_SLOTS"]
NEIGH_HASH = _C["NEIGH_HASH"]
LINK_SLOTS = _C["LINK_SLOTS"]
PING_PENDING, PING_OK, PING_ERROR, PING_TIMEOUT = (
    _C["PING_PENDING"], _C["PING_OK"], _C["PING_ERROR"], _C["PING_TIMEOUT"])

# The per-CPU regions every machine has, in directory order (enum smp_region_id).
BUILTIN_REGIONS = tuple((name, STRUCTS[record]) for name, record in _core.c_builtin_regions())

LAYOUTS = ("aligned", "packed")


def stride(dtype, layout="aligned"):
    """Bytes from one record to the next: a whole number of cache lines
    (DEFINE_PER_CPU_SHARED_ALIGNED), or the natural size rounded to 8 so that
    neighbouring CPUs' records share lines, to show false sharing."""
    if layout == "aligned":
        return -(-dtype.itemsize // CACHELINE) * CACHELINE
    return -(-dtype.itemsize // 8) * 8


def padded(dtype, nbytes):
    """The same record with its itemsize widened to the stride."""
    d = dtype.fields
    names = list(dtype.names)
    return np.dtype({"names": names, "formats": [d[n][0] for n in names],
                     "offsets": [d[n][1] for n in names], "itemsize": nbytes})


def describe(dtype):
    """A stable text form of a record: fields with offsets and formats,
    nested records and arrays of them spelled out in full."""
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return f"{describe(base)}{list(shape)}"
    if dtype.names is None:
        return dtype.str
    parts = [f"{n}@{dtype.fields[n][1]}:{describe(dtype.fields[n][0])}" for n in dtype.names]
    return f"{dtype.itemsize}{{{','.join(parts)}}}"


def layout_hash(regions, layout):
    """64-bit hash of everything an attacher must agree on: the version, the
    header, each region's name and record, and the stride policy."""
    h = hashlib.sha256(f"smpnet-layout-v{VERSION}|{layout}".encode())
    h.update(describe(SMP_HEADER).encode())
    for name, dtype in regions:
        h.update(f"|{name}={describe(dtype)}".encode())
    return int.from_bytes(h.digest()[:8], "little")


# What Python knows only by name and C by number: each must match its enum.
# name in smpnet._core.c_constants() -> value here
CONSTANTS = {
    "LOCKDEP_NR_BUGS": len(LOCKDEP_BUGS),
    **{f"REGION_{name.upper()}": i for i, (name, _) in enumerate(BUILTIN_REGIONS)},
    "REGION_NR_BUILTIN": len(BUILTIN_REGIONS),
}


def verify(c_layout, c_constants=None):
    """Compare the dtypes above with a compiler's report (c_layout(): each
    struct's sizeof and each field's offset and size) and the names Python
    keeps with the headers' constants; returns a list of disagreements
    (empty when they agree).

    Built from this core's own report, the dtypes agree with it unless
    numpy placed a field other than where it was told (the check that the
    construction is faithful); against another build's report, this is the
    check that both lay the segment out alike."""
    problems = []
    for name, value in CONSTANTS.items():
        if c_constants is not None and c_constants.get(name) != value:
            problems.append(f"constant {name}: {c_constants.get(name)} in C, {value} in numpy")
    for cname, dtype in STRUCTS.items():
        if cname not in c_layout:
            problems.append(f"struct {cname}: missing on the C side")
            continue
        csize, cfields = c_layout[cname]
        if csize != dtype.itemsize:
            problems.append(f"struct {cname}: sizeof {csize} in C, {dtype.itemsize} in numpy")
        if set(cfields) != set(dtype.names):
            problems.append(f"struct {cname}: fields {sorted(cfields)} in C, "
                            f"{sorted(dtype.names)} in numpy")
        for name in dtype.names:
            if name not in cfields:
                continue
            fdtype, foffset = dtype.fields[name][:2]
            if cfields[name] != (foffset, fdtype.itemsize):
                problems.append(
                    f"{cname}.{name}: (offset, size) {cfields[name]} in C, "
                    f"{(foffset, fdtype.itemsize)} in numpy")
    return problems
