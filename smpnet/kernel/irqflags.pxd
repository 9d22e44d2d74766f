from libc.stdint cimport uint32_t
from smpnet.kernel.smp cimport cpu_ctx

cdef extern from "irqflags.h" nogil:
    enum: IRQ_TEST
    enum: HI_SOFTIRQ
    enum: IPI_NET_RX
    enum: NET_RX_SOFTIRQ
    enum: NR_SOFTIRQS
    enum: NR_IRQ_VECTORS

    ctypedef void (*irq_handler_t)(cpu_ctx *c, unsigned int vector) noexcept nogil
    ctypedef void (*softirq_action_t)(cpu_ctx *c) noexcept nogil
    irq_handler_t irq_handlers[32]
    softirq_action_t softirq_vec[10]

    void local_irq_disable(cpu_ctx *c)
    void local_irq_enable(cpu_ctx *c)
    unsigned long local_irq_save(cpu_ctx *c)
    void local_irq_restore(cpu_ctx *c, unsigned long flags)
    void local_bh_disable(cpu_ctx *c)
    void local_bh_enable(cpu_ctx *c)
    void raise_softirq(cpu_ctx *c, unsigned int nr)
    void irq_poll(cpu_ctx *c)
    void send_ipi(cpu_ctx *c, int target, unsigned int vector)
    void do_softirq(cpu_ctx *c)
