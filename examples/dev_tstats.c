/* A driver's receive stats: one lock around the device's counters against
 * per-CPU u64_stats (dev->tstats), as drivers moved to them.
 *
 *   smpnet-bench ab examples/dev_tstats.c
 *
 * The baseline takes a lock around the device's counters, every CPU on one
 * line. The second is dev_sw_netstats_rx_add() as Linux 6.x's
 * include/linux/netdevice.h has it, the declarations with it, unchanged:
 * tstats from alloc_percpu() in the init (as netdev_alloc_pcpu_stats()),
 * this CPU's copy by this_cpu_ptr(), a %gs-relative read of this_cpu_off
 * and unlocked adds. Each check sums what its variant counted. */
#include <smpnet.h>

/* include/linux/netdevice.h */
struct pcpu_sw_netstats {
	u64_stats_t		rx_packets;
	u64_stats_t		rx_bytes;
	u64_stats_t		tx_packets;
	u64_stats_t		tx_bytes;
	struct u64_stats_sync	syncp;
} __aligned(4 * sizeof(u64));

struct net_device_stats {
	unsigned long	rx_packets;
	unsigned long	rx_bytes;
};

/* the fields of struct net_device the two use */
struct net_device {
	spinlock_t			stats_lock;
	struct net_device_stats		stats;
	struct pcpu_sw_netstats __percpu *tstats;
};

static inline void dev_sw_netstats_rx_add(struct net_device *dev, unsigned int len)
{
	struct pcpu_sw_netstats *tstats = this_cpu_ptr(dev->tstats);

	u64_stats_update_begin(&tstats->syncp);
	u64_stats_add(&tstats->rx_bytes, len);
	u64_stats_inc(&tstats->rx_packets);
	u64_stats_update_end(&tstats->syncp);
}

#define LEN	1500

SMPNET_STATE(struct net_device, struct smpnet_none);

SMPNET_INIT(locked)
{
	spin_lock_init(&shared->stats_lock);
}

SMPNET_VARIANT(locked)
{
	spin_lock(&shared->stats_lock);
	shared->stats.rx_packets++;
	shared->stats.rx_bytes += LEN;
	spin_unlock(&shared->stats_lock);
}

SMPNET_CHECK(locked)
{
	expect(shared->stats.rx_packets == nr_ops && shared->stats.rx_bytes == nr_ops * LEN,
	       "the locked counters lost packets");
}

SMPNET_INIT(tstats)
{
	shared->tstats = alloc_percpu(struct pcpu_sw_netstats);
	expect(shared->tstats != NULL, "alloc_percpu");
}

SMPNET_VARIANT(tstats)
{
	dev_sw_netstats_rx_add(shared, LEN);
}

SMPNET_CHECK(tstats)
{
	u64 packets = 0, bytes = 0;
	int cpu;

	for_each_possible_cpu(cpu) {
		const struct pcpu_sw_netstats *stats = per_cpu_ptr(shared->tstats, cpu);

		packets += u64_stats_read(&stats->rx_packets);
		bytes += u64_stats_read(&stats->rx_bytes);
	}
	expect(packets == nr_ops && bytes == nr_ops * LEN, "the per-CPU stats lost packets");
}
