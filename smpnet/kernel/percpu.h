/* percpu.h - the shared segment: header, region directory, per-CPU records.
 *
 * One shared-memory segment holds everything the emulated CPUs share. It
 * starts with struct smp_header; a directory of regions follows, each an
 * array of fixed-stride records (the per-CPU ones one record per emulated
 * CPU). layout.h lists every record's fields for smpnet/layout.py, which
 * builds its numpy dtypes from what the compiler reports of them.
 *
 * Records carry no alignment attribute: the stride says where record N
 * starts. The default stride rounds each record up to SMP_CACHE_BYTES, as
 * DEFINE_PER_CPU_SHARED_ALIGNED does; the "packed" layout uses the natural
 * size instead, to show what false sharing costs.
 */
#ifndef SMPNET_PERCPU_H
#define SMPNET_PERCPU_H

#include "compiler.h"
#include "spinlock_types.h"

#define SMPNET_MAGIC          0x54454e504d53ull	/* "SMPNET" */
#define SMPNET_LAYOUT_VERSION 24	/* bump on any change to a shared record: its one home */
#define SMPNET_MAX_REGIONS    24
#define SMPNET_REGION_NAME    16

/* The built-in regions, in directory order. Regions an experiment adds
 * follow them; its C code is handed their index. */
enum smp_region_id {
	REGION_CPU = 0,		/* struct cpu_state[nr_cpus] */
	REGION_SOFTNET = 1,	/* struct softnet_data[nr_cpus] */
	REGION_LSTATS = 2,	/* struct pcpu_lstats[nr_cpus] */
	REGION_IRQ = 3,		/* struct irq_cpustat[nr_cpus] */
	REGION_QNODES = 4,	/* struct qnodes[nr_cpus] */
	REGION_LOCK_INFO = 5,	/* struct lock_infos[nr_cpus]: spinlock_t's side table */
	REGION_NR_BUILTIN = 6,
};

/* header flags */
#define SMP_F_OVERSUBSCRIBED  0x1	/* more emulated CPUs than real ones */

struct smp_region {
	char     name[SMPNET_REGION_NAME];
	uint64_t offset;		/* from the start of the segment */
	uint32_t count;			/* records */
	uint32_t stride;		/* bytes from one record to the next */
};

struct smp_header {
	/* line 0: identity, written once by the creator */
	uint64_t magic;
	uint64_t layout_hash;
	uint32_t version;
	uint32_t nr_cpus;
	uint32_t nr_regions;
	uint32_t flags;
	double   tsc_hz;
	uint64_t size;
	uint32_t nr_node_ids;		/* NUMA nodes: the real CPUs', or ab's --numa-nodes */
	uint8_t  _pad0[SMP_CACHE_BYTES - 52];
	/* line 1: the stop flag, polled by every spin loop. Alone on its line
	 * so that polling it never pulls in a line somebody writes. */
	uint32_t stop;
	uint8_t  _pad1[SMP_CACHE_BYTES - 4];
	/* line 2: the start barrier, written once per worker per run */
	uint32_t barrier_arrived;
	uint32_t barrier_go;
	uint8_t  _pad2[SMP_CACHE_BYTES - 8];
	/* lines 3..: the region directory */
	struct smp_region regions[SMPNET_MAX_REGIONS];
};

/* Per emulated CPU: who runs it and where. Not a kernel structure: it is
 * the emulator's own bookkeeping, written by the worker once it is pinned. */
enum { CPU_OFFLINE = 0, CPU_ONLINE = 1, CPU_RUNNING = 2, CPU_DONE = 3 };

struct cpu_state {
	int32_t  cpu;			/* emulated CPU number */
	int32_t  real_cpu;		/* the CPU the worker is pinned to */
	int32_t  pid;
	uint32_t state;
	uint32_t seen_arrived;		/* barrier_arrived when this CPU left the barrier */
	uint32_t tsc_aux;		/* rdtscp's TSC_AUX: (node << 12) | cpu */
	uint64_t tsc_arrive;		/* TSC when it reached the barrier */
	uint64_t tsc_release;		/* TSC when it left it */
	uint64_t heartbeat;		/* rounds (and attempts) its harness finished: the
					 * watchdog's sign that a slow run still works */
	int32_t  numa_node;		/* its node (the kernel's per-CPU numa_node) */
	int32_t  sd_llc_id;		/* its last-level cache, by the first CPU that
					 * shares it (the kernel's per-CPU sd_llc_id) */
};

/* struct softnet_data (include/linux/netdevice.h): per-CPU packet queues
 * and counters. Line 0 is this CPU's own; the defer-free fields follow as
 * the kernel version each strategy models lays them out. List heads hold
 * an skb handle (index + 1), 0 for an empty list, so a zeroed segment
 * starts with empty lists. */
struct softnet_data {
	/* line 0: this CPU's own */
	uint32_t processed;
	uint32_t time_squeeze;
	uint32_t dropped;
	uint32_t poll_list;		/* NAPI instances scheduled here (bit per instance) */
	uint32_t backlog_state;		/* the backlog NAPI's NAPI_STATE_SCHED bit */
	uint32_t input_head;		/* input_pkt_queue: skb handles, 0 when empty */
	uint32_t input_tail;
	uint32_t input_qlen;
	uint32_t xmit_recursion;	/* softnet_data.xmit.recursion: nested
					 * __dev_queue_xmit() calls (dev_xmit_recursion) */
	uint8_t  _pad0[SMP_CACHE_BYTES - 36];
	/* line 1, "another possibly contended cache line", written by other
	 * CPUs. 5.19 to 6.17 (the irqsave, irq and bh strategies): the lock,
	 * the count, the IPI flag and the list, in that order, on one line
	 * (`spinlock_t defer_lock ____cacheline_aligned_in_smp; atomic_t
	 * defer_count; int defer_ipi_scheduled; struct sk_buff *defer_list;`) */
	spinlock_t defer_lock;
	uint32_t defer_count;
	uint32_t defer_ipi_scheduled;
	uint32_t defer_list;		/* skb handle */
	/* 844c9db7f7f5 (Sep 2025, the llist strategy) on the same line: no
	 * lock, `struct llist_head defer_list ____cacheline_aligned_in_smp;
	 * atomic_long_t defer_count;` */
	uint32_t defer_llist;		/* llist_head: skb handle */
	uint32_t _pad1;
	uint64_t defer_llist_count;	/* atomic_long_t */
	uint8_t  _pad2[SMP_CACHE_BYTES - 32];
	/* line 2, the llist strategy's: `int defer_ipi_scheduled
	 * ____cacheline_aligned_in_smp;`, moved off the list's line by the
	 * same commit (the csd that follows it is not modelled) */
	uint32_t defer_llist_ipi_scheduled;
	uint8_t  _pad3[SMP_CACHE_BYTES - 4];
};

/* struct pcpu_lstats (drivers/net/loopback.c), with seed 002's depth. */
struct pcpu_lstats {
	uint64_t packets;
	uint64_t bytes;
	int32_t  depth;
	int32_t  _pad;
};

/* Per-CPU IRQ, softirq and preemption state: the emulated half of the
 * CPU's flags register plus the kernel's irq_cpustat_t and preempt_count.
 * Line 0 is written only by its own CPU; line 1 by the others (IPIs), so
 * that sending an IPI never steals the line the owner writes on every
 * local_irq_disable(). */
/* The checker's report kinds (lockdep.h), one count each in bugs[]:
 * enumerator, and its name in results.
 *   LOCK_IRQ_IRQS_OFF    spin_lock_irq() entered with IRQs off
 *   HARDIRQ_INVERSION    lock used in hardirq and with IRQs on
 *   SOFTIRQ_INVERSION    lock used in softirq and with BHs on
 *   UNBALANCED_RESTORE   local_irq_restore() without save, or a save never restored
 *   RECURSION            a CPU took a lock it already holds
 *   BH_ENABLE_IRQS_OFF   local_bh_enable() with IRQs off
 *   SPIN_BUG             DEBUG_SPINLOCK's checks (x86-debug build): a
 *                        recursion, or an unlock by a CPU not the owner
 *   BAD_MAGIC            a lock taken that spin_lock_init() never saw
 *                        (DEBUG_SPINLOCK's "bad magic"): the CPU stops there */
#define LOCKDEP_BUG_TABLE(X)						\
	X(LOCKDEP_LOCK_IRQ_IRQS_OFF,	"lock_irq_with_irqs_off")	\
	X(LOCKDEP_HARDIRQ_INVERSION,	"hardirq_inversion")		\
	X(LOCKDEP_SOFTIRQ_INVERSION,	"softirq_inversion")		\
	X(LOCKDEP_UNBALANCED_RESTORE,	"unbalanced_irq_restore")	\
	X(LOCKDEP_RECURSION,		"recursion")			\
	X(LOCKDEP_BH_ENABLE_IRQS_OFF,	"bh_enable_with_irqs_off")	\
	X(LOCKDEP_SPIN_BUG,		"spin_bug")			\
	X(LOCKDEP_BAD_MAGIC,		"bad_magic")

SMP_ENUM(lockdep_bug, LOCKDEP_BUG_TABLE, LOCKDEP_NR_BUGS);

struct irq_cpustat {
	/* line 0: this CPU's own state */
	uint32_t irqs_off;		/* the soft IF: 1 while IRQs are disabled */
	uint32_t preempt_count;		/* PREEMPT | SOFTIRQ << 8 | HARDIRQ << 16 */
	uint32_t softirq_pending;	/* local_softirq_pending() */
	uint32_t save_depth;		/* checker: local_irq_save() nesting */
	uint32_t irqs_while_masked;	/* hard IRQs handled with the mask on: must stay 0 */
	uint32_t do_softirqs;		/* do_softirq() calls that ran (out of interrupt) */
	uint64_t hardirqs;		/* hard IRQs and IPIs handled */
	uint64_t softirqs;		/* softirq vectors run */
	uint64_t ipis_sent;
	uint64_t spins;			/* wait iterations in lock slow paths */
	uint64_t lock_checks;		/* acquisitions the checker looked at */
	/* line 1: written by other CPUs */
	uint32_t irq_pending;		/* vectors raised and not yet handled */
	uint8_t  _pad2[SMP_CACHE_BYTES - 4];
	/* line 2: checker reports */
	uint32_t bugs[LOCKDEP_NR_BUGS];	/* reports, by kind */
	uint32_t first_bug;		/* kind of the first report + 1, 0 if none */
	uint32_t first_bug_lock;	/* id of the lock it named */
	uint64_t flags_saves;		/* checker: real flags reads (pushf; pop) of a save,
					 * so that tests see which path ran */
	uint64_t ipi_send_cycles;	/* TSC cycles this CPU spent sending IPIs */
	uint64_t pv_halts;		/* pvqspinlock: a waiter's halts (futex waits) */
	uint64_t irq_cycles;		/* TSC cycles in irq_replay(): hard IRQs taken (entry,
					 * handlers, exit) and the softirqs they ran, so that a
					 * timed section can leave them out (skb_defer.h's flush) */
};

/* The record of emulated CPU `cpu` in a region. */
static inline void *per_cpu_ptr(const struct smp_header *hdr, int region, int cpu)
{
	const struct smp_region *r = &hdr->regions[region];
	return (char *)hdr + r->offset + (size_t)cpu * r->stride;
}

#endif
