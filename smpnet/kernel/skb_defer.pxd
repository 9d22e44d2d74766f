from smpnet.kernel.smp cimport cpu_ctx
from smpnet.kernel.sk_buff cimport sk_buff
from smpnet.kernel.skbuff cimport net_ctx

cdef extern from "skb_defer.h" nogil:
    void skb_attempt_defer_free(cpu_ctx *c, net_ctx *n, sk_buff *skb)
    void skb_defer_free_flush(cpu_ctx *c, net_ctx *n)
