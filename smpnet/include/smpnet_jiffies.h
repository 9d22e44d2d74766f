/* smpnet_jiffies.h - jiffies in a user's `ab` file, as include/linux/jiffies.h
 * has them: ticks of HZ since boot, from INITIAL_JIFFIES; smpnet.h includes
 * it. Docs: docs/experiments/ab.md. */
#ifndef SMPNET_JIFFIES_H
#define SMPNET_JIFFIES_H

/* HZ: Kconfig's default (HZ_250) unless the file defines it first */
#ifndef HZ
#define HZ		250
#endif
/* five minutes before the 32-bit wrap, so that a comparison done wrong
 * shows early, as the kernel's */
#define INITIAL_JIFFIES	((unsigned long)(unsigned int)(-300 * HZ))

/* The kernel's jiffies is a word the tick writes and every CPU reads: an
 * op reads it with one load. Here each CPU's process has its word, set
 * from the TSC (its count since boot, at HZ) each time a loop or hook
 * begins, outside the timing: it advances between rounds, where the
 * kernel's advances at each tick (a few times a contended round). */
static unsigned long smpnet_jiffies = INITIAL_JIFFIES;
#define jiffies		(*(volatile unsigned long *)&smpnet_jiffies)
#define jiffies_64	((u64)jiffies)
#define get_jiffies_64()	((u64)jiffies)

static inline void smpnet_jiffies_update(const struct smpnet_model_cpu_ctx *c)
{
	double hz = c->hdr->tsc_hz;

	if (hz > 0)
		smpnet_jiffies = INITIAL_JIFFIES + (unsigned long)((double)tsc_read_unordered() / hz * HZ);
}

/* include/linux/jiffies.h's comparisons, safe across the wrap */
#define time_after(a, b)	((long)((b) - (a)) < 0)
#define time_before(a, b)	time_after(b, a)
#define time_after_eq(a, b)	((long)((a) - (b)) >= 0)
#define time_before_eq(a, b)	time_after_eq(b, a)
#define time_in_range(a, b, c)	(time_after_eq(a, b) && time_before_eq(a, c))
#define time_in_range_open(a, b, c)	(time_after_eq(a, b) && time_before(a, c))
#define time_is_before_jiffies(a)	time_after(jiffies, a)
#define time_is_after_jiffies(a)	time_before(jiffies, a)
#define time_is_before_eq_jiffies(a)	time_after_eq(jiffies, a)
#define time_is_after_eq_jiffies(a)	time_before_eq(jiffies, a)

/* conversions, rounded up as the kernel's (a timeout is never shorter) */
#define msecs_to_jiffies(m)	((unsigned long)(((u64)(m) * HZ + 999) / 1000))
#define usecs_to_jiffies(u)	((unsigned long)(((u64)(u) * HZ + 999999) / 1000000))
#define jiffies_to_msecs(j)	((unsigned int)((u64)(j) * 1000 / HZ))
#define jiffies_to_usecs(j)	((unsigned int)((u64)(j) * 1000000 / HZ))

#endif
