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

/* The lock algorithms (the kernel's spinlock.h includes its
 * spinlock_api_smp.h; here the entry points include the algorithms, so
 * the code that takes locks includes this file). */
#include "kernel_build.h"
#include "spinlock.h"

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

/* ---------------------------------------------------------------- do_raw_spin_lock */

static __always_inline int __do_raw_spin_lock_nodebug(struct cpu_ctx *c, spinlock_t *l,
						      const int algo, const int check)
{
	struct lock_info *li = NULL;
	int rc;

	if (unlikely(check))
		li = lockdep_acquire(c, l, algo);
	rc = __arch_spin_lock(c, l, algo);
	if (unlikely(check) && rc == 0)
		WRITE_ONCE(li->owner, (uint32_t)c->cpu + 1);
	return rc;
}

static __always_inline void __do_raw_spin_unlock_nodebug(struct cpu_ctx *c, spinlock_t *l,
							 const int algo, const int check)
{
	if (unlikely(check))
		WRITE_ONCE(spin_lock_info(c, l)->owner, 0);
	__arch_spin_unlock(c, l, algo);
}

/* DEBUG_SPINLOCK's do_raw_spin_lock()/unlock() (spinlock_debug.c): the
 * checks before and the owner recorded after. The kernel keeps magic,
 * owner and owner_cpu in the lock; smpnet keeps its locks the kernel's 4
 * bytes (spinlock_types.h) and uses the lock's side-table entry, found
 * through the CPU's last one (spin_lock_info(): one load and compare,
 * which stands in for the magic test), whose owner is the CPU + 1. A
 * failed check is a spin_bug report, as spin_dump() is; a recursion also
 * stops the run (the acquire would spin forever). */
static __always_inline int __do_raw_spin_lock_debug(struct cpu_ctx *c, spinlock_t *l,
						    const int algo, const int check)
{
	struct lock_info *li = spin_lock_info(c, l);
	int rc;

	if (unlikely(READ_ONCE(li->owner) == (uint32_t)c->cpu + 1)) {	/* "recursion" */
		lockdep_bug(c, LOCKDEP_SPIN_BUG, l);
		atomic_set(&c->hdr->stop, 1);
		return -1;
	}
	rc = __do_raw_spin_lock_nodebug(c, l, algo, check);
	if (likely(rc == 0))
		WRITE_ONCE(li->owner, (uint32_t)c->cpu + 1);
	return rc;
}

static __always_inline void __do_raw_spin_unlock_debug(struct cpu_ctx *c, spinlock_t *l,
						       const int algo, const int check)
{
	struct lock_info *li = spin_lock_info(c, l);

	if (unlikely(READ_ONCE(li->owner) != (uint32_t)c->cpu + 1))	/* "wrong owner" */
		lockdep_bug(c, LOCKDEP_SPIN_BUG, l);
	WRITE_ONCE(li->owner, 0);
	__do_raw_spin_unlock_nodebug(c, l, algo, check);
}

/* The out-of-line copies, one per algorithm, checker and return, in a
 * table the inline bodies read with constant indices (a direct call). */
struct raw_spin_debug_ops {
	int (*lock)(struct cpu_ctx *c, spinlock_t *l);
	void (*unlock)(struct cpu_ctx *c, spinlock_t *l);
};

#define DEFINE_DO_RAW_SPIN_DEBUG(algo, check, t)					\
	static __attribute__((noinline)) RETURN_VIA_##t int				\
	do_raw_spin_lock_##algo##_##check##_##t(struct cpu_ctx *c, spinlock_t *l)	\
	{										\
		RETURN_ENTER_##t;							\
		return __do_raw_spin_lock_debug(c, l, algo, check);			\
	}										\
	static __attribute__((noinline)) RETURN_VIA_##t void				\
	do_raw_spin_unlock_##algo##_##check##_##t(struct cpu_ctx *c, spinlock_t *l)	\
	{										\
		RETURN_ENTER_##t;							\
		__do_raw_spin_unlock_debug(c, l, algo, check);				\
	}
#define DO_RAW_SPIN_DEBUG_ENTRY(algo, check, t)						\
	[algo][check][t] = { do_raw_spin_lock_##algo##_##check##_##t,			\
			     do_raw_spin_unlock_##algo##_##check##_##t },
#define DO_RAW_SPIN_DEBUG_OF(X, algo)							\
	X(algo, 0, 0) X(algo, 1, 0) X(algo, 0, 1) X(algo, 1, 1) X(algo, 0, 2) X(algo, 1, 2)
#define DEFINE_DO_RAW_SPIN_DEBUG_OF(algo, name)	DO_RAW_SPIN_DEBUG_OF(DEFINE_DO_RAW_SPIN_DEBUG, algo)
#define DO_RAW_SPIN_DEBUG_ENTRIES_OF(algo, name) DO_RAW_SPIN_DEBUG_OF(DO_RAW_SPIN_DEBUG_ENTRY, algo)

SPIN_ALGO_TABLE(DEFINE_DO_RAW_SPIN_DEBUG_OF)

static const struct raw_spin_debug_ops do_raw_spin_debug[SPIN_NR_ALGOS][2][KRET_NR] = {
	SPIN_ALGO_TABLE(DO_RAW_SPIN_DEBUG_ENTRIES_OF)
};

/* `build`: the kernel build the body is compiled for. DEBUG_SPINLOCK's
 * (x86-debug's) do_raw_spin_lock() is out of line, returning as the
 * build's copies do; every other build's is inline. */
static __always_inline int __do_raw_spin_lock(struct cpu_ctx *c, spinlock_t *l,
					      const int algo, const int check, const int build)
{
	if (kbuild_shape(build) == KSHAPE_X86_DEBUG)
		return do_raw_spin_debug[algo][check != 0][kbuild_return(build)].lock(c, l);
	return __do_raw_spin_lock_nodebug(c, l, algo, check);
}

static __always_inline void __do_raw_spin_unlock(struct cpu_ctx *c, spinlock_t *l,
						 const int algo, const int check, const int build)
{
	if (kbuild_shape(build) == KSHAPE_X86_DEBUG)
		do_raw_spin_debug[algo][check != 0][kbuild_return(build)].unlock(c, l);
	else
		__do_raw_spin_unlock_nodebug(c, l, algo, check);
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
 * __lockfunc`), one set per algorithm, checker, debug setting and return. */
struct lockfunc_ops {
	int (*lock)(struct cpu_ctx *c, spinlock_t *l);
	void (*unlock)(struct cpu_ctx *c, spinlock_t *l);
	int (*lock_bh)(struct cpu_ctx *c, spinlock_t *l);
	void (*unlock_bh)(struct cpu_ctx *c, spinlock_t *l);
	int (*lock_irq)(struct cpu_ctx *c, spinlock_t *l);
	void (*unlock_irq)(struct cpu_ctx *c, spinlock_t *l);
	int (*lock_irqsave)(struct cpu_ctx *c, spinlock_t *l, unsigned long *flags);
	int (*lock_irqsave_nopushf)(struct cpu_ctx *c, spinlock_t *l, unsigned long *flags);
	void (*unlock_irqrestore[2])(struct cpu_ctx *c, spinlock_t *l, unsigned long flags);
};

/* One copy: `d` 1 for DEBUG_SPINLOCK's, `t` 1 when it returns through the
 * thunk. Its body is compiled for a build of that debug setting and return
 * (all the body reads of its build: the x86 builds' calls are alike). */
#define LOCKFUNC(name, a, k, d, t)	_raw_spin_##name##_##a##_##k##_##d##_##t
#define LOCKFUNC_BUILD(d, t)	KBUILD((d) ? KSHAPE_X86_DEBUG : KSHAPE_X86_PREEMPT, t)
#define DEFINE_LOCKFUNC_1(ret, name, args, body, a, k, d, t)				\
	static __attribute__((noinline)) RETURN_VIA_##t ret				\
	LOCKFUNC(name, a, k, d, t) args { RETURN_ENTER_##t; body; }
#define DEFINE_LOCKFUNC(a, k, d, t)							\
	DEFINE_LOCKFUNC_1(int, lock, (struct cpu_ctx *c, spinlock_t *l),		\
		return __spin_lock(c, l, a, k, LOCKFUNC_BUILD(d, t)), a, k, d, t)	\
	DEFINE_LOCKFUNC_1(void, unlock, (struct cpu_ctx *c, spinlock_t *l),		\
		__spin_unlock(c, l, a, k, LOCKFUNC_BUILD(d, t)), a, k, d, t)		\
	DEFINE_LOCKFUNC_1(int, lock_bh, (struct cpu_ctx *c, spinlock_t *l),		\
		return __spin_lock_bh(c, l, a, k, LOCKFUNC_BUILD(d, t)), a, k, d, t)	\
	DEFINE_LOCKFUNC_1(void, unlock_bh, (struct cpu_ctx *c, spinlock_t *l),		\
		__spin_unlock_bh(c, l, a, k, LOCKFUNC_BUILD(d, t)), a, k, d, t)		\
	DEFINE_LOCKFUNC_1(int, lock_irq, (struct cpu_ctx *c, spinlock_t *l),		\
		return __spin_lock_irq(c, l, a, k, LOCKFUNC_BUILD(d, t)), a, k, d, t)	\
	DEFINE_LOCKFUNC_1(void, unlock_irq, (struct cpu_ctx *c, spinlock_t *l),		\
		__spin_unlock_irq(c, l, a, k, LOCKFUNC_BUILD(d, t)), a, k, d, t)		\
	DEFINE_LOCKFUNC_1(int, lock_irqsave,						\
		(struct cpu_ctx *c, spinlock_t *l, unsigned long *flags),		\
		return __spin_lock_irqsave(c, l, flags, a, k, LOCKFUNC_BUILD(d, t)),	\
		a, k, d, t)								\
	DEFINE_LOCKFUNC_1(int, lock_irqsave_nopushf,					\
		(struct cpu_ctx *c, spinlock_t *l, unsigned long *flags),		\
		return __spin_lock_irqsave_nopushf(c, l, flags, a, k,			\
						   LOCKFUNC_BUILD(d, t)), a, k, d, t)	\
	DEFINE_LOCKFUNC_1(void, unlock_irqrestore_sti,					\
		(struct cpu_ctx *c, spinlock_t *l, unsigned long flags),		\
		__spin_unlock_irqrestore(c, l, flags, a, k, 0, LOCKFUNC_BUILD(d, t)),	\
		a, k, d, t)								\
	DEFINE_LOCKFUNC_1(void, unlock_irqrestore_popf,					\
		(struct cpu_ctx *c, spinlock_t *l, unsigned long flags),		\
		__spin_unlock_irqrestore(c, l, flags, a, k, 1, LOCKFUNC_BUILD(d, t)),	\
		a, k, d, t)
#define LOCKFUNC_ENTRY(a, k, d, t)							\
	[a][k][d][t] = { LOCKFUNC(lock, a, k, d, t), LOCKFUNC(unlock, a, k, d, t),	\
			 LOCKFUNC(lock_bh, a, k, d, t), LOCKFUNC(unlock_bh, a, k, d, t),	\
			 LOCKFUNC(lock_irq, a, k, d, t), LOCKFUNC(unlock_irq, a, k, d, t),	\
			 LOCKFUNC(lock_irqsave, a, k, d, t),				\
			 LOCKFUNC(lock_irqsave_nopushf, a, k, d, t),			\
			 { LOCKFUNC(unlock_irqrestore_sti, a, k, d, t),			\
			   LOCKFUNC(unlock_irqrestore_popf, a, k, d, t) } },
/* checker, debug, return: the inline build has no copies, so only the x86
 * builds' (its debug and return are theirs) */
#define LOCKFUNC_MODES(X, a)								\
	X(a, 0, 0, 0) X(a, 0, 1, 0) X(a, 1, 0, 0) X(a, 1, 1, 0)				\
	X(a, 0, 0, 1) X(a, 0, 1, 1) X(a, 1, 0, 1) X(a, 1, 1, 1)				\
	X(a, 0, 0, 2) X(a, 0, 1, 2) X(a, 1, 0, 2) X(a, 1, 1, 2)
#define DEFINE_LOCKFUNCS_OF(algo, name)	LOCKFUNC_MODES(DEFINE_LOCKFUNC, algo)
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
static __always_inline int _raw_spin_lock(struct cpu_ctx *c, spinlock_t *l, const int algo,
					  const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_LOCK))
		return LOCKFUNC_OF(algo, check, build).lock(c, l);
	return __spin_lock(c, l, algo, check, build);
}

static __always_inline void _raw_spin_unlock(struct cpu_ctx *c, spinlock_t *l, const int algo,
					     const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_UNLOCK))
		LOCKFUNC_OF(algo, check, build).unlock(c, l);
	else
		__spin_unlock(c, l, algo, check, build);
}

static __always_inline int _raw_spin_lock_bh(struct cpu_ctx *c, spinlock_t *l, const int algo,
					     const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_LOCK_BH))
		return LOCKFUNC_OF(algo, check, build).lock_bh(c, l);
	return __spin_lock_bh(c, l, algo, check, build);
}

static __always_inline void _raw_spin_unlock_bh(struct cpu_ctx *c, spinlock_t *l,
						const int algo, const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_UNLOCK_BH))
		LOCKFUNC_OF(algo, check, build).unlock_bh(c, l);
	else
		__spin_unlock_bh(c, l, algo, check, build);
}

static __always_inline int _raw_spin_lock_irq(struct cpu_ctx *c, spinlock_t *l, const int algo,
					      const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_LOCK_IRQ))
		return LOCKFUNC_OF(algo, check, build).lock_irq(c, l);
	return __spin_lock_irq(c, l, algo, check, build);
}

static __always_inline void _raw_spin_unlock_irq(struct cpu_ctx *c, spinlock_t *l,
						 const int algo, const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_UNLOCK_IRQ))
		LOCKFUNC_OF(algo, check, build).unlock_irq(c, l);
	else
		__spin_unlock_irq(c, l, algo, check, build);
}

static __always_inline int _raw_spin_lock_irqsave(struct cpu_ctx *c, spinlock_t *l,
						  unsigned long *flags, const int algo,
						  const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_LOCK_IRQSAVE))
		return LOCKFUNC_OF(algo, check, build).lock_irqsave(c, l, flags);
	return __spin_lock_irqsave(c, l, flags, algo, check, build);
}

/* irqsave's control, shaped as spin_lock_irqsave() is in `build` */
static __always_inline int _raw_spin_lock_irqsave_nopushf(struct cpu_ctx *c, spinlock_t *l,
							  unsigned long *flags, const int algo,
							  const int check, const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_LOCK_IRQSAVE))
		return LOCKFUNC_OF(algo, check, build).lock_irqsave_nopushf(c, l, flags);
	return __spin_lock_irqsave_nopushf(c, l, flags, algo, check, build);
}

static __always_inline void _raw_spin_unlock_irqrestore(struct cpu_ctx *c, spinlock_t *l,
							unsigned long flags, const int algo,
							const int check, const int popf,
							const int build)
{
	if (kbuild_calls(build, ENTRY_SPIN_UNLOCK_IRQRESTORE))
		LOCKFUNC_OF(algo, check, build).unlock_irqrestore[popf != 0](c, l, flags);
	else
		__spin_unlock_irqrestore(c, l, flags, algo, check, popf, build);
}

/* The kernel's names, deciding at run time: the lock's algorithm, the
 * CPU's checker, restore mode and kernel build. */
static inline int spin_lock(struct cpu_ctx *c, spinlock_t *l)
{
	return _raw_spin_lock(c, l, spin_algo(c, l), c->check, c->kbuild);
}

static inline void spin_unlock(struct cpu_ctx *c, spinlock_t *l)
{
	_raw_spin_unlock(c, l, spin_algo(c, l), c->check, c->kbuild);
}

static inline int spin_lock_bh(struct cpu_ctx *c, spinlock_t *l)
{
	return _raw_spin_lock_bh(c, l, spin_algo(c, l), c->check, c->kbuild);
}

static inline void spin_unlock_bh(struct cpu_ctx *c, spinlock_t *l)
{
	_raw_spin_unlock_bh(c, l, spin_algo(c, l), c->check, c->kbuild);
}

static inline int spin_lock_irq(struct cpu_ctx *c, spinlock_t *l)
{
	return _raw_spin_lock_irq(c, l, spin_algo(c, l), c->check, c->kbuild);
}

static inline void spin_unlock_irq(struct cpu_ctx *c, spinlock_t *l)
{
	_raw_spin_unlock_irq(c, l, spin_algo(c, l), c->check, c->kbuild);
}

static inline int spin_lock_irqsave(struct cpu_ctx *c, spinlock_t *l, unsigned long *flags)
{
	return _raw_spin_lock_irqsave(c, l, flags, spin_algo(c, l), c->check, c->kbuild);
}

static inline void spin_unlock_irqrestore(struct cpu_ctx *c, spinlock_t *l, unsigned long flags)
{
	_raw_spin_unlock_irqrestore(c, l, flags, spin_algo(c, l), c->check, c->popf, c->kbuild);
}

/* ---------------------------------------------------------------- variants by number */

/* Enumerator, and its name as Python offers it; the two *_BEFORE_LOCK
 * variants are local_irq_save() or local_irq_disable() (always inline:
 * arch_local_irq_save()), then spin_lock(). With constant arguments
 * (time_bench.h) the switch folds to one variant; spin_lock_variant() is
 * for loops that pick it at run time (contended runs, torture). */
#define SPIN_VARIANT_TABLE(X)						\
	X(VARIANT_PLAIN,			"plain")		\
	X(VARIANT_BH,				"bh")			\
	X(VARIANT_IRQ,				"irq")			\
	X(VARIANT_IRQSAVE,			"irqsave")		\
	X(VARIANT_IRQSAVE_BEFORE_LOCK,		"irqsave_before_lock")	\
	X(VARIANT_IRQ_DISABLE_BEFORE_LOCK,	"irq_disable_before_lock")

SMP_ENUM(spin_variant, SPIN_VARIANT_TABLE, SPIN_NR_VARIANTS);

static __always_inline int __spin_lock_variant(struct cpu_ctx *c, spinlock_t *l,
					       const int variant, unsigned long *flags,
					       const int algo, const int check, const int build)
{
	switch (variant) {
	case VARIANT_BH:
		return _raw_spin_lock_bh(c, l, algo, check, build);
	case VARIANT_IRQ:
		return _raw_spin_lock_irq(c, l, algo, check, build);
	case VARIANT_IRQSAVE:
		return _raw_spin_lock_irqsave(c, l, flags, algo, check, build);
	case VARIANT_IRQSAVE_BEFORE_LOCK:
		*flags = __local_irq_save(c, check);
		return _raw_spin_lock(c, l, algo, check, build);
	case VARIANT_IRQ_DISABLE_BEFORE_LOCK:
		local_irq_disable(c);
		return _raw_spin_lock(c, l, algo, check, build);
	case VARIANT_PLAIN:
		return _raw_spin_lock(c, l, algo, check, build);
	default:	/* every caller checks the variant against SPIN_NR_VARIANTS */
		BUG();
	}
}

static __always_inline void __spin_unlock_variant(struct cpu_ctx *c, spinlock_t *l,
						  const int variant, unsigned long flags,
						  const int algo, const int check, const int popf,
						  const int build)
{
	switch (variant) {
	case VARIANT_BH:
		_raw_spin_unlock_bh(c, l, algo, check, build);
		break;
	case VARIANT_IRQ:
		_raw_spin_unlock_irq(c, l, algo, check, build);
		break;
	case VARIANT_IRQSAVE:
		_raw_spin_unlock_irqrestore(c, l, flags, algo, check, popf, build);
		break;
	case VARIANT_IRQSAVE_BEFORE_LOCK:
		_raw_spin_unlock(c, l, algo, check, build);
		__local_irq_restore(c, flags, check, popf);
		break;
	case VARIANT_IRQ_DISABLE_BEFORE_LOCK:
		_raw_spin_unlock(c, l, algo, check, build);
		local_irq_enable(c);
		break;
	case VARIANT_PLAIN:
		_raw_spin_unlock(c, l, algo, check, build);
		break;
	default:
		BUG();
	}
}

static inline int spin_lock_variant(struct cpu_ctx *c, spinlock_t *l, int variant,
				    unsigned long *flags)
{
	return __spin_lock_variant(c, l, variant, flags, spin_algo(c, l), c->check, c->kbuild);
}

static inline void spin_unlock_variant(struct cpu_ctx *c, spinlock_t *l, int variant,
				       unsigned long flags)
{
	__spin_unlock_variant(c, l, variant, flags, spin_algo(c, l), c->check, c->popf,
			      c->kbuild);
}

#endif
