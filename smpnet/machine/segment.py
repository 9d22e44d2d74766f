"""One shared-memory segment: smp_header, then the regions.

The segment is a file with no name at all: an O_TMPFILE on /dev/shm (or a
memfd where /dev/shm cannot make one), 0600, mapped by the coordinator
before it forks, so the workers inherit the mapping. No name means nothing
can outlive the processes that map it, whatever signal reaches whichever
of them: the kernel frees the memory when the last mapping and descriptor
go. No helper process (Python's resource tracker) is involved.

The whole segment is reserved with posix_fallocate() when it is created, so
a full /dev/shm or a memory limit is one clear error (NoMemory, exit 1)
before any worker starts, never a SIGBUS in the middle of a run.

Another process attaches to a live segment through its creator's
descriptor, /proc/PID/fd/N (`Segment.name`). Attaching checks magic, layout
version and layout hash before anything is trusted.

The mapping itself is never unmapped by hand: every numpy view holds a
reference to it, so a view kept after the Machine closed stays valid (the
memory goes when the last view does), and no close can pull memory from
under a live array.
"""
import errno
import mmap
import os

import numpy as np

from ..errors import NoMemory, SegmentError
from . import layout

SHM_DIR = "/dev/shm"
MEMFD_NAME = "smpnet"
# What a worker process needs of its own (copy-on-write pages it touches,
# its stack, Python's bookkeeping): 2 MiB idle, measured with psutil's USS
# on 32 workers; more while an experiment runs.
WORKER_BYTES = 8 << 20


def _view(buf, dtype, offset, count=None):
    """A numpy view that keeps the mapping alive (np.frombuffer holds it)."""
    if count is None:
        return np.frombuffer(buf, dtype, 1, offset).reshape(())
    return np.frombuffer(buf, dtype, count, offset)


def _create_fd():
    """A new 0600 file with no name, on /dev/shm (whose size limit applies)
    or, where that directory cannot make one, a memfd."""
    try:
        return os.open(SHM_DIR, os.O_TMPFILE | os.O_RDWR, 0o600), SHM_DIR
    except OSError:
        return os.memfd_create(MEMFD_NAME, os.MFD_CLOEXEC), "memory"


def _reserve(fd, size, where):
    """posix_fallocate the whole segment: a later page fault can then never
    find the memory gone (SIGBUS). Raises NoMemory naming what is needed."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno == errno.EFBIG:
            why = "over the file size limit (ulimit -f)"
        elif e.errno in (errno.ENOSPC, errno.ENOMEM, errno.EDQUOT):
            why = _free_text(where)
        else:
            why = e.strerror or str(e)
        raise NoMemory(f"cannot reserve {_mib(size)} of shared memory: {why}") from None


def _map_fd(fd, size):
    try:
        return mmap.mmap(fd, size)
    except OSError as e:
        raise NoMemory(f"cannot map {_mib(size)} of shared memory: "
                       f"{e.strerror or e} (a limit on address space, ulimit -v?)") from None


class Segment:
    """A mapped segment with numpy views of its header and regions."""

    def __init__(self, name, buf, regions, layout_name, owner, fd=None):
        self.name = name  # /proc/PID/fd/N while the creator lives: what attach() takes
        self.owner = owner
        self.fd = fd
        self.inode = os.fstat(fd).st_ino if fd is not None else None
        self.layout = layout_name
        self.buf = buf
        self.size = len(buf)
        self.header = _view(buf, layout.SMP_HEADER, 0)
        self._types = dict(regions)
        self._views = {}

    # ------------------------------------------------------------ create

    @classmethod
    def create(cls, nr_cpus, regions=(), tsc_hz=0.0, flags=0, layout_name="aligned",
               workers=0):
        """A new segment for nr_cpus CPUs with the built-in per-CPU regions
        and `regions`, a sequence of (name, dtype, count). `workers`: how many
        worker processes will map it, for the memory check."""
        if layout_name not in layout.LAYOUTS:
            raise SegmentError(f"unknown layout {layout_name!r} "
                               f"(choose from {', '.join(layout.LAYOUTS)})")
        table = [(n, d, nr_cpus) for n, d in layout.BUILTIN_REGIONS] + list(regions)
        if len(table) > layout.MAX_REGIONS:
            raise SegmentError(f"too many regions ({len(table)} > {layout.MAX_REGIONS})")
        names = [n for n, _, _ in table]
        if len(set(names)) != len(names):
            raise SegmentError(f"region names must be unique: {names}")
        offset = _align(layout.SMP_HEADER.itemsize)
        placed = []
        for name, dtype, count in table:
            if not name or len(name.encode()) >= layout.REGION_NAME:
                raise SegmentError(f"region name {name!r} must be 1-15 bytes")
            if count <= 0:
                raise SegmentError(f"region {name!r} needs a positive count, got {count}")
            st = layout.stride(dtype, layout_name)
            if st % mmap.PAGESIZE == 0:     # records of whole pages start on one (ab's mremap)
                offset = _align(offset, mmap.PAGESIZE)
            placed.append((name, dtype, count, offset, st))
            offset = _align(offset + count * st)
        size = offset
        check_memory(size, workers)

        fd, where = _create_fd()
        try:
            _reserve(fd, size, where)
            buf = _map_fd(fd, size)
        except BaseException:
            os.close(fd)
            raise
        name = f"/proc/{os.getpid()}/fd/{fd}"
        seg = cls(name, buf, [(n, d) for n, d, *_ in placed], layout_name, owner=True, fd=fd)
        h = seg.header
        h["magic"] = layout.MAGIC
        h["version"] = layout.VERSION
        h["layout_hash"] = layout.layout_hash([(n, d) for n, d, *_ in placed], layout_name)
        h["nr_cpus"] = nr_cpus
        h["nr_regions"] = len(placed)
        h["flags"] = flags
        h["tsc_hz"] = tsc_hz
        h["size"] = size
        for i, (name, _, count, off, st) in enumerate(placed):
            r = h["regions"][i]
            r["name"], r["offset"], r["count"], r["stride"] = name.encode(), off, count, st
        return seg

    # ------------------------------------------------------------ attach

    @classmethod
    def attach(cls, name, regions=(), layout_name="aligned"):
        """Map a live segment, checking that it is an smpnet segment of this
        very layout. `name`: the creator's `Segment.name` (/proc/PID/fd/N),
        or any path to such a file. `regions`: the (name, dtype) pairs of
        the extra regions its creator added."""
        path = name if name.startswith("/") else os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            raise SegmentError(f"no shared-memory segment at {path}") from None
        except PermissionError:
            raise SegmentError(f"shared-memory segment {path}: permission denied") from None
        except OSError as e:
            raise SegmentError(f"shared-memory segment {path}: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            size, inode = st.st_size, st.st_ino
            buf = mmap.mmap(fd, size) if size else None
        except OSError as e:
            raise SegmentError(f"shared-memory segment {path}: {e.strerror}") from None
        finally:
            os.close(fd)
        types = list(layout.BUILTIN_REGIONS) + list(regions)
        problem = _check_header(buf, types, layout_name)
        if problem:
            raise SegmentError(f"segment {path} {problem}")
        seg = cls(path, buf, types, layout_name, owner=False)
        seg.inode = inode
        return seg

    # ------------------------------------------------------------ views

    def region(self, name):
        """The numpy array of a region's records (one per CPU for per-CPU ones)."""
        view = self._views.get(name)
        if view is None:
            for i in range(int(self.header["nr_regions"])):
                r = self.header["regions"][i]
                if r["name"].decode() == name:
                    dtype = layout.padded(self._types[name], int(r["stride"]))
                    view = _view(self.buf, dtype, int(r["offset"]), int(r["count"]))
                    self._views[name] = view
                    break
            else:
                raise KeyError(f"no region {name!r} in segment {self.name}")
        return view

    def lock_info(self, region, index, field="lock"):
        """The side-table entry (a lock_info record, a view) of the lock at
        `field` of record `index` of `region`, or None when that lock was
        never initialised: its algorithm, id, and the checker's owner and
        usage bits, which spinlock_t (the kernel's 4 bytes) has no room for."""
        r = self.header["regions"][self.region_names.index(region)]
        key = (int(r["offset"]) + index * int(r["stride"])
               + self._types[region].fields[field][1] + 1)
        entries = self.region("lock_info")["e"]          # [cpu][slot]
        hit = np.argwhere(entries["key"] == key)
        return entries[tuple(hit[0])] if len(hit) else None

    @property
    def region_names(self):
        return [self.header["regions"][i]["name"].decode()
                for i in range(int(self.header["nr_regions"]))]

    # ------------------------------------------------------------ teardown

    def close(self):
        """Drop our descriptor and references. The memory goes when the last
        mapping of it does (a numpy view kept after close, a worker)."""
        if self.buf is None:
            return
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self._views.clear()
        self.header = None
        self.buf = None


def check_memory(segment_bytes, workers=0):
    """Refuse, before anything is made, a machine this one has no memory for:
    the segment's pages and each worker's own (WORKER_BYTES) against the
    lower of MemAvailable and what this process's memory cgroups still
    allow. Past it the OOM killer, not smpnet, would end the run."""
    need = segment_bytes + workers * WORKER_BYTES
    avail, where = _memory_available()
    if need > avail:
        parts = f"{_mib(segment_bytes)} shared" + (
            f" + {_mib(workers * WORKER_BYTES)} for {workers} workers" if workers else "")
        raise NoMemory(f"the machine needs {_mib(need)} of memory ({parts}), "
                       f"{where} has {_mib(avail)} available")


def _memory_available():
    """(bytes, what limits it): MemAvailable, or a memory cgroup's limit."""
    import psutil

    best = (psutil.virtual_memory().available, "this machine")
    for limit, usage in _cgroup_limits():
        if limit - usage < best[0]:
            best = (max(0, limit - usage), "this process's memory cgroup")
    return best


def _cgroup_limits(root="/"):
    """(limit, usage) of each memory cgroup above this process that has a
    limit: cgroup v2 (memory.max, memory.current, every ancestor) and v1
    (memory.limit_in_bytes, memory.usage_in_bytes). Usage leaves out the
    inactive file cache (memory.stat), which the kernel reclaims before it
    would kill anything: the working set, as container runtimes count it.
    `root`: for tests."""
    try:
        with open(os.path.join(root, "proc/self/cgroup")) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            top, files = "sys/fs/cgroup", ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            top, files = "sys/fs/cgroup/memory", ("memory.limit_in_bytes",
                                                  "memory.usage_in_bytes")
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            d = os.path.join(root, top, *parts[:depth])
            limit, usage = (_read_int(os.path.join(d, f)) for f in files)
            if limit is not None and usage is not None and limit < 1 << 60:
                out.append((limit, max(0, usage - _inactive_file(d))))
    return out


def _inactive_file(d):
    """Reclaimable page cache of a cgroup, from its memory.stat (v1: the
    hierarchical total_inactive_file; v2: inactive_file); 0 if unknown."""
    try:
        with open(os.path.join(d, "memory.stat")) as f:
            stat_ = dict(line.split() for line in f if len(line.split()) == 2)
    except (OSError, ValueError):
        return 0
    value = stat_.get("total_inactive_file", stat_.get("inactive_file", "0"))
    return int(value) if value.isdigit() else 0


def _read_int(path):
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _free_text(where):
    """What is left where the segment was being reserved."""
    if where == "memory":  # a memfd: what check_memory() looks at
        free, what = _memory_available()
        return f"{what} has {_mib(free)} available"
    try:
        st = os.statvfs(where)
    except OSError:
        return f"{where}: free space unknown"
    return f"{where} has {_mib(st.f_bavail * st.f_frsize)} free"


def _mib(n):
    return f"{n / 2**20:.1f} MiB"


def _align(n, to=layout.CACHELINE):
    return -(-n // to) * to


def _check_header(buf, types, layout_name):
    """Why the mapped segment is not one we can use, or None."""
    size = 0 if buf is None else len(buf)
    if size < layout.SMP_HEADER.itemsize:
        return f"is too small ({size} bytes) to be an smpnet segment"
    h = _view(buf, layout.SMP_HEADER, 0)
    if int(h["magic"]) != layout.MAGIC:
        return "is not an smpnet segment (bad magic)"
    if int(h["version"]) != layout.VERSION:
        return (f"has layout version {int(h['version'])}, "
                f"this smpnet reads version {layout.VERSION}")
    nr = int(h["nr_regions"])
    if nr > layout.MAX_REGIONS:
        return f"claims {nr} regions (at most {layout.MAX_REGIONS})"
    names = [h["regions"][i]["name"].decode(errors="replace") for i in range(nr)]
    if [n for n, _ in types] != names:
        return f"holds regions {names}, expected {[n for n, _ in types]}"
    if int(h["layout_hash"]) != layout.layout_hash(types, layout_name):
        return "has a different layout (layout hash mismatch): built by another smpnet?"
    if int(h["size"]) > size:
        return f"is truncated ({size} of {int(h['size'])} bytes)"
    for i in range(nr):
        r = h["regions"][i]
        if int(r["offset"]) + int(r["count"]) * int(r["stride"]) > size:
            return f"has region {names[i]!r} running past its end"
    return None
