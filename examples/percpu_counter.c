/* A shared atomic counter against per-CPU ones: what a per-CPU stat saves.
 *
 *   smpnet-bench ab examples/percpu_counter.c
 *
 * The first variant is the baseline: every CPU increments one atomic_t, so
 * with two CPUs or more its cache line moves between them on every op. The
 * second increments this CPU's own copy (this_cpu_inc: one add, no lock
 * prefix), which stays in this CPU's cache. The third is the kernel's
 * struct percpu_counter (include/linux/percpu_counter.h), as dst's entries
 * count moved to one: this CPU's part by an unlocked cmpxchg, folded into the
 * shared count under its lock every batch. Each check sums its variant's
 * counters and compares them with the ops the run did. */
#include <smpnet.h>

struct shared { atomic_t count; struct percpu_counter counter; };
struct pcpu   { unsigned long count; };
SMPNET_STATE(struct shared, struct pcpu);

SMPNET_VARIANT(shared_atomic)
{
	atomic_inc(&shared->count);
}

SMPNET_CHECK(shared_atomic)
{
	/* atomic_t is a signed int that wraps at 2^32, as the kernel's */
	expect((uint32_t)atomic_read(&shared->count) == (uint32_t)nr_ops,
	       "the shared counter lost increments");
}

SMPNET_VARIANT(percpu)
{
	this_cpu_inc(this_cpu->count);
}

SMPNET_CHECK(percpu)
{
	unsigned long sum = 0;
	int cpu;

	for (cpu = 0; cpu < nr_cpus; cpu++)
		sum += per_cpu(cpu)->count;
	expect(sum == nr_ops, "the per-CPU counters do not sum to the ops done");
}

SMPNET_INIT(percpu_counter)
{
	expect(percpu_counter_init(&shared->counter, 0, GFP_KERNEL) == 0, "percpu_counter_init");
}

SMPNET_VARIANT(percpu_counter)
{
	percpu_counter_inc(&shared->counter);
}

SMPNET_CHECK(percpu_counter)
{
	expect(percpu_counter_sum(&shared->counter) == (s64)nr_ops,
	       "the percpu_counter does not sum to the ops done");
}
