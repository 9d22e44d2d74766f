/* compiler.h - the few compiler and CPU primitives every other header needs.
 *
 * Named after include/linux/compiler.h and asm/processor.h so a reader of the
 * kernel finds them: barrier(), READ_ONCE/WRITE_ONCE, cpu_relax().
 */
#ifndef SMPNET_COMPILER_H
#define SMPNET_COMPILER_H

#include <stdint.h>
#include <stddef.h>

#define SMP_CACHE_BYTES 64

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* A compiler barrier: keeps the measured op inside the timed loop and
 * stops GCC from hoisting or merging loads across it. Emits no instruction. */
#define barrier() __asm__ __volatile__("" ::: "memory")

/* BUG(): a state no caller can reach (every value that selects a path is
 * checked where it enters from Python). Stop here, as the kernel's BUG()
 * does, rather than carry on down a path chosen by default.
 * BUG_UNLESS(x): the same as a test, for the last case of a hot switch
 * written as its default: the other cases compile as they did without it,
 * the test costs only the path it guards. */
#define BUG() __builtin_trap()
#define BUG_UNLESS(x) do { if (unlikely(!(x))) BUG(); } while (0)

/* Inlined whatever the size: an op written once with `const int` mode
 * arguments (the lock algorithm, the checker, popf) and called with
 * constants must be inlined for -O2 to fold those arguments away, which
 * is how each time_bench loop gets its own code (time_bench.h). glibc's
 * <sys/cdefs.h> defines the same. */
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* One table per list: a list written once as
 *	#define FOO_TABLE(X) X(FOO_A, "a") X(FOO_B, "b")
 * and declared with SMP_ENUM(foo, FOO_TABLE, NR_FOOS) gives enum foo
 * (FOO_A = 0, FOO_B, then NR_FOOS, the count that range checks use) and
 * foo_names[], the names Python offers as choices: in step by construction. */
#define SMP_ENUM_ID(id, name)	id,
#define SMP_ENUM_NAME(id, name)	name,
#define SMP_ENUM(type, table, nr)				\
	enum type { table(SMP_ENUM_ID) nr };			\
	static const char *const type##_names[nr] = { table(SMP_ENUM_NAME) }

/* Single-copy-atomic access to shared memory, as the kernel's are. */
#define READ_ONCE(x)     __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* The spin-wait hint: `pause` on x86 (what the kernel's cpu_relax() is),
 * `yield` on arm64. Every spin loop in smpnet calls it. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	barrier();
#endif
}

/* prefetchw(): fetch a line for writing, as the kernel's on x86: its
 * alternative picks `prefetchw` on X86_FEATURE_3DNOWPREFETCH (every AMD
 * x86-64, Intel since Broadwell), `prefetcht0` without it; older Intel CPUs
 * run the `prefetchw` opcode as a NOP, so it stands for both here. */
static inline void prefetchw(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("prefetchw %0" :: "m" (*(const char *)p));
#else
	__builtin_prefetch(p, 1);
#endif
}

#endif
