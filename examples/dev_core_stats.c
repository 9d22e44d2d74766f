/* 6510ea973d8d "net: Use this_cpu_inc() to increment net->core_stats"
 * (Linux 5.18): dev_core_stats_rx_dropped_inc() before and after, as
 * include/linux/netdevice.h has them, the patch's own claim "less
 * instructions on x86-64" put to a measure.
 *
 *   smpnet-bench ab examples/dev_core_stats.c
 *
 * Before: preemption off, this_cpu_ptr() of the device's per-CPU stats
 * (its pointer plus this CPU's this_cpu_off, read %gs-relative) and an
 * unlocked local_inc() through it. After: this_cpu_inc() on the per-CPU
 * pointer itself, one `incq %gs:(%rax)`. Each check sums what its
 * variant counted on every CPU. */
#include <smpnet.h>

/* before: the counters are local_t */
struct net_device_core_stats_local {
	local_t		rx_dropped;
	local_t		tx_dropped;
	local_t		rx_nohandler;
} __aligned(4 * sizeof(local_t));

/* after */
struct net_device_core_stats {
	unsigned long	rx_dropped;
	unsigned long	tx_dropped;
	unsigned long	rx_nohandler;
} __aligned(4 * sizeof(unsigned long));

/* the fields of struct net_device the two use: one device, each side its own */
struct net_device {
	struct net_device_core_stats_local __percpu *core_stats_local;
	struct net_device_core_stats __percpu *core_stats;
};

SMPNET_STATE(struct net_device, struct smpnet_none);

/* the stats are allocated up front (netdev_core_stats_alloc() runs once) */
SMPNET_INIT(local_inc)
{
	shared->core_stats_local = alloc_percpu(struct net_device_core_stats_local);
	expect(shared->core_stats_local != NULL, "alloc_percpu");
}

static inline struct net_device_core_stats_local *dev_core_stats_local(struct net_device *dev)
{
	struct net_device_core_stats_local __percpu *p = READ_ONCE(dev->core_stats_local);

	if (likely(p))
		return this_cpu_ptr(p);
	return NULL;
}

SMPNET_VARIANT(local_inc)
{
	struct net_device_core_stats_local *p;

	preempt_disable();
	p = dev_core_stats_local(shared);
	if (p)
		local_inc(&p->rx_dropped);
	preempt_enable();
}

SMPNET_CHECK(local_inc)
{
	long dropped = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		dropped += local_read(&per_cpu_ptr(shared->core_stats_local, cpu)->rx_dropped);
	expect(dropped == (long)nr_ops, "local_inc() lost drops");
}

SMPNET_INIT(this_cpu_inc)
{
	shared->core_stats = alloc_percpu(struct net_device_core_stats);
	expect(shared->core_stats != NULL, "alloc_percpu");
}

static inline struct net_device_core_stats __percpu *dev_core_stats(struct net_device *dev)
{
	struct net_device_core_stats __percpu *p = READ_ONCE(dev->core_stats);

	if (likely(p))
		return p;
	return NULL;
}

SMPNET_VARIANT(this_cpu_inc)
{
	struct net_device_core_stats __percpu *p;

	p = dev_core_stats(shared);
	if (p)
		this_cpu_inc(p->rx_dropped);
}

SMPNET_CHECK(this_cpu_inc)
{
	unsigned long dropped = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		dropped += READ_ONCE(per_cpu_ptr(shared->core_stats, cpu)->rx_dropped);
	expect(dropped == nr_ops, "this_cpu_inc() lost drops");
}
