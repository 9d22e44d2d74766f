"""The model's skb life cycle in an `ab` run (a file that includes
smpnet_skbuff.h): its pool's regions in the run's machine, set up before
the first init, handed to every core call, and held to no skb freed twice
at the end. docs/experiments/ab.md, "The model's skbs"."""
from ... import _core
from ...errors import BadInput, RunFailed
from ..common import net

# heads in the pool: what every CPU's cache, slab and defer list hold at
# their fullest and room for what a file holds per CPU (a queue of 256 to
# each, in each of three copies of the state: the variants' and the A/A
# control's), and 8192 more
HELD_PER_CPU = net.held_per_cpu(_core.NET_CORE_MODEL["skb_defer_max"]) + 3 * 256
SKBS = 8192


def validate(obj, name, variant_algos):
    """BadInput for a file whose skbs cannot run: an unknown strategy, or a
    variant on a lock algorithm of its own (the pool and defer locks are
    the run's, one algorithm: the model's network is one kernel's)."""
    if not obj.skb_defer:
        return
    if obj.skb_defer not in net.STRATEGIES:
        raise BadInput(f"{name}: SMPNET_SKB_DEFER({obj.skb_defer}): the defer list is locked "
                       f"as one of {', '.join(net.STRATEGIES)}")
    if variant_algos:
        raise BadInput(f"{name}: the model's skbs (smpnet_skbuff.h) take the run's lock "
                       f"algorithm, and variant {next(iter(variant_algos))!r} names its own "
                       "(SMPNET_VARIANT_ALGO): give the run's with --algo instead")


def regions(obj, nr_cpus):
    """The pool's regions for a machine of nr_cpus CPUs, none without skbs."""
    if not obj.skb_defer:
        return []
    return net.regions(SKBS + nr_cpus * HELD_PER_CPU, nr_cpus)


def setup(m, obj):
    """Fill the pool, empty every cache, slab and defer list (their locks
    for the algorithm `obj` was built for, the run's); the core calls'
    arguments for the model's network."""
    if not obj.skb_defer:
        return {}
    where = net.indices(m)
    _core.net_init(m.segment.buf, where, obj.options["algo"])
    return dict(net_regions=where, net_strategy=_core.DEFER_STRATEGIES[obj.skb_defer])


def check(m, obj, mode):
    """RunFailed when an skb was freed twice (or handed on stale) in the
    `mode` rounds: the model counts such a free rather than corrupt its lists."""
    if not obj.skb_defer:
        return
    stats = m.region("skb_stats")
    twice, stale = int(stats["double_free"].sum()), int(stats["stale"].sum())
    if twice or stale:
        raise RunFailed(f"{obj.name}: after the {mode} rounds, {twice} free(s) of an skb not "
                        f"live (freed already, or on a defer list) and {stale} stale skb(s): "
                        "each skb is freed once")


# skb_stats' counters a contended row reports: what the model did with its skbs
FIELDS = ("allocated", "remote_frees", "deferred", "fallback_frees", "flushes", "flushed", "ipis")


class Tally:
    """The model's skb counters of each entry's contended rounds, every CPU
    together: read around each round (the pool is the run's, one kernel's),
    and set on each contended row as `skbs`."""

    def __init__(self, m, obj, entries):
        self.m = m if obj.skb_defer else None
        self.per = [dict.fromkeys(FIELDS, 0) for _ in range(entries)]

    def _now(self):
        stats = self.m.region("skb_stats")
        return {f: int(stats[f].sum()) for f in FIELDS}

    def round(self, entry, run):
        """run(), the entry's round, counted."""
        if self.m is None:
            return run()
        before = self._now()
        out = run()
        after = self._now()
        for f in FIELDS:
            self.per[entry][f] += after[f] - before[f]
        return out

    def attach(self, rows):
        if self.m is not None:
            for row, counts in zip(rows, self.per):
                row["skbs"] = counts
