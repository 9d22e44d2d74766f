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
#define MAX_JIFFY_OFFSET	((unsigned long)((__LONG_MAX__ >> 1) - 1))

/* The kernel's jiffies is a word the tick writes and every CPU reads: an
 * op reads it with one load. Here each CPU's process has its word, a
 * variable as the kernel's (a struct may have a member of the name), set
 * from the TSC (its count since boot, at HZ) as each loop and hook
 * begins, outside the timing: it advances between rounds, where the
 * kernel's advances at each tick. A contended round's is set from the
 * round's deadline, one TSC value for every CPU, so that the CPUs agree
 * on it as the kernel's share one word. */
static volatile unsigned long jiffies = INITIAL_JIFFIES;
#define jiffies_64		((u64)jiffies)
#define get_jiffies_64()	((u64)jiffies)

static inline void smpnet_jiffies_at(const struct smpnet_model_cpu_ctx *c, uint64_t tsc)
{
	double hz = c->hdr->tsc_hz;

	if (hz > 0)
		jiffies = INITIAL_JIFFIES + (unsigned long)((double)tsc / hz * HZ);
}

/* include/linux/jiffies.h's comparisons, safe across the wrap; each
 * argument must be an unsigned long (typecheck(): a warning otherwise, as
 * the kernel's, where a u32 stamp compares wrong) */
#define smpnet_typecheck(type, x)	({ type d1_; __typeof__(x) d2_; (void)(&d1_ == &d2_); 1; })
#define time_after(a, b)	(smpnet_typecheck(unsigned long, a) && smpnet_typecheck(unsigned long, b) \
				 && ((long)((b) - (a)) < 0))
#define time_before(a, b)	time_after(b, a)
#define time_after_eq(a, b)	(smpnet_typecheck(unsigned long, a) && smpnet_typecheck(unsigned long, b) \
				 && ((long)((a) - (b)) >= 0))
#define time_before_eq(a, b)	time_after_eq(b, a)
#define time_in_range(a, b, c)	(time_after_eq(a, b) && time_before_eq(a, c))
#define time_in_range_open(a, b, c)	(time_after_eq(a, b) && time_before(a, c))
#define time_is_before_jiffies(a)	time_after(jiffies, a)
#define time_is_after_jiffies(a)	time_before(jiffies, a)
#define time_is_before_eq_jiffies(a)	time_after_eq(jiffies, a)
#define time_is_after_eq_jiffies(a)	time_before_eq(jiffies, a)

/* kernel/time/time.c's conversions: to jiffies rounded up (a timeout is
 * never shorter; a negative one the longest), jiffies to ms rounded up
 * and to us down, as its 64-bit forms */
#define msecs_to_jiffies(m)	((int)(m) < 0 ? MAX_JIFFY_OFFSET :				\
				 (unsigned long)(((u64)(unsigned int)(m) * HZ + 999) / 1000))
#define usecs_to_jiffies(u)	((int)(u) < 0 ? MAX_JIFFY_OFFSET :				\
				 (unsigned long)(((u64)(unsigned int)(u) * HZ + 999999) / 1000000))
#define jiffies_to_msecs(j)	((unsigned int)(((u64)(j) * 1000 + HZ - 1) / HZ))
#define jiffies_to_usecs(j)	((unsigned int)((u64)(j) * 1000000 / HZ))

#endif
