from smpnet.kernel.smp cimport cpu_ctx

cdef extern from "preempt.h" nogil:
    void preempt_disable(cpu_ctx *c)
    void preempt_enable(cpu_ctx *c)
    int irqs_disabled(const cpu_ctx *c)
    int in_hardirq(const cpu_ctx *c)
