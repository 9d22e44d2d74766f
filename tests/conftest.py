"""Shared fixtures. Every test is checked for leaks: no smpnet segment left
in /dev/shm and no worker process left alive when it ends."""
import os

import psutil
import pytest

SHM = "/dev/shm"


def smpnet_segments():
    try:
        return {n for n in os.listdir(SHM) if n.startswith("smpnet_")}
    except FileNotFoundError:
        return set()


def live_workers():
    """Children of this process other than multiprocessing's resource tracker."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if any("resource_tracker" in a for a in p.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        out.append(p.pid)
    return out


@pytest.fixture(autouse=True)
def no_leaks():
    from smpnet import segment

    first = len(segment.CREATED)
    yield
    # only this process's segments: another smpnet run on the machine is not ours
    mine = set(segment.CREATED[first:])
    assert mine & smpnet_segments() == set(), "a test left a segment in /dev/shm"
    assert live_workers() == [], "a test left worker processes alive"


@pytest.fixture
def allowed():
    return sorted(os.sched_getaffinity(0))
