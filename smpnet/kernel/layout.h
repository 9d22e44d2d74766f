/* layout.h - the shared records as the C compiler lays them out: the one
 * source of truth for the segment's layout.
 *
 * For every field of every record in the segment, a row with its offset and
 * size (offsetof, sizeof) and its type: a scalar's numpy type code, chosen by
 * _Generic from the member's C type, so it cannot be written wrong; bytes
 * ("S" a C string, "V" opaque); or the name of a nested record. Arrays give
 * their length. smpnet/layout.py builds its numpy dtypes from these rows
 * (smpnet._core.c_structs()), and the layout hash from the dtypes. A field
 * not listed here is padding to Python, which never reads it.
 *
 * Each row's macro checks what it is told against the member: SMP_FIELD on
 * an array, SMP_ARRAY on a scalar, SMP_BYTES on anything but uint8_t[], or
 * SMP_RECORD naming the wrong struct do not compile.
 *
 * The built-in regions come from here too; the constants Python needs,
 * from consts.h.
 */
#ifndef SMPNET_LAYOUT_H
#define SMPNET_LAYOUT_H

#include "percpu.h"
#include "fake_nic.h"
#include "link.h"
#include "loopback.h"

struct smp_field {
	const char *name;
	size_t offset;
	size_t size;
	const char *type;	/* numpy type code of a scalar or of an array's elements,
				 * "S" or "V" for bytes, NULL for a record */
	const char *record;	/* a record's struct name, or NULL */
	size_t count;		/* an array's length; 0: not an array */
};

#define SMP_MEMBER(type, member)	(((struct type *)0)->member)
#define SMP_COUNT(type, member)	(sizeof(SMP_MEMBER(type, member)) / sizeof(SMP_MEMBER(type, member)[0]))
#define SMP_PLACE(type, member)	#member, offsetof(struct type, member), sizeof(SMP_MEMBER(type, member))

/* numpy's code for a C scalar type; no default: any other type is an error */
#define SMP_TYPE_CODE(x) _Generic((x),						\
	int8_t: "i1", uint8_t: "u1", int16_t: "i2", uint16_t: "u2",		\
	int32_t: "i4", uint32_t: "u4", int64_t: "i8", uint64_t: "u8",		\
	float: "f4", double: "f8", char: "S")

#define SMP_FIELD(type, member) \
	{ SMP_PLACE(type, member), SMP_TYPE_CODE(SMP_MEMBER(type, member)), NULL, 0 }
#define SMP_ARRAY(type, member) \
	{ SMP_PLACE(type, member), SMP_TYPE_CODE(SMP_MEMBER(type, member)[0]), NULL, \
	  SMP_COUNT(type, member) }
#define SMP_BYTES(type, member) \
	{ SMP_PLACE(type, member), _Generic(SMP_MEMBER(type, member)[0], uint8_t: "V"), NULL, \
	  SMP_COUNT(type, member) }
#define SMP_RECORD(type, member, rec) \
	{ SMP_PLACE(type, member), NULL, _Generic(SMP_MEMBER(type, member), struct rec: #rec), 0 }
#define SMP_RECORDS(type, member, rec) \
	{ SMP_PLACE(type, member), NULL, _Generic(SMP_MEMBER(type, member)[0], struct rec: #rec), \
	  SMP_COUNT(type, member) }

static const struct smp_field smp_header_fields[] = {
	SMP_FIELD(smp_header, magic),
	SMP_FIELD(smp_header, layout_hash),
	SMP_FIELD(smp_header, version),
	SMP_FIELD(smp_header, nr_cpus),
	SMP_FIELD(smp_header, nr_regions),
	SMP_FIELD(smp_header, flags),
	SMP_FIELD(smp_header, tsc_hz),
	SMP_FIELD(smp_header, size),
	SMP_FIELD(smp_header, nr_node_ids),
	SMP_FIELD(smp_header, stop),
	SMP_FIELD(smp_header, barrier_arrived),
	SMP_FIELD(smp_header, barrier_go),
	SMP_RECORDS(smp_header, regions, smp_region),
	{ 0 }
};

static const struct smp_field smp_region_fields[] = {
	SMP_ARRAY(smp_region, name),
	SMP_FIELD(smp_region, offset),
	SMP_FIELD(smp_region, count),
	SMP_FIELD(smp_region, stride),
	{ 0 }
};

static const struct smp_field cpu_state_fields[] = {
	SMP_FIELD(cpu_state, cpu),
	SMP_FIELD(cpu_state, real_cpu),
	SMP_FIELD(cpu_state, pid),
	SMP_FIELD(cpu_state, state),
	SMP_FIELD(cpu_state, seen_arrived),
	SMP_FIELD(cpu_state, tsc_aux),
	SMP_FIELD(cpu_state, tsc_arrive),
	SMP_FIELD(cpu_state, tsc_release),
	SMP_FIELD(cpu_state, heartbeat),
	SMP_FIELD(cpu_state, numa_node),
	SMP_FIELD(cpu_state, sd_llc_id),
	{ 0 }
};

static const struct smp_field softnet_data_fields[] = {
	SMP_FIELD(softnet_data, processed),
	SMP_FIELD(softnet_data, time_squeeze),
	SMP_FIELD(softnet_data, dropped),
	SMP_FIELD(softnet_data, poll_list),
	SMP_FIELD(softnet_data, backlog_state),
	SMP_FIELD(softnet_data, input_head),
	SMP_FIELD(softnet_data, input_tail),
	SMP_FIELD(softnet_data, input_qlen),
	SMP_FIELD(softnet_data, xmit_recursion),
	SMP_RECORD(softnet_data, defer_lock, spinlock),
	SMP_FIELD(softnet_data, defer_count),
	SMP_FIELD(softnet_data, defer_ipi_scheduled),
	SMP_FIELD(softnet_data, defer_list),
	SMP_FIELD(softnet_data, defer_llist),
	SMP_FIELD(softnet_data, defer_llist_count),
	SMP_FIELD(softnet_data, defer_llist_ipi_scheduled),
	{ 0 }
};

static const struct smp_field pcpu_lstats_fields[] = {
	SMP_FIELD(pcpu_lstats, packets),
	SMP_FIELD(pcpu_lstats, bytes),
	SMP_FIELD(pcpu_lstats, depth),
	{ 0 }
};

static const struct smp_field irq_cpustat_fields[] = {
	SMP_FIELD(irq_cpustat, irqs_off),
	SMP_FIELD(irq_cpustat, preempt_count),
	SMP_FIELD(irq_cpustat, softirq_pending),
	SMP_FIELD(irq_cpustat, save_depth),
	SMP_FIELD(irq_cpustat, irqs_while_masked),
	SMP_FIELD(irq_cpustat, do_softirqs),
	SMP_FIELD(irq_cpustat, hardirqs),
	SMP_FIELD(irq_cpustat, softirqs),
	SMP_FIELD(irq_cpustat, ipis_sent),
	SMP_FIELD(irq_cpustat, spins),
	SMP_FIELD(irq_cpustat, lock_checks),
	SMP_FIELD(irq_cpustat, irq_pending),
	SMP_ARRAY(irq_cpustat, bugs),
	SMP_FIELD(irq_cpustat, first_bug),
	SMP_FIELD(irq_cpustat, first_bug_lock),
	SMP_FIELD(irq_cpustat, flags_saves),
	SMP_FIELD(irq_cpustat, ipi_send_cycles),
	SMP_FIELD(irq_cpustat, pv_halts),
	SMP_FIELD(irq_cpustat, irq_cycles),
	{ 0 }
};

static const struct smp_field qnodes_fields[] = {
	SMP_RECORDS(qnodes, n, qnode),
	SMP_RECORDS(qnodes, mcs, mcs_node),
	{ 0 }
};

static const struct smp_field qnode_fields[] = {
	SMP_FIELD(qnode, next),
	SMP_FIELD(qnode, locked),
	SMP_FIELD(qnode, count),
	SMP_FIELD(qnode, pv_state),
	{ 0 }
};

static const struct smp_field mcs_node_fields[] = {
	SMP_FIELD(mcs_node, next),
	SMP_FIELD(mcs_node, locked),
	SMP_FIELD(mcs_node, lock),
	{ 0 }
};

static const struct smp_field spinlock_fields[] = {
	SMP_FIELD(spinlock, val),
	{ 0 }
};

static const struct smp_field lock_info_fields[] = {
	SMP_FIELD(lock_info, key),
	SMP_FIELD(lock_info, algo),
	SMP_FIELD(lock_info, owner),
	SMP_FIELD(lock_info, usage),
	SMP_FIELD(lock_info, id),
	SMP_BYTES(lock_info, mutex_raw),
	{ 0 }
};

static const struct smp_field lock_infos_fields[] = {
	SMP_RECORDS(lock_infos, e, lock_info),
	{ 0 }
};

static const struct smp_field lock_slot_fields[] = {
	SMP_RECORD(lock_slot, lock, spinlock),
	SMP_FIELD(lock_slot, counter),
	{ 0 }
};

static const struct smp_field sk_buff_fields[] = {
	SMP_FIELD(sk_buff, next),
	SMP_FIELD(sk_buff, alloc_cpu),
	SMP_FIELD(sk_buff, gen),
	SMP_FIELD(sk_buff, state),
	SMP_FIELD(sk_buff, len),
	SMP_FIELD(sk_buff, hash),
	SMP_FIELD(sk_buff, tstamp),
	SMP_BYTES(sk_buff, cb),
	{ 0 }
};

static const struct smp_field skb_data_fields[] = {
	SMP_BYTES(skb_data, head),
	SMP_FIELD(skb_data, dataref),
	SMP_FIELD(skb_data, nr_frags),
	{ 0 }
};

static const struct smp_field skb_page_fields[] = {
	SMP_FIELD(skb_page, refcount),
	{ 0 }
};

static const struct smp_field skb_slab_fields[] = {
	SMP_FIELD(skb_slab, freelist),
	SMP_FIELD(skb_slab, count),
	SMP_FIELD(skb_slab, remote_free),
	{ 0 }
};

static const struct smp_field skb_pool_fields[] = {
	SMP_RECORD(skb_pool, lock, spinlock),
	SMP_FIELD(skb_pool, head),
	SMP_FIELD(skb_pool, count),
	SMP_FIELD(skb_pool, total),
	{ 0 }
};

static const struct smp_field napi_alloc_cache_fields[] = {
	SMP_FIELD(napi_alloc_cache, count),
	SMP_ARRAY(napi_alloc_cache, skb_cache),
	SMP_FIELD(napi_alloc_cache, pagecnt_bias),
	{ 0 }
};

static const struct smp_field skb_stats_fields[] = {
	SMP_FIELD(skb_stats, allocated),
	SMP_FIELD(skb_stats, alloc_failed),
	SMP_FIELD(skb_stats, freed),
	SMP_FIELD(skb_stats, freed_local),
	SMP_FIELD(skb_stats, deferred),
	SMP_FIELD(skb_stats, fallback_frees),
	SMP_FIELD(skb_stats, remote_frees),
	SMP_FIELD(skb_stats, double_free),
	SMP_FIELD(skb_stats, stale),
	SMP_FIELD(skb_stats, ipis),
	SMP_FIELD(skb_stats, flushes),
	SMP_FIELD(skb_stats, flushed),
	SMP_FIELD(skb_stats, flushes_past_half),
	SMP_FIELD(skb_stats, flush_cycles),
	SMP_FIELD(skb_stats, flush_lock_cycles),
	SMP_FIELD(skb_stats, flush_irq_cycles),
	SMP_FIELD(skb_stats, flush_irq_replays),
	SMP_FIELD(skb_stats, max_flush),
	SMP_FIELD(skb_stats, defer_cycles),
	SMP_FIELD(skb_stats, defer_samples),
	SMP_FIELD(skb_stats, received),
	SMP_FIELD(skb_stats, rx_packets),
	SMP_FIELD(skb_stats, ring_full),
	SMP_ARRAY(skb_stats, flush_hist),
	SMP_FIELD(skb_stats, nr_flush_samples),
	SMP_ARRAY(skb_stats, flush_lock_sample),
	{ 0 }
};

static const struct smp_field skb_ring_fields[] = {
	SMP_FIELD(skb_ring, head),
	SMP_FIELD(skb_ring, tail_cache),
	SMP_FIELD(skb_ring, tail),
	SMP_FIELD(skb_ring, head_cache),
	SMP_ARRAY(skb_ring, slot),
	{ 0 }
};

static const struct smp_field defer_ctl_fields[] = {
	SMP_FIELD(defer_ctl, rx_done),
	SMP_FIELD(defer_ctl, consumers_done),
	{ 0 }
};

static const struct smp_field net_device_fields[] = {
	SMP_FIELD(net_device, refcnt),
	SMP_FIELD(net_device, state),
	SMP_FIELD(net_device, last_rx),
	{ 0 }
};

static const struct smp_field lo_stats_fields[] = {
	SMP_FIELD(lo_stats, xmits),
	SMP_FIELD(lo_stats, requests),
	SMP_FIELD(lo_stats, replies),
	SMP_FIELD(lo_stats, acks),
	SMP_FIELD(lo_stats, delivered),
	SMP_FIELD(lo_stats, transactions),
	SMP_FIELD(lo_stats, refcnt_atomics),
	SMP_FIELD(lo_stats, softirq_raises),
	SMP_FIELD(lo_stats, direct),
	SMP_FIELD(lo_stats, queued),
	SMP_FIELD(lo_stats, purged),
	SMP_FIELD(lo_stats, stack_drops),
	SMP_FIELD(lo_stats, sk_backlogged),
	SMP_FIELD(lo_stats, recursion_drops),
	SMP_FIELD(lo_stats, stack_work_cycles),
	SMP_FIELD(lo_stats, max_depth),
	SMP_FIELD(lo_stats, max_rx_nest),
	SMP_FIELD(lo_stats, stack_max),
	SMP_FIELD(lo_stats, overflow),
	SMP_FIELD(lo_stats, overflow_depth),
	SMP_FIELD(lo_stats, server_pending),
	SMP_FIELD(lo_stats, client_pending),
	SMP_FIELD(lo_stats, oops_frames),
	SMP_FIELD(lo_stats, oops_refused),
	SMP_ARRAY(lo_stats, oops_trace),
	{ 0 }
};

static const struct smp_field neighbour_fields[] = {
	SMP_FIELD(neighbour, ip),
	SMP_FIELD(neighbour, nud_state),
	SMP_BYTES(neighbour, ha),
	SMP_FIELD(neighbour, probes),
	SMP_FIELD(neighbour, arpq_head),
	SMP_FIELD(neighbour, arpq_len),
	SMP_FIELD(neighbour, arpq_bytes),
	SMP_FIELD(neighbour, updated),
	SMP_FIELD(neighbour, confirmed),
	SMP_FIELD(neighbour, used),
	SMP_FIELD(neighbour, timer),
	SMP_ARRAY(neighbour, arpq_seq),
	SMP_ARRAY(neighbour, arpq_size),
	SMP_ARRAY(neighbour, arpq_tstamp),
	{ 0 }
};

static const struct smp_field neigh_parms_fields[] = {
	SMP_FIELD(neigh_parms, hz),
	SMP_FIELD(neigh_parms, probe_mode),
	SMP_FIELD(neigh_parms, ucast_probes),
	SMP_FIELD(neigh_parms, app_probes),
	SMP_FIELD(neigh_parms, mcast_probes),
	SMP_FIELD(neigh_parms, retrans_time),
	SMP_FIELD(neigh_parms, base_reachable_time),
	SMP_FIELD(neigh_parms, delay_first_probe_time),
	SMP_FIELD(neigh_parms, gc_stale_time),
	SMP_FIELD(neigh_parms, queue_len_bytes),
	{ 0 }
};

static const struct smp_field neigh_stats_fields[] = {
	SMP_FIELD(neigh_stats, solicits),
	SMP_FIELD(neigh_stats, unres_discards),
	SMP_FIELD(neigh_stats, failed),
	SMP_FIELD(neigh_stats, resolved),
	SMP_FIELD(neigh_stats, sent),
	SMP_FIELD(neigh_stats, last_solicit_jiffies),
	SMP_FIELD(neigh_stats, first_solicit_jiffies),
	{ 0 }
};

static const struct smp_field neigh_table_fields[] = {
	SMP_RECORDS(neigh_table, tbl, neighbour),
	SMP_RECORD(neigh_table, parms, neigh_parms),
	SMP_RECORD(neigh_table, stats, neigh_stats),
	{ 0 }
};

static const struct smp_field frame_fields[] = {
	SMP_FIELD(frame, type),
	SMP_FIELD(frame, src_ip),
	SMP_FIELD(frame, dst_ip),
	SMP_FIELD(frame, seq),
	SMP_BYTES(frame, src_mac),
	SMP_BYTES(frame, dst_mac),
	SMP_FIELD(frame, tstamp),
	{ 0 }
};

static const struct smp_field link_ring_fields[] = {
	SMP_FIELD(link_ring, head),
	SMP_FIELD(link_ring, tail),
	SMP_RECORDS(link_ring, f, frame),
	{ 0 }
};

static const struct smp_field ping_result_fields[] = {
	SMP_FIELD(ping_result, tstamp),
	SMP_FIELD(ping_result, rtt),
	SMP_FIELD(ping_result, status),
	{ 0 }
};

static const struct smp_field arp_ctl_fields[] = {
	SMP_FIELD(arp_ctl, done),
	SMP_FIELD(arp_ctl, peer_down),
	SMP_FIELD(arp_ctl, b_arp_requests),
	SMP_FIELD(arp_ctl, b_learned),
	SMP_FIELD(arp_ctl, b_echoes),
	SMP_FIELD(arp_ctl, a_tick_cycles),
	{ 0 }
};

struct smp_struct {
	const char *name;
	size_t size;
	const struct smp_field *fields;
};

#define SMP_STRUCT(type) { #type, sizeof(struct type), type##_fields }

static const struct smp_struct smp_structs[] = {
	SMP_STRUCT(smp_header),
	SMP_STRUCT(smp_region),
	SMP_STRUCT(cpu_state),
	SMP_STRUCT(softnet_data),
	SMP_STRUCT(pcpu_lstats),
	SMP_STRUCT(irq_cpustat),
	SMP_STRUCT(qnodes),
	SMP_STRUCT(qnode),
	SMP_STRUCT(mcs_node),
	SMP_STRUCT(spinlock),
	SMP_STRUCT(lock_info),
	SMP_STRUCT(lock_infos),
	SMP_STRUCT(lock_slot),
	SMP_STRUCT(sk_buff),
	SMP_STRUCT(skb_data),
	SMP_STRUCT(skb_page),
	SMP_STRUCT(skb_slab),
	SMP_STRUCT(skb_pool),
	SMP_STRUCT(napi_alloc_cache),
	SMP_STRUCT(skb_stats),
	SMP_STRUCT(skb_ring),
	SMP_STRUCT(defer_ctl),
	SMP_STRUCT(net_device),
	SMP_STRUCT(lo_stats),
	SMP_STRUCT(neighbour),
	SMP_STRUCT(neigh_parms),
	SMP_STRUCT(neigh_stats),
	SMP_STRUCT(neigh_table),
	SMP_STRUCT(frame),
	SMP_STRUCT(link_ring),
	SMP_STRUCT(ping_result),
	SMP_STRUCT(arp_ctl),
	{ 0 }
};

/* The regions every segment starts with, in directory order (enum
 * smp_region_id): their names in the directory and their records. */
struct smp_builtin_region {
	const char *name;
	const char *record;
};

static const struct smp_builtin_region smp_builtin_regions[REGION_NR_BUILTIN] = {
	[REGION_CPU]	 = { "cpu", "cpu_state" },
	[REGION_SOFTNET] = { "softnet", "softnet_data" },
	[REGION_LSTATS]	 = { "lstats", "pcpu_lstats" },
	[REGION_IRQ]	 = { "irq", "irq_cpustat" },
	[REGION_QNODES]	 = { "qnodes", "qnodes" },
	[REGION_LOCK_INFO] = { "lock_info", "lock_infos" },
};

#endif
