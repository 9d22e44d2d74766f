/* smpnet_irq_locks.h - spinlock_t's calls, IRQs, bottom halves and preemption
 * in a user's `ab` file by the kernel's names, each the model's with the
 * build this object was made for, and include/linux/preempt.h's context
 * tests on the model's counts; smpnet.h includes it. Docs:
 * docs/experiments/ab.md. */
#ifndef SMPNET_IRQ_LOCKS_H
#define SMPNET_IRQ_LOCKS_H

/* The kernel's names, each with the algorithm, checker, restore mode and
 * kernel build this object was built for (constants: one path compiled,
 * as a kernel is built with one lock implementation; an entry point the
 * build calls is a direct call of its out-of-line copy, spinlock_api_smp.h). */
#define SMPNET_LOCK_ARGS	SMPNET_BUILD_ALGO, SMPNET_BUILD_CHECKER
#define spin_lock(l)		SMPNET_STOP_IF(_raw_spin_lock(smpnet_cpu, (l), SMPNET_LOCK_ARGS, SMPNET_BUILD_KERNEL))
#define spin_unlock(l)		_raw_spin_unlock(smpnet_cpu, (l), SMPNET_LOCK_ARGS, SMPNET_BUILD_KERNEL)
#define spin_lock_bh(l)		SMPNET_STOP_IF(_raw_spin_lock_bh(smpnet_cpu, (l), SMPNET_LOCK_ARGS, SMPNET_BUILD_KERNEL))
#define spin_unlock_bh(l)	_raw_spin_unlock_bh(smpnet_cpu, (l), SMPNET_LOCK_ARGS, SMPNET_BUILD_KERNEL)
#define spin_lock_irq(l)	SMPNET_STOP_IF(_raw_spin_lock_irq(smpnet_cpu, (l), SMPNET_LOCK_ARGS, SMPNET_BUILD_KERNEL))
#define spin_unlock_irq(l)	_raw_spin_unlock_irq(smpnet_cpu, (l), SMPNET_LOCK_ARGS, SMPNET_BUILD_KERNEL)
#define spin_lock_irqsave(l, flags)							\
	SMPNET_STOP_IF(_raw_spin_lock_irqsave(smpnet_cpu, (l), &(flags), SMPNET_LOCK_ARGS, SMPNET_BUILD_KERNEL))
#define spin_unlock_irqrestore(l, flags)						\
	_raw_spin_unlock_irqrestore(smpnet_cpu, (l), (flags), SMPNET_LOCK_ARGS, SMPNET_BUILD_POPF,	\
				    SMPNET_BUILD_KERNEL)

#define local_irq_disable()	local_irq_disable(smpnet_cpu)
#define local_irq_enable()	local_irq_enable(smpnet_cpu)
#define local_irq_save(flags)	((flags) = __local_irq_save(smpnet_cpu, SMPNET_BUILD_CHECKER))
#define local_irq_restore(flags)	__local_irq_restore(smpnet_cpu, (flags), SMPNET_BUILD_CHECKER, SMPNET_BUILD_POPF)
#define local_bh_disable()	local_bh_disable(smpnet_cpu)
#define local_bh_enable()	local_bh_enable_ip(smpnet_cpu, SMPNET_BUILD_CHECKER, SMPNET_BUILD_KERNEL)
#define preempt_disable()	preempt_disable(smpnet_cpu)
#define preempt_enable()	preempt_enable(smpnet_cpu)
#define irqs_disabled()		irqs_disabled(smpnet_cpu)
/* include/linux/preempt.h's context tests, on the model's count */
#define preempt_count()		(READ_ONCE(smpnet_cpu->irq->preempt_count))
#define hardirq_count()		(preempt_count() & HARDIRQ_MASK)
#define softirq_count()		(preempt_count() & SOFTIRQ_MASK)
#define in_softirq()		(softirq_count() != 0)
#define in_task()		(!(preempt_count() & (HARDIRQ_MASK | SOFTIRQ_OFFSET)))
#define in_atomic()		(preempt_count() != 0)
#define preemptible()		(preempt_count() == 0 && !irqs_disabled())

#endif
