/* percpu.h - the shared segment: header, region directory, per-CPU records.
 *
 * One shared-memory segment holds everything the emulated CPUs share. It
 * starts with struct smp_header; a directory of regions follows, each an
 * array of fixed-stride records (the per-CPU ones one record per emulated
 * CPU). smpnet/layout.py holds the numpy dtypes of the same records; the
 * field tables at the bottom of this file let a test (and Machine, at
 * start) prove that both agree offset by offset.
 *
 * Records carry no alignment attribute: the stride says where record N
 * starts. The default stride rounds each record up to SMP_CACHE_BYTES, as
 * DEFINE_PER_CPU_SHARED_ALIGNED does; the "packed" layout uses the natural
 * size instead, to show what false sharing costs.
 */
#ifndef SMPNET_PERCPU_H
#define SMPNET_PERCPU_H

#include "compiler.h"

#define SMPNET_MAGIC          0x54454e504d53ull	/* "SMPNET" */
#define SMPNET_LAYOUT_VERSION 1
#define SMPNET_MAX_REGIONS    16
#define SMPNET_REGION_NAME    16

/* The built-in regions, in directory order. Regions a scenario adds
 * follow them; its C code is handed their index. */
enum smp_region_id {
	REGION_CPU = 0,		/* struct cpu_state[nr_cpus] */
	REGION_SOFTNET = 1,	/* struct softnet_data[nr_cpus] */
	REGION_LSTATS = 2,	/* struct pcpu_lstats[nr_cpus] */
	REGION_NR_BUILTIN = 3,
};

/* header flags */
#define SMP_F_OVERSUBSCRIBED  0x1	/* more emulated CPUs than real ones */

struct smp_region {
	char     name[SMPNET_REGION_NAME];
	uint64_t offset;		/* from the start of the segment */
	uint32_t count;			/* records */
	uint32_t stride;		/* bytes from one record to the next */
};

struct smp_header {
	/* line 0: identity, written once by the creator */
	uint64_t magic;
	uint64_t layout_hash;
	uint32_t version;
	uint32_t nr_cpus;
	uint32_t nr_regions;
	uint32_t flags;
	double   tsc_hz;
	uint64_t size;
	uint8_t  _pad0[SMP_CACHE_BYTES - 48];
	/* line 1: the stop flag, polled by every spin loop. Alone on its line
	 * so that polling it never pulls in a line somebody writes. */
	uint32_t stop;
	uint8_t  _pad1[SMP_CACHE_BYTES - 4];
	/* line 2: the start barrier, written once per worker per run */
	uint32_t barrier_arrived;
	uint32_t barrier_go;
	uint8_t  _pad2[SMP_CACHE_BYTES - 8];
	/* lines 3..: the region directory */
	struct smp_region regions[SMPNET_MAX_REGIONS];
};

/* Per emulated CPU: who runs it and where. Not a kernel structure: it is
 * the emulator's own bookkeeping, written by the worker once it is pinned. */
enum { CPU_OFFLINE = 0, CPU_ONLINE = 1, CPU_RUNNING = 2, CPU_DONE = 3 };

struct cpu_state {
	int32_t  cpu;			/* emulated CPU number */
	int32_t  real_cpu;		/* the CPU the worker is pinned to */
	int32_t  pid;
	uint32_t state;
	uint32_t seen_arrived;		/* barrier_arrived when this CPU left the barrier */
	uint32_t tsc_aux;		/* rdtscp's TSC_AUX: (node << 12) | cpu */
	uint64_t tsc_arrive;		/* TSC when it reached the barrier */
	uint64_t tsc_release;		/* TSC when it left it */
};

/* struct softnet_data (include/linux/netdevice.h): per-CPU packet queues
 * and counters. The later experiments grow it; bump the layout version. */
struct softnet_data {
	uint32_t processed;
	uint32_t time_squeeze;
	uint32_t dropped;
	uint32_t _pad;
};

/* struct pcpu_lstats (drivers/net/loopback.c), with seed 002's depth. */
struct pcpu_lstats {
	uint64_t packets;
	uint64_t bytes;
	int32_t  depth;
	int32_t  _pad;
};

/* Field tables, for the layout-agreement check. */
struct smp_field {
	const char *name;
	size_t offset;
	size_t size;
};

#define SMP_FIELD(type, member) \
	{ #member, offsetof(struct type, member), sizeof(((struct type *)0)->member) }

static const struct smp_field smp_header_fields[] = {
	SMP_FIELD(smp_header, magic),
	SMP_FIELD(smp_header, layout_hash),
	SMP_FIELD(smp_header, version),
	SMP_FIELD(smp_header, nr_cpus),
	SMP_FIELD(smp_header, nr_regions),
	SMP_FIELD(smp_header, flags),
	SMP_FIELD(smp_header, tsc_hz),
	SMP_FIELD(smp_header, size),
	SMP_FIELD(smp_header, stop),
	SMP_FIELD(smp_header, barrier_arrived),
	SMP_FIELD(smp_header, barrier_go),
	SMP_FIELD(smp_header, regions),
	{ 0, 0, 0 }
};

static const struct smp_field smp_region_fields[] = {
	SMP_FIELD(smp_region, name),
	SMP_FIELD(smp_region, offset),
	SMP_FIELD(smp_region, count),
	SMP_FIELD(smp_region, stride),
	{ 0, 0, 0 }
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
	{ 0, 0, 0 }
};

static const struct smp_field softnet_data_fields[] = {
	SMP_FIELD(softnet_data, processed),
	SMP_FIELD(softnet_data, time_squeeze),
	SMP_FIELD(softnet_data, dropped),
	{ 0, 0, 0 }
};

static const struct smp_field pcpu_lstats_fields[] = {
	SMP_FIELD(pcpu_lstats, packets),
	SMP_FIELD(pcpu_lstats, bytes),
	SMP_FIELD(pcpu_lstats, depth),
	{ 0, 0, 0 }
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
	{ 0, 0, 0 }
};

/* The record of emulated CPU `cpu` in a region. */
static inline void *per_cpu_ptr(const struct smp_header *hdr, int region, int cpu)
{
	const struct smp_region *r = &hdr->regions[region];
	return (char *)hdr + r->offset + (size_t)cpu * r->stride;
}

#endif
