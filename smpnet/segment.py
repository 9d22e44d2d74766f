"""One POSIX shared-memory segment: smp_header, then the regions.

Created 0600 under an unguessable name (/dev/shm/smpnet_<128 random bits>),
unlinked on every exit path by its creator. Python's resource tracker is
told about it too, so that even a coordinator killed with SIGKILL leaves
nothing in /dev/shm: the tracker unlinks what its parent left behind.
Attaching checks magic, layout version and layout hash before anything is
trusted.

The mapping itself is never unmapped by hand: every numpy view holds a
reference to it, so a view kept after the Machine closed stays valid (the
memory goes when the last view does), and no close can pull memory from
under a live array.
"""
import mmap
import os
import secrets
from multiprocessing import resource_tracker

import _posixshmem
import numpy as np

from . import layout
from .errors import SegmentError

NAME_PREFIX = "smpnet_"
CREATED = []  # names this process created, oldest first: what a leak check looks for


def _view(buf, dtype, offset, count=None):
    """A numpy view that keeps the mapping alive (np.frombuffer holds it)."""
    if count is None:
        return np.frombuffer(buf, dtype, 1, offset).reshape(())
    return np.frombuffer(buf, dtype, count, offset)


def _map(name, size=None):
    """shm_open + mmap; creates the segment (0600, must not exist) when size is given."""
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if size is not None else 0)
    fd = _posixshmem.shm_open("/" + name, flags, mode=0o600)
    try:
        if size is not None:
            os.ftruncate(fd, size)
        else:
            size = os.fstat(fd).st_size
        if size == 0:
            return None
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


class Segment:
    """A mapped segment with numpy views of its header and regions."""

    def __init__(self, name, buf, regions, layout_name, owner):
        self.name = name
        self.owner = owner
        self.layout = layout_name
        self.buf = buf
        self.size = len(buf)
        self.header = _view(buf, layout.SMP_HEADER, 0)
        self._types = dict(regions)
        self._views = {}

    # ------------------------------------------------------------ create

    @classmethod
    def create(cls, nr_cpus, regions=(), tsc_hz=0.0, flags=0, layout_name="aligned"):
        """A new segment for nr_cpus CPUs with the built-in per-CPU regions
        and `regions`, a sequence of (name, dtype, count)."""
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
            placed.append((name, dtype, count, offset, st))
            offset = _align(offset + count * st)
        size = offset
        _check_room(size)

        name = NAME_PREFIX + secrets.token_hex(16)
        buf = _map(name, size)
        CREATED.append(name)
        resource_tracker.register("/" + name, "shared_memory")
        seg = cls(name, buf, [(n, d) for n, d, *_ in placed], layout_name, owner=True)
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
        """Map an existing segment by name, checking that it is an smpnet
        segment of this very layout. `regions`: the (name, dtype) pairs of
        the extra regions its creator added."""
        name = name.lstrip("/")
        try:
            buf = _map(name)
        except FileNotFoundError:
            raise SegmentError(f"no shared-memory segment named {name!r}") from None
        except PermissionError:
            raise SegmentError(f"shared-memory segment {name!r}: permission denied") from None
        except OSError as e:
            raise SegmentError(f"shared-memory segment {name!r}: {e.strerror}") from None
        types = list(layout.BUILTIN_REGIONS) + list(regions)
        problem = _check_header(buf, types, layout_name)
        if problem:
            raise SegmentError(f"segment {name!r} {problem}")
        return cls(name, buf, types, layout_name, owner=False)

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

    @property
    def region_names(self):
        return [self.header["regions"][i]["name"].decode()
                for i in range(int(self.header["nr_regions"]))]

    # ------------------------------------------------------------ teardown

    def close(self, unlink=None):
        """Unlink the name (by default, if we created it) and drop our
        references. The mapping goes when the last numpy view of it does."""
        if self.buf is None:
            return
        unlink = self.owner if unlink is None else unlink
        if unlink:
            try:
                _posixshmem.shm_unlink("/" + self.name)
            except FileNotFoundError:
                pass
            resource_tracker.unregister("/" + self.name, "shared_memory")
        self._views.clear()
        self.header = None
        self.buf = None


def _check_room(size, where="/dev/shm"):
    """Refuse a segment that /dev/shm cannot hold: better one clear line than
    a worker killed by SIGBUS or the OOM killer halfway through a run."""
    try:
        st = os.statvfs(where)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if size > free:
        raise SegmentError(f"the machine needs {size / 2**20:.0f} MiB of shared memory, "
                           f"{where} has {free / 2**20:.0f} MiB free")


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
