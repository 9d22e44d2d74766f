"""A run's worker processes: one per emulated CPU, forked, pinned to its real
CPU before it touches the segment, started with the others on the barrier,
and in the end stopped and reaped whatever happened.

The coordinator's side (start_workers, stop_and_reap, Worker, describe_exit) and the
worker's own (_worker_main, CpuContext) are here together because they make
one protocol: the signal mask across the fork, the ("ok"|"error", value)
message on the pipe, the states a worker writes to its cpu record.
"""
import errno
import multiprocessing
import os
import signal
import sys
import time
import traceback

from .. import _core
from ..errors import RunFailed
from . import layout
from .process import INTERRUPTS

STOP_GRACE_S = 1.0  # after the stop flag, how long workers get to return
# What ends a run the way Ctrl-C does (process.py says which). Workers
# ignore the terminal's signals (the coordinator decides how a run ends) and
# die with it (PDEATHSIG).
STOP_SIGNALS = INTERRUPTS
_WORKER_IGNORES = (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
# what a failed fork most likely ran into, for its one-line error
_LIMIT_HINT = {errno.EAGAIN: " (a limit on processes, ulimit -u?)",
               errno.EMFILE: " (a limit on open files, ulimit -n?)",
               errno.ENOMEM: " (out of memory)"}


# This process's record in cpu_state when it is a worker, None in the
# coordinator: heartbeat() raises its count.
_this_cpu = None


def heartbeat():
    """A worker finished a piece of work (a round of the harness, or an
    attempt at one): its count rises, and the watchdog judges a run stuck
    only when no worker's count has risen for its slack, so a loaded run
    whose rounds are thrown out and rerun is slow, not stuck. Outside a
    worker, nothing."""
    if _this_cpu is not None:
        _this_cpu["heartbeat"] += 1


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


class Worker:
    """The coordinator's handle on one worker: its process and result pipe."""

    def __init__(self, cpu, real, proc, conn):
        self.cpu, self.real, self.proc, self.conn = cpu, real, proc, conn
        self.done = False


def start_workers(machine, fn, args, workers):
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
    for cpu, real in enumerate(machine.cpu_map):
        rx, tx = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker_main, name=f"smpnet-cpu{cpu}",
                        args=(machine, cpu, real, fn, args, tx, mask, os.getpid()),
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
            workers.append(Worker(cpu, real, p, rx))
        finally:
            tx.close()
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def stop_and_reap(machine, workers):
    """Stop flag up, a grace period, SIGKILL for the rest, reap all.

    A second Ctrl-C must not cut this short and leave workers alive:
    SIGINT/SIGTERM wait until every worker is reaped."""
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        if machine.segment is not None:
            _core.smp_stop(machine.segment.buf)
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


def describe_exit(code):
    """How a worker that exited with a nonzero `code` ended, for WorkerDied."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


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
        global _this_cpu
        cs = _this_cpu = machine.cpu_state[cpu]
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
