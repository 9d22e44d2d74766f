"""The three kernel patches under study (../shared/seeds/), and what each claims.

"seed" in smpnet always means one of these patches; a random generator's
starting value is called an RNG seed. A verdict is one of these claims
with what this machine measured (see stats.verdict).
"""

# seed -> (the machine and year of the original figure, the figure)
ORIGINAL = {
    "000": ("first ping after arp -d, HZ=100 (2011)", "9.91 ms -> 0.152 ms"),
    "002": ("tbench on Eric Dumazet's machine (2008)", "+5 %"),
    "003": ("E5-1650 v4 @ 3.60GHz, time_bench (2023)", "irqsave - irq = 14 cycles"),
}
SEEDS = tuple(ORIGINAL)

# 000: neigh: reduce arp latency (Eric Dumazet, 2011)
SEED_000 = {
    "seed": "000",
    "claim": "sending the first ARP request at once cuts the first ping's latency "
             "(timer - immediate > 0 ms)",
    "reference": "first ping 9.91 ms -> 0.152 ms at HZ=100; later pings ~0.065 ms",
}

# 002: loopback: calls netif_receive_skb() instead of netif_rx() (2008)
SEED_002 = {
    "seed": "002",
    "claim": "direct delivery is faster than netif_rx (tbench, direct / netif_rx > 1)",
    "reference": "tbench +5 % (2008)",
}
SEED_002_STORM = {
    "seed": "002",
    "claim": "with ACKs of ACKs, the depth guard survives by queueing; unguarded recursion "
             "overflows the kernel stack",
    "reference": "the reviewer's objection (David Miller, 2008)",
}

# 003: net: avoid irqsave in skb_defer_free_flush (Jesper Dangaard Brouer, 2023)
SEED_003 = {
    "seed": "003",
    "claim": "spin_lock_irq is cheaper than spin_lock_irqsave (irqsave - irq > 0 cycles)",
    "reference": "irqsave - irq = 14 cycles (48 - 34, E5-1650 v4 @ 3.60GHz)",
}
SEED_003_RATE = {
    "seed": "003",
    "claim": "no measurable packet-rate gain expected from irq over irqsave",
    "reference": "no number given: 'We don't expect to see a measurable packet performance gain'",
}
