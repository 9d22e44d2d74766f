/* tsc.h - cycle counter and clocks.
 *
 * x86: the TSC, read as time_bench does but with lfence instead of cpuid
 * (cpuid traps to the hypervisor in a VM and costs thousands of cycles):
 *   start: lfence; rdtsc; lfence   - earlier instructions done, later ones wait
 *   stop:  rdtscp; lfence          - the timed code done, nothing later starts
 * Elsewhere: CLOCK_MONOTONIC_RAW in ns stands in for the TSC (tsc_hz = 1e9),
 * and smpnet reports tsc_source = "clock_gettime" so nobody mistakes it.
 */
#ifndef SMPNET_TSC_H
#define SMPNET_TSC_H

#include <time.h>
#include "compiler.h"

static inline uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t mono_raw_ns(void) { return clock_ns(CLOCK_MONOTONIC_RAW); }
static inline uint64_t mono_ns(void)     { return clock_ns(CLOCK_MONOTONIC); }

#if defined(__x86_64__) || defined(__i386__)
#define SMPNET_HAVE_TSC 1
#include <cpuid.h>

static inline uint64_t tsc_start(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("lfence\n\trdtsc\n\tlfence"
			     : "=a"(lo), "=d"(hi) :: "memory");
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t tsc_stop(void)
{
	uint32_t lo, hi, aux;
	__asm__ __volatile__("rdtscp\n\tlfence"
			     : "=a"(lo), "=d"(hi), "=c"(aux) :: "memory");
	return ((uint64_t)hi << 32) | lo;
}

/* A plain rdtsc with no fences: for deadlines and delays inside a loop,
 * never for timing one. */
static inline uint64_t tsc_read_unordered(void)
{
	return __builtin_ia32_rdtsc();
}

/* rdtscp also returns IA32_TSC_AUX, which Linux sets to (node << 12) | cpu:
 * a cheap check of where a worker really runs. */
static inline uint64_t tsc_rdtscp(uint32_t *aux)
{
	uint32_t lo, hi;
	__asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(*aux) :: "memory");
	return ((uint64_t)hi << 32) | lo;
}

static inline int smp_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
	if (leaf < 0x40000000u && leaf > __get_cpuid_max(leaf & 0x80000000u, 0))
		return 0;
	__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
	return 1;
}
#else
#define SMPNET_HAVE_TSC 0
static inline uint64_t tsc_start(void) { barrier(); return mono_raw_ns(); }
static inline uint64_t tsc_stop(void)  { uint64_t t = mono_raw_ns(); barrier(); return t; }
static inline uint64_t tsc_rdtscp(uint32_t *aux) { *aux = 0; return mono_raw_ns(); }
static inline uint64_t tsc_read_unordered(void) { return mono_raw_ns(); }
static inline int smp_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
	(void)leaf; (void)sub; r[0] = r[1] = r[2] = r[3] = 0;
	return 0;
}
#endif

/* Spend `cycles` TSC cycles, as work (no pause: a pause would overshoot
 * it). The stand-in for costs the model charges but does not execute. */
/* tsc_spend(), cut short at the TSC's `deadline`: a hold inside a contended
 * op never runs past the run's end, however seldom the loop reads it. */
static inline void tsc_spend_until(uint64_t cycles, uint64_t deadline)
{
	uint64_t t0, end;

	if (!cycles)
		return;
	t0 = tsc_read_unordered();
	end = t0 + cycles < deadline ? t0 + cycles : deadline;
	while (tsc_read_unordered() < end)
		;
}

static inline void tsc_spend(uint64_t cycles)
{
	uint64_t t0;

	if (!cycles)
		return;
	t0 = tsc_read_unordered();
	while (tsc_read_unordered() - t0 < cycles)
		;
}

#endif
