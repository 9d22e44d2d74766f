"""The emulated SMP machine: one shared segment and one pinned worker per CPU.

    with Machine(cpus=[0, 1]) as m:
        results = m.run(fn, arg)    # fn(ctx, arg) on every emulated CPU

Each emulated CPU is a forked worker process, pinned to its real CPU before
it touches the segment; all of them start together on a barrier in shared
memory. The coordinator sleeps in wait() on the workers' pipes and exit
sentinels, so it burns no CPU the workers need. If a worker dies, raises or
the coordinator gets Ctrl-C, SIGTERM, SIGHUP or SIGQUIT, the stop flag goes
up (every C spin loop polls it), the others get STOP_GRACE_S to return,
stragglers are SIGKILLed, all are reaped (workers.py), and the call raises
an error that names the emulated CPU, the real CPU and the signal or exit
code.

A watchdog ends a run that outlives what it was expected to take
(`expected`, the same estimate the progress lines use) by more than a few
seconds with no work done for as long (the workers' heartbeats, a run's own
count), naming the worker that made no progress and why (stopped, not
scheduled, sleeping: watchdog.py). The segment has no name (see segment.py):
it goes with the last process that maps it, whatever kills which.
"""
import multiprocessing.connection
import signal
import threading
import time

from .. import _core
from ..errors import BadInput, Interrupted, RunTimeout, SegmentError, SmpnetError, WorkerDied
from . import layout, load, sysinfo
from .cpus import format_cpus, parse_cpus
from .segment import Segment
from .tsc import tsc_info
from .watchdog import Watchdog, stall_error
from .workers import (STOP_SIGNALS, CpuContext,  # noqa: F401 (smpnet.CpuContext is found here)
                      describe_exit, start_workers, stop_and_reap)

MAX_CPUS = 4096     # emulated CPUs; qspinlock's 14-bit tail CPU field allows 16383
MAX_NUMNODES = 1024  # x86's CONFIG_NODES_SHIFT of 10 at most
# The watchdog's patience past a run's expected length: a few seconds, and
# a tenth more for long runs, whose estimates are rougher. Read here by each
# run and handed to its Watchdog, so that changing them here takes effect.
WATCHDOG_SLACK_S = 3.0
WATCHDOG_SLACK_SHARE = 0.1
WATCHDOG_POLL_S = 0.5  # how often a run's progress count is read
# What one worker costs a run besides its work (fork, pin, barrier, exit):
# 1024 workers on 2 vCPUs took 10.6 s for an empty run.
WORKER_START_S = 0.01


def work_seconds(count, duration, rate):
    """A run's own work, in seconds: its duration, or its count (skbs,
    packets) at a typical rate."""
    return duration if duration else count / rate


def run_seconds(work_s, ncpus, real_cpus, counted=True):
    """What a run of `work_s` seconds of work per CPU takes on `ncpus`
    emulated CPUs over `real_cpus` real ones: its workers' start and exit,
    and, for a run that does a count of work (not one that ends at a
    deadline), the work stretched by the oversubscription (a floor: CPUs
    that wait on each other through the scheduler can take far longer)."""
    stretch = max(1.0, ncpus / real_cpus) if counted else 1.0
    return ncpus * WORKER_START_S + work_s * stretch

_layout_checked = False


def check_layout():
    """Refuse to run if the numpy dtypes and the C structs disagree."""
    global _layout_checked
    if not _layout_checked:
        problems = layout.verify(_core.c_layout(), _core.c_constants())
        if problems:
            raise SmpnetError("smpnet is built inconsistently (layout.py's dtypes vs the "
                              "compiled core's layout report): "
                              + "; ".join(problems))
        _layout_checked = True


class Machine:
    """An emulated SMP machine. See the module docstring.

    cpus: the real CPUs to use (a --cpus string, a list, or None for all
          allowed ones). ncpus: emulated CPUs (default len(cpus)); emulated
          CPU i runs on real CPU cpus[i % len(cpus)]. More emulated CPUs than
          real ones needs oversubscribe=True and makes timings invalid.
    layout: "aligned" (one cache line or more per per-CPU record) or "packed".
    regions: extra shared regions, (name, dtype, count) each.
    numa_nodes: NUMA nodes to emulate (None: each CPU on its real CPU's node):
          emulated CPU i on node i * numa_nodes // ncpus, a block each. The
          last-level caches are always the real CPUs'.
    """

    def __init__(self, cpus=None, ncpus=None, oversubscribe=False,
                 layout="aligned", regions=(), numa_nodes=None):
        self.real_cpus = parse_cpus(cpus)
        if ncpus is None:
            ncpus = len(self.real_cpus)
        if not isinstance(ncpus, int) or isinstance(ncpus, bool) or ncpus <= 0:
            raise BadInput(f"the number of emulated CPUs must be a positive integer, got {ncpus!r}")
        if ncpus > MAX_CPUS:
            raise BadInput(f"{ncpus} emulated CPUs: smpnet emulates at most {MAX_CPUS}")
        if ncpus > len(self.real_cpus) and not oversubscribe:
            raise BadInput(
                f"{ncpus} emulated CPUs on {len(self.real_cpus)} real CPU(s) "
                f"({format_cpus(self.real_cpus)}): pass --oversubscribe to allow it "
                "(results are then not valid for timing)")
        self.nr_cpus = ncpus
        self.oversubscribed = ncpus > len(self.real_cpus)
        self.cpu_map = [self.real_cpus[i % len(self.real_cpus)] for i in range(ncpus)]
        if numa_nodes is not None and not 1 <= numa_nodes <= MAX_NUMNODES:
            raise BadInput(f"{numa_nodes} NUMA nodes: between 1 and {MAX_NUMNODES}")
        self.numa_nodes = numa_nodes
        self.layout = layout
        self.extra_regions = list(regions)
        self.segment = None

    # ------------------------------------------------------------ lifetime

    def open(self):
        check_layout()
        flags = layout.F_OVERSUBSCRIBED if self.oversubscribed else 0
        self.segment = Segment.create(self.nr_cpus, self.extra_regions,
                                      tsc_hz=tsc_info()["tsc_hz"], flags=flags,
                                      layout_name=self.layout, workers=self.nr_cpus)
        cs = self.cpu_state
        cs["cpu"] = range(self.nr_cpus)
        cs["real_cpu"] = self.cpu_map
        topology = self.topology()
        cs["numa_node"] = [node for node, _ in topology]
        cs["sd_llc_id"] = [llc for _, llc in topology]
        self.header["nr_node_ids"] = self.nr_node_ids
        return self

    @property
    def nr_node_ids(self):
        return self.numa_nodes or sysinfo.nr_node_ids()

    def topology(self):
        """(NUMA node, LLC id) of each emulated CPU: its real CPU's, or the
        emulated nodes' blocks; the LLC id the first real CPU sharing it."""
        real = sysinfo.cpu_topology(sorted(set(self.cpu_map)))
        return [(real[r][0] if self.numa_nodes is None else i * self.numa_nodes // self.nr_cpus,
                 real[r][1]) for i, r in enumerate(self.cpu_map)]

    def close(self):
        if self.segment is not None:
            self.segment.close()
            self.segment = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    @property
    def timing_valid(self):
        return not self.oversubscribed

    # ------------------------------------------------------------ views

    def region(self, name):
        if self.segment is None:
            raise SegmentError("the machine is not open (use it as a context manager)")
        return self.segment.region(name)

    @property
    def cpu_state(self):
        return self.region("cpu")

    @property
    def softnet(self):
        """softnet_data[nr_cpus]: one record per emulated CPU."""
        return self.region("softnet")

    @property
    def lstats(self):
        """pcpu_lstats[nr_cpus]: one record per emulated CPU."""
        return self.region("lstats")

    @property
    def header(self):
        return self.segment.header

    # ------------------------------------------------------------ run

    def run(self, fn, *args, expected=None, progress=None, timeout=None):
        """Run fn(ctx, *args) on every emulated CPU, started together.

        Returns the results as a list indexed by emulated CPU. `expected`:
        seconds the run should take once its workers are started (times
        the oversubscription, emulated CPUs per real one); the watchdog
        stops it WATCHDOG_SLACK_S (and a tenth) past that and raises
        Stalled naming the worker that made no progress. The workers'
        heartbeats (a round of the harness done, or an attempt at one) are
        read every WATCHDOG_POLL_S, and with them `progress`, if given: a
        function of the machine giving a count its workers raise as they
        work (skbs freed, packets sent). A run past its estimate (a slow,
        oversubscribed or loaded one) is stopped only once neither has
        risen for WATCHDOG_SLACK_S. `timeout`:
        a plain limit, RunTimeout past it. Raises WorkerDied if a worker
        died or raised, Interrupted on Ctrl-C, SIGTERM, SIGHUP or SIGQUIT;
        in every case no worker is left running when it returns.
        """
        if self.segment is None:
            raise SegmentError("the machine is not open (use it as a context manager)")
        if timeout is not None and timeout <= 0:
            raise BadInput(f"timeout must be positive, got {timeout}")
        if expected is not None and expected < 0:
            raise BadInput(f"expected run time must not be negative, got {expected}")
        h = self.header
        h["stop"] = 0
        h["barrier_arrived"] = 0
        h["barrier_go"] = 0
        cs = self.cpu_state
        for name in ("pid", "state", "seen_arrived", "tsc_aux", "tsc_arrive", "tsc_release"):
            cs[name] = 0
        # Every run starts from a CPU just booted: IRQs on, nothing held or
        # pending (an aborted run may have left a lock's prologue half done).
        # The counters (hardirqs, spins, checker reports) carry on.
        irq = self.region("irq")
        for name in ("irqs_off", "preempt_count", "softirq_pending", "save_depth", "irq_pending"):
            irq[name] = 0
        self.region("qnodes")["n"] = 0
        _core.queue_nodes_reset(self.segment.buf)

        workers = []
        # SIGTERM, SIGHUP and SIGQUIT end a run the way Ctrl-C does, unless
        # the caller (the CLI) handles them already; installed before any fork
        old = {}
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS[1:]:
                if signal.getsignal(sig) == signal.SIG_DFL:
                    old[sig] = signal.signal(sig, raise_interrupt)
        # the load on this run's CPUs, when a caller records it (load.around)
        seen = load.run_started(self.real_cpus)
        try:
            start_workers(self, fn, args, workers)
            results = self._wait(workers, timeout, expected, progress)
        except KeyboardInterrupt:
            raise Interrupted("interrupted: workers stopped") from None
        finally:
            stop_and_reap(self, workers)
            for sig, handler in old.items():
                signal.signal(sig, handler)
        load.run_finished(seen)   # its workers reaped: their time is the tree's
        return results

    def _wait(self, workers, timeout, expected, progress):
        now = started = time.monotonic()
        deadline = None if timeout is None else now + timeout
        if expected is not None:
            # Oversubscribed, each worker gets a share of a real CPU, and a
            # fair lock's hand-over waits for the scheduler: allow for both.
            expected *= max(1.0, self.nr_cpus / len(self.real_cpus))
        watchdog = Watchdog(self, expected, _work_done(progress), now,
                            WATCHDOG_SLACK_S, WATCHDOG_SLACK_SHARE, WATCHDOG_POLL_S)
        results = [None] * len(workers)
        by_conn = {w.conn: w for w in workers}
        by_sentinel = {w.proc.sentinel: w for w in workers}
        while by_conn or by_sentinel:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise RunTimeout(f"run exceeded its {timeout} s timeout; stopped")
            if watchdog.stuck(now):
                raise stall_error(workers, expected, now - started)
            wakes = watchdog.wakes() + ([deadline] if deadline is not None else [])
            left = max(0.0, min(wakes) - now) if wakes else None
            ready = multiprocessing.connection.wait(list(by_conn) + list(by_sentinel), left)
            for obj in ready:
                if obj in by_conn:
                    w = by_conn.pop(obj)
                    try:
                        kind, value = obj.recv()
                    except (EOFError, OSError):
                        continue  # died before sending: its sentinel says how
                    if kind == "ok":
                        results[w.cpu] = value
                        w.done = True
                    elif kind == "error":
                        raise WorkerDied(w.cpu, w.real, w.proc.pid, f"raised {value}")
                else:
                    w = by_sentinel.pop(obj)
                    w.proc.join()
                    code = w.proc.exitcode
                    if code != 0:
                        raise WorkerDied(w.cpu, w.real, w.proc.pid, describe_exit(code))
                    if w.conn in by_conn:
                        # exited cleanly; its result may still be in the pipe
                        continue
                    if not w.done:
                        raise WorkerDied(w.cpu, w.real, w.proc.pid, "exited without a result")
        for w in workers:  # its pipe closed before its sentinel fired
            if not w.done:
                raise WorkerDied(w.cpu, w.real, w.proc.pid, "exited without a result")
        return results


def _work_done(progress):
    """What the watchdog samples: the workers' heartbeats (the harness's
    rounds and attempts, workers.heartbeat) and the run's own count, if any.
    Either rising means work is done."""
    def sample(m):
        beats = int(m.cpu_state["heartbeat"].sum())
        return beats if progress is None else (beats, progress(m))
    return sample


def raise_interrupt(signum, frame):
    """A SIGTERM handler: end what runs the way Ctrl-C does."""
    raise KeyboardInterrupt
