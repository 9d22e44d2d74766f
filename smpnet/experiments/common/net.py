"""What the network experiments share: the skb allocator's regions of the
segment, which net_init() sets up and every network run maps, what one
CPU holds of its heads, the defer strategies' names, and the audit that
every skb head is back where it belongs after a run."""
import numpy as np

from ... import _core
from ...machine import layout

# the regions _core.net_init() takes, in its order
NET_REGIONS = ("skb", "skb_data", "skb_page", "skb_pool", "napi_cache", "skb_slab",
               "skb_stats")
# skbuff.h's defer-list strategies by name, in the enum's order
STRATEGIES = tuple(sorted(_core.DEFER_STRATEGIES, key=_core.DEFER_STRATEGIES.get))


def held_per_cpu(defer_max):
    """The most skb heads one CPU keeps from the pool: its defer list full,
    its cache full twice over (a full cache spills its newer half into the
    slab) and its slab at SLAB_CPU_MAX."""
    return defer_max + 2 * layout.NAPI_SKB_CACHE_SIZE + layout.SLAB_CPU_MAX


def regions(nskbs, ncpus):
    """The network model's regions, as Machine(regions=...) takes them:
    `nskbs` skb heads with their data areas and the pages those are cut
    from, and each CPU's cache, slab and counters."""
    pages = -(-nskbs // layout.SKB_FRAGS_PER_PAGE)
    return [("skb", layout.SK_BUFF, nskbs), ("skb_data", layout.SKB_DATA, nskbs),
            ("skb_page", layout.SKB_PAGE, pages), ("skb_pool", layout.SKB_POOL, 1), ("napi_cache", layout.NAPI_ALLOC_CACHE, ncpus),
            ("skb_slab", layout.SKB_SLAB, ncpus), ("skb_stats", layout.SKB_STATS, ncpus)]


def indices(m):
    """The NET_REGIONS' indices in `m`'s segment, for net_init() and the loops."""
    names = m.segment.region_names
    return tuple(names.index(r) for r in NET_REGIONS)


def _walk(skb, h, held):
    """Count the heads on the list from handle h; returns how many."""
    steps = 0
    while h and steps <= len(skb):
        held[h] += 1
        h, steps = int(skb[h - 1]["next"]), steps + 1
    return steps


def audit(m):
    """Conservation after a run: every head is back in the pool, a cache or
    a slab (its freelist or its remote-free list), exactly once, and free,
    and every frag its page counted is back (the pages' refcounts add up to
    the CPUs' unspent bias: no skb is live). Returns the number of things
    out of place: heads missing, held twice, or not free, and counts that
    disagree (0 when all are accounted for)."""
    skb = m.region("skb")
    pool = m.region("skb_pool")[0]
    caches = m.region("napi_cache")
    held = np.zeros(len(skb) + 1, dtype=np.int64)   # by handle
    walked = _walk(skb, int(pool["head"]), held)
    bad = int(walked != int(pool["count"]))         # the pool's count agrees with its list
    counted = walked
    for s in m.region("skb_slab"):
        walked = _walk(skb, int(s["freelist"]), held)
        bad += int(walked != int(s["count"]))       # and each slab's with its freelist
        counted += walked + _walk(skb, int(s["remote_free"]), held)
    for c in caches:
        np.add.at(held, c["skb_cache"][: int(c["count"])], 1)
    counted += int(caches["count"].sum())
    held = held[1:]
    bad += int(np.count_nonzero(held != 1))
    bad += int(np.count_nonzero(skb["state"] != layout.SKB_FREE))
    refs = int(m.region("skb_page")["refcount"].sum())
    bad += int(refs != int(caches["pagecnt_bias"].sum()))
    return bad + abs(counted - len(skb))
