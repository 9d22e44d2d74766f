/* link.h - the emulated Ethernet between the ARP experiment's two hosts,
 * and what each host does with it.
 *
 * Two SPSC rings of frames, one per direction. Host A pings host B through
 * its neighbour table; host B answers ARP requests (learning A's address)
 * and ICMP echo requests, unless the peer is down. Every echo request
 * carries the TSC of its sendmsg, so the round trip includes the wait for
 * resolution, as ping's does.
 */
#ifndef SMPNET_LINK_H
#define SMPNET_LINK_H

#include "neighbour.h"

enum { FRAME_ARP_REQUEST = 1, FRAME_ARP_REPLY = 2, FRAME_ECHO = 3, FRAME_ECHO_REPLY = 4,
       NR_FRAME_TYPES = 5 };
enum { PING_PENDING = 0, PING_OK = 1, PING_ERROR = 2, PING_TIMEOUT = 3 };
#define LINK_SLOTS	256
#define PING_SIZE	84	/* ping's 56 data bytes in ICMP and IPv4 */
#define HOST_A_IP	0xc0a81401u	/* 192.168.20.1 */
#define HOST_B_IP	0xc0a8146cu	/* 192.168.20.108, the seed's */

struct frame {
	uint32_t type;
	uint32_t src_ip;
	uint32_t dst_ip;
	uint32_t seq;			/* the ping's index in the results */
	uint8_t  src_mac[8];
	uint8_t  dst_mac[8];
	uint64_t tstamp;		/* TSC at the echo request's sendmsg */
	uint8_t  _pad[24];		/* one cache line a frame */
};

struct link_ring {
	uint32_t head;
	uint8_t  _pad0[SMP_CACHE_BYTES - 4];
	uint32_t tail;
	uint8_t  _pad1[SMP_CACHE_BYTES - 4];
	struct frame f[LINK_SLOTS];
};

struct ping_result {			/* a cache line, so that C can index the region */
	uint64_t tstamp;		/* TSC at sendmsg */
	uint64_t rtt;			/* TSC cycles to the reply */
	uint32_t status;		/* PING_* */
	uint8_t  _pad[SMP_CACHE_BYTES - 20];
};

struct arp_ctl {
	uint32_t done;			/* host A finished: host B may stop */
	uint32_t peer_down;		/* host B answers nothing */
	uint32_t b_arp_requests;	/* ARP requests host B saw */
	uint32_t b_learned;		/* host B's entry for A: its nud_state */
	uint64_t b_echoes;		/* echo requests host B answered */
	double   a_tick_cycles;		/* host A's jiffy, TSC cycles: what its timers ran on */
	uint8_t  _pad[SMP_CACHE_BYTES - 32];
};

static inline int link_push(struct link_ring *r, const struct frame *f)
{
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);

	if (r->head - tail == LINK_SLOTS)
		return 0;
	r->f[r->head % LINK_SLOTS] = *f;
	__atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
	return 1;
}

static inline int link_pop(struct link_ring *r, struct frame *f)
{
	if (r->tail == __atomic_load_n(&r->head, __ATOMIC_ACQUIRE))
		return 0;
	*f = r->f[r->tail % LINK_SLOTS];
	__atomic_store_n(&r->tail, r->tail + 1, __ATOMIC_RELEASE);
	return 1;
}

/* The calibrated cost of a frame's trip, by frame type (a calibration
 * profile's real veth round trips: half a resolved ping's for an echo or
 * its reply, half of what the first ping adds for an ARP request or reply),
 * spent by the receiver on the TSC before it handles the frame; 0 when
 * uncalibrated: the emulated link costs only its memory traffic. */
static inline void link_wire_delay(const uint64_t *wire, uint32_t type)
{
	tsc_spend(type < NR_FRAME_TYPES ? wire[type] : 0);
}

static const uint8_t HOST_A_MAC[8] = { 0x02, 0, 0, 0, 0, 0x0a };
static const uint8_t HOST_B_MAC[8] = { 0x02, 0, 0, 0, 0, 0x0b };

/* Host A: its neighbour table's output goes to the link and the results. */
struct host_a {
	struct neigh_table *tbl;
	struct link_ring *tx, *rx;
	struct ping_result *results;
	uint32_t nr_results;
	uint64_t boot_tsc;
	double tick_cycles;		/* TSC cycles per jiffy */
	uint64_t last_jiffies;
	uint64_t wire[NR_FRAME_TYPES];	/* link_wire_delay()'s costs */
	struct neigh_out out;
};

static void host_a_solicit(void *arg, struct neighbour *n)
{
	struct host_a *h = arg;
	struct frame f = { .type = FRAME_ARP_REQUEST, .src_ip = HOST_A_IP, .dst_ip = n->ip };

	__builtin_memcpy(f.src_mac, HOST_A_MAC, 8);
	__builtin_memset(f.dst_mac, 0xff, 6);	/* broadcast */
	link_push(h->tx, &f);
}

static void host_a_xmit(void *arg, struct neighbour *n, uint32_t seq, uint32_t size,
			uint64_t tstamp)
{
	struct host_a *h = arg;
	struct frame f = { .type = FRAME_ECHO, .src_ip = HOST_A_IP, .dst_ip = n->ip,
			   .seq = seq, .tstamp = tstamp };

	(void)size;
	__builtin_memcpy(f.src_mac, HOST_A_MAC, 8);
	__builtin_memcpy(f.dst_mac, n->ha, 8);
	link_push(h->tx, &f);
}

static void host_a_error(void *arg, uint32_t seq)
{
	struct host_a *h = arg;

	if (seq < h->nr_results && h->results[seq].status == PING_PENDING) {
		h->results[seq].rtt = tsc_stop() - h->results[seq].tstamp;	/* time to the error */
		h->results[seq].status = PING_ERROR;	/* "Destination Host Unreachable" */
	}
}

static inline uint64_t host_a_jiffies(struct host_a *h, uint64_t tsc)
{
	/* start well above 0, as the kernel's INITIAL_JIFFIES does */
	return 1000 + (uint64_t)((double)(tsc - h->boot_tsc) / h->tick_cycles);
}

/* Receive what the link brought, then run the timers if a tick passed. */
static inline void host_a_poll(struct host_a *h)
{
	struct frame f;
	uint64_t now = tsc_read_unordered(), j;

	while (link_pop(h->rx, &f)) {
		link_wire_delay(h->wire, f.type);
		if (f.type == FRAME_ARP_REPLY) {
			struct neighbour *n = neigh_lookup(h->tbl, f.src_ip);

			if (n)
				neigh_update(h->tbl, n, f.src_mac, NUD_REACHABLE,
					     host_a_jiffies(h, now), &h->out);
		} else if (f.type == FRAME_ECHO_REPLY && f.seq < h->nr_results) {
			struct ping_result *r = &h->results[f.seq];

			now = tsc_stop();
			if (r->status == PING_PENDING) {
				r->rtt = now - f.tstamp;
				r->status = PING_OK;
			}
		}
	}
	j = host_a_jiffies(h, tsc_read_unordered());
	if (j != h->last_jiffies) {		/* a tick boundary: the timer wheel runs */
		h->last_jiffies = j;
		neigh_run_timers(h->tbl, j, &h->out);
	}
}

/* ping: send echo request `seq` to B through the neighbour table. */
static inline void host_a_ping(struct host_a *h, uint32_t seq)
{
	uint64_t t = tsc_start(), j = host_a_jiffies(h, t);
	struct neighbour *n = neigh_create(h->tbl, HOST_B_IP, j);
	struct ping_result *r = &h->results[seq];

	r->tstamp = t;
	r->status = PING_PENDING;
	if (!n) {
		r->status = PING_ERROR;
		return;
	}
	if (neigh_event_send(h->tbl, n, j, seq, PING_SIZE, t, &h->out) == 0)
		host_a_xmit(h, n, seq, PING_SIZE, t);
}

/* Host B: one pass over what came in. Returns the frames handled. */
static inline int host_b_poll(struct link_ring *rx, struct link_ring *tx, struct arp_ctl *ctl,
			      struct neigh_table *tbl, uint64_t now, const uint64_t *wire)
{
	struct frame f, out;
	int handled = 0;

	while (link_pop(rx, &f)) {
		handled++;
		link_wire_delay(wire, f.type);
		if (f.type == FRAME_ARP_REQUEST && f.dst_ip == HOST_B_IP) {
			struct neighbour *n = neigh_create(tbl, f.src_ip, now);

			ctl->b_arp_requests++;
			if (n) {		/* arp_process(): learn the sender, STALE */
				neigh_update(tbl, n, f.src_mac, NUD_STALE, now, NULL);
				ctl->b_learned = n->nud_state;
			}
			if (READ_ONCE(ctl->peer_down))
				continue;
			out = (struct frame){ .type = FRAME_ARP_REPLY, .src_ip = HOST_B_IP,
					      .dst_ip = f.src_ip };
			__builtin_memcpy(out.src_mac, HOST_B_MAC, 8);
			__builtin_memcpy(out.dst_mac, f.src_mac, 8);
			link_push(tx, &out);
		} else if (f.type == FRAME_ECHO && !READ_ONCE(ctl->peer_down)) {
			out = f;
			out.type = FRAME_ECHO_REPLY;
			out.src_ip = HOST_B_IP;
			out.dst_ip = f.src_ip;
			__builtin_memcpy(out.src_mac, HOST_B_MAC, 8);
			__builtin_memcpy(out.dst_mac, f.src_mac, 8);
			link_push(tx, &out);
			ctl->b_echoes++;
		}
	}
	return handled;
}

#endif
