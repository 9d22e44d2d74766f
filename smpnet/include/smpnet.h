/* smpnet.h - a change of your own, as variants `smpnet-bench ab FILE.c` measures.
 *
 * A file declares its state once and two or more variants of one op:
 *
 *	#include <smpnet.h>
 *
 *	struct shared { spinlock_t lock; unsigned long count; };
 *	struct pcpu   { unsigned long count; };
 *	SMPNET_STATE(struct shared, struct pcpu);
 *
 *	SMPNET_INIT(locked)    { spin_lock_init(&shared->lock); }
 *	SMPNET_VARIANT(locked) { spin_lock(&shared->lock); shared->count++; spin_unlock(&shared->lock); }
 *	SMPNET_VARIANT(percpu) { this_cpu_inc(this_cpu->count); }
 *
 * Inside a variant's body, as in kernel code: `shared` (the one copy every
 * CPU sees), `this_cpu` (this CPU's copy of the per-CPU state, 64-byte
 * aligned), per_cpu(cpu), nr_cpus, smp_processor_id(); the kernel's names
 * for spinlocks (every variant, with the algorithm the run was built for),
 * local_irq_*(), local_bh_*(), preempt_*(), atomic_*(), this_cpu_*(), and
 * hold() (--hold-cycles of work, for a contended critical section); the same
 * names in the file's own functions but `shared` and `this_cpu`. Per-CPU
 * data as the kernel declares it (DEFINE_PER_CPU, alloc_percpu(),
 * this_cpu_ptr(), per_cpu()) works too, this_cpu_*() %gs-relative. The body
 * is inlined into the timed loop: no call sits in the timing.
 *
 * SMPNET_ROLES(consumer, producer) gives CPUs roles (`role` in a body),
 * SMPNET_UNIT(skb) and SMPNET_WORK(n) the unit of work the figures count.
 * SMPNET_VARIANT_ALGO(name, ticket) runs a variant on a lock of its own (a
 * build of the file for that lock). #include <smpnet_skbuff.h> after this
 * gives the model's own skbs (napi_alloc_skb(), kfree_skb(),
 * skb_attempt_defer_free()). SMPNET_INIT(name) runs before a
 * variant's rounds, SMPNET_CHECK(name) after them (expect(cond, "message")
 * fails it, and the run), both outside the timing, on their variant's own
 * copy of the state. docs/experiments/ab.md has the whole API.
 */
#ifndef SMPNET_H
#define SMPNET_H

#if !defined(SMPNET_BUILD_ALGO) || !defined(SMPNET_BUILD_CHECKER) || !defined(SMPNET_BUILD_POPF) \
	|| !defined(SMPNET_BUILD_KERNEL)
#error "smpnet.h: build this file with `smpnet-bench ab FILE.c` (it sets SMPNET_BUILD_ALGO, SMPNET_BUILD_CHECKER, SMPNET_BUILD_POPF, SMPNET_BUILD_KERNEL)"
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
/* The core's own atomics (atomic.h, on uint32_t) under other names in this
 * file: the kernel's names are the file's (below). */
#define atomic_read	smpnet_core_atomic_read
#define atomic_set	smpnet_core_atomic_set
#define atomic_inc	smpnet_core_atomic_inc
#define atomic_inc_return	smpnet_core_atomic_inc_return
#define atomic_dec_return	smpnet_core_atomic_dec_return
#define atomic_xchg	smpnet_core_atomic_xchg
#define atomic_cmpxchg	smpnet_core_atomic_cmpxchg
#define atomic_long_set	smpnet_core_atomic_long_set
#define atomic_long_inc_return	smpnet_core_atomic_long_inc_return
#define this_cpu_cmpxchg	smpnet_core_this_cpu_cmpxchg
#include "smpnet_model_names.h"
#include <setjmp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include "compiler.h"
#include "atomic.h"
#include "percpu.h"
#include "smp.h"
#include "tsc.h"
#include "preempt.h"
#include "irqflags.h"
#include "spinlock_api_smp.h"
#include "ab.h"
#undef atomic_read
#undef atomic_set
#undef atomic_inc
#undef atomic_inc_return
#undef atomic_dec_return
#undef atomic_xchg
#undef atomic_cmpxchg
#undef atomic_long_set
#undef atomic_long_inc_return
#undef this_cpu_cmpxchg
#pragma GCC diagnostic pop


/* A state a file does not need: SMPNET_STATE(struct smpnet_none, struct pcpu). */
struct smpnet_none { char unused; };

/* ---------------------------------------------------------------- the state */

#define SMPNET_STATE(shared_type, percpu_type)						\
	typedef shared_type smpnet_shared_t;						\
	typedef percpu_type smpnet_percpu_t;						\
	size_t smpnet_shared_size(void) { return sizeof(smpnet_shared_t); }		\
	size_t smpnet_percpu_size(void) { return sizeof(smpnet_percpu_t); }		\
	/* CPU `cpu`'s copy of the per-CPU state of the env's copy */			\
	static __always_inline smpnet_percpu_t *smpnet_per_cpu(const struct smpnet_env *e, \
							      int cpu)		\
	{										\
		return (smpnet_percpu_t *)(e->percpu + (size_t)cpu * e->percpu_stride);	\
	}

/* ---------------------------------------------------------------- CPU roles, the unit of work */

/* A producer/consumer change gives each CPU a role: SMPNET_ROLES(consumer,
 * producer) names them (an enum: `role == consumer` in a body), the file's
 * first role on CPU 0, the next on CPU 1, ..., the last on every CPU left
 * (ab's --roles says otherwise); uncontended, the one CPU runs every role
 * in turn each op. SMPNET_UNIT(skb) names the unit of work, which a body
 * counts where it is done, SMPNET_WORK(n): the figures are then per unit
 * (cycles per skb freed, skbs/s), not per loop turn. Without them, one
 * role and the op as the unit. The definitions below are tentative (C's
 * file-scope `static int x;`): the file's, if any, complete them, and the
 * compiler sees constants. */
static int smpnet_nr_roles_;
static const char *smpnet_role_names_;
static const char *smpnet_unit_;
int smpnet_nr_roles(void) { return smpnet_nr_roles_; }
const char *smpnet_role_names(void) { return smpnet_role_names_; }
const char *smpnet_unit(void) { return smpnet_unit_; }
#define SMPNET_ROLES(...)								\
	enum { __VA_ARGS__, smpnet_roles_end_ };					\
	_Static_assert(smpnet_roles_end_ <= SMPNET_AB_MAX_ROLES, "SMPNET_ROLES: 8 roles at most"); \
	static int smpnet_nr_roles_ = smpnet_roles_end_;				\
	static const char *smpnet_role_names_ = #__VA_ARGS__
#define SMPNET_UNIT(name)	static const char *smpnet_unit_ = #name

/* The model's skbs (smpnet_skbuff.h), and how their defer list is locked:
 * tentative too. The strategy by name, "llist" (the newest kernel's)
 * unless SMPNET_SKB_DEFER() says; NULL for a file without skbs. */
static int smpnet_uses_skbs_;
static const char *smpnet_skb_defer_;
/* Between two ops, IRQs are on: a file with the model's skbs takes the
 * defer kick's IPI there, as a CPU takes it at once; in any other file
 * no IRQ is ever raised, and the test folds away. */
#define SMPNET_IRQ_WINDOW(cpu)	do { if (smpnet_uses_skbs_) irq_poll(cpu); } while (0)
const char *smpnet_skb_defer(void)
{
	return !smpnet_uses_skbs_ ? NULL : smpnet_skb_defer_ ? smpnet_skb_defer_ : "llist";
}
#define SMPNET_WORK(n)		((void)(smpnet_env->work += (n)))

/* ---------------------------------------------------------------- the registry */

static struct smpnet_variant_info smpnet_variants_[SMPNET_AB_MAX_VARIANTS];
static int smpnet_nr_variants_, smpnet_overflow_;
/* SMPNET_INIT/SMPNET_CHECK, by the name of their variant: joined when asked */
static struct { const char *name; int line; int kind; uintptr_t fn; }
	smpnet_hooks_[2 * SMPNET_AB_MAX_VARIANTS];
static int smpnet_nr_hooks_;

static __attribute__((unused)) void smpnet_register(const char *name, int line, uintptr_t loop,
						    uintptr_t contended, int algo)
{
	struct smpnet_variant_info *v;

	if (smpnet_nr_variants_ == SMPNET_AB_MAX_VARIANTS || strlen(name) >= SMPNET_AB_NAME) {
		smpnet_overflow_ = line;
		return;
	}
	v = &smpnet_variants_[smpnet_nr_variants_++];
	strcpy(v->name, name);
	v->line = line;
	v->loop = loop;
	v->contended = contended;
	v->algo = algo;
}

static __attribute__((unused)) void smpnet_register_hook(const char *name, int line, int kind, uintptr_t fn)
{
	if (smpnet_nr_hooks_ == 2 * SMPNET_AB_MAX_VARIANTS) {
		smpnet_overflow_ = line;
		return;
	}
	smpnet_hooks_[smpnet_nr_hooks_].name = name;
	smpnet_hooks_[smpnet_nr_hooks_].line = line;
	smpnet_hooks_[smpnet_nr_hooks_].kind = kind;
	smpnet_hooks_[smpnet_nr_hooks_++].fn = fn;
}

/* What the harness asks the object (cffi's declarations: ab/build.py). */
uint64_t smpnet_abi_hash(void) { return SMPNET_ABI_HASH; }

static const struct smpnet_build_info smpnet_build_ = {
	SMPNET_BUILD_ALGO, SMPNET_BUILD_CHECKER, SMPNET_BUILD_POPF, SMPNET_BUILD_KERNEL
};
const struct smpnet_build_info *smpnet_build(void) { return &smpnet_build_; }
int smpnet_overflow(void) { return smpnet_overflow_; }
int smpnet_nr_variants(void) { return smpnet_nr_variants_; }

const struct smpnet_variant_info *smpnet_variant(int i)
{
	struct smpnet_variant_info *v = &smpnet_variants_[i];
	int k;

	for (k = 0; k < smpnet_nr_hooks_; k++)
		if (!strcmp(smpnet_hooks_[k].name, v->name)) {
			if (smpnet_hooks_[k].kind == 0)
				v->init = smpnet_hooks_[k].fn;
			else
				v->check = smpnet_hooks_[k].fn;
		}
	return v;
}

/* The line of a SMPNET_INIT/SMPNET_CHECK whose variant the file lacks, or 0. */
int smpnet_orphan_hook(void)
{
	int k, i;

	for (k = 0; k < smpnet_nr_hooks_; k++) {
		for (i = 0; i < smpnet_nr_variants_; i++)
			if (!strcmp(smpnet_hooks_[k].name, smpnet_variants_[i].name))
				break;
		if (i == smpnet_nr_variants_)
			return smpnet_hooks_[k].line;
	}
	return 0;
}

/* ---------------------------------------------------------------- in a body, or a helper */

/* A variant's body, init and check get the CPU and the run's environment
 * as parameters (in registers, in the timed loop); the file's own
 * functions find the same here, set by each loop and hook before it runs
 * the file's code, so that the kernel's API works in a helper as in a
 * body, as kernel code takes locks in helpers. A process runs one
 * emulated CPU: these are that CPU's. */
static struct smpnet_env *smpnet_env __attribute__((unused));
static struct smpnet_model_cpu_ctx *smpnet_cpu __attribute__((unused));
/* Where a stopped acquire, a failed expect() and a failed spin_lock_init()
 * go: back to the loop or hook that ran the file's code, from whatever
 * function of the file they are in (what they leave is an init's errno,
 * a check's message). */
static jmp_buf smpnet_unwind;
static int smpnet_err __attribute__((unused));
static const char *smpnet_fail __attribute__((unused));

/* the message of the expect() that failed this process's last init */
const char *smpnet_init_failure(void) { return smpnet_fail; }

/* this CPU's copy of the file's per-CPU section at the section's address
 * (smpnet_percpu.h) */
static inline void smpnet_percpu_map(const struct smpnet_env *e);

/* jiffies, set as each loop and hook begins */
#include "smpnet_jiffies.h"

static inline void smpnet_enter(struct smpnet_env *e)
{
	smpnet_env = e;
	smpnet_cpu = e->c;
	smpnet_percpu_map(e);
	smpnet_jiffies_at(e->c, tsc_read_unordered());
}

/* cpu_relax() in the file's own code: the pause, and at the run's stop an
 * end of the op (back to its loop, as a stopped acquire), so that a spin
 * loop waiting on a CPU that died, or on a flag no one sets, ends with the
 * run; smp_cond_load_*() wait with it. The core's own loops keep theirs. */
static inline void smpnet_cpu_relax(void)
{
	cpu_relax();
	if (unlikely(smp_should_stop(smpnet_cpu->hdr)))
		longjmp(smpnet_unwind, 1);
}
#define cpu_relax()	smpnet_cpu_relax()

/* the kernel's barriers (after cpu_relax(), which their waits call) */
#include "smpnet_barrier.h"

/* static keys, as the kernel's jump labels, and prefetch() */
#include "smpnet_jump_label.h"

/* The kernel's types, atomics, local_t, seqcount, u64_stats, refcount_t and
 * llist, by the kernel's names (after the barriers they wait with) */
#include "smpnet_atomic.h"

/* BUG_ON() and WARN_ON(), and printk() counted as they are */
#include "smpnet_bug.h"
#include "smpnet_printk.h"

/* the kernel's attributes, IS_ENABLED() and EXPORT_SYMBOL() */
#include "smpnet_attributes.h"

/* lists, bit operations, min()/max() and their kin, by the kernel's names */
#include "smpnet_list.h"
#include "smpnet_bitops.h"
#include "smpnet_minmax.h"

#define nr_cpus		(smpnet_env->nr_cpus)
#define smp_processor_id()	(smpnet_cpu->cpu)
#define raw_smp_processor_id()	smp_processor_id()
#define get_cpu()		({ preempt_disable(); smp_processor_id(); })
#define put_cpu()		preempt_enable()

/* Topology: cpu_to_node(), cpus_share_cache() and the node iterators */
#include "smpnet_topology.h"

/* An acquire returns -1 when the run was stopped while it waited: the
 * variant's op ends there, and its loop with it (as time_bench.h's loops do). */
#define SMPNET_STOP_IF(x)	do { if (unlikely(x)) longjmp(smpnet_unwind, 1); } while (0)

/* spin_lock() and its kin, local_irq_*(), local_bh_*(), preempt_*() and
 * the context tests, by the kernel's names */
#include "smpnet_irq_locks.h"

/* this_cpu_*(), every width, as x86's unlocked instructions */
#include "smpnet_this_cpu.h"

/* The critical section's length in a contended run: --hold-cycles of work. */
#define hold()			tsc_spend_until(smpnet_env->hold_cycles, smpnet_env->deadline)

/* In an init: a lock in the state, for the run's algorithm (the kernel's
 * spin_lock_init(); every spinlock_t a variant takes needs it). */
#define spin_lock_init(l)								\
	do {										\
		int rc_ = spin_lock_init(smpnet_env->c->hdr, (l), SMPNET_BUILD_ALGO,		\
					 smpnet_env->lock_ids++);			\
		if (rc_) { smpnet_err = rc_; longjmp(smpnet_unwind, 1); }		\
	} while (0)

/* In a check: fail it, and the run, with `message` unless `cond` holds. */
#define expect(cond, message)								\
	do { if (!(cond)) { smpnet_fail = (message); longjmp(smpnet_unwind, 1); } } while (0)
#define nr_ops			(smpnet_env->ops)

/* rwlock_t and RCU's read side, by the kernel's names (after the spinlock
 * names, the IRQ model's and the atomics they are made of) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"	/* the entry points a file leaves unused */
#include "smpnet_rwlock.h"
#include "smpnet_rcu.h"
#pragma GCC diagnostic pop

/* ---------------------------------------------------------------- the variants */

/* The timed loop (time_bench.h's shape: the op inlined between two TSC
 * reads) and the contended one (until the deadline, read every 16th op
 * unless a think time, spent by the loop after every op, makes it cheap to
 * read every time; a hold() stops at the deadline itself, so a variant
 * that holds needs no closer reading, and one that does not is not
 * changed by --hold-cycles), both in the user's object, then the op's body. */
/* A variant on a lock algorithm of its own, by --algo's names: `ab` builds the
 * file once more for each such algorithm, as a kernel of that lock, and runs
 * the variant from that build (its init, check and helpers with it). */
enum {
	smpnet_algo_tas = SPIN_TAS, smpnet_algo_ttas = SPIN_TTAS, smpnet_algo_ticket = SPIN_TICKET,
	smpnet_algo_qspinlock = SPIN_QSPINLOCK, smpnet_algo_pvqspinlock = SPIN_PVQSPINLOCK,
	smpnet_algo_virt_tas = SPIN_VIRT_TAS, smpnet_algo_mcs = SPIN_MCS, smpnet_algo_clh = SPIN_CLH,
	smpnet_algo_pthread = SPIN_PTHREAD,
};
_Static_assert(SPIN_NR_ALGOS == 9, "a new lock algorithm needs its name for SMPNET_VARIANT_ALGO");
#define SMPNET_VARIANT_ALGO(name, algo)	SMPNET_VARIANT_ON(name, smpnet_algo_##algo)
#define SMPNET_VARIANT(name)		SMPNET_VARIANT_ON(name, -1)

#define SMPNET_VARIANT_ON(name, algo)							\
	static __always_inline void smpnet_op_##name(struct smpnet_env *smpnet_env,	\
		struct smpnet_model_cpu_ctx *smpnet_cpu, smpnet_shared_t *shared,	\
		smpnet_percpu_t *this_cpu, const int role);				\
	static __attribute__((__noinline__)) uint64_t smpnet_timed_##name(			\
		struct smpnet_env *e, uint64_t loops)					\
	{										\
		/* in registers: barrier() spares them */				\
		struct smpnet_model_cpu_ctx *cpu = e->c;				\
		smpnet_shared_t *sh = (smpnet_shared_t *)e->shared;			\
		smpnet_percpu_t *mine = smpnet_per_cpu(e, e->cpu);			\
		uint64_t i, t0 = tsc_start();						\
		for (i = 0; i < loops; i++) {						\
			/* one CPU: every role in turn, the compiler not merging	\
			 * one role's work with the next's (one call site, for the	\
			 * inliner; without roles, once: the count is a constant) */ \
			int r_ = 0;							\
			do {									\
				smpnet_op_##name(e, cpu, sh, mine, r_);			\
				SMPNET_IRQ_WINDOW(cpu);					\
				barrier();						\
			} while (++r_ < smpnet_nr_roles_);				\
		}									\
		return tsc_stop() - t0;							\
	}										\
	static uint64_t smpnet_loop_##name(struct smpnet_env *e, uint64_t loops)	\
	{										\
		volatile uint64_t t0 = tsc_read_unordered();				\
											\
		smpnet_enter(e);							\
		if (setjmp(smpnet_unwind))	/* an acquire stopped: the time so far */ \
			return tsc_read_unordered() - t0;				\
		return smpnet_timed_##name(e, loops);					\
	}										\
	static __attribute__((__noinline__)) int smpnet_hammer_##name(			\
		struct smpnet_env *e, uint64_t deadline, uint64_t *done)		\
	{										\
		struct smpnet_model_cpu_ctx *cpu = e->c;				\
		smpnet_shared_t *sh = (smpnet_shared_t *)e->shared;			\
		smpnet_percpu_t *mine = smpnet_per_cpu(e, e->cpu);			\
		uint64_t n = 0, every = e->think_cycles					\
			|| (cpu->hdr->flags & SMP_F_OVERSUBSCRIBED) ? 0 : 15;		\
		const int role = e->role;						\
		int stopped = 0;							\
		for (;;) {								\
			smpnet_op_##name(e, cpu, sh, mine, role);			\
			SMPNET_IRQ_WINDOW(cpu);						\
			n++;								\
			if (e->think_cycles)						\
				tsc_spend(e->think_cycles);				\
			if ((n & every) == 0) {						\
				if (tsc_read_unordered() >= deadline)			\
					break;						\
				if (smp_should_stop(cpu->hdr)) {			\
					stopped = 1;					\
					break;						\
				}							\
			}								\
			barrier();							\
		}									\
		*done = n;								\
		return stopped;								\
	}										\
	static int smpnet_contended_##name(struct smpnet_env *e, uint64_t deadline,	\
					   uint64_t *done)				\
	{										\
		smpnet_enter(e);							\
		smpnet_jiffies_at(e->c, deadline);	/* every CPU's the same */	\
		*done = 0;								\
		if (setjmp(smpnet_unwind))	/* an acquire stopped: so is the run */	\
			return 1;							\
		return smpnet_hammer_##name(e, deadline, done);				\
	}										\
	static void __attribute__((constructor)) smpnet_register_##name(void)		\
	{										\
		smpnet_register(#name, __LINE__, (uintptr_t)smpnet_loop_##name,		\
				(uintptr_t)smpnet_contended_##name, (algo));		\
	}										\
	static __always_inline void smpnet_op_##name(struct smpnet_env *smpnet_env,	\
		struct smpnet_model_cpu_ctx *smpnet_cpu, smpnet_shared_t *shared,	\
		smpnet_percpu_t *this_cpu, const int role __attribute__((unused)))

#define SMPNET_INIT(name)								\
	static void smpnet_init_body_##name(struct smpnet_env *smpnet_env,		\
		struct smpnet_model_cpu_ctx *smpnet_cpu, smpnet_shared_t *shared);	\
	static int smpnet_init_##name(struct smpnet_env *e)				\
	{										\
		smpnet_enter(e);							\
		smpnet_err = 0;								\
		smpnet_fail = NULL;							\
		smpnet_percpu_reserved = 0;	/* alloc_percpu()'s, on this copy */	\
		if (!setjmp(smpnet_unwind))						\
			smpnet_init_body_##name(e, e->c, (smpnet_shared_t *)e->shared);	\
		return smpnet_fail ? -1 : smpnet_err;	/* -1: an expect() failed */	\
	}										\
	static void __attribute__((constructor)) smpnet_register_init_##name(void)	\
	{										\
		smpnet_register_hook(#name, __LINE__, 0, (uintptr_t)smpnet_init_##name);	\
	}										\
	static void smpnet_init_body_##name(struct smpnet_env *smpnet_env,		\
		struct smpnet_model_cpu_ctx *smpnet_cpu, smpnet_shared_t *shared)

#define SMPNET_CHECK(name)								\
	static void smpnet_check_body_##name(struct smpnet_env *smpnet_env,		\
		struct smpnet_model_cpu_ctx *smpnet_cpu, smpnet_shared_t *shared);	\
	static const char *smpnet_check_##name(struct smpnet_env *e)			\
	{										\
		smpnet_enter(e);							\
		smpnet_fail = NULL;							\
		if (!setjmp(smpnet_unwind))						\
			smpnet_check_body_##name(e, e->c, (smpnet_shared_t *)e->shared);	\
		return smpnet_fail;							\
	}										\
	static void __attribute__((constructor)) smpnet_register_check_##name(void)	\
	{										\
		smpnet_register_hook(#name, __LINE__, 1, (uintptr_t)smpnet_check_##name);	\
	}										\
	static void smpnet_check_body_##name(struct smpnet_env *smpnet_env,		\
		struct smpnet_model_cpu_ctx *smpnet_cpu, smpnet_shared_t *shared)


/* the model's names given back to the file */
#include "smpnet_model_names_end.h"

/* per-CPU data as the kernel declares it, and percpu_counter and
 * local_lock_t on it */
#include "smpnet_percpu.h"
#include "smpnet_percpu_counter.h"
#include "smpnet_local_lock.h"

#endif
