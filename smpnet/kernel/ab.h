/* ab.h - the contract between smpnet's core and a user's object (`ab`).
 *
 * A user's C file (smpnet/include/smpnet.h) is compiled at run time into an
 * object of its own. The core calls its variants' loops through the
 * pointers the object registers, handing each an smpnet_env; both sides are
 * compiled from these headers with the same flags, and SMPNET_ABI_HASH
 * (the layout version and the size and place of every field either side
 * reads) must agree, or the object is refused before anything runs.
 */
#ifndef SMPNET_AB_H
#define SMPNET_AB_H

#include <stddef.h>
#include "percpu.h"
#include "smp.h"

struct sk_buff;

/* The model's skb life cycle (skbuff.h, dev.h), for a file that includes
 * smpnet_skbuff.h: the core's own functions, out of line, called through
 * this table (ab_skb.h), on the CPU's c->net. */
struct smpnet_skb_ops {
	struct sk_buff *(*alloc)(struct cpu_ctx *c, unsigned int len);	/* napi_alloc_skb() */
	void (*free)(struct cpu_ctx *c, struct sk_buff *skb);		/* kfree_skb() */
	void (*defer_free)(struct cpu_ctx *c, struct sk_buff *skb);	/* skb_attempt_defer_free() */
	void (*net_rx_ipi)(struct cpu_ctx *c);	/* the defer kick's handler */
	void (*net_rx_action)(struct cpu_ctx *c);	/* the NET_RX softirq */
};

/* What one variant's loop runs on: one emulated CPU and one copy of the
 * file's state (each variant, and the A/A control, has a copy of its own). */
struct smpnet_env {
	struct cpu_ctx *c;
	void *shared;			/* the file's shared state: one copy, every CPU sees it */
	char *percpu;			/* CPU 0's copy of its per-CPU state */
	uint64_t percpu_stride;		/* bytes from one CPU's copy to the next (64-byte multiple) */
	char *pcpu_area;		/* CPU 0's copy of the object's per-CPU section
					 * (DEFINE_PER_CPU, alloc_percpu, this_cpu_off), on whole pages */
	uint64_t pcpu_area_stride;	/* bytes from one CPU's copy to the next (whole pages) */
	int cpu;			/* this emulated CPU */
	int nr_cpus;			/* emulated CPUs running the variant */
	uint64_t hold_cycles;		/* contended: what hold() spins, in TSC cycles */
	uint64_t think_cycles;		/* contended: TSC cycles between two ops */
	uint64_t deadline;		/* contended: the run's end, where a hold() stops short */
	uint64_t ops;			/* a check's: ops this copy ran, on every CPU */
	uint32_t lock_ids;		/* spin_lock_init()'s next lock id */
	int32_t role;			/* contended: this CPU's role (SMPNET_ROLES), 0 without */
	uint64_t work;			/* units of work this CPU's loop did (SMPNET_WORK) */
	const struct smpnet_skb_ops *skb_ops;	/* the model's skbs: NULL unless the
					 * file includes smpnet_skbuff.h */
};

/* The options the object was built for (SMPNET_BUILD_*: the lock
 * algorithm, the checker, the restore mode, the kernel build), which the
 * core reads from the object to set up the CPU its loops run on. */
struct smpnet_build_info {
	int algo;
	int check;
	int popf;
	int kbuild;
};

/* loops ops between two TSC reads: the cycles (fewer ops when stopped) */
typedef uint64_t (*smpnet_loop_fn)(struct smpnet_env *e, uint64_t loops);
/* ops until the TSC passes `deadline` or a stop; *ops done; 1 when stopped */
typedef int (*smpnet_contended_fn)(struct smpnet_env *e, uint64_t deadline, uint64_t *ops);
/* init: 0 or an errno; check: NULL, or what failed */
typedef int (*smpnet_init_fn)(struct smpnet_env *e);
typedef const char *(*smpnet_check_fn)(struct smpnet_env *e);

#define SMPNET_AB_MAX_VARIANTS	16
#define SMPNET_AB_NAME		32
#define SMPNET_AB_MAX_ROLES	8	/* SMPNET_ROLES' names */

/* One variant as the object registers it (its pointers as integers, which
 * is how cffi hands them to Python and Python to the core). */
struct smpnet_variant_info {
	char name[SMPNET_AB_NAME];
	int line;			/* where SMPNET_VARIANT() names it */
	int algo;			/* SMPNET_VARIANT_ALGO()'s lock algorithm; -1: the build's */
	uintptr_t loop;			/* smpnet_loop_fn */
	uintptr_t contended;		/* smpnet_contended_fn */
	uintptr_t init;			/* smpnet_init_fn, 0: none */
	uintptr_t check;		/* smpnet_check_fn, 0: none */
};

/* The layout both sides must share: the version, then every structure the
 * harness and a user's object both touch, by size and by the offset of the
 * field each reads. A change to any of them changes the hash. */
#define SMPNET_ABI_MIX(h, v)	(((h) ^ (uint64_t)(v)) * 0x100000001b3ull)
#define SMPNET_ABI_HASH									\
	SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(	\
	SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(	\
	SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(SMPNET_ABI_MIX(				\
	SMPNET_ABI_MIX(SMPNET_ABI_MIX(0xcbf29ce484222325ull,					\
	SMPNET_LAYOUT_VERSION), sizeof(struct cpu_ctx)),				\
	offsetof(struct cpu_ctx, lock_algo)), sizeof(struct smp_header)),		\
	offsetof(struct smp_header, regions)), sizeof(struct irq_cpustat)),		\
	sizeof(spinlock_t)), sizeof(struct lock_info)), sizeof(struct qnodes)),		\
	sizeof(struct smpnet_env)), offsetof(struct smpnet_env, lock_ids)),		\
	sizeof(struct smpnet_variant_info)), sizeof(struct smpnet_build_info)),		\
	offsetof(struct smpnet_variant_info, algo)), sizeof(struct smpnet_skb_ops)),	\
	offsetof(struct smpnet_env, skb_ops))

#endif
