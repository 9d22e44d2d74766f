/* smpnet_percpu.h - per-CPU data in a user's `ab` file as the kernel declares
 * it (include/linux/percpu-defs.h, percpu.h, mm/percpu.c), smpnet.h includes
 * it: the section, each worker's mapping of its CPU's copy, and the API.
 * Docs: docs/experiments/ab.md. */
#ifndef SMPNET_PERCPU_DATA_H
#define SMPNET_PERCPU_DATA_H

/* The kernel's per-CPU variables (include/linux/percpu-defs.h): DEFINE_PER_CPU
 * puts one in the object's per-CPU section (smpnet_percpu.ld: whole pages of
 * its own), the template, as the kernel's .data..percpu is; alloc_percpu()
 * takes room in the section's reserve. Every CPU of every variant's state
 * has a copy of the section in the segment (at one address in every
 * worker), and the process running a CPU maps that CPU's copy over the
 * template too (below): %gs's base is 0, so this_cpu_*() are the kernel's
 * %gs-relative instructions on this CPU's copy; this_cpu_off is, as the
 * kernel's, the offset from the template to the copy in the segment, so a
 * this_cpu_ptr() handed to another CPU reaches this CPU's copy there too
 * (an MCS node queued behind another's). docs/experiments/ab.md. */
extern char __smpnet_percpu_start[] __attribute__((visibility("hidden")));
extern char __smpnet_percpu_end[] __attribute__((visibility("hidden")));
#define SMPNET_PERCPU_SECTION	__attribute__((section("smpnet_percpu")))

size_t smpnet_percpu_area_size(void) { return __smpnet_percpu_end - __smpnet_percpu_start; }
const void *smpnet_percpu_template(void) { return __smpnet_percpu_start; }

/* this process's copy mapped over the template, and its CPU's area */
static char *smpnet_percpu_mapped;

/* CPU `cpu`'s copy of the section, of the state copy `e` runs on */
static __always_inline char *smpnet_percpu_area(const struct smpnet_env *e, int cpu)
{
	return e->pcpu_area + (size_t)cpu * e->pcpu_area_stride;
}

/* per_cpu_offset(cpu): from the template to CPU cpu's copy in the segment
 * (the kernel's __per_cpu_offset[]) */
static __always_inline unsigned long smpnet_per_cpu_offset(const struct smpnet_env *e, int cpu)
{
	return (unsigned long)smpnet_percpu_area(e, cpu) - (unsigned long)__smpnet_percpu_start;
}

/* DEFINE_PER_CPU_CACHE_HOT(unsigned long, this_cpu_off), as arch/x86 has
 * it: first in the section (smpnet_percpu.ld) */
static unsigned long this_cpu_off __attribute__((section("smpnet_percpu..first"), unused));

/* Map this CPU's copy of the section (in the shared segment) over the
 * template: mremap() of a shared mapping with an old size of 0 makes a
 * second mapping of the same pages, here at the template's address. Once
 * per process and copy, outside any timing. The template's own first
 * contents were copied to every CPU's copy before the inits ran. */
static inline void smpnet_percpu_map(const struct smpnet_env *e)
{
	size_t size = smpnet_percpu_area_size();
	char *area;

	area = smpnet_percpu_area(e, e->cpu);
	if (area == smpnet_percpu_mapped)
		return;
	/* this CPU's offset to its copy, in its this_cpu_off, as the kernel's
	 * (arch/x86/kernel/setup_percpu.c, setup_per_cpu_areas()); %gs's base
	 * stays 0, as glibc leaves it (made sure of): a user address may not
	 * lie below the template, and the kernel refuses a base past user space */
	*(unsigned long *)(area + ((char *)&this_cpu_off - __smpnet_percpu_start)) =
		smpnet_per_cpu_offset(e, e->cpu);
#if defined(__x86_64__)
	if (!smpnet_percpu_mapped) {
		unsigned long gs = 0;

		if (syscall(SYS_arch_prctl, 0x1004 /* ARCH_GET_GS */, &gs) != 0 || gs != 0)
			syscall(SYS_arch_prctl, 0x1001 /* ARCH_SET_GS */, 0UL);
	}
#endif
	if ((void *)syscall(SYS_mremap, area, 0UL, size, 1UL | 2UL /* MAYMOVE | FIXED */,
			    __smpnet_percpu_start) != (void *)__smpnet_percpu_start)
		abort();	/* a worker without its per-CPU data: ends the run, naming its CPU */
	/* the new mapping's page tables, filled now: not a fault in the timed loop
	 * (MADV_POPULATE_WRITE, Linux 5.14 on; before it, a read of each page) */
	if (syscall(SYS_madvise, __smpnet_percpu_start, size, 23 /* MADV_POPULATE_WRITE */) != 0)
		for (size_t at = 0; at < size; at += 4096)
			(void)READ_ONCE(__smpnet_percpu_start[at]);
	smpnet_percpu_mapped = area;
}

/* ---------------------------------------------------------------- the API */

#define DEFINE_PER_CPU(type, name)		SMPNET_PERCPU_SECTION __typeof__(type) name
#define DECLARE_PER_CPU(type, name)		extern __typeof__(type) name
#define DEFINE_PER_CPU_ALIGNED(type, name)	DEFINE_PER_CPU(type, name) ____cacheline_aligned
#define DEFINE_PER_CPU_SHARED_ALIGNED(type, name) DEFINE_PER_CPU_ALIGNED(type, name)
#define DEFINE_PER_CPU_READ_MOSTLY(type, name)	DEFINE_PER_CPU(type, name)
#define DECLARE_PER_CPU_ALIGNED(type, name)	DECLARE_PER_CPU(type, name)
#define DECLARE_PER_CPU_SHARED_ALIGNED(type, name) DECLARE_PER_CPU(type, name)

#define per_cpu_offset(cpu)	smpnet_per_cpu_offset(smpnet_env, (cpu))
#define per_cpu_ptr(ptr, cpu)	((__typeof__(ptr))((unsigned long)(ptr) + per_cpu_offset(cpu)))
/* per_cpu(var, cpu): the kernel's; per_cpu(cpu): CPU cpu's SMPNET_STATE copy */
#define SMPNET_PICK_2(_1, _2, name, ...)	name
#define per_cpu(...)	SMPNET_PICK_2(__VA_ARGS__, SMPNET_PER_CPU_VAR, SMPNET_PER_CPU_STATE, )(__VA_ARGS__)
#define SMPNET_PER_CPU_VAR(var, cpu)	(*per_cpu_ptr(&(var), (cpu)))
#define SMPNET_PER_CPU_STATE(cpu)	smpnet_per_cpu(smpnet_env, (cpu))

/* this_cpu_ptr(): the kernel's x86 arch_raw_cpu_ptr(), the pointer plus this
 * CPU's this_cpu_off read %gs-relative */
#define this_cpu_ptr(ptr)	((__typeof__(ptr))((unsigned long)(ptr) + this_cpu_read(this_cpu_off)))
#define raw_cpu_ptr(ptr)	this_cpu_ptr(ptr)
#define get_cpu_ptr(ptr)	({ preempt_disable(); this_cpu_ptr(ptr); })
#define put_cpu_ptr(ptr)	do { (void)(ptr); preempt_enable(); } while (0)

/* alloc_percpu() (mm/percpu.c): room for `size` bytes in every CPU's copy,
 * zeroed, from the section's reserve (SMPNET_PERCPU_RESERVE bytes a CPU),
 * the first chunk's dynamic area after the static variables (smpnet_percpu.ld);
 * NULL once it is spent. In an SMPNET_INIT: each variant's init starts the
 * reserve afresh on its own copies; an alignment of a power of 2 up to a
 * page, of the address (the copies lie at the template's page offsets).
 * free_percpu() gives nothing back. */
#ifndef SMPNET_PERCPU_RESERVE
#define SMPNET_PERCPU_RESERVE	(8 << 10)
#endif
static char smpnet_percpu_reserve[SMPNET_PERCPU_RESERVE]
	__attribute__((section("smpnet_percpu..dynamic"), aligned(SMP_CACHE_BYTES), unused));
static size_t smpnet_percpu_reserved __attribute__((unused));
static inline void *__alloc_percpu(size_t size, size_t align)
{
	unsigned long base = (unsigned long)smpnet_percpu_reserve;
	size_t at;

	if (align < 4)		/* mm/percpu.c's PCPU_MIN_ALLOC_SIZE */
		align = 4;
	if (!size || align > 4096 || (align & (align - 1)))	/* its refusals */
		return NULL;
	at = ((base + smpnet_percpu_reserved + align - 1) & ~(align - 1)) - base;
	if (at + size > sizeof(smpnet_percpu_reserve))
		return NULL;
	smpnet_percpu_reserved = at + size;
	return smpnet_percpu_reserve + at;
}
#define __alloc_percpu_gfp(size, align, gfp)	__alloc_percpu(size, align)
#define alloc_percpu(type)	((__typeof__(type) *)__alloc_percpu(sizeof(type), __alignof__(type)))
#define alloc_percpu_gfp(type, gfp)	alloc_percpu(type)
#define free_percpu(ptr)	((void)(ptr))
#define GFP_KERNEL		0
#define GFP_ATOMIC		0

#define nr_cpu_ids		nr_cpus
#define num_possible_cpus()	nr_cpus
#define num_online_cpus()	nr_cpus
#define num_present_cpus()	nr_cpus
#define for_each_possible_cpu(cpu)	for ((cpu) = 0; (cpu) < nr_cpus; (cpu)++)
#define for_each_online_cpu(cpu)	for_each_possible_cpu(cpu)
#define for_each_present_cpu(cpu)	for_each_possible_cpu(cpu)

#endif
