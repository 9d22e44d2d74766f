# segment.pyx - the shared segment as C sees it: the layout this build's
# compiler gave the shared records (layout.h, percpu.h), and the machine's
# helpers every worker calls (stop flag, start barrier, idle wait), with the
# checks that a region handed in from Python is what a C loop will index.

cdef extern from "sys/prctl.h" nogil:
    int prctl(int option, unsigned long arg2, unsigned long arg3,
              unsigned long arg4, unsigned long arg5)
    enum: PR_SET_PDEATHSIG

cdef extern from *:
    """
    #ifndef SMPNET_CYTHON_VERSION
    #define SMPNET_CYTHON_VERSION "unknown"
    #endif
    """
    const char *SMPNET_CYTHON_VERSION

CYTHON_VERSION = SMPNET_CYTHON_VERSION.decode()


# ---------------------------------------------------------------- layout

def c_layout():
    """{struct: (sizeof, {field: (offset, size)})} as the C compiler laid them out."""
    cdef const layout.smp_struct *s = layout.smp_structs
    cdef const layout.smp_field *f
    out = {}
    while s.name != NULL:
        fields = {}
        f = s.fields
        while f.name != NULL:
            fields[f.name.decode()] = (f.offset, f.size)
            f += 1
        out[s.name.decode()] = (s.size, fields)
        s += 1
    return out


def c_constants():
    """The headers' constants that smpnet/layout.py repeats, for verify()."""
    return {
        "SMPNET_MAGIC": percpu.SMPNET_MAGIC, "SMPNET_LAYOUT_VERSION": percpu.SMPNET_LAYOUT_VERSION,
        "SMPNET_MAX_REGIONS": percpu.SMPNET_MAX_REGIONS, "SMPNET_REGION_NAME": percpu.SMPNET_REGION_NAME,
        "SMP_F_OVERSUBSCRIBED": percpu.SMP_F_OVERSUBSCRIBED, "SMP_CACHE_BYTES": SMP_CACHE_BYTES,
        "CPU_OFFLINE": percpu.CPU_OFFLINE, "CPU_ONLINE": percpu.CPU_ONLINE,
        "CPU_RUNNING": percpu.CPU_RUNNING, "CPU_DONE": percpu.CPU_DONE,
        "LOCKDEP_NR_BUGS": percpu.LOCKDEP_NR_BUGS, "MAX_NODES": spinlock_types.MAX_NODES,
        "REGION_CPU": percpu.REGION_CPU, "REGION_SOFTNET": percpu.REGION_SOFTNET,
        "REGION_LSTATS": percpu.REGION_LSTATS, "REGION_IRQ": percpu.REGION_IRQ,
        "REGION_QNODES": percpu.REGION_QNODES, "REGION_NR_BUILTIN": percpu.REGION_NR_BUILTIN,
        "NAPI_SKB_CACHE_SIZE": skbuff.NAPI_SKB_CACHE_SIZE, "FLUSH_HIST_BUCKETS": skbuff.FLUSH_HIST_BUCKETS,
        "SKB_RING_SIZE": fake_nic.SKB_RING_SIZE, "SKB_FREE": skbuff.SKB_FREE, "SKB_LIVE": skbuff.SKB_LIVE,
        "SKB_DEFERRED": skbuff.SKB_DEFERRED, "FLUSH_SAMPLES": skbuff.FLUSH_SAMPLES,
    }


# ---------------------------------------------------------------- machine

cdef inline smp_header *segment_header(unsigned char[::1] seg) except NULL:
    # Python-side callers only: raises on a buffer too small to be a segment
    if <size_t>seg.shape[0] < sizeof(smp_header):
        raise ValueError("segment smaller than its header")
    return <smp_header *>&seg[0]


def set_pdeathsig(int sig):
    """Have the kernel send `sig` to this process when its parent dies, so a
    worker never outlives a coordinator killed with SIGKILL."""
    if prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_PDEATHSIG) failed")


def smp_stop(unsigned char[::1] seg):
    """Raise the stop flag that every spin loop polls."""
    atomic_set(&segment_header(seg).stop, 1)


cdef inline int check_cpu(smp_header *hdr, int cpu) except -1:
    if cpu < 0 or <uint32_t>cpu >= hdr.nr_cpus:
        raise ValueError(f"no CPU {cpu} in this segment ({hdr.nr_cpus} CPUs)")
    return 0


def barrier_wait(unsigned char[::1] seg, int cpu):
    """Wait at the start barrier as emulated CPU `cpu`; False if stopped first."""
    cdef smp_header *hdr = segment_header(seg)
    check_cpu(hdr, cpu)
    cdef cpu_state *cs = <cpu_state *>per_cpu_ptr(hdr, REGION_CPU, cpu)
    cdef int rc
    with nogil:
        rc = smp_barrier_wait(hdr, cs)
    return rc == 0


def idle_poll(unsigned char[::1] seg, double timeout_s):
    """Spin, polling the stop flag, until it is raised or timeout_s passes.
    Returns True if it was stopped."""
    cdef smp_header *hdr = segment_header(seg)
    if not 0 <= timeout_s <= 1e6:
        raise ValueError(f"timeout_s must be in [0, 1e6], got {timeout_s}")
    cdef uint64_t timeout_ns = <uint64_t>(timeout_s * 1e9)
    with nogil:
        cpu_idle_poll(hdr, timeout_ns)
    return atomic_read(&hdr.stop) != 0


# ---------------------------------------------------------------- regions

cdef int check_region(smp_header *hdr, int region, size_t record, uint32_t count) except -1:
    """Region `region` exists, has records of at least `record` bytes, and
    at least `count` of them: what a C loop will index it with."""
    if region < 0 or <uint32_t>region >= hdr.nr_regions:
        raise ValueError(f"no region {region} in this segment")
    if hdr.regions[region].stride < record:
        raise ValueError(f"region {region}: records of {hdr.regions[region].stride} bytes, "
                         f"{record} needed")
    if hdr.regions[region].count < count:
        raise ValueError(f"region {region}: {hdr.regions[region].count} records, {count} needed")
    return 0


cdef int check_array(smp_header *hdr, int region, size_t record, uint32_t count) except -1:
    """Like check_region, for a region C indexes as an array: its stride
    must be the struct's size exactly."""
    check_region(hdr, region, record, count)
    if hdr.regions[region].stride != record:
        raise ValueError(f"region {region}: stride {hdr.regions[region].stride}, "
                         f"C indexes it by {record}")
    return 0
