/* The net_device refcount: one refcount_t against a per-CPU count, the two
 * builds of include/linux/netdevice.h's __dev_hold()/__dev_put() (Linux
 * 5.13 on; CONFIG_PCPU_DEV_REFCNT picks one).
 *
 *   smpnet-bench ab examples/netdev_refcnt.c
 *
 * Every packet path takes and drops a reference on its device: with one
 * refcount_t, every CPU's hold and put move one cache line; with the
 * per-CPU count (2010's "net: percpu net_device refcount"), each CPU adds
 * to its own, and only netdev_refcnt_read() sums them. The op is a hold
 * and a put; each check reads the count back at the one reference its
 * init took, as unregistering a device waits for it to. */
#include <smpnet.h>

/* the fields of struct net_device the two builds use */
struct net_device {
	int __percpu	*pcpu_refcnt;	/* CONFIG_PCPU_DEV_REFCNT */
	refcount_t	dev_refcnt;	/* without it */
};

SMPNET_STATE(struct net_device, struct smpnet_none);

/* without CONFIG_PCPU_DEV_REFCNT */
SMPNET_INIT(refcount)
{
	refcount_set(&shared->dev_refcnt, 1);
}

SMPNET_VARIANT(refcount)
{
	refcount_inc(&shared->dev_refcnt);	/* __dev_hold() */
	refcount_dec(&shared->dev_refcnt);	/* __dev_put() */
}

SMPNET_CHECK(refcount)
{
	expect(refcount_read(&shared->dev_refcnt) == 1, "a reference lost or left");
}

/* with CONFIG_PCPU_DEV_REFCNT: alloc_netdev_mqs() allocates the count and
 * takes the device's first reference */
SMPNET_INIT(pcpu)
{
	shared->pcpu_refcnt = alloc_percpu(int);
	expect(shared->pcpu_refcnt != NULL, "alloc_percpu");
	this_cpu_inc(*shared->pcpu_refcnt);
}

SMPNET_VARIANT(pcpu)
{
	this_cpu_inc(*shared->pcpu_refcnt);	/* __dev_hold() */
	this_cpu_dec(*shared->pcpu_refcnt);	/* __dev_put() */
}

/* netdev_refcnt_read() */
SMPNET_CHECK(pcpu)
{
	int i, refcnt = 0;

	for_each_possible_cpu(i)
		refcnt += *per_cpu_ptr(shared->pcpu_refcnt, i);
	expect(refcnt == 1, "a reference lost or left");
}
