# cacheline.pyx - what moving one cache line between two real CPUs costs,
# now: the round trip of a line two pinned threads write in turn.
#
# Every cross-CPU cost the model has (the defer list's lock and head, the
# slab's remote-free list, the page refcount, an IPI's pending word) is a
# line moving between the run's CPUs, so this is the machine fact behind
# them. In a guest it is not fixed: the hypervisor may run the two vCPUs on
# SMT siblings, on two cores sharing a cache, or across caches, and move
# them between runs; measured before each run, it says which.
#
# Ping-pong: the answerer waits for an odd value and writes the next even
# one, the asker the other way round; each timed block is BLOCK round trips,
# the figure the median of the blocks. Plain C threads, nogil, every wait
# under the deadline.

cdef enum:
    LINE_BLOCK = 100        # round trips a timed block


cdef struct line_pair:
    uint32_t *word          # alone on its line
    int cpu[2]              # [0] the answerer's, [1] the asker's
    int ran_on[2]
    int pin_err
    uint32_t stop
    uint32_t ready
    uint64_t deadline_ns
    uint32_t blocks
    uint32_t done
    uint64_t *cycles        # per block: cycles per round trip, x LINE_BLOCK


cdef void *line_answerer(void *arg) noexcept nogil:
    cdef line_pair *p = <line_pair *>arg
    cdef uint32_t v, n = 0
    if not pair_pin(p.cpu[0], &p.ran_on[0], &p.pin_err, &p.stop):
        return NULL
    atomic_set(&p.ready, 1)
    while not atomic_read(&p.stop):
        v = atomic_read(p.word)
        if v & 1:
            atomic_set(p.word, v + 1)
        else:
            n += 1
            if (n & 1023) == 0 and mono_ns() >= p.deadline_ns:
                atomic_set(&p.stop, 1)
    return NULL


cdef void *line_asker(void *arg) noexcept nogil:
    cdef line_pair *p = <line_pair *>arg
    cdef uint64_t t0
    cdef uint32_t v = 0, b, i, n
    if not pair_pin(p.cpu[1], &p.ran_on[1], &p.pin_err, &p.stop):
        return NULL
    while not atomic_read(&p.ready):
        if not pair_wait_step(&p.stop, p.deadline_ns, False):
            return NULL
    for b in range(p.blocks):
        t0 = tsc_start()
        for i in range(LINE_BLOCK):
            v += 1
            atomic_set(p.word, v)     # odd: the answerer's turn
            v += 1
            n = 0
            while atomic_read(p.word) != v:
                n += 1
                if atomic_read(&p.stop) or ((n & 1023) == 0 and mono_ns() >= p.deadline_ns):
                    atomic_set(&p.stop, 1)
                    return NULL
        p.cycles[b] = tsc_stop() - t0
        p.done = b + 1
        if mono_ns() >= p.deadline_ns:
            break
    atomic_set(&p.stop, 1)
    return NULL


cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void **ptr, size_t alignment, size_t size)


def line_round_trip_cycles(int cpu_a, int cpu_b, uint32_t blocks=20, double timeout_s=5.0):
    """TSC cycles of one cache line's round trip between real CPUs `cpu_a`
    (the answerer) and `cpu_b` (the asker): the median of `blocks` timed
    blocks of 100 round trips, with the fastest and slowest block's. Returns
    {"cycles", "min", "max", "blocks", "cross_cpu"}, or with one real CPU
    (cpu_a == cpu_b) {"cycles": None, "cross_cpu": False}. OSError if a CPU
    cannot be used; RuntimeError if no block finished within timeout_s."""
    cdef line_pair p
    cdef int rc
    cdef void *mem = NULL
    cdef int cpu   # typed: Cython 3.3 infers a loop over a tuple of ints wrongly
    cdef uint32_t i
    if blocks < 1 or blocks > 100000:
        raise ValueError("blocks must be 1 to 100000")
    for cpu in (cpu_a, cpu_b):
        if not 0 <= cpu < CPU_SETSIZE:
            raise ValueError(f"no real CPU {cpu}")
    if not 0 < timeout_s <= 3600:
        raise ValueError(f"timeout_s must be in (0, 3600], got {timeout_s}")
    if cpu_a == cpu_b:
        return {"cycles": None, "min": None, "max": None, "blocks": 0, "cross_cpu": False}
    memset(&p, 0, sizeof(p))
    if posix_memalign(&mem, 64, 64) != 0:
        raise MemoryError()
    p.word = <uint32_t *>mem
    p.word[0] = 0
    p.cycles = <uint64_t *>malloc(blocks * sizeof(uint64_t))
    if p.cycles == NULL:
        free(mem)
        raise MemoryError()
    p.cpu[0], p.cpu[1] = cpu_a, cpu_b
    p.ran_on[0] = p.ran_on[1] = -1
    p.blocks = blocks
    try:
        with nogil:
            p.deadline_ns = mono_ns() + <uint64_t>(timeout_s * 1e9)
            rc = pair_run(line_answerer, line_asker, &p, &p.stop, NULL)
        if rc:
            raise pair_run_error(rc)
        if p.pin_err:
            raise OSError(p.pin_err, f"cannot run on real CPU {cpu_a} and {cpu_b}")
        if p.done == 0:
            raise RuntimeError(f"no cache line round trip finished within {timeout_s} s")
        per = sorted(p.cycles[i] / <double>LINE_BLOCK for i in range(p.done))
    finally:
        free(p.cycles)
        free(mem)
    n = len(per)
    return {"cycles": (per[(n - 1) // 2] + per[n // 2]) / 2, "min": per[0], "max": per[n - 1],
            "blocks": n, "cross_cpu": p.ran_on[0] != p.ran_on[1]}
