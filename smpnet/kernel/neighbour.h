/* neighbour.h - ARP resolution: the neighbour state machine of
 * net/core/neighbour.c, and the two hosts of the ARP experiment.
 *
 * Times are in jiffies. The state machine takes "now" from its caller, so
 * tests drive it with an injected clock; the experiment's host derives
 * jiffies from the TSC at the chosen HZ and runs an armed timer only when
 * it observes a tick boundary, as the kernel's timer wheel does.
 * Probe modes (seed 000):
 *   timer      before: the first solicit from the timer armed at jiffies + 1
 *   immediate  after:  neigh_probe() at once, the timer at retrans_time
 */
#ifndef SMPNET_NEIGHBOUR_H
#define SMPNET_NEIGHBOUR_H

#include "compiler.h"
#include "tsc.h"

#define NUD_NONE	0x00
#define NUD_INCOMPLETE	0x01
#define NUD_REACHABLE	0x02
#define NUD_STALE	0x04
#define NUD_DELAY	0x08
#define NUD_PROBE	0x10
#define NUD_FAILED	0x20
#define NUD_NOARP	0x40
#define NUD_PERMANENT	0x80
#define NUD_IN_TIMER	(NUD_INCOMPLETE | NUD_REACHABLE | NUD_DELAY | NUD_PROBE)
#define NUD_CONNECTED	(NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE)
#define NUD_VALID	(NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | \
			 NUD_STALE | NUD_DELAY)

/* The probe modes above: enumerator, and its name as Python offers it. */
#define PROBE_MODE_TABLE(X)			\
	X(PROBE_TIMER,		"timer")	\
	X(PROBE_IMMEDIATE,	"immediate")

SMP_ENUM(probe_mode, PROBE_MODE_TABLE, NR_PROBE_MODES);

#define ARPQ_SLOTS	64	/* packets an entry can hold while unresolved */
#define NEIGH_HASH	16

struct neigh_parms {		/* times in jiffies at `hz`, the rest in packets and bytes */
	uint32_t hz;
	uint32_t probe_mode;
	uint32_t ucast_probes;		/* 3 */
	uint32_t app_probes;		/* 0 */
	uint32_t mcast_probes;		/* 3 */
	uint32_t retrans_time;		/* jiffies: 1 s */
	uint32_t base_reachable_time;	/* jiffies: 30 s */
	uint32_t delay_first_probe_time;/* jiffies: 5 s */
	uint32_t gc_stale_time;		/* jiffies: 60 s */
	uint32_t queue_len_bytes;	/* unres_qlen_bytes */
};

struct neighbour {
	uint32_t ip;			/* 0: a free slot */
	uint32_t nud_state;
	uint8_t  ha[8];			/* hardware address (6 used) */
	uint32_t probes;
	uint32_t arpq_head;		/* arp_queue: a ring of queued packets */
	uint32_t arpq_len;
	uint32_t arpq_bytes;
	uint64_t updated;		/* jiffies */
	uint64_t confirmed;
	uint64_t used;
	uint64_t timer;			/* expiry, in jiffies; 0: not armed */
	uint32_t arpq_seq[ARPQ_SLOTS];
	uint32_t arpq_size[ARPQ_SLOTS];
	uint64_t arpq_tstamp[ARPQ_SLOTS];
};

/* What the state machine did, for the host and the tests to read. */
struct neigh_stats {
	uint64_t solicits;		/* ARP requests sent */
	uint64_t unres_discards;	/* queued packets dropped for room */
	uint64_t failed;		/* queued packets errored when resolution failed */
	uint64_t resolved;		/* entries that went REACHABLE from INCOMPLETE */
	uint64_t sent;			/* packets handed to the link */
	uint64_t last_solicit_jiffies;
	uint64_t first_solicit_jiffies;	/* of the current resolution */
};

/* Where packets go: the host's link, or nowhere in state-machine tests. */
struct neigh_out {
	void (*solicit)(void *arg, struct neighbour *n);
	void (*xmit)(void *arg, struct neighbour *n, uint32_t seq, uint32_t size, uint64_t tstamp);
	void (*error)(void *arg, uint32_t seq);	/* a queued packet's sender learns it failed */
	void *arg;
};

struct neigh_table {
	struct neighbour tbl[NEIGH_HASH];
	struct neigh_parms parms;
	struct neigh_stats stats;
};

static inline struct neighbour *neigh_lookup(struct neigh_table *t, uint32_t ip)
{
	uint32_t i, h = (ip * 2654435761u) % NEIGH_HASH;

	for (i = 0; i < NEIGH_HASH; i++) {
		struct neighbour *n = &t->tbl[(h + i) % NEIGH_HASH];

		if (n->ip == ip)
			return n;
	}
	return NULL;
}

/* neigh_create(): a NUD_NONE entry for ip, or NULL if the table is full. */
static inline struct neighbour *neigh_create(struct neigh_table *t, uint32_t ip, uint64_t now)
{
	uint32_t i, h = (ip * 2654435761u) % NEIGH_HASH;
	struct neighbour *n = neigh_lookup(t, ip);

	if (n)
		return n;
	for (i = 0; i < NEIGH_HASH; i++) {
		n = &t->tbl[(h + i) % NEIGH_HASH];
		if (!n->ip) {
			__builtin_memset(n, 0, sizeof(*n));
			n->ip = ip;
			n->nud_state = NUD_NONE;
			n->updated = n->used = now;
			return n;
		}
	}
	return NULL;
}

/* A PROBE entry re-checks by unicast only; an INCOMPLETE one also multicasts. */
static inline uint32_t neigh_max_probes(struct neigh_table *t, const struct neighbour *n)
{
	if (n->nud_state & NUD_PROBE)
		return t->parms.ucast_probes;
	return t->parms.ucast_probes + t->parms.app_probes + t->parms.mcast_probes;
}

static inline void neigh_add_timer(struct neighbour *n, uint64_t when)
{
	n->timer = when ? when : 1;
}

static void neigh_probe(struct neigh_table *t, struct neighbour *n, uint64_t now,
			struct neigh_out *o)
{
	if (!t->stats.first_solicit_jiffies)
		t->stats.first_solicit_jiffies = now;
	t->stats.last_solicit_jiffies = now;
	t->stats.solicits++;
	n->probes++;
	if (o && o->solicit)
		o->solicit(o->arg, n);
}

/* neigh_invalidate(): resolution failed; every queued packet gets an error. */
static void neigh_invalidate(struct neigh_table *t, struct neighbour *n, struct neigh_out *o)
{
	while (n->arpq_len) {
		uint32_t i = n->arpq_head;

		if (o && o->error)
			o->error(o->arg, n->arpq_seq[i]);
		n->arpq_head = (i + 1) % ARPQ_SLOTS;
		n->arpq_len--;
		t->stats.failed++;
	}
	n->arpq_bytes = 0;
}

static void arpq_add(struct neigh_table *t, struct neighbour *n, uint32_t seq, uint32_t size,
		     uint64_t tstamp)
{
	/* bounded in bytes: drop the oldest until the new one fits */
	while (n->arpq_len && (n->arpq_bytes + size > t->parms.queue_len_bytes ||
			       n->arpq_len == ARPQ_SLOTS)) {
		n->arpq_bytes -= n->arpq_size[n->arpq_head];
		n->arpq_head = (n->arpq_head + 1) % ARPQ_SLOTS;
		n->arpq_len--;
		t->stats.unres_discards++;
	}
	if (size > t->parms.queue_len_bytes) {
		t->stats.unres_discards++;
		return;
	}
	uint32_t i = (n->arpq_head + n->arpq_len) % ARPQ_SLOTS;

	n->arpq_seq[i] = seq;
	n->arpq_size[i] = size;
	n->arpq_tstamp[i] = tstamp;
	n->arpq_len++;
	n->arpq_bytes += size;
}

/* __neigh_event_send(): 0 if the packet can go now, 1 if it was queued,
 * -1 if it was dropped. */
static int neigh_event_send(struct neigh_table *t, struct neighbour *n, uint64_t now,
			    uint32_t seq, uint32_t size, uint64_t tstamp, struct neigh_out *o)
{
	int immediate_probe = 0, rc = 0;

	n->used = now;
	if (n->nud_state & (NUD_CONNECTED | NUD_DELAY | NUD_PROBE))
		return 0;
	if (!(n->nud_state & (NUD_STALE | NUD_INCOMPLETE))) {
		if (t->parms.mcast_probes + t->parms.app_probes) {
			n->probes = t->parms.ucast_probes;
			n->nud_state = NUD_INCOMPLETE;
			n->updated = now;
			t->stats.first_solicit_jiffies = 0;
			switch (t->parms.probe_mode) {
			case PROBE_IMMEDIATE:
				neigh_add_timer(n, now + t->parms.retrans_time);
				immediate_probe = 1;
				break;
			case PROBE_TIMER:
				neigh_add_timer(n, now + 1);
				break;
			default:
				BUG();	/* parms_init() takes no other mode */
			}
		} else {
			n->nud_state = NUD_FAILED;
			n->updated = now;
			if (o && o->error)
				o->error(o->arg, seq);
			t->stats.failed++;
			return -1;
		}
	} else if (n->nud_state & NUD_STALE) {
		n->nud_state = NUD_DELAY;
		n->updated = now;
		neigh_add_timer(n, now + t->parms.delay_first_probe_time);
	}
	if (n->nud_state == NUD_INCOMPLETE) {
		arpq_add(t, n, seq, size, tstamp);
		rc = 1;
	}
	if (immediate_probe)
		neigh_probe(t, n, now, o);	/* the patch: at once, not from the timer */
	return rc;
}

/* neigh_timer_handler(): run when the timer's expiry has come. */
static void neigh_timer_handler(struct neigh_table *t, struct neighbour *n, uint64_t now,
				struct neigh_out *o)
{
	uint32_t state = n->nud_state;
	uint64_t next = now + t->parms.hz;

	n->timer = 0;
	if (!(state & NUD_IN_TIMER))
		return;
	if (state & NUD_REACHABLE) {
		if (now <= n->confirmed + t->parms.base_reachable_time) {
			next = n->confirmed + t->parms.base_reachable_time;
		} else if (now <= n->used + t->parms.delay_first_probe_time) {
			n->nud_state = NUD_DELAY;
			n->updated = now;
			next = now + t->parms.delay_first_probe_time;
		} else {
			n->nud_state = NUD_STALE;
			n->updated = now;
		}
	} else if (state & NUD_DELAY) {
		if (now <= n->confirmed + t->parms.delay_first_probe_time) {
			n->nud_state = NUD_REACHABLE;
			n->updated = now;
			next = n->confirmed + t->parms.base_reachable_time;
		} else {
			n->nud_state = NUD_PROBE;
			n->updated = now;
			n->probes = 0;
			next = now + t->parms.retrans_time;
		}
	} else {
		next = now + t->parms.retrans_time;	/* NUD_PROBE | NUD_INCOMPLETE */
	}
	if ((n->nud_state & (NUD_INCOMPLETE | NUD_PROBE)) && n->probes >= neigh_max_probes(t, n)) {
		n->nud_state = NUD_FAILED;
		n->updated = now;
		neigh_invalidate(t, n, o);
		return;
	}
	if (n->nud_state & NUD_IN_TIMER) {
		if (next < now + t->parms.hz / 2)
			next = now + t->parms.hz / 2;
		neigh_add_timer(n, next);
	}
	if (n->nud_state & (NUD_INCOMPLETE | NUD_PROBE))
		neigh_probe(t, n, now, o);
}

/* neigh_update() for an ARP reply or request from the neighbour: learn its
 * address; a reply confirms it (REACHABLE, queued packets go out), a
 * request only makes it STALE, as arp_process() does. */
static void neigh_update(struct neigh_table *t, struct neighbour *n, const uint8_t *ha,
			 uint32_t new_state, uint64_t now, struct neigh_out *o)
{
	uint32_t old = n->nud_state;

	__builtin_memcpy(n->ha, ha, 6);
	if (new_state == NUD_STALE && (old & NUD_VALID))
		return;				/* a request does not downgrade a valid entry */
	n->nud_state = new_state;
	n->updated = now;
	if (new_state & NUD_CONNECTED)
		n->confirmed = now;
	if (new_state & NUD_IN_TIMER)
		neigh_add_timer(n, now + t->parms.base_reachable_time);
	else
		n->timer = 0;
	if ((old & NUD_INCOMPLETE) && (new_state & NUD_VALID)) {
		t->stats.resolved++;
		while (n->arpq_len) {		/* the queued packets go out */
			uint32_t i = n->arpq_head;

			if (o && o->xmit)
				o->xmit(o->arg, n, n->arpq_seq[i], n->arpq_size[i], n->arpq_tstamp[i]);
			t->stats.sent++;
			n->arpq_head = (i + 1) % ARPQ_SLOTS;
			n->arpq_len--;
		}
		n->arpq_bytes = 0;
	}
}

/* `arp -d`: forget the entry (its queued packets are dropped). */
static inline void neigh_delete(struct neigh_table *t, uint32_t ip)
{
	struct neighbour *n = neigh_lookup(t, ip);

	if (n)
		__builtin_memset(n, 0, sizeof(*n));
}

/* Run the timers of every entry whose expiry has come. */
static inline void neigh_run_timers(struct neigh_table *t, uint64_t now, struct neigh_out *o)
{
	int i;

	for (i = 0; i < NEIGH_HASH; i++) {
		struct neighbour *n = &t->tbl[i];

		if (n->ip && n->timer && n->timer <= now)
			neigh_timer_handler(t, n, now, o);
	}
}

#endif
