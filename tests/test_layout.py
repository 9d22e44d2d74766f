"""The numpy dtypes (layout.py) are the C structs as the compiler laid them
out (layout.h, reported by the core), and what depends on them follows."""
import glob
import hashlib
import os
import re
import sys

import numpy as np
import pytest

from smpnet import _core
from smpnet.machine import layout

# Every record's layout, pinned per layout version. A change to any shared
# record changes the digest: bump SMPNET_LAYOUT_VERSION in percpu.h (the
# version's one home) and pin the new digest here, so that a segment built
# by another smpnet is refused by its version, not only by its hash.
LAYOUT_PINS = {6: "28814baf10709e9c", 7: "83b185ecc8b53fe5", 8: "de8ed2f9beaaa1fa",
               9: "73f04e66e671abc1", 10: "6c41120246259712", 11: "e626891802bcfbac",
               12: "6812bfe941c2ea6c", 13: "375c64838ef67124", 14: "69c3a91987f741e3",
               15: "908850575dc05549", 16: "b962585a26813dfe",
               17: "3758e2e466ee2079", 18: "806ad77559400160", 19: "200d67b226b430f7",
               20: "ef93e9c400e4ee37", 21: "8fb57e6395c01431",
               22: "31f006ba0d454fac", 23: "4a1c96d43d5682e5", 24: "6c0c47008d3d6d1c"}


def records_digest(structs):
    text = "|".join(f"{name}={layout.describe(d)}" for name, d in sorted(structs.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("cname", sorted(layout.STRUCTS))
def test_dtype_matches_c_struct_field_by_field(cname):
    csize, cfields = _core.c_layout()[cname]
    dtype = layout.STRUCTS[cname]
    assert dtype.itemsize == csize
    assert sorted(dtype.names) == sorted(cfields)
    for name in dtype.names:
        fdtype, offset = dtype.fields[name][:2]
        assert (offset, fdtype.itemsize) == cfields[name], f"{cname}.{name}"


def test_every_record_in_layout_h_has_a_dtype_and_a_name():
    assert list(layout.STRUCTS) == list(_core.c_structs())
    for cname, dtype in layout.STRUCTS.items():
        assert getattr(layout, cname.upper()) is dtype


def test_dtypes_follow_the_compiler_report():
    # a field the compiler put elsewhere, or gave another type, is read there
    size, fields = _core.c_structs()["pcpu_lstats"]
    moved = [(n, off + 4, sz, "i4" if n == "depth" else t, r, c) if n == "depth"
             else (n, off, sz, t, r, c) for n, off, sz, t, r, c in fields]
    d = layout.build_dtypes({"pcpu_lstats": (size, moved)})["pcpu_lstats"]
    assert d.fields["depth"][1] == layout.PCPU_LSTATS.fields["depth"][1] + 4
    assert d.itemsize == layout.PCPU_LSTATS.itemsize


def test_nested_records_and_arrays():
    regions = layout.SMP_HEADER.fields["regions"][0]
    assert regions.shape == (layout.MAX_REGIONS,) and regions.base == layout.SMP_REGION
    assert layout.SMP_REGION.fields["name"][0] == np.dtype(f"S{layout.REGION_NAME}")
    assert layout.IRQ_CPUSTAT.fields["bugs"][0].shape == (len(layout.LOCKDEP_BUGS),)
    assert layout.SKB_STATS.fields["flush_hist"][0].shape == (_core.c_constants()["FLUSH_HIST_BUCKETS"],)
    assert layout.SKB_STATS.fields["flush_lock_sample"][0].shape == (layout.FLUSH_SAMPLES,)
    assert layout.NAPI_ALLOC_CACHE.fields["skb_cache"][0].shape == (layout.NAPI_SKB_CACHE_SIZE,)
    assert layout.SKB_RING.fields["slot"][0].shape == (layout.SKB_RING_SIZE,)
    assert layout.QNODES.fields["n"][0].base == layout.QNODE
    assert layout.LOCK_SLOT.fields["lock"][0] == layout.SPINLOCK
    assert layout.NEIGH_TABLE.fields["tbl"][0].shape == (layout.NEIGH_HASH,)
    assert layout.NEIGH_TABLE.fields["parms"][0] == layout.NEIGH_PARMS
    assert layout.LINK_RING.fields["f"][0].base == layout.FRAME
    assert layout.SK_BUFF.fields["cb"][0] == np.dtype("V32")
    assert layout.SMP_HEADER.fields["tsc_hz"][0] == np.dtype("f8")
    assert layout.CPU_STATE.fields["pid"][0] == np.dtype("i4")


def test_a_record_array_reads_what_c_wrote():
    buf = np.zeros(1, layout.SKB_STATS)
    raw = buf.view(np.uint8)
    off = layout.SKB_STATS.fields["flush_hist"][1]
    raw[off + 4 * 3] = 7                        # flush_hist[3], little-endian u4
    assert buf["flush_hist"][0][3] == 7


@pytest.mark.skipif(sys.byteorder != "little", reason="pinned on a little-endian machine")
def test_layout_changes_bump_the_version():
    assert layout.VERSION in LAYOUT_PINS, (
        f"layout version {layout.VERSION} has no pin: add {layout.VERSION}: "
        f"{records_digest(layout.STRUCTS)!r} to LAYOUT_PINS")
    assert records_digest(layout.STRUCTS) == LAYOUT_PINS[layout.VERSION], (
        "a shared record changed: bump SMPNET_LAYOUT_VERSION in smpnet/kernel/percpu.h "
        f"and pin {records_digest(layout.STRUCTS)!r} for it")


def test_constants_are_the_headers():
    c = _core.c_constants()
    assert layout.VERSION == c["SMPNET_LAYOUT_VERSION"]
    assert layout.MAGIC == c["SMPNET_MAGIC"] == int.from_bytes(b"SMPNET", "little")  # in memory, as the magic reads
    assert layout.CACHELINE == c["SMP_CACHE_BYTES"]
    assert (layout.PING_PENDING, layout.PING_OK) == (c["PING_PENDING"], c["PING_OK"])


def test_builtin_regions_are_the_headers():
    c = _core.c_constants()
    assert len(layout.BUILTIN_REGIONS) == c["REGION_NR_BUILTIN"]
    names = [n for n, _ in layout.BUILTIN_REGIONS]
    assert names.index("irq") == c["REGION_IRQ"] and names.index("cpu") == c["REGION_CPU"]
    assert dict(layout.BUILTIN_REGIONS)["irq"] is layout.IRQ_CPUSTAT


def test_verify_reports_no_disagreement():
    assert layout.verify(_core.c_layout(), _core.c_constants()) == []


def test_verify_checks_the_names_python_keeps():
    c = _core.c_constants()
    assert set(layout.CONSTANTS) <= set(c)
    problems = layout.verify(_core.c_layout(), dict(c, LOCKDEP_NR_BUGS=c["LOCKDEP_NR_BUGS"] + 1))
    assert len(problems) == 1 and "LOCKDEP_NR_BUGS" in problems[0]


def test_layout_hash_sees_inside_nested_records():
    inner1 = np.dtype({"names": ["a", "b"], "formats": ["<u4", "<u4"], "offsets": [0, 4]})
    inner2 = np.dtype({"names": ["b", "a"], "formats": ["<u4", "<u4"], "offsets": [0, 4]})
    base = list(layout.BUILTIN_REGIONS)
    h1 = layout.layout_hash(base + [("neigh", np.dtype([("e", inner1, (2,))]))], "aligned")
    h2 = layout.layout_hash(base + [("neigh", np.dtype([("e", inner2, (2,))]))], "aligned")
    assert h1 != h2


def test_verify_catches_a_moved_field():
    c = _core.c_layout()
    size, fields = c["pcpu_lstats"]
    moved = dict(fields, depth=(fields["depth"][0] + 4, fields["depth"][1]))
    problems = layout.verify(dict(c, pcpu_lstats=(size, moved)))
    assert len(problems) == 1 and "pcpu_lstats.depth" in problems[0]


def test_verify_catches_a_missing_field_and_size():
    c = _core.c_layout()
    size, fields = c["softnet_data"]
    fewer = {k: v for k, v in fields.items() if k != "dropped"}
    problems = layout.verify(dict(c, softnet_data=(size + 8, fewer)))
    assert any("sizeof" in p for p in problems)
    assert any("fields" in p for p in problems)


def test_hot_header_fields_have_their_own_cache_lines():
    off = {n: layout.SMP_HEADER.fields[n][1] for n in layout.SMP_HEADER.names}
    lines = {n: off[n] // layout.CACHELINE for n in off}
    assert lines["stop"] not in {lines["magic"], lines["barrier_arrived"]}
    assert lines["barrier_arrived"] != lines["magic"]


@pytest.mark.parametrize("dtype", [d for _, d in layout.BUILTIN_REGIONS])
def test_strides(dtype):
    aligned = layout.stride(dtype, "aligned")
    packed = layout.stride(dtype, "packed")
    assert aligned % layout.CACHELINE == 0 and aligned >= dtype.itemsize
    assert packed % 8 == 0 and dtype.itemsize <= packed < dtype.itemsize + 8


def test_layout_hash_depends_on_regions_and_policy():
    base = list(layout.BUILTIN_REGIONS)
    extra = base + [("skb", np.dtype([("next", "<u4")]))]
    hashes = {layout.layout_hash(base, "aligned"), layout.layout_hash(base, "packed"),
              layout.layout_hash(extra, "aligned")}
    assert len(hashes) == 3
    assert layout.layout_hash(base, "aligned") == layout.layout_hash(list(base), "aligned")


# members of a shared record that have no layout.h row, each with the reason
UNLISTED = {
    "spinlock": {"locked", "pending", "locked_pending", "tail"},  # union views of `val`,
    # which has a row: Python reads the word
    "lock_info": {"mutex"},  # a union view of `mutex_raw`, which has a row
}
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _struct_members(name):
    """The member names of `struct name` as the headers declare it (padding
    aside), read from the source; None when no header defines it."""
    for path in glob.glob(os.path.join(os.path.dirname(__file__), "..", "smpnet", "kernel", "*.h")):
        src = _COMMENT.sub("", open(path).read())
        m = re.search(rf"(?:typedef\s+)?struct {name}\s*\{{", src)
        if not m:
            continue
        depth, j = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            j += 1
        names = set(re.findall(r"(\w+)\s*(?:\[[^\]]*\])*\s*;", src[m.end():j - 1]))
        return {n for n in names if not n.startswith("_pad")}
    return None


@pytest.mark.parametrize("struct", sorted(layout.STRUCTS))
def test_every_member_of_a_shared_record_has_its_layout_row(struct):
    """A field added to a record without its row in layout.h would be
    invisible to Python and to the layout hash: refuse it."""
    members = _struct_members(struct)
    assert members is not None, f"no header defines struct {struct}"
    assert members - UNLISTED.get(struct, set()) == set(layout.STRUCTS[struct].names)


def test_the_defer_fields_lie_as_each_kernel_version_lays_them_out():
    sd = layout.SOFTNET_DATA.fields

    def line(name):
        return sd[name][1] // layout.CACHELINE

    # spinlock_t is the kernel's 4-byte word: the checker's fields and the
    # pthread mutex are in the side table, not in the record
    assert layout.SPINLOCK.itemsize == 4
    # 5.19 to 6.17: defer_lock first on "another possibly contended cache
    # line" (____cacheline_aligned_in_smp), then the count, the IPI flag and
    # the list, all on it, apart from the owner's line 0
    assert sd["defer_lock"][1] % layout.CACHELINE == 0
    assert {line(n) for n in ("defer_lock", "defer_count", "defer_ipi_scheduled",
                              "defer_list")} == {1}
    assert line("input_qlen") == 0
    # 844c9db7f7f5 (2025): the llist head and an 8-byte atomic_long_t count
    # on that line, the IPI flag moved to a line of its own
    assert line("defer_llist") == line("defer_llist_count") == 1
    assert sd["defer_llist_count"][0].itemsize == 8
    assert line("defer_llist_ipi_scheduled") == 2


def test_a_lock_in_a_record_takes_the_kernels_four_bytes():
    # the datum a lock_slot's lock protects follows its word on the same
    # line, as a kernel struct's fields follow an embedded spinlock_t
    assert layout.LOCK_SLOT.fields["counter"][1] == 8
    assert layout.LOCK_INFO.itemsize == layout.CACHELINE