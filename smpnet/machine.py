"""The emulated SMP machine: one shared segment and one pinned worker per CPU.

    with Machine(cpus=[0, 1]) as m:
        results = m.run(fn, arg)    # fn(ctx, arg) on every emulated CPU

Each emulated CPU is a forked worker process, pinned to its real CPU before
it touches the segment; all of them start together on a barrier in shared
memory. The coordinator sleeps in wait() on the workers' pipes and exit
sentinels, so it burns no CPU the workers need. If a worker dies, raises or
the coordinator gets Ctrl-C, SIGTERM, SIGHUP or SIGQUIT, the stop flag goes
up (every C spin loop polls it), the others get STOP_GRACE_S to return,
stragglers are SIGKILLed, all are reaped, and the call raises an error that
names the emulated CPU, the real CPU and the signal or exit code.

A watchdog ends a run that outlives what it was expected to take
(`expected`, the same estimate the progress lines use) by more than a few
seconds, naming the worker that made no progress and why (stopped, not
scheduled, sleeping). The segment has no name (see segment.py): it goes with
the last process that maps it, whatever kills which.
"""
import errno
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
import traceback

from . import _core, layout
from .cpus import format_cpus, parse_cpus
from .errors import (BadInput, Interrupted, RunFailed, RunTimeout, SegmentError, SmpnetError,
                     Stalled, WorkerDied)
from .segment import Segment
from .tsc import tsc_info

STOP_GRACE_S = 1.0  # after the stop flag, how long workers get to return
MAX_CPUS = 4096     # emulated CPUs; qspinlock's 14-bit tail CPU field allows 16383
# The watchdog's patience past a run's expected length: a few seconds, and
# a tenth more for long runs, whose estimates are rougher.
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
# What ends a run the way Ctrl-C does: SIGHUP is a closed terminal, SIGQUIT
# Ctrl-\. Workers ignore the terminal's signals (the coordinator decides
# how a run ends) and die with it (PDEATHSIG).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_WORKER_IGNORES = (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)

_layout_checked = False


def check_layout():
    """Refuse to run if the numpy dtypes and the C structs disagree."""
    global _layout_checked
    if not _layout_checked:
        problems = layout.verify(_core.c_layout(), _core.c_constants())
        if problems:
            raise SmpnetError("smpnet is built inconsistently (layout.py vs percpu.h): "
                              + "; ".join(problems))
        _layout_checked = True


class CpuContext:
    """What a worker function gets: which CPU it is, and the machine."""

    def __init__(self, machine, cpu, real_cpu):
        self.machine = machine
        self.cpu = cpu            # emulated CPU number, 0..nr_cpus-1
        self.real_cpu = real_cpu  # the real CPU this worker is pinned to
        self.seg = machine.segment.buf  # the mapping: pass it to smpnet._core entry points

    @property
    def nr_cpus(self):
        return self.machine.nr_cpus


class Machine:
    """An emulated SMP machine. See the module docstring.

    cpus: the real CPUs to use (a --cpus string, a list, or None for all
          allowed ones). ncpus: emulated CPUs (default len(cpus)); emulated
          CPU i runs on real CPU cpus[i % len(cpus)]. More emulated CPUs than
          real ones needs oversubscribe=True and makes timings invalid.
    layout: "aligned" (one cache line or more per per-CPU record) or "packed".
    regions: extra shared regions, (name, dtype, count) each.
    """

    def __init__(self, cpus=None, ncpus=None, oversubscribe=False,
                 layout="aligned", regions=()):
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
        return self

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
        Stalled naming the worker that made no progress. `progress`: a
        function of the machine giving a count its workers raise as they
        work (skbs freed, packets sent), read every WATCHDOG_POLL_S: a run
        past its estimate (a slow, oversubscribed one) is stopped only once
        the count has not risen for WATCHDOG_SLACK_S. `timeout`:
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

        workers = []
        # SIGTERM, SIGHUP and SIGQUIT end a run the way Ctrl-C does, unless
        # the caller (the CLI) handles them already; installed before any fork
        old = {}
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS[1:]:
                if signal.getsignal(sig) == signal.SIG_DFL:
                    old[sig] = signal.signal(sig, raise_interrupt)
        try:
            self._start_workers(fn, args, workers)
            return self._wait(workers, timeout, expected, progress)
        except KeyboardInterrupt:
            raise Interrupted("interrupted: workers stopped") from None
        finally:
            self._stop_and_reap(workers)
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _start_workers(self, fn, args, workers):
        """Fork one pinned worker per emulated CPU into `workers` (the
        caller's list, so that whatever was started is reaped whatever
        happens here)."""
        ctx = multiprocessing.get_context("fork")
        # Workers must never see Ctrl-C: the coordinator decides how a run
        # ends. The stop signals are blocked across each fork, so a child
        # cannot take one before it has set them to ignored; one that
        # reaches the coordinator meanwhile is delivered right after that
        # fork (not after the last of a thousand), and the caller reaps
        # what was started.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        for cpu, real in enumerate(self.cpu_map):
            rx, tx = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker_main, name=f"smpnet-cpu{cpu}",
                            args=(self, cpu, real, fn, args, tx, mask, os.getpid()),
                            daemon=True)
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            try:
                try:
                    p.start()
                except OSError as e:
                    rx.close()
                    raise RunFailed(f"cannot start the worker of emulated CPU {cpu}: "
                                    f"{e.strerror or e}{_LIMIT_HINT.get(e.errno, '')}") from None
                # in the list before the signals are let in: unblocking runs
                # a pending handler at once, and the caller reaps the list
                workers.append(_Worker(cpu, real, p, rx))
            finally:
                tx.close()
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _wait(self, workers, timeout, expected, progress):
        now = started = time.monotonic()
        deadline = None if timeout is None else now + timeout
        watchdog = None
        if expected is not None:
            # Oversubscribed, each worker gets a share of a real CPU, and a
            # fair lock's hand-over waits for the scheduler: allow for both.
            expected *= max(1.0, self.nr_cpus / len(self.real_cpus))
            watchdog = now + expected * (1 + WATCHDOG_SLACK_SHARE) + WATCHDOG_SLACK_S
        # the progress count, sampled every WATCHDOG_POLL_S: when it last rose
        seen = None if progress is None else progress(self)
        risen, sampled = now, now
        results = [None] * len(workers)
        by_conn = {w.conn: w for w in workers}
        by_sentinel = {w.proc.sentinel: w for w in workers}
        while by_conn or by_sentinel:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise RunTimeout(f"run exceeded its {timeout} s timeout; stopped")
            if progress is not None and now - sampled >= WATCHDOG_POLL_S:
                value, sampled = progress(self), now
                if value != seen:
                    seen, risen = value, now
            if watchdog is not None and now >= watchdog:
                if now - risen < WATCHDOG_SLACK_S:  # slow, not stuck: keep waiting
                    watchdog = risen + WATCHDOG_SLACK_S
                    continue
                raise _stalled(workers, expected, now - started)
            poll = sampled + WATCHDOG_POLL_S if progress is not None else None
            wakes = [t for t in (deadline, watchdog, poll) if t is not None]
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
                        raise WorkerDied(w.cpu, w.real, w.proc.pid, _describe_exit(code))
                    if w.conn in by_conn:
                        # exited cleanly; its result may still be in the pipe
                        continue
                    if not w.done:
                        raise WorkerDied(w.cpu, w.real, w.proc.pid, "exited without a result")
        for w in workers:  # its pipe closed before its sentinel fired
            if not w.done:
                raise WorkerDied(w.cpu, w.real, w.proc.pid, "exited without a result")
        return results

    def _stop_and_reap(self, workers):
        """Stop flag up, a grace period, SIGKILL for the rest, reap all.

        A second Ctrl-C must not cut this short and leave workers alive:
        SIGINT/SIGTERM wait until every worker is reaped."""
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            if self.segment is not None:
                _core.smp_stop(self.segment.buf)
            deadline = time.monotonic() + STOP_GRACE_S
            for w in workers:
                w.proc.join(max(0.0, deadline - time.monotonic()))
            for w in workers:
                if w.proc.exitcode is None:
                    w.proc.kill()
            for w in workers:
                w.proc.join()
                w.conn.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


_LIMIT_HINT = {errno.EAGAIN: " (a limit on processes, ulimit -u?)",
               errno.EMFILE: " (a limit on open files, ulimit -n?)",
               errno.ENOMEM: " (out of memory)"}


class _Worker:
    def __init__(self, cpu, real, proc, conn):
        self.cpu, self.real, self.proc, self.conn = cpu, real, proc, conn
        self.done = False


def _worker_main(machine, cpu, real_cpu, fn, args, tx, sigmask, parent_pid):
    """The body of one emulated CPU's worker process."""
    for sig in _WORKER_IGNORES:
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, sigmask)
    _core.set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent_pid:  # the coordinator died before prctl
        os._exit(1)
    try:
        # Pin first: every touch of the segment is from the right CPU.
        os.sched_setaffinity(0, {real_cpu})
        cs = machine.cpu_state[cpu]
        cs["pid"] = os.getpid()
        cs["tsc_aux"] = _core.read_tscp()[1]
        cs["state"] = layout.CPU_ONLINE
        if not _core.barrier_wait(machine.segment.buf, cpu):
            tx.send(("ok", None))  # stopped before the start
            return
        cs["state"] = layout.CPU_RUNNING
        result = fn(CpuContext(machine, cpu, real_cpu), *args)
        cs["state"] = layout.CPU_DONE
        tx.send(("ok", result))
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
        try:
            tx.send(("error", f"{type(e).__name__}: {e}{where}"))
        finally:
            sys.exit(1)


def _stalled(workers, expected, elapsed):
    """The Stalled error for a run past its watchdog: the unfinished
    workers, the likeliest culprit first (stopped, then not scheduled)."""
    import psutil

    seen = []
    for w in workers:
        if w.done:
            continue
        try:
            p = psutil.Process(w.proc.pid)
            seen.append((w, p, p.status(), sum(p.cpu_times()[:2])))
        except psutil.Error:
            continue
    time.sleep(0.2)  # does it get CPU time at all? (clock ticks are 10 ms)
    found = []
    for w, p, status, cpu0 in seen:
        try:
            advanced = sum(p.cpu_times()[:2]) > cpu0
        except psutil.Error:
            continue
        if status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
            state = "stopped"
        elif status == psutil.STATUS_RUNNING and not advanced:
            state = "not scheduled"
        elif status in (psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP) and not advanced:
            state = "sleeping"
        else:
            state = "running"
        found.append((_STALL_ORDER.index(state), w, state))
    found.sort(key=lambda f: (f[0], f[1].cpu))
    if not found:
        return RunTimeout(f"run made no progress, {elapsed:.1f} s into a run expected to "
                          f"take {expected:.1f} s; stopped")
    _, w, state = found[0]
    others = ", ".join(f"CPU {o.cpu} {st}" for _, o, st in found[1:9])
    if len(found) > 9:
        others += f" and {len(found) - 9} more"
    return Stalled(w.cpu, w.real, w.proc.pid, state, expected, elapsed,
                   f" (also unfinished: {others})" if others else "")


_STALL_ORDER = ("stopped", "not scheduled", "sleeping", "running")


def _describe_exit(code):
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def raise_interrupt(signum, frame):
    """A SIGTERM handler: end what runs the way Ctrl-C does."""
    raise KeyboardInterrupt
