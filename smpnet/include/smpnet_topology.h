/* smpnet_topology.h - a user's `ab` file's topology, by the kernel's names
 * (include/linux/topology.h, nodemask.h; kernel/sched/topology.c); smpnet.h
 * includes it. Docs: docs/experiments/ab.md. */
#ifndef SMPNET_TOPOLOGY_H
#define SMPNET_TOPOLOGY_H

/* Each CPU's node and last-level cache are its real CPU's, or with --numa-nodes
 * N the emulated nodes', a block of CPUs each (docs/experiments/ab.md). */
static __always_inline const struct cpu_state *smpnet_cpu_state(struct smp_header *hdr, int cpu)
{
	return (const struct cpu_state *)smpnet_model_per_cpu_ptr(hdr, REGION_CPU, cpu);
}
#define nr_node_ids		((int)smpnet_cpu->hdr->nr_node_ids)
#define num_online_nodes()	nr_node_ids
#define for_each_node(node)	for ((node) = 0; (node) < nr_node_ids; (node)++)
#define for_each_online_node(node)	for_each_node(node)
#define cpu_to_node(cpu)	(smpnet_cpu_state(smpnet_cpu->hdr, (cpu))->numa_node)
#define cpu_to_mem(cpu)		cpu_to_node(cpu)
#define numa_node_id()		(smpnet_cpu->numa_node)	/* the kernel's: one per-CPU load */
#define numa_mem_id()		numa_node_id()
#define cpus_share_cache(a, b)								\
	(smpnet_cpu_state(smpnet_cpu->hdr, (a))->sd_llc_id ==				\
	 smpnet_cpu_state(smpnet_cpu->hdr, (b))->sd_llc_id)

#endif
