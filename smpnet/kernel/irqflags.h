/* irqflags.h - the IRQ model: local_irq_*, bottom halves,
 * softirqs, and emulated hard IRQs and IPIs.
 *
 * cli/sti fault at CPL3, so the IF bit is a per-CPU soft mask
 * (irq_cpustat.irqs_off), as PowerPC lazy masking and LKL do. Everything
 * else is as on x86 since 5.12 (ab234a260b1f):
 *   local_irq_save()     real `pushf; pop` of the flags register, then the mask
 *   local_irq_restore()  test the saved IF, enable only if it was on; or,
 *                        with c->popf (older kernels), a real `push; popf`
 * A hard IRQ or IPI is a bit another CPU sets in our irq_pending word; it
 * runs when this CPU re-enables IRQs or polls with them on (irq_poll), in
 * hardirq context, followed by softirqs on irq_exit as the kernel does.
 * The preempt_count and the context tests that read it are preempt.h's;
 * the checker's reports (--check) are lockdep.h's.
 */
#ifndef SMPNET_IRQFLAGS_H
#define SMPNET_IRQFLAGS_H

#include "atomic.h"
#include "kernel_build.h"
#include "lockdep.h"
#include "preempt.h"
#include "smp.h"

#define X86_EFLAGS_IF		0x200UL
/* What a restore may load with popf: IF, the arithmetic flags and the
 * always-one bit 1. Never TF, DF, AC and the like, whatever the caller
 * passes: they would trap or break the ABI. */
#define X86_EFLAGS_RESTORABLE	(X86_EFLAGS_IF | 0x8d5UL | 0x2UL)

/* softirq vectors, numbered as in include/linux/interrupt.h */
enum { HI_SOFTIRQ = 0, TIMER_SOFTIRQ, NET_TX_SOFTIRQ, NET_RX_SOFTIRQ, NR_SOFTIRQS = 10 };
#define MAX_SOFTIRQ_RESTART 10

/* hard IRQ vectors of the emulated machine */
enum { IRQ_TEST = 0, IPI_NET_RX = 1, NR_IRQ_VECTORS = 32 };

typedef void (*irq_handler_t)(struct cpu_ctx *c, unsigned int vector);
typedef void (*softirq_action_t)(struct cpu_ctx *c);

/* Handlers are per process (function pointers), set before a run. */
static irq_handler_t irq_handlers[NR_IRQ_VECTORS];
static softirq_action_t softirq_vec[NR_SOFTIRQS];

/* ---------------------------------------------------------------- the real flags register */

static inline unsigned long native_save_fl(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned long flags;
	/* built with -mno-red-zone, as the kernel is: the push may not
	 * clobber locals below the stack pointer */
	__asm__ __volatile__("pushf ; pop %0" : "=rm"(flags) : : "memory");
	return flags;
#else
	barrier();
	return X86_EFLAGS_IF;	/* a soft read: no flags register to save */
#endif
}

static inline void native_restore_fl(unsigned long flags)
{
#if defined(__x86_64__) || defined(__i386__)
	/* At CPL3 with IOPL 0, popf leaves IF alone (no fault): the cost is
	 * real, the mask is ours. */
	__asm__ __volatile__("push %0 ; popf" : : "g"(flags) : "memory", "cc");
#else
	(void)flags;
	barrier();
#endif
}

/* ---------------------------------------------------------------- hard IRQs */

static void do_softirq(struct cpu_ctx *c);
static void __do_softirq(struct cpu_ctx *c);

/* The interrupt's entry, the kernel's handling of it and its exit on the
 * target, as a calibrated spin: what a real IPI costs the CPU it
 * interrupts on this machine (ipi_cycles()'s entry in core/ipi.pyx: the
 * gap an IPI leaves in a thread's TSC readings there), measured once per
 * run; nothing when it is 0. The model's handler runs on top. */
static inline void irq_entry_cost(const struct cpu_ctx *c)
{
	tsc_spend(c->irq_entry_cycles);
}

/* Run every pending hard IRQ, in hardirq context with IRQs off, then the
 * softirqs they raised (irq_exit -> invoke_softirq). */
static __attribute__((__noinline__)) void irq_replay(struct cpu_ctx *c)
{
	struct irq_cpustat *irq = c->irq;
	uint64_t t0 = tsc_read_unordered();	/* into irq_cycles: see percpu.h */
	uint32_t pending;

	while ((pending = atomic_xchg(&irq->irq_pending, 0)) != 0) {
		if (irq->irqs_off)
			irq->irqs_while_masked++;	/* a bug in the model: tests watch it */
		irq->irqs_off = 1;
		irq->preempt_count += HARDIRQ_OFFSET;	/* irq_enter */
		while (pending) {
			unsigned int vec = __builtin_ctz(pending);

			pending &= pending - 1;
			irq->hardirqs++;
			irq_entry_cost(c);
			if (irq_handlers[vec])
				irq_handlers[vec](c, vec);
		}
		irq->preempt_count -= HARDIRQ_OFFSET;	/* irq_exit */
		/* invoke_softirq(): __do_softirq() itself, IRQs still off and
		 * on the IRQ's stack (do_softirq()'s save, restore and switch
		 * are for task context); the next pending IRQ is then taken by
		 * this loop, in turn, not nested in a restore */
		if (!in_interrupt(c) && irq->softirq_pending)
			__do_softirq(c);
		irq->irqs_off = 0;
	}
	irq->irq_cycles += tsc_read_unordered() - t0;
}

static inline void local_irq_disable(struct cpu_ctx *c)
{
	c->irq->irqs_off = 1;
	barrier();
}

static inline void local_irq_enable(struct cpu_ctx *c)
{
	barrier();
	c->irq->irqs_off = 0;
	barrier();
	if (unlikely(READ_ONCE(c->irq->irq_pending)))
		irq_replay(c);
}

/* An interrupt window: take pending IRQs if they are enabled here. */
static inline void irq_poll(struct cpu_ctx *c)
{
	if (!c->irq->irqs_off && unlikely(READ_ONCE(c->irq->irq_pending)))
		irq_replay(c);
}

/* One wait step of a lock's spin loop (spinlock.h, mcs_spinlock.h): a
 * CPU spinning with IRQs on takes them. -1 when the run is being stopped
 * (or the caller's deadline passed: Python-driven CPUs set one, they have
 * no stop flag raised for them). */
static inline int spin_wait(struct cpu_ctx *c)
{
	c->irq->spins++;
	if (smp_should_stop(c->hdr))
		return -1;
	if (unlikely(c->spin_deadline) && tsc_read_unordered() > c->spin_deadline)
		return -1;
	irq_poll(c);
	smp_spin_wait(c->hdr);
	return 0;
}

/* Raise `vector` on `target` and return: smp_call_function_single_async()
 * (kernel/smp.c) queues its csd on the target's call_single_queue (here:
 * the bit in the target's pending word, set atomically on the target's
 * line) and sends one IPI, and never waits for the target. The sender pays
 * c->ipi_send_cost for the send, what an IPI's send costs on this machine
 * (the ICR write, a VM exit in many guests: ipi_cycles() in core/ipi.pyx,
 * measured once per command, or --ipi-cycles), as a calibrated spin timed into
 * ipi_send_cycles. The target's side (entry, handler, exit) is charged to
 * the target when it takes the IPI: irq_entry_cost(). */
static inline void send_ipi(struct cpu_ctx *c, int target, unsigned int vector)
{
	struct irq_cpustat *t = (struct irq_cpustat *)per_cpu_ptr(c->hdr, REGION_IRQ, target);

	__atomic_fetch_or(&t->irq_pending, 1U << vector, __ATOMIC_SEQ_CST);
	c->irq->ipis_sent++;
	if (c->ipi_send_cost) {
		uint64_t t0 = tsc_read_unordered();

		tsc_spend(c->ipi_send_cost);
		c->irq->ipi_send_cycles += tsc_read_unordered() - t0;
	}
}


/* ---------------------------------------------------------------- save/restore */

/* Each with the checker (check) and the restore mode (popf) as arguments:
 * the loops that time them pass constants (time_bench.h), so each of their
 * specialisations has no test of either; everyone else passes c->check and
 * c->popf through the wrappers below. */
static __always_inline unsigned long __local_irq_save_fl(struct cpu_ctx *c, unsigned long fl,
						       const int check)
{
	unsigned long flags = fl & ~X86_EFLAGS_IF;

	if (!c->irq->irqs_off)
		flags |= X86_EFLAGS_IF;
	local_irq_disable(c);
	if (unlikely(check))
		c->irq->save_depth++;
	return flags;
}

/* The real `pushf; pop` of a save; with the checker on, counted in
 * irq_cpustat.flags_saves, so that a test sees the save ran (the timed
 * loops without the checker are unchanged). */
static __always_inline unsigned long __save_fl(struct cpu_ctx *c, const int check)
{
	if (unlikely(check))
		c->irq->flags_saves++;
	return native_save_fl();
}

/* local_irq_save(): the real `pushf; pop`, then the soft mask merged in.
 * (__local_irq_save_fl() with another source of `fl` is time_bench's
 * control: every instruction of the save but the pushf; pop.) */
static __always_inline unsigned long __local_irq_save(struct cpu_ctx *c, const int check)
{
	return __local_irq_save_fl(c, __save_fl(c, check), check);
}

static __always_inline void __local_irq_restore(struct cpu_ctx *c, unsigned long flags,
						const int check, const int popf)
{
	if (unlikely(check)) {
		if (c->irq->save_depth == 0)
			lockdep_bug(c, LOCKDEP_UNBALANCED_RESTORE, NULL);
		else
			c->irq->save_depth--;
	}
	if (unlikely(popf)) {
		native_restore_fl((flags & X86_EFLAGS_RESTORABLE) | X86_EFLAGS_IF);
		if (flags & X86_EFLAGS_IF)
			local_irq_enable(c);
		return;
	}
	if (flags & X86_EFLAGS_IF)	/* !arch_irqs_disabled_flags(flags) */
		local_irq_enable(c);
}

static inline unsigned long local_irq_save(struct cpu_ctx *c)
{
	return __local_irq_save(c, c->check);
}

static inline void local_irq_restore(struct cpu_ctx *c, unsigned long flags)
{
	__local_irq_restore(c, flags, c->check, c->popf);
}

/* ---------------------------------------------------------------- softirqs */

static inline void raise_softirq(struct cpu_ctx *c, unsigned int nr)
{
	c->irq->softirq_pending |= 1U << nr;
}

/* __do_softirq(): handlers run with IRQs on and SOFTIRQ_OFFSET held;
 * restart while more was raised, at most MAX_SOFTIRQ_RESTART times.
 * Entered and left with IRQs off. */
static __attribute__((__noinline__)) void __do_softirq(struct cpu_ctx *c)
{
	struct irq_cpustat *irq = c->irq;
	int restart = MAX_SOFTIRQ_RESTART;
	uint32_t pending;

	irq->preempt_count += SOFTIRQ_OFFSET;
	do {
		pending = irq->softirq_pending;
		irq->softirq_pending = 0;
		local_irq_enable(c);
		while (pending) {
			unsigned int nr = __builtin_ctz(pending);

			pending &= pending - 1;
			irq->softirqs++;
			if (softirq_vec[nr])
				softirq_vec[nr](c);
		}
		local_irq_disable(c);
	} while (irq->softirq_pending && --restart);
	irq->preempt_count -= SOFTIRQ_OFFSET;
}

/* do_softirq(), as kernel/softirq.c has it today and 2.6.24's
 * arch/x86/kernel/irq_64.c had it: local_irq_save() (the real pushf), then
 * on the softirq stack (2.6.24's call_softirq: `incl %gs:pda_irqcount`,
 * the stack pointer swapped, __do_softirq() called, `decl`; today's
 * do_softirq_own_stack()) __do_softirq(), then local_irq_restore(): a
 * popf where the kernel is older than 5.12 (c->popf, as the loopback
 * experiment's 2.6.24 is). The stack switch is the count alone: the
 * stack pointer stays. */
static __attribute__((__noinline__)) void do_softirq(struct cpu_ctx *c)
{
	unsigned long flags;

	if (in_interrupt(c))
		return;
	c->irq->do_softirqs++;
	flags = local_irq_save(c);
	if (c->irq->softirq_pending) {
		WRITE_ONCE(c->irq_stack_count, c->irq_stack_count + 1);
		__do_softirq(c);
		WRITE_ONCE(c->irq_stack_count, c->irq_stack_count - 1);
	}
	local_irq_restore(c, flags);
}

static inline void local_bh_disable(struct cpu_ctx *c)
{
	c->irq->preempt_count += SOFTIRQ_DISABLE_OFFSET;
	barrier();
}

/* __local_bh_enable_ip(): keep preemption off while running what was raised.
 * With IRQs off it is a caller bug (the kernel warns): do_softirq would turn
 * them on under the caller. */
static __always_inline void __local_bh_enable(struct cpu_ctx *c, const int check)
{
	if (unlikely(check) && c->irq->irqs_off)
		lockdep_bug(c, LOCKDEP_BH_ENABLE_IRQS_OFF, NULL);
	barrier();
	c->irq->preempt_count -= SOFTIRQ_DISABLE_OFFSET - 1;
	if (unlikely(!in_interrupt(c) && c->irq->softirq_pending))
		do_softirq(c);
	c->irq->preempt_count -= 1;
}

/* The kernel's local_bh_enable() is a call of __local_bh_enable_ip(),
 * which kernel/softirq.c keeps out of line in every kernel
 * (include/linux/bottom_half.h declares it extern; no Kconfig option
 * inlines it), returning through the return thunk where the kernel does:
 * one noinline copy per checker and return, called in every x86 build;
 * inline in the inline build only (smpnet's model before builds). The
 * copy is smpnet's body: not the kernel's WARN_ON_ONCE(in_hardirq()) nor,
 * in a PREEMPTION build, its preempt_check_resched(). */
#define DEFINE_LOCAL_BH_ENABLE_IP(check, t)						\
	static __attribute__((__noinline__)) RETURN_VIA_##t void				\
	__local_bh_enable_ip_##check##_##t(struct cpu_ctx *c)				\
	{										\
		RETURN_ENTER_##t;							\
		__local_bh_enable(c, check);						\
	}
DEFINE_LOCAL_BH_ENABLE_IP(0, 0)
DEFINE_LOCAL_BH_ENABLE_IP(0, 1)
DEFINE_LOCAL_BH_ENABLE_IP(0, 2)
DEFINE_LOCAL_BH_ENABLE_IP(1, 0)
DEFINE_LOCAL_BH_ENABLE_IP(1, 1)
DEFINE_LOCAL_BH_ENABLE_IP(1, 2)

/* the copy of `check` (a literal) and return `ret` */
#define LOCAL_BH_ENABLE_IP_COPY(check, ret)	RETURN_COPY(__local_bh_enable_ip_##check, ret)

/* local_bh_enable() as kernel build `build` has it: the body inline, or a
 * direct call of the copy (with constant arguments, the timed loops and a
 * user's object, one of the four; with run-time ones, a test and a direct
 * call, never one through a pointer, which the kernel does not make) */
static __always_inline void local_bh_enable_ip(struct cpu_ctx *c, const int check,
					       const int build)
{
	if (kbuild_shape(build) == KSHAPE_INLINE)
		__local_bh_enable(c, check);
	else if (check)
		LOCAL_BH_ENABLE_IP_COPY(1, kbuild_return(build))(c);
	else
		LOCAL_BH_ENABLE_IP_COPY(0, kbuild_return(build))(c);
}

static inline void local_bh_enable(struct cpu_ctx *c)
{
	local_bh_enable_ip(c, c->check, c->kbuild);
}

#endif
