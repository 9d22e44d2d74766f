/* bpf_helpers.h - kernel/bpf/helpers.c's bpf_spin_lock() and
 * bpf_spin_unlock(), the path the kernel referee times inside the running
 * kernel, built from the model's lock. docs/experiments/kernel.md. */
#ifndef SMPNET_BPF_HELPERS_H
#define SMPNET_BPF_HELPERS_H

#include "spinlock_api_smp.h"

/* helpers.c: static DEFINE_PER_CPU(unsigned long, irqsave_flags). A worker
 * is one CPU, so a variable of its process is that CPU's, stored with no
 * pointer register (the kernel's: mov %rbx,%gs:irqsave_flags). */
static unsigned long bpf_irqsave_flags;

/* bpf_spin_lock() calls __bpf_spin_lock_irqsave(), a function of its own
 * (local_irq_save, preempt_disable, arch_spin_lock, the flags stored per
 * CPU); bpf_spin_unlock() calls __bpf_spin_unlock_irqrestore() (the flags
 * read, arch_spin_unlock, local_irq_restore, preempt_enable). Here the inner
 * functions are the model's out-of-line _raw_spin_lock_irqsave and
 * _raw_spin_unlock_irqrestore copies of the same bodies (no debug checks,
 * as helpers.c calls arch_spin_lock directly), the flags stored and read by
 * the outer one. The helpers are calls in every kernel, whatever its lock
 * entry points' shape; each returns 0 after its call (BPF_CALL_1's u64: no
 * tail call) and returns as the build returns. noipa: the kernel's are
 * called from JIT code no compiler sees, so gcc may not clone them or drop
 * their result (which would make the inner call a tail call). One copy per algorithm,
 * checker and return; the unlock per restore mode. Returns -1 where the
 * lock gave up (a stopped run). */
#define DEFINE_BPF_SPIN_LOCK(algo, check, ret)						\
	static __attribute__((noipa)) RETURN_VIA_##ret int				\
	bpf_spin_lock_##algo##_##check##_##ret(struct cpu_ctx *c, spinlock_t *l)	\
	{										\
		RETURN_ENTER_##ret;							\
		unsigned long flags;							\
		if (lockfunc[algo][check][0][ret].lock_irqsave(c, l, &flags))		\
			return -1;							\
		bpf_irqsave_flags = flags;						\
		return 0;								\
	}										\
	DEFINE_BPF_SPIN_UNLOCK(algo, check, ret, sti)					\
	DEFINE_BPF_SPIN_UNLOCK(algo, check, ret, popf)
#define DEFINE_BPF_SPIN_UNLOCK(algo, check, ret, restore)				\
	static __attribute__((noipa)) RETURN_VIA_##ret int				\
	bpf_spin_unlock_##algo##_##check##_##ret##_##restore(struct cpu_ctx *c, spinlock_t *l) \
	{										\
		RETURN_ENTER_##ret;							\
		lockfunc[algo][check][0][ret].unlock_irqrestore_##restore(c, l,	\
									   bpf_irqsave_flags); \
		return 0;								\
	}

typedef int (*bpf_helper_t)(struct cpu_ctx *c, spinlock_t *l);

struct bpf_spin_lock_ops {
	bpf_helper_t lock;
	bpf_helper_t unlock[2];		/* sti, popf */
};

#define BPF_SPIN_LOCK_MODES(X, algo)							\
	X(algo, 0, 0) X(algo, 0, 1) X(algo, 0, 2) X(algo, 1, 0) X(algo, 1, 1) X(algo, 1, 2)
#define BPF_SPIN_LOCK_ENTRY(algo, check, ret)						\
	[algo][check][ret] = { bpf_spin_lock_##algo##_##check##_##ret,			\
			       { bpf_spin_unlock_##algo##_##check##_##ret##_sti,	\
				 bpf_spin_unlock_##algo##_##check##_##ret##_popf } },
#define DEFINE_BPF_SPIN_LOCKS_OF(algo, name)	BPF_SPIN_LOCK_MODES(DEFINE_BPF_SPIN_LOCK, algo)
#define BPF_SPIN_LOCK_ENTRIES_OF(algo, name)	BPF_SPIN_LOCK_MODES(BPF_SPIN_LOCK_ENTRY, algo)
_Static_assert(KRET_NR == 3, "a new return needs its copies in BPF_SPIN_LOCK_MODES");

SPIN_ALGO_TABLE(DEFINE_BPF_SPIN_LOCKS_OF)

static const struct bpf_spin_lock_ops bpf_spin_lock_ops[SPIN_NR_ALGOS][2][KRET_NR] = {
	SPIN_ALGO_TABLE(BPF_SPIN_LOCK_ENTRIES_OF)
};

/* the copies of `algo`, `check` and `build`'s return (constants: direct calls) */
#define BPF_SPIN_LOCK_OF(algo, check, build)						\
	(bpf_spin_lock_ops[algo][(check) != 0][kbuild_return(build)])

/* The same, chosen at run time (lock_hammer's contended pair: called through
 * the pointers, where the JIT's calls are direct; NULL out of range). */
static inline const struct bpf_spin_lock_ops *bpf_spin_lock_ops_of(int algo, int check, int build)
{
	if (algo < 0 || algo >= SPIN_NR_ALGOS || !kbuild_valid(build))
		return NULL;
	return &BPF_SPIN_LOCK_OF(algo, check, build);
}

#endif
