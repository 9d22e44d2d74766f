"""A user's variant (smpnet-bench ab's C file), timed as a microbenchmark.

    pytest bench/ --benchmark-only -k ab

The file is built by ab's own build (cached: a second session compiles
nothing); each timed round is one call of the variant's loop, LOOPS ops,
in this process, pinned to BENCH_CPU, on a one-CPU machine holding the
file's state. Before each timed round, outside the timing, one round of the
built-in time_bench test of the same op: extra_info has the median of the
rounds' user / built-in ratios with its 95 % interval (the harness overhead
of a user's file; target at most 1.05). To time a file of your own, copy
this test and change FILE, VARIANT and BUILTIN.
"""
import pathlib
import statistics

import pytest

from smpnet import Machine, _core
from smpnet.experiments.ab import build, rounds
from smpnet.experiments.common import lockbench
from smpnet.machine.tsc import tsc_hz
from smpnet.measure import stats

from conftest import BENCH_CPU, LOOPS

FILE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "spin_lock_bh.c"
VARIANT, BUILTIN, ALGO = "plain", "spin_lock_unlock", "qspinlock"
ROUNDS = 21


@pytest.fixture(scope="module")
def user_machine():
    obj = build.build(FILE.read_text(), str(FILE), _core.LOCK_ALGOS[ALGO])
    variant = next(v for v in obj.variants if v.name == VARIANT)
    regions = rounds.regions(obj, 1, 1) + lockbench.locks_region(1)
    with Machine(cpus=[BENCH_CPU], regions=regions) as m:
        lockbench.init_locks(m, [ALGO])
        where = rounds.Where(m, [obj])
        if variant.init:
            assert _core.ab_init(variant.init, m.segment.buf, **where.state(0)) == 0
        yield m, variant, where


def test_ab_variant(benchmark, pinned, user_machine):
    m, variant, where = user_machine
    seg = m.segment.buf
    builtin = dict(seg=seg, cpu=0, lock_region=m.segment.region_names.index("locks"),
                   lock_index=0)
    benchmark.group = "ab"
    user, base = [], []

    def builtin_round():
        base.append(_core.time_bench_round(BUILTIN, LOOPS, **builtin)[0] / LOOPS)

    def user_round():
        user.append(_core.ab_round(variant.loop, LOOPS, seg, 0, **where.state(0))[0] / LOOPS)

    benchmark.pedantic(user_round, setup=builtin_round, rounds=ROUNDS, warmup_rounds=1)
    n = ROUNDS if benchmark.enabled else 1
    user, base = user[-n:], base[-n:]
    ratio, (lo, hi) = stats.median_ci([u / b for u, b in zip(user, base)])
    med = statistics.median(user)
    benchmark.extra_info.update(file=FILE.name, variant=VARIANT, builtin=BUILTIN, loops=LOOPS,
                                cycles_per_op=med, ns_per_op=med * 1e9 / tsc_hz(),
                                builtin_cycles_per_op=statistics.median(base),
                                over_builtin=ratio, over_builtin_interval=[lo, hi])
    assert len(user) == len(base) == n and lo <= ratio <= hi
