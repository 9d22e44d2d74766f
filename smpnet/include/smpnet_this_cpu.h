/* smpnet_this_cpu.h - the kernel's this_cpu_*() ops on this CPU's copy of a
 * per-CPU variable, for a user's `ab` file (smpnet.h includes it), each the
 * one unlocked, %gs-relative instruction arch/x86/include/asm/percpu.h makes
 * it, on a variable of 1, 2, 4 or 8 bytes (16 for the cmpxchg128). Docs:
 * docs/experiments/ab.md.
 *
 * %gs's base is 0 in a worker, and this CPU's copy of the file's per-CPU
 * section is mapped at the section's own address (smpnet.h): so a
 * DEFINE_PER_CPU variable, an alloc_percpu() pointer and the `this_cpu->x`
 * form all reach this CPU's copy through the same %gs-prefixed instruction,
 * safe against this CPU's own interrupts, not against another CPU. Each is
 * asm, so the compiler neither merges nor hoists it.
 */
#ifndef SMPNET_THIS_CPU_H
#define SMPNET_THIS_CPU_H

#if defined(__x86_64__) || defined(__i386__)
/* percpu_to_op(): add, and, or of the operand's size (%z: its suffix), of a
 * register or an immediate; percpu_add_op(): inc and dec for a constant 1
 * and -1 of the variable's type, as the kernel's */
#define smpnet_pcpu_op(insn, var, val)							\
	__asm__ __volatile__(insn "%z0 %1, %%gs:%0" : "+m"(var) : "qe"((__typeof__(var))(val)) \
			     : "cc")
#define smpnet_pcpu_unary(insn, var)							\
	__asm__ __volatile__(insn "%z0 %%gs:%0" : "+m"(var) : : "cc")
#define smpnet_pcpu_add(var, val)							\
	do {										\
		if (__builtin_constant_p(val) && (__typeof__(var))(val) == 1)		\
			smpnet_pcpu_unary("inc", var);					\
		else if (__builtin_constant_p(val) &&					\
			 (__typeof__(var))(val) == (__typeof__(var))-1)			\
			smpnet_pcpu_unary("dec", var);					\
		else									\
			smpnet_pcpu_op("add", var, val);				\
	} while (0)
/* percpu_add_return_op(): xadd, and the sum */
#define this_cpu_add_return(var, val)							\
	({ __typeof__(var) __add = (val), __old = __add;				\
	   __asm__ __volatile__("xadd %0, %%gs:%1" : "+q"(__old), "+m"(var) : : "cc");	\
	   (__typeof__(var))(__old + __add); })
/* percpu_try_cmpxchg_op(): cmpxchg, ZF the answer; *oval updated on a miss */
#define this_cpu_try_cmpxchg(var, ovalp, nval)						\
	({ __typeof__(var) *__po = (ovalp), __old = *__po, __new = (nval);		\
	   bool __ok;									\
	   __asm__ __volatile__("cmpxchg %3, %%gs:%1"					\
				: "=@ccz"(__ok), "+m"(var), "+a"(__old)			\
				: "q"(__new) : "memory");				\
	   if (!__ok)									\
		   *__po = __old;							\
	   __ok; })
#else
#define smpnet_pcpu_op(insn, var, val)							\
	do { __typeof__(var) __v = (val);						\
	     WRITE_ONCE(var, smpnet_pcpu_apply_##insn(READ_ONCE(var), __v)); barrier(); } while (0)
#define smpnet_pcpu_add(var, val)	smpnet_pcpu_op(add, var, val)
#define smpnet_pcpu_apply_add(a, b)	((a) + (b))
#define smpnet_pcpu_apply_and(a, b)	((a) & (b))
#define smpnet_pcpu_apply_or(a, b)	((a) | (b))
#define this_cpu_add_return(var, val)							\
	({ __typeof__(var) __r = READ_ONCE(var) + (val); WRITE_ONCE(var, __r); barrier(); __r; })
#define this_cpu_try_cmpxchg(var, ovalp, nval)						\
	({ __typeof__(var) *__po = (ovalp), __cur = READ_ONCE(var);			\
	   bool __ok = __cur == *__po;							\
	   if (__ok) WRITE_ONCE(var, (nval)); else *__po = __cur;			\
	   barrier(); __ok; })
#endif

#define this_cpu_add(var, val)		smpnet_pcpu_add(var, val)
#define this_cpu_sub(var, val)		this_cpu_add(var, -(__typeof__(var))(val))
#define this_cpu_inc(var)		this_cpu_add(var, 1)
#define this_cpu_dec(var)		this_cpu_add(var, -1)
#define this_cpu_and(var, val)		smpnet_pcpu_op("and", var, val)
#define this_cpu_or(var, val)		smpnet_pcpu_op("or", var, val)
#if defined(__x86_64__) || defined(__i386__)
/* percpu_from_op()/percpu_to_op()'s mov */
#define this_cpu_read(var)								\
	({ __typeof__(var) __r;								\
	   __asm__ __volatile__("mov %%gs:%1, %0" : "=q"(__r) : "m"(var));		\
	   __r; })
#define this_cpu_write(var, val)							\
	__asm__ __volatile__("mov%z0 %1, %%gs:%0" : "=m"(var) : "qe"((__typeof__(var))(val)))
#else
#define this_cpu_read(var)		READ_ONCE(var)
#define this_cpu_write(var, val)	WRITE_ONCE(var, val)
#endif
#define this_cpu_sub_return(var, val)	this_cpu_add_return(var, -(__typeof__(var))(val))
#define this_cpu_inc_return(var)	this_cpu_add_return(var, 1)
#define this_cpu_dec_return(var)	this_cpu_add_return(var, -1)
/* percpu_cmpxchg_op(): the old value */
#define this_cpu_cmpxchg(var, oval, nval)						\
	({ __typeof__(var) __o = (oval); this_cpu_try_cmpxchg(var, &__o, nval); __o; })
/* percpu_xchg_op(): a cmpxchg loop, since xchg with memory locks the bus */
#define this_cpu_xchg(var, nval)							\
	({ __typeof__(var) __x = READ_ONCE(var), __n = (nval);				\
	   while (!this_cpu_try_cmpxchg(var, &__x, __n))				\
		   ;									\
	   __x; })

#if defined(__x86_64__)
/* percpu_cmpxchg128_op(): cmpxchg16b without a lock prefix, on a 16-byte
 * aligned u128 (every x86-64 CPU smpnet runs on has CX16) */
typedef unsigned __int128 u128;
#define this_cpu_try_cmpxchg128(var, ovalp, nval)					\
	({ u128 *__po = (ovalp), __n = (nval);						\
	   u64 __lo = (u64)*__po, __hi = (u64)(*__po >> 64);				\
	   bool __ok;									\
	   _Static_assert(sizeof(var) == 16, "this_cpu_cmpxchg128 takes a u128");	\
	   __asm__ __volatile__("cmpxchg16b %%gs:%1"						\
				: "=@ccz"(__ok), "+m"(var), "+a"(__lo), "+d"(__hi)	\
				: "b"((u64)__n), "c"((u64)(__n >> 64)) : "memory");	\
	   if (!__ok)									\
		   *__po = ((u128)__hi << 64) | __lo;					\
	   __ok; })
#define this_cpu_cmpxchg128(var, oval, nval)						\
	({ u128 __o = (oval); this_cpu_try_cmpxchg128(var, &__o, nval); __o; })
#endif

/* The kernel's __this_cpu_*() (preemption already off) and raw_cpu_*()
 * (no checks): on x86 the same instructions */
#define __this_cpu_add(var, val)	this_cpu_add(var, val)
#define __this_cpu_sub(var, val)	this_cpu_sub(var, val)
#define __this_cpu_inc(var)		this_cpu_inc(var)
#define __this_cpu_dec(var)		this_cpu_dec(var)
#define __this_cpu_and(var, val)	this_cpu_and(var, val)
#define __this_cpu_or(var, val)		this_cpu_or(var, val)
#define __this_cpu_read(var)		this_cpu_read(var)
#define __this_cpu_write(var, val)	this_cpu_write(var, val)
#define __this_cpu_add_return(var, val)	this_cpu_add_return(var, val)
#define __this_cpu_inc_return(var)	this_cpu_inc_return(var)
#define __this_cpu_dec_return(var)	this_cpu_dec_return(var)
#define __this_cpu_xchg(var, nval)	this_cpu_xchg(var, nval)
#define __this_cpu_cmpxchg(var, o, n)	this_cpu_cmpxchg(var, o, n)
#define raw_cpu_add(var, val)		this_cpu_add(var, val)
#define raw_cpu_sub(var, val)		this_cpu_sub(var, val)
#define raw_cpu_inc(var)		this_cpu_inc(var)
#define raw_cpu_dec(var)		this_cpu_dec(var)
#define raw_cpu_read(var)		this_cpu_read(var)
#define raw_cpu_write(var, val)		this_cpu_write(var, val)
#define raw_cpu_add_return(var, val)	this_cpu_add_return(var, val)
#define raw_cpu_xchg(var, nval)		this_cpu_xchg(var, nval)
#define raw_cpu_cmpxchg(var, o, n)	this_cpu_cmpxchg(var, o, n)
#define raw_cpu_try_cmpxchg(var, po, n)	this_cpu_try_cmpxchg(var, po, n)

#endif
