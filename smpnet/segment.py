"""One POSIX shared-memory segment: smp_header, then the regions.

Created 0600 under an unguessable name (/dev/shm/smpnet_<128 random bits>),
unlinked on every exit path by its creator. Python's resource tracker is
told about it too, so that even a coordinator killed with SIGKILL leaves
nothing in /dev/shm: the tracker unlinks what its parent left behind.
Attaching checks magic, layout version and layout hash before anything is
trusted.
"""
import secrets
import sys
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from . import layout
from .errors import SegmentError

NAME_PREFIX = "smpnet_"


class Segment:
    """A mapped segment with numpy views of its header and regions."""

    def __init__(self, shm, regions, layout_name, owner):
        self._shm = shm
        self.name = shm.name.lstrip("/")
        self.owner = owner
        self.layout = layout_name
        self.buf = shm.buf
        self.header = np.ndarray((), layout.SMP_HEADER, self.buf, 0)
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

        shm = shared_memory.SharedMemory(
            name=NAME_PREFIX + secrets.token_hex(16), create=True, size=size)
        seg = cls(shm, [(n, d) for n, d, *_ in placed], layout_name, owner=True)
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
        try:
            shm = _open_untracked(name)
        except FileNotFoundError:
            raise SegmentError(f"no shared-memory segment named {name!r}") from None
        except PermissionError:
            raise SegmentError(f"shared-memory segment {name!r}: permission denied") from None
        types = list(layout.BUILTIN_REGIONS) + list(regions)
        try:
            problem = _check_header(shm, types, layout_name)
        except BaseException:
            shm.close()
            raise
        if problem:
            shm.close()
            raise SegmentError(f"segment {name!r} {problem}")
        return cls(shm, types, layout_name, owner=False)

    # ------------------------------------------------------------ views

    def region(self, name):
        """The numpy array of a region's records (one per CPU for per-CPU ones)."""
        view = self._views.get(name)
        if view is None:
            for i in range(int(self.header["nr_regions"])):
                r = self.header["regions"][i]
                if r["name"].decode() == name:
                    dtype = layout.padded(self._types[name], int(r["stride"]))
                    view = np.ndarray((int(r["count"]),), dtype, self.buf, int(r["offset"]))
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
        """Unmap, and (by default for the creator) unlink the name.

        The name goes first: a view some caller still holds keeps the mapping
        alive (BufferError on close), but never the /dev/shm entry."""
        if self._shm is None:
            return
        unlink = self.owner if unlink is None else unlink
        if unlink:
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass
        self._views.clear()
        self.header = None
        self.buf = None
        try:
            self._shm.close()
        except BufferError:
            pass  # a caller still holds a view; the mapping goes with it
        self._shm = None

    @property
    def closed(self):
        return self._shm is None


def _align(n, to=layout.CACHELINE):
    return -(-n // to) * to


def _open_untracked(name):
    """Attach without registering with the resource tracker (which would
    unlink a segment this process does not own when it exits)."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    shm = shared_memory.SharedMemory(name=name)
    resource_tracker.unregister(shm._name, "shared_memory")
    return shm


def _check_header(shm, types, layout_name):
    """Why the mapped segment is not one we can use, or None."""
    if shm.size < layout.SMP_HEADER.itemsize:
        return f"is too small ({shm.size} bytes) to be an smpnet segment"
    h = np.ndarray((), layout.SMP_HEADER, shm.buf, 0)
    try:
        if int(h["magic"]) != layout.MAGIC:
            return "is not an smpnet segment (bad magic)"
        if int(h["version"]) != layout.VERSION:
            return (f"has layout version {int(h['version'])}, "
                    f"this smpnet reads version {layout.VERSION}")
        nr = int(h["nr_regions"])
        names = [h["regions"][i]["name"].decode(errors="replace") for i in range(min(nr, layout.MAX_REGIONS))]
        if [n for n, _ in types] != names:
            return f"holds regions {names}, expected {[n for n, _ in types]}"
        if int(h["layout_hash"]) != layout.layout_hash(types, layout_name):
            return "has a different layout (layout hash mismatch): built by another smpnet?"
        if int(h["size"]) > shm.size:
            return f"is truncated ({shm.size} of {int(h['size'])} bytes)"
        return None
    finally:
        del h
