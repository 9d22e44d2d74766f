/* smp.h - what the emulated CPUs do together: start barrier, stop flag.
 *
 * Every spin loop in smpnet polls hdr->stop (smp_should_stop), so a run
 * whose worker died, or whose coordinator got Ctrl-C, ends promptly instead
 * of spinning on a lock nobody will release. When the machine is
 * oversubscribed (two emulated CPUs share a real one), waiting with `pause`
 * would burn the time slice the other one needs: spin loops yield instead.
 */
#ifndef SMPNET_SMP_H
#define SMPNET_SMP_H

#include <limits.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include "atomic.h"
#include "percpu.h"
#include "tsc.h"

/* What one emulated CPU carries through its run: process-private, on the
 * worker's stack. The per-CPU records it points at are in shared memory. */
struct net_ctx;
struct lock_info;

struct cpu_ctx {
	struct smp_header *hdr;
	int cpu;
	int check;			/* the lock/IRQ checker is on */
	int popf;			/* local_irq_restore() with popf (before 5.12) */
	struct irq_cpustat *irq;	/* this CPU's IRQ state */
	struct qnodes *qnodes;		/* this CPU's lock queue nodes */
	struct spinlock *irq_test_lock;	/* taken by the test IRQ handler, if set */
	uint64_t spin_deadline;		/* TSC after which a lock wait gives up; 0: never */
	struct net_ctx *net;		/* the network model, for CPUs that run it */
	uint64_t ipi_send_cost;		/* what sending an IPI costs its sender; 0: nothing */
	uint64_t irq_entry_cycles;	/* what a hard IRQ's entry and exit cost; 0: nothing */
	int lock_algo;			/* the algorithm of every lock this CPU takes by the
					 * kernel's names (spinlock.h's spin_algo()), as a
					 * kernel is built with one; -1: each lock's own */
	int kbuild;			/* the kernel build the lock entry points and
					 * local_bh_enable() follow (kernel_build.h) */
	const struct spinlock *last_lock;	/* the lock this CPU found the entry of
					 * last (lockdep.h's spin_lock_info()); NULL: none yet */
	struct lock_info *last_lock_info;	/* and that entry: a lock keeps its entry
					 * for the segment's life */
	uint64_t lock_info_searches;	/* side-table searches spin_lock_info() made */
	int irq_stack_count;		/* on the softirq stack (2.6.24's pda_irqcount):
					 * do_softirq()'s switch, irqflags.h */
	int mcs_node_held;		/* the MCS/CLH node this CPU's last acquire
					 * queued (mcs_spinlock.h): the node the kernel's
					 * caller holds and passes to the unlock */
	int numa_node;			/* this CPU's node, cpu_state's: what
					 * numa_node_id() reads, one load as the kernel's */
};

static inline void cpu_ctx_init(struct cpu_ctx *c, struct smp_header *hdr, int cpu,
				int check, int popf)
{
	c->hdr = hdr;
	c->cpu = cpu;
	c->check = check;
	c->popf = popf;
	c->irq = (struct irq_cpustat *)per_cpu_ptr(hdr, REGION_IRQ, cpu);
	c->qnodes = (struct qnodes *)per_cpu_ptr(hdr, REGION_QNODES, cpu);
	c->irq_test_lock = NULL;
	c->spin_deadline = 0;
	c->net = NULL;
	c->ipi_send_cost = 0;
	c->irq_entry_cycles = 0;
	c->lock_algo = -1;
	c->kbuild = 0;			/* KBUILD(KSHAPE_INLINE, KRET_RET) */
	c->last_lock = NULL;
	c->last_lock_info = NULL;
	c->lock_info_searches = 0;
	c->irq_stack_count = 0;
	c->mcs_node_held = 0;
	c->numa_node = ((const struct cpu_state *)per_cpu_ptr(hdr, REGION_CPU, cpu))->numa_node;
}

/* this CPU's pcpu_lstats (loopback's counters; the referee's per-CPU word) */
static inline struct pcpu_lstats *this_lstats(struct cpu_ctx *c)
{
	return (struct pcpu_lstats *)per_cpu_ptr(c->hdr, REGION_LSTATS, c->cpu);
}

static inline int smp_should_stop(const struct smp_header *hdr)
{
	return unlikely(READ_ONCE(hdr->stop) != 0);
}

/* One wait step of a spin loop: pause, or give the real CPU away. */
static inline void smp_spin_wait(const struct smp_header *hdr)
{
	if (unlikely(hdr->flags & SMP_F_OVERSUBSCRIBED))
		sched_yield();
	else
		cpu_relax();
}

/* The start barrier: the last CPU to arrive opens it for everyone.
 * Returns 0 when released, -1 when the run was stopped first.
 * Oversubscribed, the early arrivals sleep on a futex (shared, the segment
 * is MAP_SHARED) instead of yielding: a thousand runnable yielders would
 * starve the coordinator still forking the rest. They wake every 10 ms to
 * poll the stop flag, which nobody wakes them for. */
static inline int smp_barrier_wait(struct smp_header *hdr, struct cpu_state *cs)
{
	const struct timespec poll = { 0, 10 * 1000 * 1000 };
	int sleep = hdr->flags & SMP_F_OVERSUBSCRIBED;

	cs->tsc_arrive = tsc_start();
	if (atomic_inc_return(&hdr->barrier_arrived) == hdr->nr_cpus) {
		atomic_set(&hdr->barrier_go, 1);
		if (sleep)
			syscall(SYS_futex, &hdr->barrier_go, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
	while (!atomic_read(&hdr->barrier_go)) {
		if (smp_should_stop(hdr))
			return -1;
		if (sleep)
			syscall(SYS_futex, &hdr->barrier_go, FUTEX_WAIT, 0, &poll, NULL, 0);
		else
			cpu_relax();
	}
	cs->tsc_release = tsc_start();
	cs->seen_arrived = atomic_read(&hdr->barrier_arrived);
	return 0;
}

/* cpu_idle_poll(): spin until the run is stopped or `timeout_ns` passes.
 * Returns the number of polls. A worker that only waits for the stop flag
 * uses it; so do the tests that kill a worker mid-run. */
static inline uint64_t cpu_idle_poll(const struct smp_header *hdr, uint64_t timeout_ns)
{
	uint64_t polls = 0, deadline = mono_ns() + timeout_ns;

	while (!smp_should_stop(hdr)) {
		smp_spin_wait(hdr);
		if ((++polls & 1023) == 0 && mono_ns() >= deadline)
			break;
	}
	return polls;
}

#endif
