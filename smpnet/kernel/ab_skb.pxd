from smpnet.kernel.ab cimport smpnet_skb_ops

cdef extern from "ab_skb.h" nogil:
    const smpnet_skb_ops ab_skb_ops
