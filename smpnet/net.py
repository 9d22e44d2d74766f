"""What the network experiments share: the skb allocator's regions of the
segment, which net_init() sets up and every network run maps, and the
audit that every skb head is back where it belongs after a run."""
import numpy as np

from . import layout

# the regions _core.net_init() takes, in its order
NET_REGIONS = ("skb", "skb_pool", "napi_cache", "skb_stats")


def audit(m):
    """Conservation after a run: every head is back in the pool or a cache,
    exactly once, and free. Returns the number of heads out of place:
    missing, held twice, or not free (0 when all are accounted for)."""
    skb = m.region("skb")
    pool = m.region("skb_pool")[0]
    caches = m.region("napi_cache")
    held = np.zeros(len(skb) + 1, dtype=np.int64)   # by handle
    h, steps = int(pool["head"]), 0
    while h and steps <= len(skb):
        held[h] += 1
        h, steps = int(skb[h - 1]["next"]), steps + 1
    for c in caches:
        np.add.at(held, c["skb_cache"][: int(c["count"])], 1)
    counted = int(pool["count"]) + int(caches["count"].sum())
    held = held[1:]
    bad = int(np.count_nonzero(held != 1))
    bad += int(np.count_nonzero(skb["state"] != layout.SKB_FREE))
    return bad + abs(counted - len(skb))
