/* atomic.h - atomic_t and friends on shared memory, with GCC __atomic builtins.
 *
 * The kernel's x86 atomics are `lock`-prefixed RMWs with full-barrier
 * semantics; __ATOMIC_SEQ_CST RMWs compile to the same instructions
 * (lock xadd, lock cmpxchg, xchg), so cycle costs match.
 */
#ifndef SMPNET_ATOMIC_H
#define SMPNET_ATOMIC_H

#include "compiler.h"

static inline uint32_t atomic_read(const uint32_t *v)
{
	return __atomic_load_n(v, __ATOMIC_ACQUIRE);
}

static inline void atomic_set(uint32_t *v, uint32_t i)
{
	__atomic_store_n(v, i, __ATOMIC_RELEASE);
}

static inline void atomic_inc(uint32_t *v)
{
	__atomic_fetch_add(v, 1, __ATOMIC_SEQ_CST);
}

/* Returns the new value, as atomic_inc_return() does. */
static inline uint32_t atomic_inc_return(uint32_t *v)
{
	return __atomic_add_fetch(v, 1, __ATOMIC_SEQ_CST);
}

static inline uint32_t atomic_dec_return(uint32_t *v)
{
	return __atomic_sub_fetch(v, 1, __ATOMIC_SEQ_CST);
}

static inline uint32_t atomic_xchg(uint32_t *v, uint32_t new)
{
	return __atomic_exchange_n(v, new, __ATOMIC_SEQ_CST);
}

/* Returns the old value, like the kernel's cmpxchg(). */
static inline uint32_t atomic_cmpxchg(uint32_t *v, uint32_t old, uint32_t new)
{
	__atomic_compare_exchange_n(v, &old, new, 0, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	return old;
}

/* atomic_long_t, as the 2025 defer list counts: 64-bit, the same lock xadd */
static inline void atomic_long_set(uint64_t *v, uint64_t i)
{
	__atomic_store_n(v, i, __ATOMIC_RELEASE);
}

static inline uint64_t atomic_long_inc_return(uint64_t *v)
{
	return __atomic_add_fetch(v, 1, __ATOMIC_SEQ_CST);
}

/* this_cpu_cmpxchg(): on x86 a cmpxchg without the lock prefix, which is
 * atomic against this CPU only (the kernel adds a %gs: prefix). */
static inline uint32_t this_cpu_cmpxchg(uint32_t *p, uint32_t old, uint32_t new)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("cmpxchgl %2, %1"
			     : "+a"(old), "+m"(*p) : "r"(new) : "memory", "cc");
	return old;
#else
	uint32_t cur = *p;

	if (cur == old)
		*p = new;
	barrier();
	return cur;
#endif
}

#endif
