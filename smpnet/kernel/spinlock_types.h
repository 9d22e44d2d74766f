/* spinlock_types.h - spinlock_t, its side table and the MCS queue node, as
 * laid out in the shared segment.
 *
 * spinlock_t is the kernel's: one 4-byte word (arch_spinlock_t, x86-64,
 * no lock debugging), so a lock embedded in a record changes that record's
 * layout exactly as the kernel's does. The word is read the way the
 * lock's algorithm reads it:
 *   tas, ttas   0 free, 1 held
 *   ticket      low 16 bits: the ticket being served; high 16: the next ticket
 *   qspinlock   the kernel's x86 layout (include/asm-generic/qspinlock_types.h,
 *               NR_CPUS < 16K): locked byte, pending byte, 16-bit MCS tail;
 *               pvqspinlock and virt_tas the same word (the locked byte
 *               _Q_SLOW_VAL while pvqspinlock's queue head sleeps)
 *   mcs, clh    the whole word is the queue's tail, a node of struct
 *               qnodes.mcs encoded as (cpu + 1, index); 0 free, no queue
 *   pthread     unused: the lock is the process-shared mutex in its lock_info
 * Everything else a lock has here lives in a side table, struct lock_info,
 * found from the lock's offset in the segment (lockdep.h's lock_info()):
 * the algorithm it was initialised for, the checker's owner and usage
 * bits, the id reports name it by, and the pthread mutex. The kernel keeps
 * lockdep's state apart from the lock in the same way (a class looked up
 * by key); what it keeps in the lock with CONFIG_DEBUG_SPINLOCK, smpnet
 * keeps out, so that turning the checker on moves nothing.
 */
#ifndef SMPNET_SPINLOCK_TYPES_H
#define SMPNET_SPINLOCK_TYPES_H

#include <pthread.h>
#include "compiler.h"

/* The algorithms: enumerator, and its name as Python offers it. */
#define SPIN_ALGO_TABLE(X)			\
	X(SPIN_TAS,		"tas")		\
	X(SPIN_TTAS,		"ttas")		\
	X(SPIN_TICKET,		"ticket")	\
	X(SPIN_QSPINLOCK,	"qspinlock")	\
	X(SPIN_PVQSPINLOCK,	"pvqspinlock")	\
	X(SPIN_VIRT_TAS,	"virt_tas")	\
	X(SPIN_MCS,		"mcs")		\
	X(SPIN_CLH,		"clh")		\
	X(SPIN_PTHREAD,		"pthread")

SMP_ENUM(spin_algo, SPIN_ALGO_TABLE, SPIN_NR_ALGOS);

/* An out-of-line copy of algorithm `algo` in a table (spinlock_api_smp.h's
 * entry points, spinlock_debug.h's): every algorithm's in the core; in a
 * user's object (smpnet.h: SMPNET_BUILD_ALGO), its build's alone, every
 * lock it takes being of that algorithm. Another's entry is NULL, and its
 * copies, referenced by nothing, are never compiled: they were most of the
 * compiler's time on a file. */
#ifdef SMPNET_BUILD_ALGO
#define SPIN_COPY(algo, fn)	((algo) == SMPNET_BUILD_ALGO ? (fn) : 0)
#else
#define SPIN_COPY(algo, fn)	(fn)
#endif

typedef struct spinlock {
	union {
		uint32_t val;
		struct {
			uint8_t locked;
			uint8_t pending;
		};
		struct {
			uint16_t locked_pending;	/* ticket: now serving */
			uint16_t tail;			/* ticket: next ticket */
		};
	};
} spinlock_t;

_Static_assert(sizeof(spinlock_t) == 4, "spinlock_t is the kernel's 4 bytes");

/* How a lock is named where it is not at hand, the same in every process:
 * its offset in the segment `hdr` + 1 (so 0 names none). The side table's
 * entries (lockdep.h) and the queue locks' nodes (mcs_spinlock.h) carry it. */
static inline uint64_t spin_lock_key(const void *hdr, const spinlock_t *l)
{
	return (uint64_t)((const char *)l - (const char *)hdr) + 1;
}

/* A lock's entry in the side table: one cache line, so that one pthread
 * lock's mutex shares its line with no other lock's entry. `key` is the
 * lock's offset in the segment + 1 (0: a free entry). */
struct lock_info {
	uint64_t key;
	uint32_t algo;		/* enum spin_algo */
	uint32_t owner;		/* checker: holder's CPU + 1, 0 when free */
	uint32_t usage;		/* checker: LOCK_USED_* bits (lockdep.h) */
	uint32_t id;		/* named in checker reports */
	union {
		pthread_mutex_t mutex;
		uint8_t mutex_raw[40];
	};
};

_Static_assert(sizeof(pthread_mutex_t) <= 40, "pthread_mutex_t does not fit lock_info");
_Static_assert(sizeof(struct lock_info) == 64, "a lock_info is one cache line");

/* The side table is a built-in region with one record per CPU, so that it
 * grows with the machine: LOCK_INFO_PER_CPU entries each, searched as one
 * open-addressed hash table of nr_cpus * LOCK_INFO_PER_CPU entries. */
#define LOCK_INFO_PER_CPU 32

struct lock_infos {
	struct lock_info e[LOCK_INFO_PER_CPU];
};

/* A lock and the datum it protects, as the lock benchmarks and the
 * mutual-exclusion tests use them: a non-atomic counter that only the
 * holder increments, so that any lost update shows. */
struct lock_slot {
	spinlock_t lock;
	uint32_t _pad;
	uint64_t counter;
};

/* struct mcs_spinlock (kernel/locking/mcs_spinlock.h), with the `next`
 * pointer replaced by an encoded tail so that it means the same thing in
 * every process mapping the segment. */
struct qnode {
	uint32_t next;		/* encoded tail of the waiter behind us, 0 if none */
	uint32_t locked;	/* 1 once the lock is handed to us */
	uint32_t count;		/* nesting level in use (node 0 only) */
	uint32_t pv_state;	/* pvqspinlock: enum vcpu_state, the futex a waiter sleeps on */
};

/* One node per context a CPU can spin in: task, softirq, hardirq, NMI. */
#define MAX_NODES 4

/* A node of the plain queue locks (mcs_spinlock.h). Unlike qspinlock's,
 * which is done with its node once it owns the lock, an MCS or CLH holder
 * keeps its node until it unlocks, and may hold several locks, released in
 * any order: `lock` says which lock a node is in use for, so the unlock
 * finds it, and is 0 when the node is free. */
struct mcs_node {
	uint32_t next;		/* mcs: encoded node of the waiter behind us, 0 if none */
	uint32_t locked;	/* mcs: 1 once the lock is handed to us;
				 * clh: 1 until this node's holder releases the lock */
	uint64_t lock;		/* spin_lock_key() of the lock, 0: free */
};

/* Nodes for queue locks held or waited for at once on one CPU: two per
 * context, so a handler can take a lock while its task holds two. */
#define MCS_NODE_BITS 3
#define MCS_NODES (1 << MCS_NODE_BITS)

struct qnodes {
	struct qnode n[MAX_NODES];		/* qspinlock's, one per context */
	struct mcs_node mcs[MCS_NODES];		/* mcs and clh */
};

#endif
