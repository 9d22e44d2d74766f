/* sk_buff.h - the model's skb head, alone: what skbuff.h's allocator and
 * lists work on, and what a user's file sees of an skb when it takes the
 * model's skb life cycle (smpnet/include/smpnet_skbuff.h). See skbuff.h.
 */
#ifndef SMPNET_SK_BUFF_H
#define SMPNET_SK_BUFF_H

#include <stdint.h>

struct sk_buff {			/* one cache line */
	uint32_t next;			/* handle of the next skb on a list, 0 at the end */
	uint32_t alloc_cpu;
	uint32_t gen;			/* bumped on every allocation */
	uint32_t state;			/* SKB_FREE or SKB_LIVE */
	uint32_t len;
	uint32_t hash;
	uint64_t tstamp;
	uint8_t  cb[32];		/* what protocol layers write and read */
};

#endif
