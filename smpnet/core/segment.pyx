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

cdef inline object c_str(const char *s):
    return None if s == NULL else s.decode()


def c_structs():
    """{struct: (sizeof, [(field, offset, size, type, record, count), ...])}:
    every shared record as this build's compiler laid it out (layout.h), its
    fields in declaration order. type: numpy's code of a scalar or of an
    array's elements, "S"/"V" for bytes, None for a nested record; record:
    that record's struct name, or None; count: an array's length, 0 if the
    field is not an array."""
    cdef const layout.smp_struct *s = layout.smp_structs
    cdef const layout.smp_field *f
    out = {}
    while s.name != NULL:
        fields = []
        f = s.fields
        while f.name != NULL:
            fields.append((f.name.decode(), f.offset, f.size, c_str(f.type), c_str(f.record),
                           f.count))
            f += 1
        out[s.name.decode()] = (s.size, fields)
        s += 1
    return out


def c_layout():
    """{struct: (sizeof, {field: (offset, size)})}: c_structs() without the types."""
    return {name: (size, {f[0]: (f[1], f[2]) for f in fields})
            for name, (size, fields) in c_structs().items()}


def c_builtin_regions():
    """((name, struct), ...): the regions every segment starts with, in
    directory order (enum smp_region_id)."""
    return tuple((c_str(layout.smp_builtin_regions[i].name),
                  c_str(layout.smp_builtin_regions[i].record))
                 for i in range(percpu.REGION_NR_BUILTIN))


cdef dict c_enum(const char *const *names, int nr):
    """{name: value} of a C enum, from the names its table gives it (the
    *_TABLE X-macros of the headers): the one place Python learns them."""
    out = {}
    for i in range(nr):
        out[names[i].decode()] = i
    return out


cdef int check_enum(int value, int nr, str what) except -1:
    """`value` is one of a C enum's nr values, or ValueError: no C switch
    over the enum has a default to fall into (they BUG())."""
    if value < 0 or value >= nr:
        raise ValueError(f"no {what} {value}")
    return 0


cdef int check_kbuild(int build) except -1:
    """`build` is a kernel build (kernel_build.h: a shape and a return, the
    inline shape with a plain return only), or ValueError."""
    if not kbuild_valid(build):
        raise ValueError(f"no kernel build {build}")
    return 0


def c_constants():
    """{name: value} of the headers' constants that Python reads (consts.h)."""
    cdef const consts.smp_const *k = consts.smp_consts
    out = {}
    while k.name != NULL:
        out[k.name.decode()] = k.value
        k += 1
    return out


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
