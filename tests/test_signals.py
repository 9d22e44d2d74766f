"""Signals to the coordinator, to a worker and to the whole process group, at
any moment: the exit code and line they promise, and nothing left behind
(no worker, no process mapping a segment)."""
import json
import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from conftest import segment_holders
from smpnet.cli import main

# A coordinator whose workers poll the stop flag for up to 60 s. It prints the
# segment's inode and the worker pids as JSON once every worker is running.
SCRIPT = textwrap.dedent("""
    import json, sys, threading, time
    from smpnet import Machine, SmpnetError, _core
    from smpnet.machine import layout

    def wait(ctx):
        return _core.idle_poll(ctx.seg, 60.0)

    with Machine(ncpus=2, oversubscribe=True) as m:
        def announce():
            deadline = time.monotonic() + 20
            while not all(m.cpu_state["state"] == layout.CPU_RUNNING):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)
            print(json.dumps({"inode": m.segment.inode,
                              "pids": [int(p) for p in m.cpu_state["pid"]]}), flush=True)
        threading.Thread(target=announce, daemon=True).start()
        try:
            m.run(wait, timeout=60)
        except SmpnetError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(e.exit_code)
""")


def as_from_a_terminal():
    """The stop signals at their defaults, as a terminal's foreground job has
    them: a shell's background job inherits SIGINT and SIGQUIT ignored, which
    a run rightly leaves ignored."""
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def start(cwd):
    # cwd away from the source tree: `python -c` puts cwd on sys.path, and
    # the installed smpnet (with its compiled core) is the one under test
    p = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=cwd, preexec_fn=as_from_a_terminal)
    ready, _, _ = select.select([p.stdout], [], [], 30)
    if not ready:
        p.kill()
        pytest.fail("the coordinator never reported its workers running")
    line = p.stdout.readline()
    assert line, p.stderr.read()
    return p, json.loads(line)


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie waiting for its reaper still answers kill(0)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_until(cond, limit=10.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_interrupt_stops_workers_and_frees_the_segment(sig, tmp_path):
    p, info = start(tmp_path)
    assert set(info["pids"]) <= set(segment_holders(info["inode"]))
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert time.monotonic() - t0 < 2.0  # the bound; it takes ~10 ms
    assert p.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    assert all(gone(pid) for pid in info["pids"])
    assert segment_holders(info["inode"]) == []


def test_coordinator_sigkill_leaves_nothing_behind(tmp_path):
    p, info = start(tmp_path)
    p.kill()
    p.wait(timeout=30)
    # workers die with their parent (PR_SET_PDEATHSIG); the segment has no
    # name, so it goes with them: no helper process is needed
    assert wait_until(lambda: all(gone(pid) for pid in info["pids"]))
    assert wait_until(lambda: segment_holders(info["inode"]) == [])
    p.stderr.close()
    p.stdout.close()


# ------------------------------------------------------------ smpnet-bench, at random moments

# A short run that forks workers eight times over about 2 s: longer than the
# latest moment a signal is sent (1.2 s), on one CPU too.
RUN = ["defer", "--duration", "0.2", "--repeat", "4", "--strategy", "irq,irqsave",
       "--ncpus", "2", "--oversubscribe"]
# the moments: seeded, so a failure repeats; from 50 ms (the interpreter is up:
# see docs/faults.md for its first milliseconds) to past the first fork
MOMENTS = random.Random(20261130)


def _bench(tmp_path, marker):
    """smpnet-bench in its own process group; `marker` in its argv finds its
    workers (forks of it, with the same command line) after it is gone."""
    exe = [sys.executable, "-m", "smpnet"] + RUN + ["--output", str(tmp_path / marker)]
    return subprocess.Popen(exe, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, start_new_session=True)


def _survivors(marker):
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and any(
                    marker in a for a in (p.info["cmdline"] or [])):
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def _finish(p, marker, t0):
    out, err = p.communicate(timeout=30)
    took = time.monotonic() - t0
    # The segment has no name: only a process of this run could keep it, and
    # every process of this run carries the marker in its command line.
    assert wait_until(lambda: _survivors(marker) == [], 5), "a process outlived the run"
    return out, err, took


def _one_line(err):
    """The message lines of stderr (progress lines aside)."""
    return [ln for ln in err.splitlines() if not ln.startswith("smpnet-bench defer: [")]


# SIGTERM, SIGHUP and SIGQUIT share one handler with Ctrl-C (machine.py's
# STOP_SIGNALS loop): each is sent in one case here, and every case of the
# coordinator checks that all four are caught before it signals
CASES = [(target, sig) for target, sigs in (
    ("coordinator", (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)),
    ("group", (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL)),
    ("worker", (signal.SIGKILL, signal.SIGTERM)),
) for sig in sigs]
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _catches(pid, sig):
    """Whether process `pid` has a handler installed for `sig` (SigCgt)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(ln.split()[1], 16) for ln in f if ln.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(mask >> (sig - 1) & 1)


def _live_worker(p):
    """A worker of `p` that has not exited: a child that is a zombie finished
    its run and only waits for the coordinator to reap it."""
    for k in psutil.Process(p.pid).children():
        try:
            if k.status() != psutil.STATUS_ZOMBIE:
                return k.pid
        except psutil.NoSuchProcess:
            continue
    return None


@pytest.mark.parametrize("target,sig", CASES, ids=[f"{t}-{s.name}" for t, s in CASES])
def test_a_signal_at_a_random_moment(target, sig, tmp_path):
    """A random moment (each case its own, from the seeded MOMENTS), checked;
    a try whose signal met no run (the worker had just finished) does not
    count, and there are 3 tries."""
    hits = 0
    for attempt in range(3):
        marker = f"sig-{target}-{sig.name}-{attempt}.json"
        p = _bench(tmp_path, marker)
        t0 = time.monotonic()
        if target == "worker":
            # a random moment once workers exist: the first live child found after it
            time.sleep(MOMENTS.uniform(0.3, 1.2))
            deadline = time.monotonic() + 10
            victim = None
            while victim is None and time.monotonic() < deadline and p.poll() is None:
                victim = _live_worker(p)
                if victim is None:
                    time.sleep(0.005)
            if victim is None:
                p.kill()
                _finish(p, marker, t0)
                continue  # between two runs for 10 s: try again
            t0 = time.monotonic()
            os.kill(victim, sig)
            _, err, took = _finish(p, marker, t0)
            if p.returncode == 0:
                # the worker exited between the look and the kill (its run was
                # over): the signal met no run
                continue
            assert p.returncode == 1, err
            lines = _one_line(err)
            assert len(lines) == 1 and "Traceback" not in err, err
            assert f"pid {victim}) was killed by {sig.name}" in lines[0]
            assert "emulated CPU" in lines[0] and "real CPU" in lines[0]
        else:
            # from 50 ms after smpnet's handlers are in: the interpreter's own
            # start comes before them (docs/faults.md), and on a loaded
            # machine it can take longer than 50 ms
            assert wait_until(lambda: _catches(p.pid, signal.SIGTERM), 10), "no handler in 10 s"
            assert all(_catches(p.pid, s) for s in STOPS), "a stop signal not caught"
            time.sleep(MOMENTS.uniform(0.05, 1.2))
            t0 = time.monotonic()
            if target == "group":
                os.killpg(p.pid, sig)
            else:
                p.send_signal(sig)
            _, err, took = _finish(p, marker, t0)
            if sig == signal.SIGKILL:
                assert p.returncode == -signal.SIGKILL, err
            else:
                assert p.returncode == 130, err
                lines = _one_line(err)
                assert len(lines) == 1 and lines[0].startswith("smpnet-bench: interrupted"), err
                assert "Traceback" not in err
        # a stop is the stop flag, a grace period of 1 s and SIGKILL at worst
        assert took < 3.0, f"took {took:.2f} s to stop: {err}"
        assert not (tmp_path / marker).exists()  # an interrupted run writes no result
        hits += 1
        break
    assert hits == 1, "the signal met no run in 3 tries"


@pytest.mark.parametrize("said, line", [(False, b"smpnet-bench: interrupted\n"), (True, b"")])
def test_a_signal_after_the_run_said_interrupted_adds_no_line(said, line):
    """A second signal, taken once cli.main has put the entry's handler
    back (it came while the run stopped), ends the process with 130 and
    adds no line to the one the run gave; before any, it gives that line."""
    from smpnet import entry
    from smpnet.machine import process
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                        # one fork: the handler exits the process
        os.dup2(w, 2)
        process.said_interrupted = said
        entry._exit_now(signal.SIGINT, None)
        os._exit(99)                    # not reached
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 130
    assert os.read(r, 100) == line
    os.close(r)


def test_a_second_sigint_does_not_cut_the_stop_short(tmp_path):
    marker = "twice.json"
    p = _bench(tmp_path, marker)
    time.sleep(0.6)
    p.send_signal(signal.SIGINT)
    time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    _, err, took = _finish(p, marker, time.monotonic())
    assert p.returncode == 130
    assert len(_one_line(err)) == 1 and "Traceback" not in err, err


def test_a_stopped_worker_is_found_and_named(tmp_path):
    """SIGSTOP on a worker: the watchdog ends the run a few seconds past its
    expected length, naming the CPU, its pid and its state."""
    marker = "stopped.json"
    p = _bench(tmp_path, marker)
    deadline = time.monotonic() + 10
    kids = []
    while not kids and time.monotonic() < deadline:
        kids = psutil.Process(p.pid).children()
        time.sleep(0.005)
    assert kids, "no worker ever started"
    victim = kids[-1].pid
    os.kill(victim, signal.SIGSTOP)
    t0 = time.monotonic()
    _, err, took = _finish(p, marker, t0)
    assert p.returncode == 1, err
    lines = _one_line(err)
    assert len(lines) == 1, err
    assert f"pid {victim}) made no progress: stopped" in lines[0]
    assert "s into a run expected to take" in lines[0]
    assert took < 10  # 0.2 s expected + 3 s and a tenth, a 1 s grace


def test_an_interrupt_lost_in_a_callback_still_ends_the_run(monkeypatch, tmp_path, capsys):
    # a KeyboardInterrupt raised while Python runs a weakref callback is
    # printed as "Exception ignored" and dropped: the signal was taken, the
    # run must still end as interrupted, at its next step, writing nothing
    from smpnet.machine import process
    from smpnet.experiments import BY_NAME

    def lost_then_step(cpus, p, progress):
        process.interrupted.append(signal.SIGTERM)     # the handler ran; its raise was lost
        progress(0, 2, "the next step")
        raise AssertionError("the run went on past a taken stop signal")

    monkeypatch.setattr(BY_NAME["null"], "run", lost_then_step)
    out = tmp_path / "r.json"
    assert main(["null", "--output", str(out)]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "smpnet-bench: interrupted"
    assert not out.exists() and process.interrupted == []
