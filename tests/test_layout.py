"""The numpy dtypes (layout.py) and the C structs (percpu.h) agree."""
import numpy as np
import pytest

from smpnet import _core, layout


@pytest.mark.parametrize("cname", sorted(layout.STRUCTS))
def test_dtype_matches_c_struct_field_by_field(cname):
    csize, cfields = _core.c_layout()[cname]
    dtype = layout.STRUCTS[cname]
    assert dtype.itemsize == csize
    assert sorted(dtype.names) == sorted(cfields)
    for name in dtype.names:
        fdtype, offset = dtype.fields[name][:2]
        assert (offset, fdtype.itemsize) == cfields[name], f"{cname}.{name}"


def test_verify_reports_no_disagreement():
    assert layout.verify(_core.c_layout(), _core.c_constants()) == []


def test_constants_agree_with_the_headers():
    c = _core.c_constants()
    assert set(layout.CONSTANTS) == set(c)
    problems = layout.verify(_core.c_layout(), dict(c, SMPNET_LAYOUT_VERSION=c["SMPNET_LAYOUT_VERSION"] + 1))
    assert len(problems) == 1 and "SMPNET_LAYOUT_VERSION" in problems[0]


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
