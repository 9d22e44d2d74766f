"""Shared fixtures. Every test is checked for leaks: no worker process left
alive when it ends. A segment has no name, so a worker is the only thing
that could keep one beyond its run (this process's own views of a segment
go with it; `segment_holders` finds who maps one)."""
import os
import platform
import re
import shutil
import subprocess
import sys

import psutil
import pytest

X86 = platform.machine() in ("x86_64", "i386", "i686")


def _segment_target(target):
    return target.startswith("/dev/shm/#") or target.startswith("/memfd:smpnet")


def open_segments():
    """The segments this process still holds a descriptor of."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if _segment_target(target):
            out.add(target)
    return out


def segment_holders(inode):
    """Pids of the processes that still map or hold the segment `inode`:
    while there is none, its memory is gone."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as f:
                if any(_maps_inode(line) == inode for line in f):
                    pids.append(int(pid))
                    continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.stat(f"/proc/{pid}/fd/{fd}").st_ino == inode and _segment_target(
                        os.readlink(f"/proc/{pid}/fd/{fd}")):
                    pids.append(int(pid))
                    break
        except OSError:
            continue
    return pids


def _maps_inode(line):
    parts = line.split(None, 5)
    if len(parts) == 6 and _segment_target(parts[5].strip()):
        return int(parts[4])
    return None


def live_workers():
    """Children of this process that are still alive."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.NoSuchProcess:
            continue
        out.append(p.pid)
    return out


@pytest.fixture(autouse=True)
def no_leaks():
    yield
    assert live_workers() == [], "a test left worker processes alive"


@pytest.fixture
def allowed():
    return sorted(os.sched_getaffinity(0))


def object_functions(path):
    """{function name: its instructions} of a built object, by objdump
    (binutils, which gcc needs): what the C compiler really emitted."""
    assert shutil.which("objdump"), "objdump (binutils, with gcc) reads the built code"
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"^[0-9a-f]+ <([^>]+)>:\n(.*?)(?:\n\n|\Z)", asm, re.S | re.M))


def timed_loop(functions, variant):
    """The name of `ab` variant `variant`'s timed loop in object_functions()'
    answer, by its whole name (gcc may add a suffix: .isra.0): the loop of
    "irq" is not "irqsave"'s."""
    return next(f for f in functions if f.split(".")[0] == f"smpnet_timed_{variant}")


@pytest.fixture(scope="session")
def core_functions():
    """object_functions() of the built extension."""
    from smpnet import _core

    return object_functions(_core.__file__)


def loop_tag(build):
    """How time_bench.h's loops name kernel build `build` (its shape and its
    return's number): tb_lock_loop_<variant>_<algo>_<tag>_<check>_<popf>."""
    from smpnet import _core
    from smpnet.machine import kernel_build

    shape, ret = kernel_build.split(build)
    return f"KSHAPE_{shape.upper().replace('-', '_')}_{_core.KERNEL_RETURNS[ret]}"


# the kernel referee's tests that load BPF programs (test_referee*.py)
bpf_root = pytest.mark.skipif(os.geteuid() != 0 or platform.machine() != "x86_64",
                              reason="needs root on x86-64: bpf(2)")


def thunk_addresses(path=None):
    """{a return thunk of the core (or of the object at `path`): its
    address, as objdump prints it}: the symbol table's, since
    __x86_return_thunk names one or the other."""
    from smpnet import _core

    out = subprocess.run(["nm", path or _core.__file__], capture_output=True, text=True,
                         check=True).stdout
    found = dict((name, addr.lstrip("0")) for addr, _, name in
                 (line.split() for line in out.splitlines() if len(line.split()) == 3))
    return {t: found[t] for t in ("smpnet_srso_return_thunk", "smpnet_ret_thunk")}


def code_of(functions, name):
    """A function's instructions; for one the compiler folded into an
    identical one (gcc's -fipa-icf: a jmp to its start, then padding), that one's."""
    body = functions[name]
    folded = re.match(r"\s*[0-9a-f]+:\s+jmp +[0-9a-f]+ <([^>+]+)>", body)
    return functions[folded.group(1)] if folded else body


def reaches(functions, name, pattern):
    """Whether function `name`'s code, or that of an out-of-line lock entry
    point it calls directly (a _raw_spin_* copy: spinlock_api_smp.h), has an
    instruction matching `pattern`: a kernel build's calls run it there."""
    body = code_of(functions, name)
    return bool(re.search(pattern, body)) or any(
        re.search(pattern, code_of(functions, f))
        for f in set(re.findall(r"\bcall +[0-9a-f]+ <(_raw_spin_[^>+]+)>", body)))


@pytest.fixture(scope="session")
def all_quick(tmp_path_factory):
    """One `smpnet-bench all --quick --format email --plot`, run as a user
    runs it (the installed smpnet, from outside the source tree), shared by
    the tests of `all` and of compare (it takes half a minute): (its exit
    code, the JSON result's path, the text's path, the pictures' folder)."""
    d = tmp_path_factory.mktemp("all")
    out, plots = d / "all.json", d / "plots"
    p = subprocess.run([sys.executable, "-m", "smpnet", "all", "--quick", "--format", "email",
                        "--output", str(out), "--plot", str(plots)], capture_output=True,
                       text=True, cwd=d, timeout=300)
    (d / "all.txt").write_text(p.stdout)
    return p.returncode, out, d / "all.txt", plots


def drop_capabilities():
    """In the child before exec: empty the bounding set, so that root's
    program starts with no capability at all (as in a locked-down container)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)    # PR_CAPBSET_DROP; past the last cap: EINVAL


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_all_gone(m):
    """Every worker machine `m` started has registered and is gone."""
    pids = [int(p) for p in m.cpu_state["pid"] if p]
    assert pids, "workers never registered"
    assert not any(pid_alive(p) for p in pids)
