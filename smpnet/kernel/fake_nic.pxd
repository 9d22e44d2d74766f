from libc.stdint cimport uint32_t, uint64_t
from smpnet.kernel.skbuff cimport net_ctx
from smpnet.kernel.smp cimport cpu_ctx

cdef extern from "fake_nic.h" nogil:
    enum: SKB_RING_SIZE

    struct skb_ring:
        uint32_t head
        uint32_t tail

    struct defer_ctl:
        uint32_t rx_done
        uint32_t consumers_done

    skb_ring *ring_of(net_ctx *n, int rx, int consumer)
    int ring_pop(skb_ring *r, uint64_t *v)
    void fake_nic_irq(cpu_ctx *c)
    void fake_nic_init()
