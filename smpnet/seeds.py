"""The three kernel patches under study (../shared/seeds/), and what each claims.

"seed" in smpnet always means one of these patches; a random generator's
starting value is called an RNG seed. A verdict is one of these claims
with what this machine measured, labelled by stats.judge.

Each claim says its unit and either the seed's own size of the effect
(`size`, > 0 in the claimed direction: the verdict compares the measured
effect with it) or, for a claim of no difference, the `margin` within which
an effect counts as none. `kind` is "measured" when the sign could come out
either way on some machine, "model" when it follows from the model's rules
(`rule` says which); `unit_note`, where the seed's unit does not carry over
to another machine.
"""

# seed -> (the machine and year of the original figure, the figure)
ORIGINAL = {
    "000": ("first ping after arp -d, HZ=100 (2011)", "9.91 ms -> 0.152 ms"),
    "002": ("tbench on Eric Dumazet's machine (2008)", "+5 %"),
    "003": ("E5-1650 v4 @ 3.60GHz, time_bench (2023)", "irqsave - irq = 14 cycles"),
}
SEEDS = tuple(ORIGINAL)

# seed -> the machine fact that set the size of its figure there, as the
# seed gives it (measure/verdict_facts.py puts this machine's beside it): 003's
# flags save and restore, "14 cycles from avoiding reading and restoring CPU
# flags"; 002's tbench transaction, whose cost the seed does not give; 000's
# HZ, with its first ping (sent, by its 9.91 ms, just after a tick boundary)
SEED_MACHINE = {
    "000": {"hz": 100, "first_ms": 9.91, "after_ms": 0.152},
    "002": {"machine": "Eric Dumazet's machine (2008)", "cycles": None},
    "003": {"cpu": "E5-1650 v4 @ 3.60GHz", "cycles": 14.0},
}

# 000: neigh: reduce arp latency (Eric Dumazet, 2011)
SEED_000 = {
    "seed": "000",
    "claim": "sending the first ARP request at once cuts the first ping's latency "
             "(timer - immediate > 0 ms)",
    "reference": "first ping 9.91 ms -> 0.152 ms at HZ=100; later pings ~0.065 ms",
    "unit": "ms",
    "size": 9.91 - 0.152,      # at HZ=100; the arp experiment scales it by 100 / HZ
    "kind": "model",
    "rule": "the timer mode's request waits for the next tick boundary, and the ping starts "
            "at a random point of a tick: timer - immediate > 0 on any machine, its size "
            "set by where in the tick the ping starts",
}

# 002: loopback: calls netif_receive_skb() instead of netif_rx() (2008)
SEED_002 = {
    "seed": "002",
    "claim": "direct delivery is faster than netif_rx (tbench, direct / netif_rx > 1)",
    "reference": "tbench +5 % (2008)",
    "unit": "% transactions/s, direct over netif_rx",
    "size": 5.0,
    "kind": "measured",
    "unit_note": "uncalibrated: the seed's tbench ran 2008's whole TCP stack per transaction; "
                 "the model's costs some 1,600 cycles, so the same saving is a larger share "
                 "(a calibration profile sizes it)",
}
# 002's primary claim, in what the patch changes: cycles per transaction.
# It has no size: the seed's +5 % was of a 2008 tbench transaction whose
# cost on that machine is not given, so the cycles it implies cannot be
# stated; SEED_002's % of this host's transaction follows it.
SEED_002_CYCLES = {
    "seed": "002",
    "claim": "direct delivery saves cycles per transaction over netif_rx "
             "(netif_rx - direct > 0 cycles)",
    "reference": "tbench +5 % (2008), in cycles not statable",
    "unit": "cycles saved per transaction",
    "kind": "measured",
    "unit_note": "the seed's +5 % cannot be put in cycles: its transaction's cost on that "
                 "machine is not given; the saving as a share of this host's transaction is "
                 "the next verdict",
}
SEED_002_STORM = {
    "seed": "002",
    "claim": "with ACKs of ACKs, the depth guard survives by queueing; unguarded recursion "
             "overflows the kernel stack",
    "reference": "the reviewer's objection (David Miller, 2008)",
    "kind": "model",
    "rule": "unguarded, every ACK of an ACK nests one more frame until depth x frame size "
            "passes THREAD_SIZE; guarded, the depth limit queues the packet first",
}

# 003: net: avoid irqsave in skb_defer_free_flush (Jesper Dangaard Brouer, 2023)
SEED_003 = {
    "seed": "003",
    "claim": "spin_lock_irq is cheaper than spin_lock_irqsave (irqsave - irq > 0 cycles)",
    "reference": "irqsave - irq = 14 cycles (48 - 34, E5-1650 v4 @ 3.60GHz)",
    "unit": "cycles",
    "size": 14.0,
    "kind": "measured",
    "unit_note": "cycles of an E5-1650 v4: a pushf costs what it costs on each CPU",
}
SEED_003_RATE = {
    "seed": "003",
    "claim": "no measurable packet-rate gain expected from irq over irqsave",
    "reference": "no number given: 'We don't expect to see a measurable packet performance gain'",
    "unit": "% skbs/s, irq over irqsave",
    # the smallest gain a reviewer of a networking patch would call measurable:
    # net-next changelogs claim gains of 1 to 2 % as improvements
    "margin": 1.0,
    "kind": "measured",
}
