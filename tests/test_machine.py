"""Machine: the segment, pinned workers, barrier start, failure handling."""
import mmap
import os
import resource
import signal
import stat
import sys
import threading
import time

import numpy as np
import pytest

from smpnet import BadInput, Machine, SegmentError, WorkerDied, _core
from smpnet.errors import RunTimeout
from smpnet.machine import layout

from conftest import assert_all_gone, open_segments, segment_holders


def whoami(ctx):
    return ctx.cpu, ctx.real_cpu, sorted(os.sched_getaffinity(0)), os.getpid()


# ------------------------------------------------------------------ segment

def test_segment_is_0600_with_no_name(allowed):
    with Machine(cpus=allowed) as m, Machine(cpus=allowed) as m2:
        name = m.segment.name
        st = os.stat(name)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_nlink == 0  # no name anywhere: nothing to leak
        assert name == f"/proc/{os.getpid()}/fd/{m.segment.fd}"
        assert st.st_ino == m.segment.inode != m2.segment.inode
        assert not any(n.startswith("smpnet") for n in os.listdir("/dev/shm"))
        inode = m.segment.inode
        assert segment_holders(inode) == [os.getpid()]
    assert segment_holders(inode) == []


def test_segment_memory_is_reserved_at_creation(allowed):
    with Machine(cpus=allowed, regions=[("big", layout.SK_BUFF, 10_000)]) as m:
        st = os.fstat(m.segment.fd)
        assert st.st_blocks * 512 >= m.segment.size  # allocated, not sparse


def test_per_cpu_views_are_one_aligned_record_per_cpu(allowed):
    with Machine(cpus=allowed) as m:
        for view in (m.softnet, m.lstats, m.cpu_state):
            assert len(view) == m.nr_cpus
            assert view.dtype.itemsize % layout.CACHELINE == 0
            base = view.__array_interface__["data"][0]
            assert base % layout.CACHELINE == 0
        assert set(m.lstats.dtype.names) == {"packets", "bytes", "depth"}
        assert int(m.header["nr_cpus"]) == m.nr_cpus
        assert int(m.header["magic"]) == layout.MAGIC


def test_packed_layout_puts_neighbours_on_one_line(allowed):
    with Machine(cpus=allowed, ncpus=2, oversubscribe=True, layout="packed") as m:
        assert m.lstats.dtype.itemsize == 24
        # CPU 0's and CPU 1's pcpu_lstats now share a cache line: false sharing
        a = m.lstats[0:1].__array_interface__["data"][0]
        b = m.lstats[1:2].__array_interface__["data"][0]
        assert a // layout.CACHELINE == b // layout.CACHELINE


def test_workers_write_what_the_coordinator_reads(allowed):
    def count(ctx, n):
        m = ctx.machine
        m.lstats[ctx.cpu]["packets"] = n * (ctx.cpu + 1)
        m.softnet[ctx.cpu]["processed"] = ctx.cpu + 7
        return True

    with Machine(cpus=allowed) as m:
        assert m.run(count, 10) == [True] * m.nr_cpus
        assert list(m.lstats["packets"]) == [10 * (i + 1) for i in range(m.nr_cpus)]
        assert list(m.softnet["processed"]) == [i + 7 for i in range(m.nr_cpus)]


def test_extra_regions(allowed):
    skb = np.dtype([("next", "<u4"), ("alloc_cpu", "<u4")])
    with Machine(cpus=allowed, regions=[("skb", skb, 100)]) as m:
        pool = m.region("skb")
        assert len(pool) == 100
        assert m.segment.region_names == [n for n, _ in layout.BUILTIN_REGIONS] + ["skb"]
        with pytest.raises(KeyError):
            m.region("neigh")


# ------------------------------------------------------------------ attach

def test_attach_to_a_live_segment(allowed):
    from smpnet.machine.segment import Segment

    with Machine(cpus=allowed) as m:
        m.lstats[0]["bytes"] = 1234
        other = Segment.attach(m.segment.name)
        try:
            assert other.region("lstats")[0]["bytes"] == 1234
            other.region("lstats")[1 % m.nr_cpus]["packets"] = 77
            assert m.lstats[1 % m.nr_cpus]["packets"] == 77  # one memory, two mappings
            assert other.inode == m.segment.inode
            assert int(other.header["nr_cpus"]) == m.nr_cpus
        finally:
            other.close()
        assert m.lstats[0]["bytes"] == 1234  # the attacher's close takes nothing away


class _Foreign:
    """A file smpnet did not make, and a writable mapping of it."""

    def __init__(self, path, size):
        with open(path, "wb") as f:
            f.truncate(size)
        self.name = str(path)
        with open(path, "r+b") as f:
            self.buf = mmap.mmap(f.fileno(), size)


@pytest.fixture
def foreign(tmp_path):
    yield _Foreign(tmp_path / "foreign", 4096)


def _header(shm):
    return np.ndarray((), layout.SMP_HEADER, shm.buf, 0)


def test_attach_foreign_segment_bad_magic(foreign):
    from smpnet.machine.segment import Segment

    foreign.buf[:8] = b"NOTSMPNE"
    with pytest.raises(SegmentError, match="not an smpnet segment"):
        Segment.attach(foreign.name)


def test_attach_wrong_version(foreign, allowed):
    from smpnet.machine.segment import Segment

    h = _header(foreign)
    h["magic"], h["version"] = layout.MAGIC, layout.VERSION + 1
    del h
    with pytest.raises(SegmentError, match="layout version"):
        Segment.attach(foreign.name)


def test_attach_wrong_layout_hash(allowed):
    from smpnet.machine.segment import Segment

    with Machine(cpus=allowed) as m:
        m.header["layout_hash"] ^= 1
        with pytest.raises(SegmentError, match="layout hash"):
            Segment.attach(m.segment.name)


def test_attach_too_small_and_missing(tmp_path):
    from smpnet.machine.segment import Segment

    tiny = _Foreign(tmp_path / "tiny", 16)
    with pytest.raises(SegmentError, match="too small"):
        Segment.attach(tiny.name)
    with pytest.raises(SegmentError, match="no shared-memory segment"):
        Segment.attach("smpnet_doesnotexist")
    with pytest.raises(SegmentError, match="no shared-memory segment"):
        Segment.attach(f"/proc/{os.getpid()}/fd/987654")


# ------------------------------------------------------------------ workers

def test_a_result_from_every_cpu_each_pinned(allowed):
    with Machine(cpus=allowed) as m:
        results = m.run(whoami)
        assert [r[0] for r in results] == list(range(len(allowed)))
        for cpu, real, affinity, pid in results:
            assert real == allowed[cpu]
            assert affinity == [real]  # the worker's own sched_getaffinity
            assert pid != os.getpid()
        assert list(m.cpu_state["state"]) == [layout.CPU_DONE] * m.nr_cpus
        if _core.HAVE_TSC:
            # rdtscp's TSC_AUX, set by Linux to the CPU the worker ran on
            assert [a & 0xFFF for a in m.cpu_state["tsc_aux"]] == allowed


def test_barrier_releases_only_when_all_arrived(allowed):
    def spin_arrival(ctx):
        return int(ctx.machine.header["barrier_arrived"])

    with Machine(cpus=allowed, ncpus=4, oversubscribe=True) as m:
        seen = m.run(spin_arrival)
        assert seen == [4, 4, 4, 4]
        assert list(m.cpu_state["seen_arrived"]) == [4, 4, 4, 4]
        if _core.HAVE_TSC and "constant_tsc" in open("/proc/cpuinfo").read():
            # nobody left before the last one arrived (TSCs are synchronised)
            assert m.cpu_state["tsc_release"].min() >= m.cpu_state["tsc_arrive"].max()


def test_runs_repeat_on_one_machine(allowed):
    with Machine(cpus=allowed) as m:
        first = m.run(whoami)
        second = m.run(whoami)
        assert [r[:3] for r in first] == [r[:3] for r in second]
        assert {r[3] for r in first}.isdisjoint({r[3] for r in second})


def test_one_cpu(allowed):
    with Machine(cpus=[allowed[-1]]) as m:
        assert m.run(whoami)[0][:3] == (0, allowed[-1], [allowed[-1]])


def test_oversubscription_refused_by_default(allowed):
    with pytest.raises(BadInput, match="--oversubscribe"):
        Machine(cpus=allowed, ncpus=len(allowed) + 1)


def test_oversubscribed_runs_round_robin_and_is_flagged(allowed):
    n = 2 * len(allowed) + 1
    with Machine(cpus=allowed, ncpus=n, oversubscribe=True) as m:
        assert not m.timing_valid
        assert int(m.header["flags"]) & layout.F_OVERSUBSCRIBED
        results = m.run(whoami)
        assert [r[1] for r in results] == [allowed[i % len(allowed)] for i in range(n)]
        assert all(r[2] == [r[1]] for r in results)
    with Machine(cpus=allowed) as m:
        assert m.timing_valid


@pytest.mark.parametrize("ncpus", [0, -1, 1.5, "2"])
def test_bad_cpu_counts(allowed, ncpus):
    with pytest.raises(BadInput):
        Machine(cpus=allowed, ncpus=ncpus)


def test_coordinator_sleeps_while_workers_run(allowed):
    def busy(ctx):
        _core.idle_poll(ctx.seg, 0.5)
        return ctx.cpu

    with Machine(cpus=allowed) as m:
        before = resource.getrusage(resource.RUSAGE_SELF)
        assert m.run(busy) == list(range(m.nr_cpus))
        after = resource.getrusage(resource.RUSAGE_SELF)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # The workers spun for 0.5 s each; a coordinator that spun too would use ~0.5 s.
    assert used < 0.25, f"coordinator used {used:.3f} s of CPU"


# ------------------------------------------------------------------ failures

def test_worker_sigkill_names_the_cpu_and_stops_the_others(allowed):
    def victim(ctx):
        if ctx.cpu == ctx.nr_cpus - 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return _core.idle_poll(ctx.seg, 60.0)  # only the stop flag ends this

    with Machine(cpus=allowed, ncpus=2, oversubscribe=True) as m:
        inode = m.segment.inode
        t0 = time.monotonic()
        with pytest.raises(WorkerDied) as e:
            m.run(victim)
        # the bound: a death stops the run within 2 s (it takes ~10 ms)
        assert time.monotonic() - t0 < 2.0
        assert e.value.cpu == 1 and e.value.real_cpu == m.cpu_map[1]
        assert "SIGKILL" in str(e.value) and "emulated CPU 1" in str(e.value)
        assert_all_gone(m)
    # no worker maps it any more (this process may, through views in `e`)
    assert set(segment_holders(inode)) <= {os.getpid()}


def test_worker_killed_from_outside(allowed):
    def wait(ctx):
        return _core.idle_poll(ctx.seg, 60.0)

    with Machine(cpus=allowed, ncpus=2, oversubscribe=True) as m:
        def killer():
            deadline = time.monotonic() + 20
            while not all(m.cpu_state["state"] == layout.CPU_RUNNING):
                if time.monotonic() > deadline:
                    return  # never reached RUNNING: the run's timeout ends it
                time.sleep(0.01)
            os.kill(int(m.cpu_state["pid"][0]), signal.SIGKILL)

        t = threading.Thread(target=killer)
        t.start()
        with pytest.raises(WorkerDied, match=r"emulated CPU 0 .*SIGKILL"):
            m.run(wait, timeout=30)
        t.join()
        assert_all_gone(m)


def test_worker_exception_is_reported(allowed):
    def boom(ctx):
        if ctx.cpu == 0:
            raise ZeroDivisionError("on purpose")
        return _core.idle_poll(ctx.seg, 60.0)

    with Machine(cpus=allowed) as m:
        with pytest.raises(WorkerDied, match=r"emulated CPU 0 .*raised ZeroDivisionError: on purpose"):
            m.run(boom)
        assert_all_gone(m)


def test_worker_exiting_0_without_a_result_is_an_error(allowed):
    def quit_quietly(ctx):
        if ctx.cpu == 0:
            os._exit(0)
        return ctx.cpu

    with Machine(cpus=allowed, ncpus=2, oversubscribe=True) as m:
        for _ in range(10):  # the race between its pipe and its exit
            with pytest.raises(WorkerDied, match="emulated CPU 0 .*without a result"):
                m.run(quit_quietly)


def test_views_outlive_the_machine(allowed):
    def count(ctx):
        ctx.machine.lstats[ctx.cpu]["packets"] = 40 + ctx.cpu
        return True

    with Machine(cpus=allowed) as m:
        m.run(count)
        lstats = m.lstats
        inode = m.segment.inode
    assert segment_holders(inode) == [os.getpid()]  # only through the views
    # the mapping lives as long as a view of it does
    assert list(lstats["packets"]) == [40 + i for i in range(len(allowed))]


def test_worker_exit_code_is_reported(allowed):
    def leave(ctx):
        sys.exit(3)

    with Machine(cpus=allowed) as m:
        with pytest.raises(WorkerDied, match="exited with code 3"):
            m.run(leave)


def test_worker_that_ignores_stop_is_killed(allowed):
    def stubborn(ctx):
        if ctx.cpu == 0:
            raise RuntimeError("first")
        while True:  # pure Python, never polls the stop flag
            time.sleep(0.01)

    with Machine(cpus=allowed, ncpus=2, oversubscribe=True) as m:
        with pytest.raises(WorkerDied, match="raised RuntimeError"):
            m.run(stubborn)
        assert_all_gone(m)


def test_run_timeout_stops_everything(allowed):
    def wait(ctx):
        return _core.idle_poll(ctx.seg, 60.0)

    with Machine(cpus=allowed) as m:
        with pytest.raises(RunTimeout):
            m.run(wait, timeout=0.3)
        assert_all_gone(m)


def test_a_segment_that_cannot_be_reserved_is_refused(allowed, monkeypatch):
    import errno

    from smpnet.machine import segment
    from smpnet.errors import NoMemory

    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment.os, "posix_fallocate", full)
    before = open_segments()
    with pytest.raises(NoMemory, match=r"cannot reserve \d+\.\d MiB of shared memory: "
                                       r"/dev/shm has \d+\.\d MiB free") as e:
        Machine(cpus=allowed, regions=[("big", layout.SK_BUFF, 100_000)]).open()
    assert e.value.exit_code == 1  # not bad input: the machine lacks room
    assert open_segments() <= before  # no descriptor left open by the failure


def _cgroup_tree(root, v2_max=None, v1_limit=None):
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("4:memory:/jobs/a\n0::/user/b\n")
    v1 = root / "sys/fs/cgroup/memory/jobs/a"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(f"{v1_limit or 9223372036854771712}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{(1 << 20) + (50 << 20)}\n")
    # 50 MiB of it is page cache the kernel would reclaim first: not in use
    (v1 / "memory.stat").write_text("cache 52428800\nrss 1048576\n"
                                    "total_inactive_file 52428800\n")
    v2 = root / "sys/fs/cgroup/user"
    (v2 / "b").mkdir(parents=True)
    (v2 / "b/memory.max").write_text("max\n")
    (v2 / "b/memory.current").write_text("2097152\n")
    (v2 / "memory.max").write_text(f"{v2_max}\n" if v2_max else "max\n")
    (v2 / "memory.current").write_text("4194304\n")


def test_memory_cgroup_limits_are_found_in_v1_and_v2_ancestors_less_page_cache(tmp_path):
    from smpnet.machine import segment

    _cgroup_tree(tmp_path, v2_max=200 << 20, v1_limit=300 << 20)
    assert sorted(segment._cgroup_limits(str(tmp_path))) == [(200 << 20, 4 << 20),
                                                             (300 << 20, 1 << 20)]
    other = tmp_path / "none"
    _cgroup_tree(other)
    assert segment._cgroup_limits(str(other)) == []  # "max" and v1's huge number: no limit


def test_a_machine_over_a_memory_cgroup_limit_is_refused_before_it_starts(allowed,
                                                                         monkeypatch):
    """The reviewer's case: a 200 MiB cgroup, a 275 MiB segment: the OOM
    killer ended the run with no word. Now: one line, exit 1, before any
    segment or worker exists."""
    from smpnet.machine import segment
    from smpnet.errors import NoMemory

    monkeypatch.setattr(segment, "_cgroup_limits", lambda: [(200 << 20, 10 << 20)])
    with pytest.raises(NoMemory, match=r"the machine needs \d+\.\d MiB of memory "
                                       r"\(\d+\.\d MiB shared \+ \d+\.\d MiB for 64 workers\), "
                                       r"this process's memory cgroup has 190\.0 MiB available"):
        Machine(cpus=allowed, ncpus=64, oversubscribe=True,
                regions=[("big", layout.SK_BUFF, 1_000_000)]).open()


def test_a_fork_that_fails_is_one_error_and_leaves_no_worker(allowed, monkeypatch):
    """`ulimit -u` reached halfway through the forks: RunFailed naming the
    CPU, the workers already started stopped and reaped."""
    import multiprocessing.process

    from smpnet.errors import RunFailed

    real_start = multiprocessing.process.BaseProcess.start
    started = []

    def start(self):
        if len(started) == 3:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        started.append(self)
        return real_start(self)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    with Machine(cpus=allowed, ncpus=6, oversubscribe=True) as m:
        with pytest.raises(RunFailed, match=r"^cannot start the worker of emulated CPU 3: "
                                            r"Resource temporarily unavailable \(a limit on "
                                            r"processes, ulimit -u\?\)$"):
            m.run(lambda ctx: _core.idle_poll(ctx.seg, 30.0))
    assert all(p.exitcode is not None for p in started)


def test_ctrl_c_between_forks_leaves_no_worker(allowed, monkeypatch):
    """SIGINT while the workers start: unblocking the signals after a fork
    runs the handler at once, so the worker just forked must already be in
    the list the run reaps."""
    import multiprocessing.process

    from smpnet.errors import Interrupted

    real_start = multiprocessing.process.BaseProcess.start
    started = []

    def start(self):
        real_start(self)
        started.append(self)
        if len(started) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # pending until the mask is restored

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    # as from a terminal: a shell's background job inherits SIGINT ignored,
    # which a run rightly leaves ignored
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with Machine(cpus=allowed, ncpus=6, oversubscribe=True) as m:
            with pytest.raises(Interrupted):
                m.run(lambda ctx: _core.idle_poll(ctx.seg, 30.0))
    finally:
        signal.signal(signal.SIGINT, old)
    assert len(started) == 3
    # joined by the run, the third too (a process never joined stays here)
    assert not set(started) & multiprocessing.process._children
    assert all(p.exitcode is not None for p in started)


def test_the_machine_sets_each_cpus_node_and_last_level_cache(allowed):
    from smpnet.machine import sysinfo
    real = sysinfo.cpu_topology(allowed[:1])[allowed[0]]
    with Machine(cpus=allowed[:1], ncpus=4, oversubscribe=True, numa_nodes=2) as m:
        assert list(m.cpu_state["numa_node"]) == [0, 0, 1, 1]
        assert list(m.cpu_state["sd_llc_id"]) == [real[1]] * 4      # one real CPU: one LLC
        assert int(m.header["nr_node_ids"]) == 2
    with Machine(cpus=allowed[:1], ncpus=2, oversubscribe=True) as m:
        assert list(m.cpu_state["numa_node"]) == [real[0]] * 2
        assert int(m.header["nr_node_ids"]) == sysinfo.nr_node_ids()
    with pytest.raises(BadInput, match="0 NUMA nodes: between 1 and 1024"):
        Machine(cpus=allowed[:1], numa_nodes=0)
