"""The shared segment's records as numpy dtypes.

smpnet/kernel/percpu.h declares the same records as C structs. Both are
written out by hand, so that each reads naturally in its own language;
`verify()` compares them field by field against what the C compiler laid
out (smpnet._core.c_layout()), and Machine refuses to start if they differ.
"""
import hashlib

import numpy as np

CACHELINE = 64
MAGIC = 0x54454E504D53  # "SMPNET", SMPNET_MAGIC
VERSION = 6  # SMPNET_LAYOUT_VERSION: bump on any change below
MAX_REGIONS = 16
REGION_NAME = 16
F_OVERSUBSCRIBED = 0x1

# cpu_state.state
CPU_OFFLINE, CPU_ONLINE, CPU_RUNNING, CPU_DONE = range(4)


def _struct(size, *fields):
    """A C struct as a dtype: (name, format, offset) per field, sizeof = size."""
    names, formats, offsets = zip(*fields)
    return np.dtype({"names": list(names), "formats": list(formats),
                     "offsets": list(offsets), "itemsize": size})


SMP_REGION = _struct(
    32,
    ("name", f"S{REGION_NAME}", 0),
    ("offset", "<u8", 16),
    ("count", "<u4", 24),
    ("stride", "<u4", 28),
)

SMP_HEADER = _struct(
    192 + MAX_REGIONS * SMP_REGION.itemsize,
    ("magic", "<u8", 0),
    ("layout_hash", "<u8", 8),
    ("version", "<u4", 16),
    ("nr_cpus", "<u4", 20),
    ("nr_regions", "<u4", 24),
    ("flags", "<u4", 28),
    ("tsc_hz", "<f8", 32),
    ("size", "<u8", 40),
    ("stop", "<u4", 64),              # its own cache line
    ("barrier_arrived", "<u4", 128),  # its own cache line
    ("barrier_go", "<u4", 132),
    ("regions", (SMP_REGION, MAX_REGIONS), 192),
)

CPU_STATE = _struct(
    40,
    ("cpu", "<i4", 0),
    ("real_cpu", "<i4", 4),
    ("pid", "<i4", 8),
    ("state", "<u4", 12),
    ("seen_arrived", "<u4", 16),
    ("tsc_aux", "<u4", 20),
    ("tsc_arrive", "<u8", 24),
    ("tsc_release", "<u8", 32),
)

PCPU_LSTATS = _struct(
    24,
    ("packets", "<u8", 0),
    ("bytes", "<u8", 8),
    ("depth", "<i4", 16),
)

# checker report kinds (irq_cpustat.bugs[]), in LOCKDEP_* order
LOCKDEP_BUGS = ("lock_irq_with_irqs_off", "hardirq_inversion", "softirq_inversion",
                "unbalanced_irq_restore", "recursion", "bh_enable_with_irqs_off")

IRQ_CPUSTAT = _struct(
    160,
    ("irqs_off", "<u4", 0),
    ("preempt_count", "<u4", 4),
    ("softirq_pending", "<u4", 8),
    ("save_depth", "<u4", 12),
    ("irqs_while_masked", "<u4", 16),
    ("hardirqs", "<u8", 24),
    ("softirqs", "<u8", 32),
    ("ipis_sent", "<u8", 40),
    ("spins", "<u8", 48),
    ("lock_checks", "<u8", 56),
    ("irq_pending", "<u4", 64),       # its own cache line: written by other CPUs
    ("bugs", ("<u4", len(LOCKDEP_BUGS)), 128),
    ("first_bug", "<u4", 152),
    ("first_bug_lock", "<u4", 156),
)

QNODE = _struct(
    16,
    ("next", "<u4", 0),
    ("locked", "<u4", 4),
    ("count", "<u4", 8),
)

MAX_NODES = 4
QNODES = _struct(64, ("n", (QNODE, MAX_NODES), 0))

SPINLOCK = _struct(
    96,
    ("val", "<u4", 0),
    ("algo", "<u4", 4),
    ("owner", "<u4", 8),
    ("usage", "<u4", 12),
    ("id", "<u4", 16),
    ("mutex_raw", "V64", 32),
)

LOCK_SLOT = _struct(
    104,
    ("lock", SPINLOCK, 0),
    ("counter", "<u8", 96),
)

SOFTNET_DATA = _struct(
    176,
    ("processed", "<u4", 0),
    ("time_squeeze", "<u4", 4),
    ("dropped", "<u4", 8),
    ("poll_list", "<u4", 12),
    ("backlog_state", "<u4", 16),      # NAPI_STATE_SCHED of the backlog
    ("input_head", "<u4", 20),         # input_pkt_queue, by skb handle
    ("input_tail", "<u4", 24),
    ("input_qlen", "<u4", 28),
    ("defer_lock", SPINLOCK, 64),      # lines 1..2: written by other CPUs
    ("defer_count", "<u4", 160),
    ("defer_ipi_scheduled", "<u4", 164),
    ("defer_list", "<u4", 168),        # skb handle (index + 1), 0 when empty
)

# The network model (skbuff.h, dev.h)
NAPI_SKB_CACHE_SIZE = 64
FLUSH_HIST_BUCKETS = 8
SKB_RING_SIZE = 256
SKB_FREE, SKB_LIVE, SKB_DEFERRED = 0, 1, 2
FLUSH_SAMPLES = 256

SK_BUFF = _struct(
    64,
    ("next", "<u4", 0),
    ("alloc_cpu", "<u4", 4),
    ("gen", "<u4", 8),
    ("state", "<u4", 12),
    ("len", "<u4", 16),
    ("hash", "<u4", 20),
    ("tstamp", "<u8", 24),
    ("cb", "V32", 32),
)

SKB_POOL = _struct(
    112,
    ("lock", SPINLOCK, 0),
    ("head", "<u4", 96),
    ("count", "<u4", 100),
    ("total", "<u4", 104),
)

NAPI_ALLOC_CACHE = _struct(
    260,
    ("count", "<u4", 0),
    ("skb_cache", ("<u4", NAPI_SKB_CACHE_SIZE), 4),
)

_SKB_STAT_NAMES = ("allocated", "alloc_failed", "freed", "freed_local", "deferred",
                   "fallback_frees", "double_free", "stale", "ipis", "flushes", "flushed",
                   "flush_cycles", "flush_lock_cycles", "max_flush", "defer_cycles",
                   "defer_samples", "received", "rx_packets", "ring_full")
SKB_STATS = _struct(
    1216,
    *[(name, "<u8", 8 * i) for i, name in enumerate(_SKB_STAT_NAMES)],
    ("flush_hist", ("<u4", FLUSH_HIST_BUCKETS), 152),
    ("nr_flush_samples", "<u4", 184),
    ("flush_lock_sample", ("<u4", FLUSH_SAMPLES), 188),
)

SKB_RING = _struct(
    128 + 8 * SKB_RING_SIZE,
    ("head", "<u4", 0),
    ("tail_cache", "<u4", 4),
    ("tail", "<u4", 64),               # the consumer's line
    ("head_cache", "<u4", 68),
    ("slot", ("<u8", SKB_RING_SIZE), 128),
)

DEFER_CTL = _struct(
    64,
    ("rx_done", "<u4", 0),
    ("consumers_done", "<u4", 4),
)

# The loopback experiment (dev.h, loopback.h)
NET_DEVICE = _struct(128, ("refcnt", "<u4", 0), ("state", "<u4", 4), ("last_rx", "<u8", 64))

_LO_COUNTERS = ("xmits", "requests", "replies", "acks", "delivered", "transactions",
                "refcnt_atomics", "softirq_raises", "direct", "queued", "purged", "stack_drops")
LO_STATS = _struct(
    128,
    *[(name, "<u8", 8 * i) for i, name in enumerate(_LO_COUNTERS)],
    ("max_depth", "<u4", 96),
    ("max_rx_nest", "<u4", 100),
    ("stack_max", "<u4", 104),
    ("overflow", "<u4", 108),
    ("overflow_depth", "<u4", 112),
    ("server_pending", "<u4", 116),
    ("client_pending", "<u4", 120),
)

# The ARP experiment (neighbour.h, link.h)
ARPQ_SLOTS = 64
NEIGH_HASH = 16
LINK_SLOTS = 256

NEIGHBOUR = _struct(
    1088,
    ("ip", "<u4", 0),
    ("nud_state", "<u4", 4),
    ("ha", "V8", 8),
    ("probes", "<u4", 16),
    ("arpq_head", "<u4", 20),
    ("arpq_len", "<u4", 24),
    ("arpq_bytes", "<u4", 28),
    ("updated", "<u8", 32),
    ("confirmed", "<u8", 40),
    ("used", "<u8", 48),
    ("timer", "<u8", 56),
    ("arpq_seq", ("<u4", ARPQ_SLOTS), 64),
    ("arpq_size", ("<u4", ARPQ_SLOTS), 320),
    ("arpq_tstamp", ("<u8", ARPQ_SLOTS), 576),
)

_PARMS = ("hz", "probe_mode", "ucast_probes", "app_probes", "mcast_probes", "retrans_time",
          "base_reachable_time", "delay_first_probe_time", "gc_stale_time", "queue_len_bytes")
NEIGH_PARMS = _struct(40, *[(name, "<u4", 4 * i) for i, name in enumerate(_PARMS)])

_NSTATS = ("solicits", "unres_discards", "failed", "resolved", "sent",
           "last_solicit_jiffies", "first_solicit_jiffies")
NEIGH_STATS = _struct(56, *[(name, "<u8", 8 * i) for i, name in enumerate(_NSTATS)])

NEIGH_TABLE = _struct(
    17504,
    ("tbl", (NEIGHBOUR, NEIGH_HASH), 0),
    ("parms", NEIGH_PARMS, 17408),
    ("stats", NEIGH_STATS, 17448),
)

FRAME = _struct(
    64,
    ("type", "<u4", 0),
    ("src_ip", "<u4", 4),
    ("dst_ip", "<u4", 8),
    ("seq", "<u4", 12),
    ("src_mac", "V8", 16),
    ("dst_mac", "V8", 24),
    ("tstamp", "<u8", 32),
)

LINK_RING = _struct(
    128 + 64 * LINK_SLOTS,
    ("head", "<u4", 0),
    ("tail", "<u4", 64),
    ("f", (FRAME, LINK_SLOTS), 128),
)

PING_RESULT = _struct(64, ("tstamp", "<u8", 0), ("rtt", "<u8", 8), ("status", "<u4", 16))
PING_PENDING, PING_OK, PING_ERROR, PING_TIMEOUT = range(4)

ARP_CTL = _struct(
    64,
    ("done", "<u4", 0),
    ("peer_down", "<u4", 4),
    ("b_arp_requests", "<u4", 8),
    ("b_learned", "<u4", 12),
    ("b_echoes", "<u8", 16),
)

# C struct name -> dtype, for verify()
STRUCTS = {
    "smp_header": SMP_HEADER,
    "smp_region": SMP_REGION,
    "cpu_state": CPU_STATE,
    "softnet_data": SOFTNET_DATA,
    "pcpu_lstats": PCPU_LSTATS,
    "irq_cpustat": IRQ_CPUSTAT,
    "qnodes": QNODES,
    "qnode": QNODE,
    "spinlock": SPINLOCK,
    "lock_slot": LOCK_SLOT,
    "sk_buff": SK_BUFF,
    "skb_pool": SKB_POOL,
    "napi_alloc_cache": NAPI_ALLOC_CACHE,
    "skb_stats": SKB_STATS,
    "skb_ring": SKB_RING,
    "defer_ctl": DEFER_CTL,
    "net_device": NET_DEVICE,
    "lo_stats": LO_STATS,
    "neighbour": NEIGHBOUR,
    "neigh_parms": NEIGH_PARMS,
    "neigh_stats": NEIGH_STATS,
    "neigh_table": NEIGH_TABLE,
    "link_ring": LINK_RING,
    "ping_result": PING_RESULT,
    "arp_ctl": ARP_CTL,
}

# The per-CPU regions every machine has, in directory order (enum smp_region_id).
BUILTIN_REGIONS = (("cpu", CPU_STATE), ("softnet", SOFTNET_DATA), ("lstats", PCPU_LSTATS),
                   ("irq", IRQ_CPUSTAT), ("qnodes", QNODES))

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


# Constants both sides must agree on: name in smpnet._core.c_constants() -> value here
CONSTANTS = {
    "SMPNET_MAGIC": MAGIC, "SMPNET_LAYOUT_VERSION": VERSION,
    "SMPNET_MAX_REGIONS": MAX_REGIONS, "SMPNET_REGION_NAME": REGION_NAME,
    "SMP_F_OVERSUBSCRIBED": F_OVERSUBSCRIBED, "SMP_CACHE_BYTES": CACHELINE,
    "CPU_OFFLINE": CPU_OFFLINE, "CPU_ONLINE": CPU_ONLINE,
    "CPU_RUNNING": CPU_RUNNING, "CPU_DONE": CPU_DONE,
    "LOCKDEP_NR_BUGS": len(LOCKDEP_BUGS), "MAX_NODES": MAX_NODES,
    "NAPI_SKB_CACHE_SIZE": NAPI_SKB_CACHE_SIZE, "FLUSH_HIST_BUCKETS": FLUSH_HIST_BUCKETS,
    "SKB_RING_SIZE": SKB_RING_SIZE, "SKB_FREE": SKB_FREE, "SKB_LIVE": SKB_LIVE,
    "SKB_DEFERRED": SKB_DEFERRED, "FLUSH_SAMPLES": FLUSH_SAMPLES,
    **{f"REGION_{name.upper()}": i for i, (name, _) in enumerate(BUILTIN_REGIONS)},
    "REGION_NR_BUILTIN": len(BUILTIN_REGIONS),
}


def verify(c_layout, c_constants=None):
    """Compare the dtypes and constants above with the C side (the
    compiler's layout, the headers' constants); returns a list of
    disagreements (empty when they agree)."""
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
