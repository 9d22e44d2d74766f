/* preempt.h - preempt_count and the context it encodes, as
 * include/linux/preempt.h: preemption, softirq and hardirq counts packed in
 * one word, and the in_*() tests that read them; plus irqs_disabled(), the
 * soft IF of irqflags.h's model.
 *
 * Its own header, below both irqflags.h and lockdep.h: the IRQ model calls
 * the checker (lockdep_bug) and the checker asks which context it is in, so
 * both read these and neither includes the other.
 */
#ifndef SMPNET_PREEMPT_H
#define SMPNET_PREEMPT_H

#include "smp.h"

#define PREEMPT_OFFSET		(1U << 0)
#define SOFTIRQ_OFFSET		(1U << 8)
#define SOFTIRQ_DISABLE_OFFSET	(2 * SOFTIRQ_OFFSET)
#define HARDIRQ_OFFSET		(1U << 16)
#define PREEMPT_MASK		0x000000ffU
#define SOFTIRQ_MASK		0x0000ff00U
#define HARDIRQ_MASK		0x000f0000U

static inline int in_hardirq(const struct cpu_ctx *c)
{
	return (c->irq->preempt_count & HARDIRQ_MASK) != 0;
}

static inline int in_serving_softirq(const struct cpu_ctx *c)
{
	return (c->irq->preempt_count & SOFTIRQ_OFFSET) != 0;
}

static inline int in_interrupt(const struct cpu_ctx *c)
{
	return (c->irq->preempt_count & (HARDIRQ_MASK | SOFTIRQ_MASK)) != 0;
}

/* The soft IF (irqflags.h): 1 while this CPU has IRQs disabled. */
static inline int irqs_disabled(const struct cpu_ctx *c)
{
	return c->irq->irqs_off != 0;
}

static inline void preempt_disable(struct cpu_ctx *c)
{
	c->irq->preempt_count += PREEMPT_OFFSET;
	barrier();
}

static inline void preempt_enable(struct cpu_ctx *c)
{
	barrier();
	c->irq->preempt_count -= PREEMPT_OFFSET;
}

#endif
