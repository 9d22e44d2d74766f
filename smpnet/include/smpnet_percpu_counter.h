/* smpnet_percpu_counter.h - include/linux/percpu_counter.h and
 * lib/percpu_counter.c for a user's `ab` file (smpnet.h includes it): a
 * count kept per CPU in an s32 and folded into the shared s64 under the
 * lock once a CPU's part reaches the batch. Docs: docs/experiments/ab.md.
 *
 * The add is x86's (CONFIG_HAVE_CMPXCHG_LOCAL): this CPU's part read, then
 * an unlocked %gs-relative cmpxchg of it, the lock with IRQs saved only to
 * fold. percpu_counter_init() allocates the parts with alloc_percpu(): in an
 * SMPNET_INIT. No CPU hotplug list: every CPU is always online here.
 */
#ifndef SMPNET_PERCPU_COUNTER_H
#define SMPNET_PERCPU_COUNTER_H

/* a kernel without PREEMPT_RT: raw_spinlock_t is spinlock_t's lock, and
 * raw_spin_lock() what spin_lock() runs (include/linux/spinlock.h) */
typedef spinlock_t raw_spinlock_t;
#define raw_spin_lock_init(l)			spin_lock_init(l)
#define raw_spin_lock(l)			spin_lock(l)
#define raw_spin_unlock(l)			spin_unlock(l)
#define raw_spin_lock_irqsave(l, flags)		spin_lock_irqsave(l, flags)
#define raw_spin_unlock_irqrestore(l, flags)	spin_unlock_irqrestore(l, flags)

struct percpu_counter {
	raw_spinlock_t lock;
	s64 count;
	s32 __percpu *counters;
};

/* lib/percpu_counter.c's compute_batch_value(): max(32, 2 * online CPUs) */
#define percpu_counter_batch	((s32)(2 * nr_cpus > 32 ? 2 * nr_cpus : 32))

static inline int percpu_counter_init(struct percpu_counter *fbc, s64 amount, int gfp)
{
	(void)gfp;
	raw_spin_lock_init(&fbc->lock);
	fbc->count = amount;
	fbc->counters = alloc_percpu(s32);
	return fbc->counters ? 0 : -12;		/* -ENOMEM */
}

static inline void percpu_counter_destroy(struct percpu_counter *fbc)
{
	free_percpu(fbc->counters);
	fbc->counters = NULL;
}

static inline void percpu_counter_add_batch(struct percpu_counter *fbc, s64 amount, s32 batch)
{
	s32 count;	/* this CPU's part, as the cmpxchg takes it */
	s64 sum;
	unsigned long flags;

	count = this_cpu_read(*fbc->counters);
	do {
		sum = count + amount;
		if (unlikely((sum < 0 ? -sum : sum) >= batch)) {
			raw_spin_lock_irqsave(&fbc->lock, flags);
			/* by now the part may have changed (an IRQ's add) */
			count = __this_cpu_read(*fbc->counters);
			fbc->count += count + amount;
			__this_cpu_sub(*fbc->counters, count);
			raw_spin_unlock_irqrestore(&fbc->lock, flags);
			return;
		}
	} while (!this_cpu_try_cmpxchg(*fbc->counters, &count, (s32)sum));
}

static inline void percpu_counter_add(struct percpu_counter *fbc, s64 amount)
{
	percpu_counter_add_batch(fbc, amount, percpu_counter_batch);
}
#define percpu_counter_sub(fbc, amount)	percpu_counter_add(fbc, -(s64)(amount))
#define percpu_counter_inc(fbc)		percpu_counter_add(fbc, 1)
#define percpu_counter_dec(fbc)		percpu_counter_add(fbc, -1)

/* the shared count alone: within (batch - 1) * CPUs of the sum */
static inline s64 percpu_counter_read(struct percpu_counter *fbc)
{
	return READ_ONCE(fbc->count);
}

static inline s64 percpu_counter_read_positive(struct percpu_counter *fbc)
{
	s64 ret = READ_ONCE(fbc->count);

	return ret >= 0 ? ret : 0;
}

static inline s64 __percpu_counter_sum(struct percpu_counter *fbc)
{
	s64 ret;
	int cpu;
	unsigned long flags;

	raw_spin_lock_irqsave(&fbc->lock, flags);
	ret = fbc->count;
	for_each_online_cpu(cpu)
		ret += *per_cpu_ptr(fbc->counters, cpu);
	raw_spin_unlock_irqrestore(&fbc->lock, flags);
	return ret;
}
#define percpu_counter_sum(fbc)		__percpu_counter_sum(fbc)
static inline s64 percpu_counter_sum_positive(struct percpu_counter *fbc)
{
	s64 ret = __percpu_counter_sum(fbc);

	return ret < 0 ? 0 : ret;
}

#endif
