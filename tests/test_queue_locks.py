"""The queue locks' nodes and order: MCS and CLH (mcs_spinlock.h) keep a
per-CPU node for each lock held or waited for, found again at the unlock
whatever the order of the unlocks, and always given back; ticket,
qspinlock, MCS and CLH serve their waiters first come, first served."""
import re
import time

import numpy as np
import pytest

from conftest import X86
from smpnet import Machine, _core
from smpnet.machine import layout

QUEUE_LOCKS = ("mcs", "clh")
FIFO_LOCKS = ("ticket", "qspinlock") + QUEUE_LOCKS
FLAG = np.dtype([("flag", "<u4")])


def machine(cpus, ncpus=1, n=2, **regions):
    return Machine(cpus=cpus, ncpus=ncpus, oversubscribe=True,
                   regions=[("locks", layout.LOCK_SLOT, n)] +
                           [(name, FLAG, ncpus) for name in regions])


def init(m, algo, n=2):
    reg = m.segment.region_names.index("locks")
    for i in range(n):
        _core.lock_init(m.segment.buf, reg, i, _core.LOCK_ALGOS[algo], i)
    return reg


MCS_NODES = _core.c_constants()["MCS_NODES"]
CLH_NODE = 0xffffffff       # a CLH node's `next` (mcs_spinlock.h)


def released(m):
    """The released CLH nodes still marked (left in their locks as the
    next acquirer's predecessor), as encoded tails."""
    q = m.region("qnodes")["mcs"]
    return {((cpu + 1) << (MCS_NODES.bit_length() - 1)) | i
            for cpu in range(len(q)) for i in range(MCS_NODES)
            if q[cpu][i]["lock"] and q[cpu][i]["next"] == CLH_NODE and not q[cpu][i]["locked"]}


def nodes_in_use(m):
    """Per CPU: the queue-lock nodes held or waited with (not free, not a
    released CLH node), and qspinlock's nesting count."""
    q = m.region("qnodes")
    rel = released(m)
    bits = MCS_NODES.bit_length() - 1
    return [sum(1 for i in range(MCS_NODES) if q["mcs"][cpu][i]["lock"]
                and ((cpu + 1) << bits | i) not in rel) + int(q["n"]["count"][cpu][0])
            for cpu in range(len(q))]


def words(m):
    return [int(v) for v in m.region("locks")["lock"]["val"]]


def assert_free(m, algo, locks=None):
    """Locks `locks` (all) are free: their words 0, or for CLH a released
    node, each released node the tail of exactly one lock (none leaked)."""
    w = words(m)
    free = [w[i] for i in (range(len(w)) if locks is None else locks)]
    rel = released(m)
    if algo == "clh":
        assert all(v == 0 or v in rel for v in free), (free, rel)
        assert sorted(rel) == sorted(v for v in w if v in rel), (w, rel)
    else:
        assert free == [0] * len(free) and not rel


def wait_for(cond, what, timeout=20):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


@pytest.mark.parametrize("algo", QUEUE_LOCKS)
def test_unlock_in_any_order_finds_each_locks_node(allowed, algo):
    # lock A, lock B, unlock A: a holder that took the last node it queued
    # (a stack) would release B's node from A, whose tail is not B's
    with machine([allowed[0]]) as m:
        c = _core.Cpu(m.segment.buf, 0, lock_region=init(m, algo))
        c.spin_lock(0)
        c.spin_lock(1)
        a, b = words(m)
        assert a and b and a != b and nodes_in_use(m) == [2]
        c.spin_unlock(0)
        assert words(m)[1] == b and nodes_in_use(m) == [1]
        assert_free(m, algo, [0])
        # MCS: A's node back, B's kept; CLH: A's node left in A as released
        assert released(m) == ({a} if algo == "clh" else set())
        b_node = b & (MCS_NODES - 1)
        assert m.region("qnodes")["mcs"]["lock"][0][b_node] != 0  # B's node, kept
        c.spin_lock(0)      # A again: MCS on the node A gave back; CLH recycles it
        assert (words(m)[0] == a) == (algo == "mcs") and not released(m)
        c.spin_unlock(1)
        c.spin_unlock(0)
        assert nodes_in_use(m) == [0]
        assert_free(m, algo)


@pytest.mark.parametrize("algo", QUEUE_LOCKS + ("qspinlock", "ticket"))
def test_unlock_out_of_order_hands_each_lock_to_its_waiter(allowed, algo):
    """CPU 0 holds A then B and releases A first while CPU 1 waits for A:
    CPU 1 gets A (handed on from A's node), then waits for B until CPU 0
    releases it."""
    def body(ctx, reg):
        c = _core.Cpu(ctx.seg, ctx.cpu, lock_region=reg, timeout=30)
        spins = ctx.machine.region("irq")["spins"]
        got = ctx.machine.region("got")["flag"]
        if ctx.cpu == 0:
            c.spin_lock(0)
            c.spin_lock(1)
            got[0] = 1
            wait_for(lambda: spins[1] > 0, "CPU 1 to wait for A")
            c.spin_unlock(0)
            wait_for(lambda: got[1] == 1, "CPU 1 to take A")
            c.spin_unlock(1)
            return None
        wait_for(lambda: got[0] == 1, "CPU 0 to hold both")
        c.spin_lock(0, timeout=30)
        got[1] = 1
        c.spin_lock(1, timeout=30)
        c.spin_unlock(1)
        c.spin_unlock(0)
        return None

    with machine(allowed, ncpus=2, got=True) as m:
        reg = init(m, algo)
        m.run(body, reg, timeout=60)
        assert list(m.region("got")["flag"]) == [1, 1]
        assert nodes_in_use(m) == [0, 0]
        if algo != "ticket":
            assert_free(m, algo)


@pytest.mark.parametrize("algo", FIFO_LOCKS)
def test_waiters_are_served_in_the_order_they_came(allowed, algo):
    """CPU 0 holds the lock; CPUs 1, 2, 3 start waiting one after the
    other (each once the one before it spins). Each then records its turn:
    a queue served last in, first out (or tas's free-for-all) fails."""
    ncpus = 4

    def body(ctx, reg):
        c = _core.Cpu(ctx.seg, ctx.cpu, lock_region=reg, timeout=30)
        spins = ctx.machine.region("irq")["spins"]
        turn = ctx.machine.region("turn")["flag"]
        counter = ctx.machine.region("locks")["counter"]
        if ctx.cpu == 0:
            c.spin_lock(0)
            turn[0] = 1
            wait_for(lambda: spins[ncpus - 1] > 0, "the last CPU to wait")
            c.spin_unlock(0)
            return None
        if ctx.cpu == 1:
            wait_for(lambda: turn[0] == 1, "CPU 0 to hold the lock")
        else:
            wait_for(lambda: spins[ctx.cpu - 1] > 0, f"CPU {ctx.cpu - 1} to wait")
        c.spin_lock(0, timeout=30)
        counter[0] += 1
        turn[ctx.cpu] = counter[0]
        c.spin_unlock(0)
        return None

    with machine(allowed, ncpus=ncpus, n=1, turn=True) as m:
        reg = init(m, algo, n=1)
        m.run(body, reg, timeout=60)
        assert list(m.region("turn")["flag"][1:]) == [1, 2, 3]
        assert nodes_in_use(m) == [0] * ncpus


@pytest.mark.parametrize("algo", QUEUE_LOCKS)
def test_no_node_is_lost_or_kept_after_contended_runs(allowed, algo):
    # CLH's nodes are freed by the successor that spun on them: after any
    # run, every node of every CPU is back, and the lock free
    with machine(allowed, ncpus=4, n=1) as m:
        reg = init(m, algo, n=1)
        for variant in ("plain", "irqsave", "bh"):
            out = m.run(lambda ctx: _core.lock_hammer(ctx.seg, ctx.cpu, reg, 0,
                                                      _core.LOCK_VARIANTS[variant], 3000, 0, 0),
                        timeout=120)
            assert [r[0] for r in out] == [3000] * 4 and not any(r[3] for r in out)
            assert nodes_in_use(m) == [0] * 4, variant
            assert_free(m, algo)
            assert len(released(m)) == (algo == "clh")     # the last release's
        assert m.region("locks")[0]["counter"] == 3 * 4 * 3000
        # the next run starts with each released node taken out of its lock
        m.run(lambda ctx: None)
        assert words(m) == [0] and not released(m) and nodes_in_use(m) == [0] * 4


@pytest.mark.parametrize("algo", QUEUE_LOCKS)
def test_an_acquire_past_the_last_node_waits_and_gives_up(allowed, algo):
    # every node in use: the next acquire waits for one (a CLH successor
    # frees it), and a CPU driven from Python gives up at its deadline
    nodes = _core.c_constants()["MCS_NODES"]
    with machine([allowed[0]], n=nodes + 1) as m:
        c = _core.Cpu(m.segment.buf, 0, lock_region=init(m, algo, n=nodes + 1))
        for i in range(nodes):
            c.spin_lock(i)
        with pytest.raises(RuntimeError, match="aborted"):
            c.spin_lock(nodes, timeout=0.1)
        assert words(m)[nodes] == 0 and nodes_in_use(m) == [nodes]  # nothing queued
        c.spin_unlock(3)    # (CLH: its node left in lock 3, taken back below)
        c.spin_lock(nodes)
        assert words(m)[3] == 0         # CLH: taken back from lock 3
        for i in [i for i in range(nodes + 1) if i != 3]:
            c.spin_unlock(i)
        assert nodes_in_use(m) == [0]
        assert_free(m, algo)


@pytest.mark.parametrize("algo", QUEUE_LOCKS)
def test_more_locks_released_than_nodes_never_wait(allowed, algo):
    # CLH leaves each released node in its lock: a CPU that takes and
    # releases more locks than it has nodes takes its own back, at once
    n = MCS_NODES + 3
    with machine([allowed[0]], n=n) as m:
        c = _core.Cpu(m.segment.buf, 0, lock_region=init(m, algo, n=n), timeout=0.5)
        for _ in range(2):
            for i in range(n):
                c.spin_lock(i)
                c.spin_unlock(i)
        assert nodes_in_use(m) == [0]
        assert_free(m, algo)
        assert len(released(m)) == (MCS_NODES if algo == "clh" else 0)


@pytest.mark.parametrize("algo", QUEUE_LOCKS)
def test_the_unlock_takes_the_node_its_lock_queued_not_the_first_marked(allowed, algo):
    # as the kernel's caller passes its node: a decoy node marked for the
    # same lock, before the real one, must not be the one released
    with machine([allowed[0]]) as m:
        c = _core.Cpu(m.segment.buf, 0, lock_region=init(m, algo), timeout=0.2)
        c.spin_lock(1)
        c.spin_lock(0)          # lock 0 on the second node
        c.spin_unlock(1)
        mcs = m.region("qnodes")["mcs"]
        tail = words(m)[0]
        real = tail & (MCS_NODES - 1)
        decoy = 0 if real else 1
        mcs[0][decoy] = mcs[0][real]        # a node marked for lock 0, not its tail
        mcs[0][decoy]["next"] = mcs[0][real]["next"]
        c.spin_unlock(0)
        # the real node released (MCS: free; CLH: released, its lock's tail)
        assert (mcs[0][real]["lock"] == 0) == (algo == "mcs")
        assert mcs[0][real]["locked"] == 0 and words(m)[0] == (tail if algo == "clh" else 0)
        assert mcs[0][decoy]["lock"] != 0 and mcs[0][decoy]["locked"] == (algo == "clh")


@pytest.mark.skipif(not X86, reason="reads x86 code")
def test_clhs_uncontended_pair_is_one_atomic_and_mcss_two(core_functions):
    """The plain timed loop, inline build: CLH's lock and unlock hold one
    locked instruction (the tail's xchg; its release a store), MCS's two
    (the xchg and the release's cmpxchg). xchg with memory is locked
    without the prefix."""
    from conftest import code_of
    for algo, atomics in (("CLH", ["xchg"]), ("MCS", ["xchg", "lock cmpxchg"])):
        body = code_of(core_functions, f"tb_lock_loop_VARIANT_PLAIN_SPIN_{algo}_KSHAPE_INLINE_0_0_0")
        # the loop's body, before the out-of-line slow paths gcc puts after it
        found = re.findall(r"\t(xchg|lock \w+)\s", body)
        assert sorted(set(found)) == sorted(atomics), (algo, found)


@pytest.mark.parametrize("algo", QUEUE_LOCKS)
def test_a_node_given_up_in_a_queue_lets_nobody_in_while_the_lock_is_held(allowed, algo):
    # CPU 1 gives up waiting behind CPU 0 on lock 0, its node still in the
    # queue, then takes and releases lock 1. Had it reused that node (CLH:
    # released it), CPU 2, queued behind the node, would get lock 0 while
    # CPU 0 holds it
    with machine(allowed[:1], ncpus=3) as m:
        reg = init(m, algo)
        c0, c1, c2 = (_core.Cpu(m.segment.buf, cpu, lock_region=reg, timeout=0.2)
                      for cpu in range(3))
        c0.spin_lock(0)
        with pytest.raises(RuntimeError, match="aborted"):
            c1.spin_lock(0, timeout=0.2)
        c1.spin_lock(1)
        c1.spin_unlock(1)
        with pytest.raises(RuntimeError, match="aborted"):
            c2.spin_lock(0, timeout=0.2)    # CPU 0 still holds it


@pytest.mark.parametrize("algo", QUEUE_LOCKS)
def test_initialising_a_lock_again_frees_the_nodes_left_marked_for_it(allowed, algo):
    # CPU 1 gives up waiting behind CPU 0, its node still linked: CPU 0's
    # unlock finds a tail that is not its own and (clh) leaves its node for a
    # successor that is gone. spin_lock_init() again must give every such
    # node back, or the next unlock of the new lock finds the stale one.
    with machine(allowed[:1], ncpus=2, n=1) as m:
        reg = init(m, algo, n=1)
        c0 = _core.Cpu(m.segment.buf, 0, lock_region=reg)
        c1 = _core.Cpu(m.segment.buf, 1, lock_region=reg, timeout=0.2)
        c0.spin_lock(0)
        with pytest.raises(RuntimeError):
            c1.spin_lock(0, timeout=0.2)
        c0.spin_unlock(0)
        init(m, algo, n=1)
        assert nodes_in_use(m) == [0, 0]
        c0.spin_lock(0)
        c0.spin_unlock(0)
        assert nodes_in_use(m) == [0, 0]
        assert_free(m, algo)
        c1.spin_lock(0)             # the free lock is free to anyone
        c1.spin_unlock(0)
        assert nodes_in_use(m) == [0, 0]
        assert_free(m, algo)


@pytest.mark.skipif(not X86, reason="x86's qspinlock (arch/x86/include/asm/qspinlock.h)")
def test_qspinlock_is_x86s_pending_by_lock_btsl_after_512_polls(core_functions):
    """x86's _Q_PENDING_LOOPS (1 << 9, where the generic is 1), and its
    pending bit set by one `lock btsl $8` in the slow path as built here,
    not the cmpxchg loop of a fetch_or: read from the extension's code."""
    assert _core.Q_PENDING_LOOPS == 512
    bodies = [b for f, b in core_functions.items() if f.startswith("queued_spin_lock_slowpath")]
    assert bodies, "queued_spin_lock_slowpath is not in the extension"
    assert all(re.search(r"lock btsl? +\$0x8,", b) for b in bodies)
