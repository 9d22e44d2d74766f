"""One table per list: each choice Python offers (lock algorithms and
variants, defer strategies, loopback and probe modes, checker report kinds)
is a C enum written once as an X-macro table in its header; the Python
dict and the enum's count come from it, and a value outside it is refused
before any C switch could meet it."""
import os
import re

import pytest

from smpnet import Machine, _core
from smpnet.experiments.common import net
from smpnet.machine import layout

KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "smpnet", "kernel")

# Python's choices -> (header, its table, the enum's count in c_constants())
TABLES = {
    "LOCK_ALGOS": ("spinlock_types.h", "SPIN_ALGO_TABLE", "SPIN_NR_ALGOS"),
    "LOCK_VARIANTS": ("spinlock_variant.h", "SPIN_VARIANT_TABLE", "SPIN_NR_VARIANTS"),
    "KERNEL_SHAPES": ("kernel_build.h", "KERNEL_SHAPE_TABLE", "KSHAPE_NR"),
    "KERNEL_RETURNS": ("kernel_build.h", "KERNEL_RETURN_TABLE", "KRET_NR"),
    "DEFER_STRATEGIES": ("skbuff.h", "DEFER_STRATEGY_TABLE", "DEFER_NR_STRATEGIES"),
    "LOOPBACK_MODES": ("loopback.h", "LO_MODE_TABLE", "LO_NR_MODES"),
    "PROBE_MODES": ("neighbour.h", "PROBE_MODE_TABLE", "NR_PROBE_MODES"),
    "LOCKDEP_BUGS": ("percpu.h", "LOCKDEP_BUG_TABLE", "LOCKDEP_NR_BUGS"),
    "STACK_FRAMES": ("dev.h", "STACK_FRAME_TABLE", "NR_STACK_FRAMES"),
}


def header_table(header, table):
    """[(enumerator, name), ...] as the header's X-macro table lists them,
    read from the source, not from the build."""
    with open(os.path.join(KERNEL, header)) as f:
        src = f.read()
    m = re.search(rf"#define {table}\(X\)((?:[^\n]*\\\n)*[^\n]*)", src)
    assert m, f"no {table} in {header}"
    return re.findall(r'X\(\s*(\w+)\s*,\s*"([^"]*)"\s*\)', m.group(1))


@pytest.mark.parametrize("choices", sorted(TABLES))
def test_python_choices_are_the_c_enum(choices):
    header, table, nr = TABLES[choices]
    rows = header_table(header, table)
    python = getattr(_core, choices)
    names = list(python)
    assert names == [name for _, name in rows]
    assert len(names) == _core.c_constants()[nr]
    if isinstance(python, dict):
        assert list(python.values()) == list(range(len(rows)))


def test_a_kernel_build_is_a_shape_and_a_return_the_inline_shape_returning_plainly():
    shapes, returns = _core.KERNEL_SHAPES, _core.KERNEL_RETURNS
    c = _core.c_constants()
    assert c["KBUILD_NR"] == len(shapes) * len(returns)
    expected = {shape + ret: shapes[shape] + len(shapes) * returns[ret]
                for ret in returns for shape in shapes if shape != "inline" or not ret}
    assert _core.KERNEL_BUILDS == expected
    assert "inline+safe-ret" not in _core.KERNEL_BUILDS and "x86-preempt+ret-thunk" in expected
    # a number between two builds that is none is refused before C meets it
    for build in range(c["KBUILD_NR"] + 1):
        if build in expected.values():
            continue
        with pytest.raises(ValueError, match="no kernel build"):
            _core.kernel_build_calls(build)


def test_the_experiments_offer_the_c_tables_in_their_order():
    from smpnet.experiments.common import lockbench
    from smpnet.experiments import arp, defer, loopback

    for offered, table in ((lockbench.ALGOS, "LOCK_ALGOS"), (lockbench.VARIANTS, "LOCK_VARIANTS"),
                           (defer.STRATEGIES, "DEFER_STRATEGIES"),
                           (loopback.MODES, "LOOPBACK_MODES"), (arp.PROBES, "PROBE_MODES")):
        header, name, _ = TABLES[table]
        assert list(offered) == [n for _, n in header_table(header, name)], table


def test_enum_values_in_c_follow_the_tables():
    # the enumerators Python never names still mean what the table says
    c = _core.c_constants()
    assert c["SPIN_NR_ALGOS"] == len(_core.LOCK_ALGOS)
    assert layout.LOCKDEP_BUGS == _core.LOCKDEP_BUGS
    assert layout.IRQ_CPUSTAT.fields["bugs"][0].shape == (c["LOCKDEP_NR_BUGS"],)


def test_the_table_reader_reads_a_table():
    assert header_table("spinlock_types.h", "SPIN_ALGO_TABLE")[0] == ("SPIN_TAS", "tas")


@pytest.fixture
def locks(allowed):
    with Machine(cpus=[allowed[0]], regions=[("locks", layout.LOCK_SLOT, 2)]) as m:
        yield m, m.segment.region_names.index("locks")


@pytest.mark.parametrize("algo", [-1, len(_core.LOCK_ALGOS)])
def test_an_unknown_lock_algorithm_is_refused_where_a_lock_is_made(locks, algo):
    m, region = locks
    with pytest.raises(ValueError, match="no lock algorithm"):
        _core.lock_init(m.segment.buf, region, 0, algo, 0)
    assert m.segment.lock_info("locks", 0) is None       # never given an entry


@pytest.mark.parametrize("variant", [-1, len(_core.LOCK_VARIANTS)])
def test_an_unknown_variant_is_refused(locks, variant):
    m, region = locks
    _core.lock_init(m.segment.buf, region, 0, _core.LOCK_ALGOS["tas"], 0)
    c = _core.Cpu(m.segment.buf, 0, lock_region=region)
    with pytest.raises(ValueError, match="no lock variant"):
        c.spin_lock(0, variant)
    with pytest.raises(ValueError, match="no lock variant"):
        c.spin_unlock(0, variant)
    with pytest.raises(ValueError, match="no lock variant"):
        _core.lock_hammer(m.segment.buf, 0, region, 0, variant, 1, 0, 0)


def test_an_unknown_algorithm_is_refused_by_net_init(allowed):
    with Machine(cpus=[allowed[0]], regions=net.regions(16, 1)) as m:
        idx = net.indices(m)
        with pytest.raises(ValueError, match="no lock algorithm"):
            _core.net_init(m.segment.buf, idx, len(_core.LOCK_ALGOS))
        _core.net_init(m.segment.buf, idx, _core.LOCK_ALGOS["ticket"])
        with pytest.raises(ValueError, match="no defer strategy"):
            _core.Cpu(m.segment.buf, 0).attach_net(idx, len(_core.DEFER_STRATEGIES), 64)


def test_an_unknown_probe_mode_is_refused():
    with pytest.raises(ValueError, match="no probe mode"):
        _core.Neigh(probe="eventually")
