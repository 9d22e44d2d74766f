/* spinlock_debug.h - do_raw_spin_lock()/unlock(): the arch lock and, with
 * the checker, lockdep's records; in DEBUG_SPINLOCK's build (x86-debug) out
 * of line with kernel/locking/spinlock_debug.c's checks. The entry points
 * (spinlock_api_smp.h) call __do_raw_spin_lock(). docs/experiments/locks.md,
 * "Kernel builds". */
#ifndef SMPNET_SPINLOCK_DEBUG_H
#define SMPNET_SPINLOCK_DEBUG_H

#include "kernel_build.h"
#include "spinlock.h"

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
							 const int algo, const int check,
							 const int ret)
{
	if (unlikely(check))
		WRITE_ONCE(spin_lock_info(c, l)->owner, 0);
	__arch_spin_unlock(c, l, algo, ret);
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
						       const int algo, const int check,
						       const int ret)
{
	struct lock_info *li = spin_lock_info(c, l);

	if (unlikely(READ_ONCE(li->owner) != (uint32_t)c->cpu + 1))	/* "wrong owner" */
		lockdep_bug(c, LOCKDEP_SPIN_BUG, l);
	WRITE_ONCE(li->owner, 0);
	__do_raw_spin_unlock_nodebug(c, l, algo, check, ret);
}

/* The out-of-line copies, one per algorithm, checker and return, in a
 * table the inline bodies read with constant indices (a direct call). */
struct raw_spin_debug_ops {
	int (*lock)(struct cpu_ctx *c, spinlock_t *l);
	void (*unlock)(struct cpu_ctx *c, spinlock_t *l);
};

#define DEFINE_DO_RAW_SPIN_DEBUG(algo, check, ret)					\
	static __attribute__((__noinline__)) RETURN_VIA_##ret int				\
	do_raw_spin_lock_##algo##_##check##_##ret(struct cpu_ctx *c, spinlock_t *l)	\
	{										\
		RETURN_ENTER_##ret;							\
		return __do_raw_spin_lock_debug(c, l, algo, check);			\
	}										\
	static __attribute__((__noinline__)) RETURN_VIA_##ret void				\
	do_raw_spin_unlock_##algo##_##check##_##ret(struct cpu_ctx *c, spinlock_t *l)	\
	{										\
		RETURN_ENTER_##ret;							\
		__do_raw_spin_unlock_debug(c, l, algo, check, ret);			\
	}
#define DO_RAW_SPIN_DEBUG_ENTRY(algo, check, ret)					\
	[algo][check][ret] = { SPIN_COPY(algo, do_raw_spin_lock_##algo##_##check##_##ret), \
			       SPIN_COPY(algo, do_raw_spin_unlock_##algo##_##check##_##ret) },
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
		__do_raw_spin_unlock_nodebug(c, l, algo, check, kbuild_return(build));
}

#endif
