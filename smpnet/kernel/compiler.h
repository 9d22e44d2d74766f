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

#endif
