/* spinlock_api_smp.h - the lock entry points as a kernel build makes them.
 *
 * The variants, as include/linux/spinlock_api_smp.h composes them (its
 * __raw_spin_lock() ... are __spin_lock() ... here), each entry point that
 * body inline or a direct call of a noinline copy of it (kernel/locking/
 * spinlock.c's _raw_spin_lock() ...) as the build's shape says
 * (kbuild_calls(), from kernel/Kconfig.locks), each copy returning as the
 * build's return says (kernel_build.h). The copies are one per algorithm,
 * checker, debug setting and return, in tables read with constant indices,
 * which the compiler folds to the direct call (tests/test_kernel_build.py
 * reads the built object for it). docs/experiments/locks.md, "Kernel
 * builds", has the Kconfig lines behind each shape and what stays emulated.
 */
#ifndef SMPNET_SPINLOCK_API_SMP_H
#define SMPNET_SPINLOCK_API_SMP_H

/* The code that takes locks includes this file (or spinlock_variant.h),
 * and it the algorithms, through do_raw_spin_lock() (spinlock_debug.h). */
#include "kernel_build.h"
#include "spinlock_debug.h"

/* The entry points, in kernel_build.py's order. */
#define SPIN_ENTRY_TABLE(X)						\
	X(ENTRY_SPIN_LOCK,		"spin_lock")			\
	X(ENTRY_SPIN_UNLOCK,		"spin_unlock")			\
	X(ENTRY_SPIN_LOCK_BH,		"spin_lock_bh")			\
	X(ENTRY_SPIN_LOCK_IRQ,		"spin_lock_irq")		\
	X(ENTRY_SPIN_LOCK_IRQSAVE,	"spin_lock_irqsave")		\
	X(ENTRY_SPIN_UNLOCK_BH,		"spin_unlock_bh")		\
	X(ENTRY_SPIN_UNLOCK_IRQ,	"spin_unlock_irq")		\
	X(ENTRY_SPIN_UNLOCK_IRQRESTORE,	"spin_unlock_irqrestore")

SMP_ENUM(spin_entry, SPIN_ENTRY_TABLE, SPIN_NR_ENTRIES);

/* 1 when `build` makes `entry` an out-of-line call. Kconfig.locks: every
 * INLINE_SPIN_* depends on an ARCH_INLINE_SPIN_* that x86 never selects,
 * but INLINE_SPIN_UNLOCK_IRQ holds without PREEMPTION, and the plain
 * unlock is inline unless UNINLINE_SPIN_UNLOCK (which PREEMPTION and
 * DEBUG_SPINLOCK select): so x86-nopreempt calls all but those two, the
 * other x86 shapes all eight. */
static __always_inline int kbuild_calls(const int build, const int entry)
{
	switch (kbuild_shape(build)) {
	case KSHAPE_INLINE:
		return 0;
	case KSHAPE_X86_NOPREEMPT:
		return entry != ENTRY_SPIN_UNLOCK && entry != ENTRY_SPIN_UNLOCK_IRQ;
	default:
		return 1;
	}
}

/* For Python, which says per build what is a call: 1, 0, or -1 when
 * either is out of range. */
static inline int kbuild_calls_of(int build, int entry)
{
	if (!kbuild_valid(build) || entry < 0 || entry >= SPIN_NR_ENTRIES)
		return -1;
	return kbuild_calls(build, entry);
}

/* ---------------------------------------------------------------- the inline bodies */

static __always_inline int __spin_lock(struct cpu_ctx *c, spinlock_t *l,
				       const int algo, const int check, const int build)
{
	preempt_disable(c);
	return __do_raw_spin_lock(c, l, algo, check, build);
}

static __always_inline void __spin_unlock(struct cpu_ctx *c, spinlock_t *l,
					  const int algo, const int check, const int build)
{
	__do_raw_spin_unlock(c, l, algo, check, build);
	preempt_enable(c);
}

static __always_inline int __spin_lock_bh(struct cpu_ctx *c, spinlock_t *l,
					  const int algo, const int check, const int build)
{
	local_bh_disable(c);
	return __do_raw_spin_lock(c, l, algo, check, build);
}

/* the kernel's __raw_spin_unlock_bh() ends with a call of
 * __local_bh_enable_ip(), out of line in every x86 build (irqflags.h) */
static __always_inline void __spin_unlock_bh(struct cpu_ctx *c, spinlock_t *l,
					     const int algo, const int check, const int build)
{
	__do_raw_spin_unlock(c, l, algo, check, build);
	local_bh_enable_ip(c, check, build);
}

static __always_inline int __spin_lock_irq(struct cpu_ctx *c, spinlock_t *l,
					   const int algo, const int check, const int build)
{
	if (unlikely(check) && irqs_disabled(c))
		lockdep_bug(c, LOCKDEP_LOCK_IRQ_IRQS_OFF, l);
	local_irq_disable(c);
	preempt_disable(c);
	return __do_raw_spin_lock(c, l, algo, check, build);
}

static __always_inline void __spin_unlock_irq(struct cpu_ctx *c, spinlock_t *l,
					      const int algo, const int check, const int build)
{
	__do_raw_spin_unlock(c, l, algo, check, build);
	local_irq_enable(c);
	preempt_enable(c);
}

/* `fl`: the flags register as the save read it (__save_fl()) */
static __always_inline int __spin_lock_irqsave_fl(struct cpu_ctx *c, spinlock_t *l,
						  unsigned long *flags, unsigned long fl,
						  const int algo, const int check, const int build)
{
	*flags = __local_irq_save_fl(c, fl, check);
	preempt_disable(c);
	return __do_raw_spin_lock(c, l, algo, check, build);
}

static __always_inline int __spin_lock_irqsave(struct cpu_ctx *c, spinlock_t *l,
					       unsigned long *flags, const int algo,
					       const int check, const int build)
{
	return __spin_lock_irqsave_fl(c, l, flags, __save_fl(c, check), algo, check, build);
}

/* The control for irqsave against irq (issue #12; time_bench.h): the
 * flags as an empty asm the compiler cannot see through gives them (and
 * that clobbers memory, as the pushf's does), so that a save runs every
 * instruction of spin_lock_irqsave() but the `pushf; pop`. */
static __always_inline unsigned long save_fl_nopushf(void)
{
	unsigned long flags;

	__asm__ __volatile__("" : "=r"(flags) : "0"(X86_EFLAGS_IF | 0x2UL) : "memory");
	return flags;
}

static __always_inline int __spin_lock_irqsave_nopushf(struct cpu_ctx *c, spinlock_t *l,
						       unsigned long *flags, const int algo,
						       const int check, const int build)
{
	return __spin_lock_irqsave_fl(c, l, flags, save_fl_nopushf(), algo, check, build);
}

static __always_inline void __spin_unlock_irqrestore(struct cpu_ctx *c, spinlock_t *l,
						     unsigned long flags, const int algo,
						     const int check, const int popf,
						     const int build)
{
	__do_raw_spin_unlock(c, l, algo, check, build);
	__local_irq_restore(c, flags, check, popf);
	preempt_enable(c);
}

/* ---------------------------------------------------------------- the calls */

/* kernel/locking/spinlock.c's out-of-line entry points (`noinline
 * __lockfunc`), one table: each copy's return type, name, parameters and
 * the inline body it runs. F is one copy's facts, (algo, check, debug,
 * ret): its algorithm, checker, DEBUG_SPINLOCK's or not, and return.
 * irqsave's control (time_bench.h) has copies shaped as irqsave's; the
 * unlock_irqrestore copies are one per restore mode. */
#define LOCKFUNC_TABLE(X, F)								\
	X(F, int, lock, (struct cpu_ctx *c, spinlock_t *l),				\
	  __spin_lock(c, l, LOCKFUNC_ARGS F))						\
	X(F, void, unlock, (struct cpu_ctx *c, spinlock_t *l),				\
	  __spin_unlock(c, l, LOCKFUNC_ARGS F))						\
	X(F, int, lock_bh, (struct cpu_ctx *c, spinlock_t *l),				\
	  __spin_lock_bh(c, l, LOCKFUNC_ARGS F))					\
	X(F, void, unlock_bh, (struct cpu_ctx *c, spinlock_t *l),			\
	  __spin_unlock_bh(c, l, LOCKFUNC_ARGS F))					\
	X(F, int, lock_irq, (struct cpu_ctx *c, spinlock_t *l),				\
	  __spin_lock_irq(c, l, LOCKFUNC_ARGS F))					\
	X(F, void, unlock_irq, (struct cpu_ctx *c, spinlock_t *l),			\
	  __spin_unlock_irq(c, l, LOCKFUNC_ARGS F))					\
	X(F, int, lock_irqsave, (struct cpu_ctx *c, spinlock_t *l, unsigned long *flags),\
	  __spin_lock_irqsave(c, l, flags, LOCKFUNC_ARGS F))				\
	X(F, int, lock_irqsave_nopushf,							\
	  (struct cpu_ctx *c, spinlock_t *l, unsigned long *flags),			\
	  __spin_lock_irqsave_nopushf(c, l, flags, LOCKFUNC_ARGS F))			\
	X(F, void, unlock_irqrestore_sti,						\
	  (struct cpu_ctx *c, spinlock_t *l, unsigned long flags),			\
	  __spin_unlock_irqrestore(c, l, flags, LOCKFUNC_CHECKED F, 0, LOCKFUNC_BUILT F)) \
	X(F, void, unlock_irqrestore_popf,						\
	  (struct cpu_ctx *c, spinlock_t *l, unsigned long flags),			\
	  __spin_unlock_irqrestore(c, l, flags, LOCKFUNC_CHECKED F, 1, LOCKFUNC_BUILT F))

/* A copy's facts, as its body and its name take them: the body is
 * compiled for a build of its debug setting and return (all it reads of
 * its build: the x86 shapes' calls are alike). */
#define LOCKFUNC_BUILD(debug, ret)	KBUILD((debug) ? KSHAPE_X86_DEBUG : KSHAPE_X86_PREEMPT, ret)
#define LOCKFUNC_CHECKED(algo, check, debug, ret)	algo, check
#define LOCKFUNC_BUILT(algo, check, debug, ret)		LOCKFUNC_BUILD(debug, ret)
#define LOCKFUNC_ARGS(algo, check, debug, ret)	algo, check, LOCKFUNC_BUILD(debug, ret)
#define LOCKFUNC_NAME(name, algo, check, debug, ret)					\
	_raw_spin_##name##_##algo##_##check##_##debug##_##ret
#define LOCKFUNC_EXPAND(macro, ...)	macro(__VA_ARGS__)
#define LOCKFUNC_UNPAREN(...)		__VA_ARGS__
#define LOCKFUNC(name, F)	LOCKFUNC_EXPAND(LOCKFUNC_NAME, name, LOCKFUNC_UNPAREN F)
#define LOCKFUNC_VIA(algo, check, debug, ret)	RETURN_VIA_##ret
#define LOCKFUNC_ENTER(algo, check, debug, ret)	RETURN_ENTER_##ret
#define LOCKFUNC_RETURN_int	return
#define LOCKFUNC_RETURN_void

#define LOCKFUNC_FIELD(F, type, name, params, body)	type (*name) params;
#define LOCKFUNC_DEFINE(F, type, name, params, body)					\
	static __attribute__((__noinline__)) LOCKFUNC_VIA F type LOCKFUNC(name, F) params	\
	{										\
		LOCKFUNC_ENTER F;							\
		LOCKFUNC_RETURN_##type body;						\
	}
#define LOCKFUNC_ALGO(algo, check, debug, ret)	algo
#define LOCKFUNC_INIT(F, type, name, params, body)	.name = SPIN_COPY(LOCKFUNC_ALGO F, LOCKFUNC(name, F)),

struct lockfunc_ops {
	LOCKFUNC_TABLE(LOCKFUNC_FIELD, (0, 0, 0, 0))
};

/* checker, debug, return: the inline build has no copies, so only the x86
 * builds' (their debug setting and return) */
#define LOCKFUNC_MODES(X, algo)								\
	X((algo, 0, 0, 0)) X((algo, 0, 1, 0)) X((algo, 1, 0, 0)) X((algo, 1, 1, 0))	\
	X((algo, 0, 0, 1)) X((algo, 0, 1, 1)) X((algo, 1, 0, 1)) X((algo, 1, 1, 1))	\
	X((algo, 0, 0, 2)) X((algo, 0, 1, 2)) X((algo, 1, 0, 2)) X((algo, 1, 1, 2))
#define LOCKFUNC_DEFINE_ALL(F)	LOCKFUNC_TABLE(LOCKFUNC_DEFINE, F)
#define LOCKFUNC_INDEX(algo, check, debug, ret)	[algo][check][debug][ret]
#define LOCKFUNC_ENTRY(F)	LOCKFUNC_INDEX F = { LOCKFUNC_TABLE(LOCKFUNC_INIT, F) },
#define DEFINE_LOCKFUNCS_OF(algo, name)	LOCKFUNC_MODES(LOCKFUNC_DEFINE_ALL, algo)
#define LOCKFUNC_ENTRIES_OF(algo, name)	LOCKFUNC_MODES(LOCKFUNC_ENTRY, algo)

SPIN_ALGO_TABLE(DEFINE_LOCKFUNCS_OF)

static const struct lockfunc_ops lockfunc[SPIN_NR_ALGOS][2][2][KRET_NR] = {
	SPIN_ALGO_TABLE(LOCKFUNC_ENTRIES_OF)
};

/* the copies of `build`: its debug setting, and its return */
#define LOCKFUNC_OF(algo, check, build)							\
	(lockfunc[algo][(check) != 0][kbuild_shape(build) == KSHAPE_X86_DEBUG]		\
		  [kbuild_return(build)])

/* ---------------------------------------------------------------- the entry points */

/* Each: the call where `build` makes one, else the body inline. With
 * constant arguments (the timed loops, a user's object) each folds to one
 * of the two; with run-time ones (the kernel's names below) it tests. */
#define DEFINE_RAW_SPIN(type, name, entry, params, args)				\
	static __always_inline type _raw_spin_##name params				\
	{										\
		if (kbuild_calls(build, entry))						\
			LOCKFUNC_RETURN_##type LOCKFUNC_OF(algo, check, build).name args; \
		else									\
			LOCKFUNC_RETURN_##type __spin_##name(LOCKFUNC_UNPAREN args,	\
							     algo, check, build);	\
	}
#define RAW_SPIN_PARAMS(...)								\
	(struct cpu_ctx *c, spinlock_t *l, ##__VA_ARGS__, const int algo, const int check,	\
	 const int build)

DEFINE_RAW_SPIN(int, lock, ENTRY_SPIN_LOCK, RAW_SPIN_PARAMS(), (c, l))
DEFINE_RAW_SPIN(void, unlock, ENTRY_SPIN_UNLOCK, RAW_SPIN_PARAMS(), (c, l))
DEFINE_RAW_SPIN(int, lock_bh, ENTRY_SPIN_LOCK_BH, RAW_SPIN_PARAMS(), (c, l))
DEFINE_RAW_SPIN(void, unlock_bh, ENTRY_SPIN_UNLOCK_BH, RAW_SPIN_PARAMS(), (c, l))
DEFINE_RAW_SPIN(int, lock_irq, ENTRY_SPIN_LOCK_IRQ, RAW_SPIN_PARAMS(), (c, l))
DEFINE_RAW_SPIN(void, unlock_irq, ENTRY_SPIN_UNLOCK_IRQ, RAW_SPIN_PARAMS(), (c, l))
DEFINE_RAW_SPIN(int, lock_irqsave, ENTRY_SPIN_LOCK_IRQSAVE,
		RAW_SPIN_PARAMS(unsigned long *flags), (c, l, flags))
/* irqsave's control, shaped as spin_lock_irqsave() is in `build` */
DEFINE_RAW_SPIN(int, lock_irqsave_nopushf, ENTRY_SPIN_LOCK_IRQSAVE,
		RAW_SPIN_PARAMS(unsigned long *flags), (c, l, flags))

static __always_inline void _raw_spin_unlock_irqrestore(struct cpu_ctx *c, spinlock_t *l,
							unsigned long flags, const int algo,
							const int check, const int popf,
							const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_UNLOCK_IRQRESTORE))
		(popf ? LOCKFUNC_OF(algo, check, build).unlock_irqrestore_popf
		      : LOCKFUNC_OF(algo, check, build).unlock_irqrestore_sti)(c, l, flags);
	else
		__spin_unlock_irqrestore(c, l, flags, algo, check, popf, build);
}

/* The kernel's names, deciding at run time: the lock's algorithm, the
 * CPU's checker, restore mode and kernel build. */
#define DEFINE_SPIN(type, name, params, args)						\
	static inline type spin_##name params						\
	{										\
		LOCKFUNC_RETURN_##type _raw_spin_##name(LOCKFUNC_UNPAREN args,		\
							spin_algo(c, l), c->check, c->kbuild); \
	}

DEFINE_SPIN(int, lock, (struct cpu_ctx *c, spinlock_t *l), (c, l))
DEFINE_SPIN(void, unlock, (struct cpu_ctx *c, spinlock_t *l), (c, l))
DEFINE_SPIN(int, lock_bh, (struct cpu_ctx *c, spinlock_t *l), (c, l))
DEFINE_SPIN(void, unlock_bh, (struct cpu_ctx *c, spinlock_t *l), (c, l))
DEFINE_SPIN(int, lock_irq, (struct cpu_ctx *c, spinlock_t *l), (c, l))
DEFINE_SPIN(void, unlock_irq, (struct cpu_ctx *c, spinlock_t *l), (c, l))
DEFINE_SPIN(int, lock_irqsave, (struct cpu_ctx *c, spinlock_t *l, unsigned long *flags),
	    (c, l, flags))

static inline void spin_unlock_irqrestore(struct cpu_ctx *c, spinlock_t *l, unsigned long flags)
{
	_raw_spin_unlock_irqrestore(c, l, flags, spin_algo(c, l), c->check, c->popf, c->kbuild);
}

#endif
