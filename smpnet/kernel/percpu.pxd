from libc.stdint cimport int32_t, uint32_t, uint64_t
from smpnet.kernel.spinlock_types cimport spinlock_t

cdef extern from "percpu.h" nogil:
    const uint64_t SMPNET_MAGIC
    enum: SMPNET_LAYOUT_VERSION
    enum: SMPNET_MAX_REGIONS
    enum: SMPNET_REGION_NAME
    enum: REGION_NR_BUILTIN
    enum: LOCKDEP_NR_BUGS
    const char *const lockdep_bug_names[]
    enum: SMP_F_OVERSUBSCRIBED
    enum: REGION_CPU
    enum: REGION_SOFTNET
    enum: REGION_LSTATS
    enum: REGION_IRQ
    enum: REGION_QNODES
    enum: CPU_OFFLINE
    enum: CPU_ONLINE
    enum: CPU_RUNNING
    enum: CPU_DONE

    struct smp_region:
        uint64_t offset
        uint32_t count
        uint32_t stride

    struct smp_header:
        uint64_t magic
        uint64_t layout_hash
        uint32_t version
        uint32_t nr_cpus
        uint32_t nr_regions
        uint32_t flags
        double tsc_hz
        uint64_t size
        uint32_t nr_node_ids
        uint32_t stop
        uint32_t barrier_arrived
        uint32_t barrier_go
        smp_region regions[16]

    struct cpu_state:
        int32_t cpu
        int32_t real_cpu
        int32_t pid
        uint32_t state
        uint32_t seen_arrived
        uint32_t tsc_aux
        uint64_t tsc_arrive
        uint64_t tsc_release
        uint64_t heartbeat
        int32_t numa_node
        int32_t sd_llc_id

    struct softnet_data:
        uint32_t processed
        uint32_t time_squeeze
        uint32_t dropped
        uint32_t poll_list
        spinlock_t defer_lock
        uint32_t defer_count
        uint32_t defer_ipi_scheduled
        uint32_t defer_list

    struct pcpu_lstats:
        uint64_t packets
        uint64_t bytes
        int32_t depth

    struct irq_cpustat:
        uint32_t irqs_off
        uint32_t preempt_count
        uint32_t softirq_pending
        uint32_t save_depth
        uint32_t irqs_while_masked
        uint64_t hardirqs
        uint64_t softirqs
        uint64_t ipis_sent
        uint64_t spins
        uint32_t irq_pending
        uint64_t ipi_send_cycles

    void *per_cpu_ptr(const smp_header *hdr, int region, int cpu)

