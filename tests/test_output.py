"""--output PATH: what each kind of path gets (docs/output.md), and that a
finished result is never lost."""
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from smpnet.cli import build_parser, main
from smpnet.errors import BadInput, OutputFailed
from smpnet.report import output, report

NOBODY = 65534
ENV = {"command": "info", "results": [{"x": 1}]}


def cli(*args, cwd, env=None, preexec_fn=None):
    """`python -m smpnet info ARGS`, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "smpnet", "info", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)


def shell(script, cwd):
    """SCRIPT in bash, $PY being this interpreter: for the shell's redirections."""
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PY": sys.executable})


def first_json(text):
    """The JSON object TEXT starts with (text may follow it)."""
    return json.JSONDecoder().raw_decode(text)[0]


def one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("smpnet-bench: ") and "Traceback" not in err
    return lines[0]


def saved_path(line):
    return line.rsplit("the result was saved to ", 1)[1]


@pytest.fixture
def saved_dir(tmp_path, monkeypatch):
    """Where a result that cannot be written is saved, in this process and its children."""
    d = tmp_path / "saved"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    monkeypatch.setenv("TMPDIR", str(d))
    return d


# ------------------------------------------------------------------ the shell's redirections

def test_append_to_stdout_keeps_what_was_there(tmp_path):
    # before: /dev/stdout resolved to log.txt, and the rename replaced it
    r = shell('printf "old\\n" > log.txt; "$PY" -m smpnet info --output /dev/stdout >> log.txt',
              tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "log.txt").read_text()
    assert text.startswith("old\n")
    assert first_json(text[4:])["command"] == "info"
    assert "CPU model" in text  # the text after the JSON, appended too


def test_append_to_stderr_keeps_what_was_there(tmp_path):
    r = shell('printf "old\\n" > err.txt; '
              '"$PY" -m smpnet info --output /dev/stderr 2>> err.txt', tmp_path)
    assert r.returncode == 0
    text = (tmp_path / "err.txt").read_text()
    assert text.startswith("old\n")
    assert first_json(text[4:])["command"] == "info"
    assert "CPU model" in r.stdout


def test_output_to_the_file_stdout_appends_to(tmp_path):
    # replaced, the file would lose "old" and the text, written to the old inode
    r = shell('printf "old\n" > log.txt; "$PY" -m smpnet info --output log.txt >> log.txt',
              tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "log.txt").read_text()
    assert text.startswith("old\n") and "CPU model" in text
    assert first_json(text[4:])["command"] == "info"


def test_stdout_a_pipe_to_head(tmp_path):
    # before: exit 2 and nothing on stdout
    r = shell('"$PY" -m smpnet info --output /dev/stdout | head -c 100 > got; '
              'echo "${PIPESTATUS[0]}" > rc', tmp_path)
    assert r.returncode == 0
    got = (tmp_path / "got").read_text()
    assert len(got) == 100 and got.startswith("{") and '"schema": 3' in got
    assert (tmp_path / "rc").read_text().strip() == "0", r.stderr


# ------------------------------------------------------------------ regular files

def test_mode_0600_stays_0600(tmp_path):
    f = tmp_path / "r.json"
    f.write_text("old")
    f.chmod(0o600)
    r = cli("--output", str(f), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert json.loads(f.read_text())["command"] == "info"


def test_a_replaced_file_is_on_disk_before_it_takes_the_name(tmp_path, monkeypatch):
    """The new file's data is flushed (fsync) before the rename puts it in
    the old one's place, and the directory after: a crash between them
    leaves the old file or the new one, whole, never an empty one."""
    from smpnet.report import output_writers
    f = tmp_path / "r.json"
    f.write_text("old")
    done = []
    monkeypatch.setattr(output_writers.os, "fsync",
                        lambda fd: done.append(("fsync", stat.S_ISDIR(os.fstat(fd).st_mode))))
    real_replace = os.replace
    monkeypatch.setattr(output_writers.os, "replace",
                        lambda a, b: (done.append(("replace", b)), real_replace(a, b)))
    output.write(json.dumps(ENV), output.prepare(str(f)))
    assert done == [("fsync", False), ("replace", str(f)), ("fsync", True)]
    assert json.loads(f.read_text()) == ENV


def test_hard_link_survives(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("old " * 1000)  # longer than the result: the rest must go
    os.link(a, b)
    r = cli("--output", "a.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert a.stat().st_ino == b.stat().st_ino and a.stat().st_nlink == 2
    assert json.loads(b.read_text())["command"] == "info"


def test_symlink_to_a_file_replaces_the_file_and_keeps_the_link(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    assert cli("--output", "link.json", cwd=tmp_path).returncode == 0
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "real.json").read_text())["command"] == "info"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can keep another user's ownership")
def test_root_keeps_owner_and_mode(tmp_path):
    f = tmp_path / "theirs.json"
    f.write_text("old")
    os.chown(f, NOBODY, NOBODY)
    f.chmod(0o444)  # root may write it; it stays read-only for its owner
    t = output.prepare(str(f))
    assert t.kind == output.REPLACE
    output.write(ENV, t)
    st = f.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (NOBODY, NOBODY, 0o444)
    assert json.loads(f.read_text()) == ENV


def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        output.write(ENV, output.prepare(str(tmp_path / "new.json")))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["new.json"]  # no temporary left


# ------------------------------------------------------------------ as an unprivileged user

@pytest.fixture
def unprivileged():
    """(run, a directory it may not write, a subdirectory it may): run(argv) is
    main(argv) in a forked child as an unprivileged user (nobody, where the
    tests run as root), giving (exit code, stdout, stderr). Forked, not
    exec'd: the interpreter may live where nobody cannot reach it."""
    # imported here: the child may not read the standard library where it lives
    build_parser()
    import smpnet.machine.sysinfo, smpnet.measure.time_bench  # noqa: E401, F401
    base = tempfile.mkdtemp(prefix="smpnet-test-", dir="/tmp")  # not tmp_path: 0700
    open_dir = os.path.join(base, "w")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    os.chmod(base, 0o755 if os.geteuid() == 0 else 0o555)

    def run(argv):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 3
            try:
                os.close(r)
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                os.chdir(base)
                sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
                rc = main(argv)
                os.write(w, json.dumps([rc, sys.stdout.getvalue(),
                                        sys.stderr.getvalue()]).encode())
                code = 0
            except BaseException as e:  # noqa: B036 - reported to the parent
                os.write(w, json.dumps([None, "", repr(e)]).encode())
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            got = f.read()
        os.waitpid(pid, 0)
        return json.loads(got)

    try:
        yield run, base, open_dir
    finally:
        os.chmod(base, 0o755)
        shutil.rmtree(base)


def test_read_only_file_is_refused_before_the_run(unprivileged):
    # before: a 0444 file in a writable directory was silently replaced
    run, base, open_dir = unprivileged
    f = os.path.join(open_dir, "ro.json")
    with open(f, "w") as fh:
        fh.write("keep")
    if os.geteuid() == 0:
        os.chown(f, NOBODY, NOBODY)
    os.chmod(f, 0o444)
    rc, out, err = run(["info", "--output", f])
    assert rc == 2, err
    assert "not writable" in one_line(err)
    assert out == ""  # the run's text never came
    assert open(f).read() == "keep" and stat.S_IMODE(os.stat(f).st_mode) == 0o444


def test_new_file_in_a_directory_not_ours_is_refused(unprivileged):
    run, base, _ = unprivileged
    rc, out, err = run(["info", "--output", os.path.join(base, "new.json")])
    assert rc == 2, err
    assert "cannot create a file in directory" in one_line(err)
    assert not os.path.exists(os.path.join(base, "new.json"))


# ------------------------------------------------------------------ FIFOs and devices

def test_fifo_with_a_reader_gets_the_json(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        r = cli("--output", "pipe", cwd=tmp_path)
    finally:
        out, _ = reader.communicate(timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(out)["command"] == "info"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_fifo_without_a_reader_saves_the_result(tmp_path, saved_dir):
    os.mkfifo(tmp_path / "pipe")
    r = cli("--output", "pipe", cwd=tmp_path, env={output.TIMEOUT_ENV: "0.3"})
    assert r.returncode == 1  # the run succeeded; writing it did not
    line = one_line(r.stderr)
    assert "no reader" in line
    saved = saved_path(line)
    assert os.path.dirname(saved) == str(saved_dir)
    assert json.loads(open(saved).read())["command"] == "info"
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode)


def test_dev_null(tmp_path):
    r = cli("--output", "/dev/null", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "CPU model" in r.stdout
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_disk_full_saves_the_result(tmp_path, saved_dir):
    r = cli("--output", "/dev/full", cwd=tmp_path)
    assert r.returncode == 1
    line = one_line(r.stderr)
    assert "No space left" in line
    assert json.loads(open(saved_path(line)).read())["command"] == "info"
    assert "CPU model" in r.stdout  # the text is still printed


# ------------------------------------------------------------------ refused before the run

def _refused(tmp_path):
    """name -> the --output argument (relative to tmp_path) that must be refused."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling").symlink_to("nowhere/at/all")
    (tmp_path / "loop").symlink_to("loop")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    sock.close()
    return {
        "directory": ("dir", "is a directory"),
        "directory with a slash": ("nodir/", "names a directory"),
        "dangling symlink": ("dangling", "does not exist"),
        "symlink loop": ("loop", "symbolic links"),
        "name over NAME_MAX": ("x" * 256, "NAME_MAX"),
        "path over PATH_MAX": ("/".join(["x" * 200] * 21), "PATH_MAX"),
        "missing directory": ("no/such/dir/x.json", "does not exist"),
        "/proc/version": ("/proc/version", "/proc"),
        "another process's fd": ("/proc/1/fd/1", "/proc"),
        "/sys": ("/sys/kernel/new", "/proc or /sys"),
        "an fd not open": ("/dev/fd/987", "not open"),
        "a socket": ("sock", "a socket"),
    }


REFUSED = ["directory", "directory with a slash", "dangling symlink", "symlink loop",
           "name over NAME_MAX", "path over PATH_MAX", "missing directory", "/proc/version",
           "another process's fd", "/sys", "an fd not open", "a socket"]


@pytest.mark.parametrize("case", REFUSED)
def test_refused_before_anything_runs(case, tmp_path, monkeypatch, capsys):
    path, says = _refused(tmp_path)[case]
    monkeypatch.chdir(tmp_path)

    def ran(*a, **k):
        raise AssertionError("the run started")
    monkeypatch.setattr(report, "machine", ran)
    assert main(["info", "--output", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = captured.err.strip()
    assert len(line.splitlines()) == 1 and says in line
    assert len(line) < 400


@pytest.mark.parametrize("case", ["directory", "dangling symlink", "name over NAME_MAX",
                                  "missing directory", "/proc/version"])
def test_refused_by_the_real_command(case, tmp_path):
    path, says = _refused(tmp_path)[case]
    r = cli("--output", path, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert says in one_line(r.stderr)


@pytest.mark.skipif(not os.path.exists("/dev/loop0"), reason="no block device to name")
def test_block_device_is_refused():
    with pytest.raises(BadInput, match="block device"):
        output.prepare("/dev/loop0")


def test_an_fd_open_for_reading_only_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        with pytest.raises(BadInput, match="not open for writing"):
            output.prepare(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


# ------------------------------------------------------------------ prepare() and write()

def test_kinds(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "linked").write_text("x")
    os.link(tmp_path / "linked", tmp_path / "linked2")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-stdout").symlink_to("/dev/stdout")
    kinds = {name: output.prepare(str(tmp_path / name)).kind
             for name in ("new", "file", "linked", "fifo", "to-stdout")}
    kinds["/dev/null"] = output.prepare("/dev/null").kind
    kinds["/dev/fd/1"] = output.prepare("/dev/fd/1").kind
    assert kinds == {"new": output.REPLACE, "file": output.REPLACE, "linked": output.IN_PLACE,
                     "fifo": output.FIFO, "to-stdout": output.FD, "/dev/null": output.DEVICE,
                     "/dev/fd/1": output.FD}
    assert output.prepare(None) is None
    with pytest.raises(BadInput, match="file name"):
        output.prepare("  ")


def test_an_fd_is_written_itself_at_its_offset(tmp_path):
    f = tmp_path / "log"
    f.write_text("old\n")
    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
    t = output.prepare(f"/dev/fd/{fd}")
    os.close(fd)  # the target holds the open file itself, not its number
    output.write("new\n", t)
    assert f.read_text() == "old\nnew\n"


def test_a_terminal(tmp_path):
    master, slave = os.openpty()
    try:
        output.write(ENV, output.prepare(f"/proc/self/fd/{slave}"))
        got = b""
        while not got.endswith(b"}\r\n"):
            got += os.read(master, 65536)
    finally:
        os.close(slave)
        os.close(master)
    assert json.loads(got.replace(b"\r\n", b"\n")) == ENV


def test_a_pipe_with_no_reader_saves_the_result(saved_dir):
    r, w = os.pipe()
    os.close(r)
    t = output.prepare(f"/dev/fd/{w}")
    os.close(w)
    with pytest.raises(OutputFailed) as e:
        output.write(ENV, t)
    assert e.value.exit_code == 1
    assert json.loads(open(e.value.saved).read()) == ENV
    assert os.path.dirname(e.value.saved) == str(saved_dir) and e.value.saved in str(e.value)


def _read_all_later(fd, delay, limit=None):
    """A reader of `fd` that starts after `delay` s; stops after `limit` bytes."""
    import threading

    got = bytearray()

    def read():
        time.sleep(delay)
        while limit is None or len(got) < limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got.extend(chunk)
        os.close(fd)

    th = threading.Thread(target=read)
    th.start()
    return th, got


BIG = {"command": "info", "results": ["x" * 1000] * 300}  # more than a pipe holds


def test_a_slow_reader_of_our_stdout_gets_all_of_it(saved_dir):
    """The reviewer's `--output /dev/stdout | (sleep 16; cat)`: the pipe's
    reader is the user's, so no deadline cuts the JSON short."""
    r, w = os.pipe()
    th, got = _read_all_later(r, 0.6)
    try:
        t = output.prepare(f"/dev/fd/{w}")
        output.write(BIG, t, timeout=0.2)  # the timeout is not for our own descriptors
    finally:
        os.close(w)
        th.join()
    assert json.loads(bytes(got)) == BIG


def test_a_reader_that_leaves_saves_the_result(saved_dir):
    r, w = os.pipe()
    th, _ = _read_all_later(r, 0.1, limit=1000)
    try:
        t = output.prepare(f"/dev/fd/{w}")
        with pytest.raises(OutputFailed) as e:
            output.write(BIG, t)
    finally:
        os.close(w)
        th.join()
    assert json.loads(open(e.value.saved).read()) == BIG


def test_a_fifo_reader_that_stops_reading_cannot_hang_the_write(tmp_path, saved_dir):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t = output.prepare(str(fifo))
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads
    try:
        with pytest.raises(OutputFailed, match="nothing was read") as e:
            output.write(BIG, t, timeout=0.2)
    finally:
        os.close(r)
    assert json.loads(open(e.value.saved).read()) == BIG


def test_a_file_removed_during_the_run(tmp_path, saved_dir):
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    t = output.prepare(str(tmp_path / "a"))
    assert t.kind == output.IN_PLACE
    os.unlink(tmp_path / "a")
    with pytest.raises(OutputFailed) as e:
        output.write(ENV, t)
    assert json.loads(open(e.value.saved).read()) == ENV
    assert not (tmp_path / "a").exists() and (tmp_path / "b").read_text() == "x"


def test_a_full_disk_leaves_an_in_place_file_whole(tmp_path, saved_dir, monkeypatch):
    """A hard-linked --output on a disk with no room: the space is reserved
    before a byte is overwritten, so the reservation fails and the old file
    (and its link) stays whole, the result saved elsewhere. (Written first
    and reserved after, the old bytes would be gone.)"""
    import errno
    from smpnet.report import output_writers

    old = json.dumps({"old": "x" * 6000})
    (tmp_path / "a").write_text(old)
    os.link(tmp_path / "a", tmp_path / "b")
    t = output.prepare(str(tmp_path / "a"))
    assert t.kind == output.IN_PLACE

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(output_writers.os, "posix_fallocate", full)
    with pytest.raises(OutputFailed, match="No space left on device") as e:
        output.write(ENV, t)
    assert json.loads(open(e.value.saved).read()) == ENV
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text() == old


def test_a_directory_removed_during_the_run(tmp_path, saved_dir):
    (tmp_path / "d").mkdir()
    t = output.prepare(str(tmp_path / "d" / "r.json"))
    (tmp_path / "d").rmdir()
    with pytest.raises(OutputFailed, match="No such file") as e:
        output.write(ENV, t)
    assert json.loads(open(e.value.saved).read()) == ENV


def test_a_file_that_became_a_fifo_is_not_replaced(tmp_path, saved_dir):
    f = tmp_path / "r.json"
    f.write_text("x")
    t = output.prepare(str(f))
    f.unlink()
    os.mkfifo(f)
    with pytest.raises(OutputFailed, match="no longer a regular file") as e:
        output.write(ENV, t)
    assert stat.S_ISFIFO(os.stat(f).st_mode)
    assert json.loads(open(e.value.saved).read()) == ENV


def test_the_text_is_printed_even_when_the_output_fails(tmp_path, saved_dir, capsys):
    os.mkfifo(tmp_path / "pipe")
    os.environ[output.TIMEOUT_ENV] = "0.2"
    try:
        assert main(["info", "--json", "--output", str(tmp_path / "pipe")]) == 1
    finally:
        del os.environ[output.TIMEOUT_ENV]
    captured = capsys.readouterr()
    assert json.loads(captured.out)["command"] == "info"
    saved = saved_path(captured.err.strip())
    assert json.loads(open(saved).read())["command"] == "info"


def test_json_with_an_output_goes_to_the_output_alone(tmp_path):
    """--json --output F writes the JSON to F and prints nothing; so
    --output /dev/stdout (or the file stdout is redirected to) gets one
    document, not two in one stream."""
    r = cli("--json", "--output", "out.json", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    assert json.loads((tmp_path / "out.json").read_text())["command"] == "info"
    r = cli("--json", "--output", "/dev/stdout", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["command"] == "info"
    with open(tmp_path / "out.json", "w") as f:
        r = subprocess.run([sys.executable, "-m", "smpnet", "info", "--json", "--output",
                            str(tmp_path / "out.json")], stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=120, cwd=tmp_path)   # the installed smpnet
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out.json").read_text())["command"] == "info"
    r = cli("--output", "/dev/stdout", cwd=tmp_path)     # without --json: the JSON, once
    assert r.returncode == 0 and r.stdout.count('"schema"') == 1
