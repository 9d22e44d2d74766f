/* smpnet_bitops.h - bit operations in a user's `ab` file, as
 * arch/x86/include/asm/bitops.h builds them, and include/linux/bits.h's
 * BIT() and GENMASK(); smpnet.h includes it. Docs: docs/experiments/ab.md. */
#ifndef SMPNET_BITOPS_H
#define SMPNET_BITOPS_H

#define BITS_PER_LONG		(__SIZEOF_LONG__ * 8)	/* a number, for #if */
#define BIT(nr)			(1UL << (nr))
#define BIT_ULL(nr)		(1ULL << (nr))
#define BIT_MASK(nr)		(1UL << ((nr) % BITS_PER_LONG))
#define BIT_WORD(nr)		((nr) / BITS_PER_LONG)
#define GENMASK(h, l)		(((~0UL) - (1UL << (l)) + 1) & (~0UL >> (BITS_PER_LONG - 1 - (h))))
#define GENMASK_ULL(h, l)	(((~0ULL) - (1ULL << (l)) + 1) & (~0ULL >> (63 - (h))))

#if defined(__x86_64__)
/* The atomic ones are locked: on a constant bit a byte's `lock orb`,
 * `andb` or `xorb` of its mask (CONST_MASK_ADDR), else `lock bts`, `btr`,
 * `btc` of the bit in the long; test_and_*() a `lock bts`/`btr`/`btc`
 * whose carry is the old bit. The __ ones are the same without the lock. */
#define SMPNET_BYTE_ADDR(nr, addr)	(*(volatile unsigned char *)((char *)(addr) + ((nr) >> 3)))
#define SMPNET_CONST_MASK(nr)		((unsigned char)(1 << ((nr) & 7)))

#define SMPNET_BITOP(name, byteop, bitop, mask)						\
static __always_inline void name(long nr, volatile unsigned long *addr)		\
{											\
	if (__builtin_constant_p(nr))							\
		__asm__ __volatile__("lock " byteop " %b1,%0"				\
				     : "+m"(SMPNET_BYTE_ADDR(nr, addr))			\
				     : "iq"((unsigned char)(mask)) : "memory", "cc");	\
	else										\
		__asm__ __volatile__("lock " bitop " %1,%0"				\
				     : "+m"(*(volatile long *)(addr)) : "Ir"(nr)	\
				     : "memory", "cc");					\
}
SMPNET_BITOP(set_bit, "orb", "btsq", SMPNET_CONST_MASK(nr))
SMPNET_BITOP(clear_bit, "andb", "btrq", ~SMPNET_CONST_MASK(nr))
SMPNET_BITOP(change_bit, "xorb", "btcq", SMPNET_CONST_MASK(nr))

#define SMPNET_TEST_AND(name, lock, op)							\
static __always_inline bool name(long nr, volatile unsigned long *addr)		\
{											\
	bool old;									\
	__asm__ __volatile__(lock op " %2,%1"						\
			     : "=@ccc"(old), "+m"(*(volatile long *)(addr))		\
			     : "Ir"(nr) : "memory");					\
	return old;									\
}
SMPNET_TEST_AND(test_and_set_bit, "lock ", "btsq")
SMPNET_TEST_AND(test_and_clear_bit, "lock ", "btrq")
SMPNET_TEST_AND(test_and_change_bit, "lock ", "btcq")
SMPNET_TEST_AND(__test_and_set_bit, "", "btsq")
SMPNET_TEST_AND(__test_and_clear_bit, "", "btrq")
SMPNET_TEST_AND(__test_and_change_bit, "", "btcq")

#define SMPNET_NONATOMIC(name, op)							\
static __always_inline void name(long nr, volatile unsigned long *addr)		\
{											\
	__asm__ __volatile__(op " %1,%0" : "+m"(*(volatile long *)(addr))		\
			     : "Ir"(nr) : "memory", "cc");				\
}
SMPNET_NONATOMIC(__set_bit, "btsq")
SMPNET_NONATOMIC(__clear_bit, "btrq")
SMPNET_NONATOMIC(__change_bit, "btcq")
#else	/* the same ops as the compiler's atomics */
#define SMPNET_MASK_(nr)	(1UL << ((nr) & (BITS_PER_LONG - 1)))
#define SMPNET_WORD_(nr, addr)	((unsigned long *)&(addr)[BIT_WORD(nr)])
static inline void set_bit(long nr, volatile unsigned long *addr)
{ __atomic_fetch_or(SMPNET_WORD_(nr, addr), SMPNET_MASK_(nr), __ATOMIC_SEQ_CST); }
static inline void clear_bit(long nr, volatile unsigned long *addr)
{ __atomic_fetch_and(SMPNET_WORD_(nr, addr), ~SMPNET_MASK_(nr), __ATOMIC_SEQ_CST); }
static inline void change_bit(long nr, volatile unsigned long *addr)
{ __atomic_fetch_xor(SMPNET_WORD_(nr, addr), SMPNET_MASK_(nr), __ATOMIC_SEQ_CST); }
static inline bool test_and_set_bit(long nr, volatile unsigned long *addr)
{ return __atomic_fetch_or(SMPNET_WORD_(nr, addr), SMPNET_MASK_(nr), __ATOMIC_SEQ_CST) & SMPNET_MASK_(nr); }
static inline bool test_and_clear_bit(long nr, volatile unsigned long *addr)
{ return __atomic_fetch_and(SMPNET_WORD_(nr, addr), ~SMPNET_MASK_(nr), __ATOMIC_SEQ_CST) & SMPNET_MASK_(nr); }
static inline bool test_and_change_bit(long nr, volatile unsigned long *addr)
{ return __atomic_fetch_xor(SMPNET_WORD_(nr, addr), SMPNET_MASK_(nr), __ATOMIC_SEQ_CST) & SMPNET_MASK_(nr); }
static inline void __set_bit(long nr, volatile unsigned long *addr) { *SMPNET_WORD_(nr, addr) |= SMPNET_MASK_(nr); }
static inline void __clear_bit(long nr, volatile unsigned long *addr) { *SMPNET_WORD_(nr, addr) &= ~SMPNET_MASK_(nr); }
static inline void __change_bit(long nr, volatile unsigned long *addr) { *SMPNET_WORD_(nr, addr) ^= SMPNET_MASK_(nr); }
static inline bool __test_and_set_bit(long nr, volatile unsigned long *addr)
{ bool old = *SMPNET_WORD_(nr, addr) & SMPNET_MASK_(nr); __set_bit(nr, addr); return old; }
static inline bool __test_and_clear_bit(long nr, volatile unsigned long *addr)
{ bool old = *SMPNET_WORD_(nr, addr) & SMPNET_MASK_(nr); __clear_bit(nr, addr); return old; }
static inline bool __test_and_change_bit(long nr, volatile unsigned long *addr)
{ bool old = *SMPNET_WORD_(nr, addr) & SMPNET_MASK_(nr); __change_bit(nr, addr); return old; }
#endif

/* test_bit(): a constant bit a plain read of its word (constant_test_bit()),
 * a variable one x86's `bt` of the bit string (variable_test_bit()) */
static __always_inline bool test_bit(long nr, const volatile unsigned long *addr)
{
#if defined(__x86_64__)
	bool old;

	if (!__builtin_constant_p(nr)) {
		__asm__ __volatile__("btq %2,%1" : "=@ccc"(old)
				     : "m"(*(const unsigned long *)addr), "Ir"(nr) : "memory");
		return old;
	}
#endif
	return 1UL & (addr[BIT_WORD(nr)] >> (nr & (BITS_PER_LONG - 1)));
}

/* the lock forms: x86's locked ops order already; the unlocks a compiler
 * barrier before the clear (asm/bitops.h's arch_clear_bit_unlock()) */
#define test_and_set_bit_lock(nr, addr)	test_and_set_bit(nr, addr)
#define clear_bit_unlock(nr, addr)	do { barrier(); clear_bit(nr, addr); } while (0)
#define __clear_bit_unlock(nr, addr)	do { barrier(); __clear_bit(nr, addr); } while (0)

#endif
