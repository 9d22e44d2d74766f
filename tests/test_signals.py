"""Ctrl-C, SIGTERM and SIGKILL of the coordinator: nothing is left behind."""
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import smpnet_segments

# A coordinator whose workers poll the stop flag for up to 60 s. It prints the
# segment name and the worker pids as JSON once every worker is running.
SCRIPT = textwrap.dedent("""
    import json, sys, threading, time
    from smpnet import Machine, SmpnetError, _core, layout

    def wait(ctx):
        return _core.idle_poll(ctx.seg, 60.0)

    with Machine(ncpus=2, oversubscribe=True) as m:
        def announce():
            deadline = time.monotonic() + 20
            while not all(m.cpu_state["state"] == layout.CPU_RUNNING):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)
            print(json.dumps({"segment": m.segment.name,
                              "pids": [int(p) for p in m.cpu_state["pid"]]}), flush=True)
        threading.Thread(target=announce, daemon=True).start()
        try:
            m.run(wait, timeout=60)
        except SmpnetError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(e.exit_code)
""")


def start(cwd):
    # cwd away from the source tree: `python -c` puts cwd on sys.path, and
    # the installed smpnet (with its compiled core) is the one under test
    p = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=cwd)
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


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_workers_and_removes_segment(sig, tmp_path):
    p, info = start(tmp_path)
    assert info["segment"] in smpnet_segments()
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert time.monotonic() - t0 < 2.0  # the bound; it takes ~10 ms
    assert p.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    assert all(gone(pid) for pid in info["pids"])
    assert info["segment"] not in smpnet_segments()


def test_coordinator_sigkill_leaves_nothing_behind(tmp_path):
    p, info = start(tmp_path)
    p.kill()
    p.wait(timeout=30)
    # workers die with their parent (PR_SET_PDEATHSIG); the resource tracker
    # unlinks the segment the dead coordinator left
    assert wait_until(lambda: all(gone(pid) for pid in info["pids"]))
    assert wait_until(lambda: info["segment"] not in smpnet_segments())
    p.stderr.close()
    p.stdout.close()
