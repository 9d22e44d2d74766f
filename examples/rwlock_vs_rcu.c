/* A flow-table lookup under read_lock() against one under rcu_read_lock():
 * what converting a read-mostly table's readers to RCU saves.
 *
 *   smpnet-bench ab examples/rwlock_vs_rcu.c
 *
 * Every CPU looks up a flow by hash and counts the hit. Under the rwlock
 * (the baseline) each lookup is a `lock xadd` on the lock's word to enter
 * and another to leave: with two CPUs or more that line moves between them
 * on every lookup, though no one ever writes the table. Under RCU the read
 * side is PREEMPT_RCU's nesting count (a call in and a call out, x86-preempt)
 * or the preempt count (a non-preemptible build): no shared line is written.
 * Only the read side is modelled (no grace periods), so the table here is
 * filled once, in the init, as a writer would before publishing it with
 * rcu_assign_pointer(). */
#include <smpnet.h>

#define NR_FLOWS	64

struct flow {
	u32 hash;
	struct flow *next;
};

struct shared {
	rwlock_t lock;			/* the baseline's readers take it */
	struct flow *buckets[NR_FLOWS];	/* __rcu in the RCU variant */
	struct flow flows[NR_FLOWS];
};
struct pcpu { unsigned long hits, lookups; };
SMPNET_STATE(struct shared, struct pcpu);

static void fill(struct shared *s)
{
	int i;

	rwlock_init(&s->lock);
	for (i = 0; i < NR_FLOWS; i++) {
		s->flows[i].hash = i;
		rcu_assign_pointer(s->buckets[i], &s->flows[i]);
	}
}

static struct flow *flow_lookup(struct shared *s, u32 hash)
{
	struct flow *f;

	for (f = rcu_dereference(s->buckets[hash % NR_FLOWS]); f; f = rcu_dereference(f->next))
		if (f->hash == hash)
			return f;
	return NULL;
}

SMPNET_INIT(rwlock) { fill(shared); }
SMPNET_VARIANT(rwlock)
{
	u32 hash = this_cpu->lookups++ % NR_FLOWS;

	read_lock(&shared->lock);
	if (flow_lookup(shared, hash))
		this_cpu->hits++;
	read_unlock(&shared->lock);
}

SMPNET_INIT(rcu) { fill(shared); }
SMPNET_VARIANT(rcu)
{
	u32 hash = this_cpu->lookups++ % NR_FLOWS;

	rcu_read_lock();
	if (flow_lookup(shared, hash))
		this_cpu->hits++;
	rcu_read_unlock();
}

static void every_lookup_hit(void)
{
	unsigned long hits = 0;
	int cpu;

	for (cpu = 0; cpu < nr_cpus; cpu++)
		hits += per_cpu(cpu)->hits;
	expect(hits == nr_ops, "a lookup missed a flow that is in the table");
}

SMPNET_CHECK(rwlock)
{
	every_lookup_hit();
	expect(atomic_read(&shared->lock.cnts) == 0, "a reader left the lock held");
}
SMPNET_CHECK(rcu) { every_lookup_hit(); }
