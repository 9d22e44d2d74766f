"""--output PATH: checked before a run, written after it, never losing the result.

    target = prepare(path)   # before the run: BadInput (exit 2) if PATH cannot take it
    ...                      # the run
    write(env, target)       # after: OutputFailed (exit 1) naming a saved copy if it fails

prepare() decides once what kind of thing PATH is, and write() treats it so:

    REPLACE   a regular file (or a new one): a temporary file in the same directory,
              renamed over it (a reader never sees half a file); the old file's mode
              is kept, and its owner where we are root
    IN_PLACE  a regular file that renaming would change: more than one hard link,
              another owner than ours, a directory we may not write to, a sticky
              directory: rewritten in place, so the links and owner survive
    FD        one of this process's own descriptors (/dev/stdout, /dev/stderr,
              /dev/fd/N, /proc/self/fd/N, or the very file stdout or stderr is):
              written to that descriptor itself, so a shell's `>>` appends and
              nothing is truncated
    FIFO      a named pipe: opened without blocking, waiting up to the timeout for
              a reader
    DEVICE    a character device (/dev/null, a terminal): opened once by prepare()
              to check it, written in place

Anything else (a block device, a socket, a directory, /proc or /sys, a dangling
symlink, an over-long name, a missing or unwritable directory, an unwritable file)
is refused by prepare() with one line. Writes to pipes, FIFOs and terminals have a
deadline: TIMEOUT seconds without progress (SMPNET_OUTPUT_TIMEOUT overrides it).
Where the write fails anyway, the result goes to a fresh file in the temporary
directory and the error names it.
"""
import errno
import fcntl
import os
import re
import select
import stat
import sys
import tempfile
import time

from .errors import BadInput, Interrupted, OutputFailed
from .report import dumps

REPLACE, IN_PLACE, FD, FIFO, DEVICE = "replace", "in place", "fd", "fifo", "device"

TIMEOUT = 10.0  # seconds: for a FIFO's reader to come, and for any reader to read on
TIMEOUT_ENV = "SMPNET_OUTPUT_TIMEOUT"
_PIPE_BUF = getattr(select, "PIPE_BUF", 4096)
_OWN_FD_DIR = re.compile(r"/proc/(\d+)/(?:task/\d+/)?fd")


class Target:
    """Where the JSON goes, as prepare() found it.

    kind: REPLACE, IN_PLACE, FD, FIFO or DEVICE; path: as given; real: the
    resolved path (None for FD); fd: for FD, a duplicate of the descriptor named
    (the same open file: same offset, same O_APPEND), held until write().
    """

    def __init__(self, path, kind, real=None, fd=None, why=""):
        self.path, self.kind, self.real, self.fd, self.why = path, kind, real, fd, why

    def close(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self):
        try:
            self.close()
        except Exception:  # at interpreter exit
            pass

    def __repr__(self):
        where = f"fd {self.fd}" if self.kind == FD else self.real
        return f"Target({self.path!r}, {self.kind}: {where}{'; ' + self.why if self.why else ''})"


# ------------------------------------------------------------------ before the run

def prepare(path):
    """Check PATH before a run; return a Target for write(), or None for no --output.

    Raises BadInput (one line) for anything write() could not write.
    """
    if path is None:
        return None
    if not path.strip():
        raise BadInput("--output needs a file name")
    try:
        return _prepare(path)
    except BadInput:
        raise
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise BadInput(f"--output {_show(path)}: {_reason(e)}") from None


def _prepare(path):
    bpath = os.fsencode(path)
    path_max = _conf("/", "PC_PATH_MAX", 4096)
    if len(bpath) >= path_max:
        raise BadInput(f"--output {_show(path)}: the path is {len(bpath)} bytes, "
                       f"over PATH_MAX ({path_max}, with its terminating NUL)")
    name_max = _conf(_nearest_dir(path), "PC_NAME_MAX", 255)
    for part in bpath.split(b"/"):
        if len(part) > name_max:
            raise BadInput(f"--output {_show(path)}: a name in it is {len(part)} bytes, "
                           f"over NAME_MAX ({name_max})")

    if path.endswith("/") or os.path.basename(path) in (".", ".."):
        if os.path.isdir(path):
            raise BadInput(f"--output {_show(path)}: is a directory")
        raise BadInput(f"--output {_show(path)}: names a directory, not a file")
    fd, real, via_link = _resolve(path)
    if fd is not None:
        return _prepare_fd(path, fd)
    if len(os.fsencode(real)) >= path_max:
        raise BadInput(f"--output {_show(path)}: it resolves to a path over PATH_MAX")
    if _under_proc_or_sys(real):
        raise BadInput(f"--output {_show(path)}: {real} is under /proc or /sys "
                       "(only this process's own /proc/self/fd/N may be named)")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return _prepare_new(path, real, via_link)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise BadInput(f"--output {_show(path)}: is a directory")
    if stat.S_ISREG(mode):
        return _prepare_file(path, real, st)
    if stat.S_ISFIFO(mode):
        if not os.access(real, os.W_OK):
            raise BadInput(f"--output {_show(path)}: FIFO {real} is not writable")
        return Target(path, FIFO, real)
    if stat.S_ISCHR(mode):
        # opened now as write() will open it: /dev/tty without a terminal, a
        # device without its driver, no permission: all refused before the run
        try:
            os.close(os.open(real, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC))
        except OSError as e:
            raise BadInput(f"--output {_show(path)}: device {real} cannot be opened for "
                           f"writing ({_reason(e)})") from None
        return Target(path, DEVICE, real)
    what = ("a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a file, FIFO or character device")
    raise BadInput(f"--output {_show(path)}: {real} is {what}; "
                   "it takes a file, a FIFO, a character device or /dev/stdout")


def _prepare_new(path, real, via_link):
    parent, name = os.path.split(real)
    if via_link:
        raise BadInput(f"--output {_show(path)}: is a symlink to {real}, which does not exist")
    if not os.path.isdir(parent):
        if os.path.exists(parent):
            raise BadInput(f"--output {_show(path)}: {parent} is not a directory")
        raise BadInput(f"--output {_show(path)}: directory {parent} does not exist")
    if not name:
        raise BadInput(f"--output {_show(path)}: names a directory, not a file")
    _probe_dir(path, parent)
    return Target(path, REPLACE, real, why="new file")


def _prepare_file(path, real, st):
    for fd in (1, 2):  # `--output log > log`: our stdout itself, replaced it would be lost
        try:
            fst = os.fstat(fd)
        except OSError:
            continue
        if (fst.st_dev, fst.st_ino) == (st.st_dev, st.st_ino):
            return _prepare_fd(path, fd)
    # open for writing, without O_TRUNC: the real check (mode, ACLs, read-only
    # mounts, immutable and append-only files, a binary being run), no change
    try:
        os.close(os.open(real, os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK))
    except OSError as e:
        raise BadInput(f"--output {_show(path)}: the file is not writable "
                       f"({_reason(e)})") from None
    parent = os.path.dirname(real)
    why = _why_in_place(parent, st)
    if why:
        return Target(path, IN_PLACE, real, why=why)
    _probe_dir(path, parent)
    return Target(path, REPLACE, real, why="existing file")


def _why_in_place(parent, st):
    """Why renaming a new file over this one would change what it is, or ''."""
    if st.st_nlink > 1:
        return f"{st.st_nlink} hard links"
    euid = os.geteuid()
    if euid != 0:
        if st.st_uid != euid:
            return "owned by another user"
        if st.st_gid != os.getegid() and st.st_gid not in os.getgroups():
            return "its group is not ours"
    if not os.access(parent, os.W_OK | os.X_OK):
        return "its directory is not writable"
    pst = os.stat(parent)
    if pst.st_mode & stat.S_ISVTX and euid not in (0, st.st_uid, pst.st_uid):
        return "in a sticky directory"
    return ""


def _probe_dir(path, parent):
    """Create and remove a file in PARENT: that a new file can be made there."""
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".smpnet-probe-")
    except OSError as e:
        raise BadInput(f"--output {_show(path)}: cannot create a file in directory "
                       f"{parent} ({_reason(e)})") from None
    os.close(fd)
    os.unlink(probe)


def _prepare_fd(path, fd):
    try:
        st = os.fstat(fd)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError as e:
        raise BadInput(f"--output {_show(path)}: file descriptor {fd} is not open "
                       f"({_reason(e)})") from None
    if flags & getattr(os, "O_PATH", 0) or (flags & os.O_ACCMODE) == os.O_RDONLY:
        raise BadInput(f"--output {_show(path)}: file descriptor {fd} is not open for writing")
    if stat.S_ISBLK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        raise BadInput(f"--output {_show(path)}: file descriptor {fd} is "
                       f"{'a block device' if stat.S_ISBLK(st.st_mode) else 'a directory'}")
    return Target(path, FD, fd=os.dup(fd), why=f"descriptor {fd}")


def _resolve(path):
    """(fd, None, False) where PATH names one of our own descriptors, else
    (None, resolved path, whether the last name was a symlink).

    Like os.path.realpath, but stops at /proc/<our pid>/fd/N before following
    that magic link, which would lose that it is a descriptor (with its offset
    and O_APPEND) and name, for a pipe, nothing that can be opened.
    """
    p = os.path.join(os.getcwd(), path)
    via_link = False
    for _ in range(40):  # the kernel's own limit on symlinks followed
        d, base = os.path.split(p)
        rd = os.path.realpath(d)
        m = _OWN_FD_DIR.fullmatch(rd)
        if m and int(m.group(1)) == os.getpid() and base.isascii() and base.isdigit():
            return int(base), None, via_link
        if _under_proc_or_sys(rd):
            raise BadInput(f"--output {_show(path)}: {os.path.join(rd, base)} is under /proc "
                           "or /sys (only this process's own /proc/self/fd/N may be named)")
        if base in ("", ".", ".."):
            return None, os.path.realpath(p), via_link
        full = os.path.join(rd, base)
        if not os.path.islink(full):
            return None, full, via_link
        p = os.path.join(rd, os.readlink(full))
        via_link = True
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))


def _under_proc_or_sys(p):
    return any(p == top or p.startswith(top + "/") for top in ("/proc", "/sys"))


def _nearest_dir(path):
    d = os.path.dirname(os.path.join(os.getcwd(), path))
    while d and not os.path.isdir(d):
        d = os.path.dirname(d)
    return d or "/"


def _conf(where, name, default):
    try:
        return os.pathconf(where, name) or default
    except (OSError, ValueError):
        return default


# ------------------------------------------------------------------ after the run

def write(env_or_text, target, timeout=None):
    """Write a result (an envelope, or text) to TARGET from prepare(); never lose it.

    If it cannot be written, it is saved to a new file in the temporary
    directory and OutputFailed (exit 1) names that file; Ctrl-C meanwhile
    saves it too (Interrupted, exit 130). TIMEOUT (or SMPNET_OUTPUT_TIMEOUT)
    bounds the wait for a FIFO's reader and for a reader that stops reading.
    """
    if target is None:
        return
    if isinstance(env_or_text, str):
        text, command = env_or_text, "result"
    else:
        text = dumps(env_or_text) + "\n"
        command = _command(env_or_text)
    data = text.encode()
    if timeout is None:
        timeout = _timeout()
    try:
        _WRITERS[target.kind](target, data, timeout)
    except (Exception, KeyboardInterrupt) as e:
        interrupted = isinstance(e, (KeyboardInterrupt, Interrupted))
        reason = ("interrupted" if interrupted else
                  _reason(e) if isinstance(e, OSError) else f"{type(e).__name__}: {e}")
        saved = _save(data, command)
        message = f"cannot write --output {_show(target.path)}: {reason}; {saved_text(saved)}"
        if interrupted:
            raise Interrupted(message) from None
        raise OutputFailed(message, saved) from None
    finally:
        target.close()


def _timeout():
    try:
        value = float(os.environ.get(TIMEOUT_ENV, TIMEOUT))
    except ValueError:
        return TIMEOUT
    return value if value > 0 else TIMEOUT


def _write_replace(t, data, timeout):
    parent, name = os.path.split(t.real)
    try:
        st = os.stat(t.real)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EEXIST, "it is no longer a regular file")
    if st is not None and _why_in_place(parent, st):
        return _write_in_place(t, data, timeout)  # it changed during the run
    # O_EXCL with the mode open() gives a new file: the umask and default ACLs apply
    for _ in range(100):
        tmp = os.path.join(parent, f".{name[:200]}.smpnet-{os.urandom(4).hex()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                         0o600 if st else 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "no free temporary name")
    try:
        _write_all(fd, data, None)
        if st is not None:
            if os.geteuid() == 0:
                os.fchown(fd, st.st_uid, st.st_gid)  # before chmod: chown clears set-id bits
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        os.fsync(fd)
        os.close(fd)
        fd = None
        os.replace(tmp, t.real)
    except BaseException:
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(parent)


def _write_in_place(t, data, timeout):
    # no O_CREAT: a file removed during the run is an error (its links would
    # not see a new one), and no O_TRUNC: truncated after the write instead
    fd = os.open(t.real, os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)

    def finish(fd):
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    _write_opened(fd, data, None, stat.S_ISREG, "a regular file", finish)


def _write_fd(t, data, timeout):
    for stream in (sys.stdout, sys.stderr):  # what was printed before comes first
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    st = os.fstat(t.fd)
    if stat.S_ISREG(st.st_mode):
        return _write_all(t.fd, data, None)  # at its offset, with its O_APPEND
    if stat.S_ISFIFO(st.st_mode) or os.isatty(t.fd):
        # a pipe or terminal: a new open file of our own, to write without
        # blocking (O_NONBLOCK on the shared one would reach the shell too)
        try:
            fd = os.open(f"/proc/self/fd/{t.fd}",
                         os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
        except OSError as e:
            if e.errno == errno.ENXIO and stat.S_ISFIFO(st.st_mode):
                raise BrokenPipeError(errno.EPIPE, "the pipe has no reader") from None
            fd = None
        # our own stdout or stderr: its reader is the user's (`| less`), so
        # no deadline; a reader that leaves is EPIPE, and the result is saved
        if fd is not None:
            try:
                return _write_all(fd, data, None)
            finally:
                os.close(fd)
    _write_all(t.fd, data, None, chunk=_PIPE_BUF)


def _write_fifo(t, data, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(t.real, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        if time.monotonic() >= deadline:
            raise TimeoutError(errno.ETIMEDOUT, f"no reader opened the FIFO within {timeout:g} s")
        time.sleep(0.02)
    _write_opened(fd, data, timeout, stat.S_ISFIFO, "a FIFO")


def _write_device(t, data, timeout):
    fd = os.open(t.real, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    _write_opened(fd, data, timeout, stat.S_ISCHR, "a character device")


def _write_opened(fd, data, timeout, is_kind, what, finish=None):
    """Write all of `data` to `fd`, which must still be `what` (the path may
    have been replaced during the run), then close it."""
    try:
        if not is_kind(os.fstat(fd).st_mode):
            raise OSError(errno.EEXIST, f"it is no longer {what}")
        _write_all(fd, data, timeout)
        if finish is not None:
            finish(fd)
    finally:
        os.close(fd)


_WRITERS = {REPLACE: _write_replace, IN_PLACE: _write_in_place, FD: _write_fd,
            FIFO: _write_fifo, DEVICE: _write_device}


def _write_all(fd, data, timeout, chunk=None):
    """Write all of DATA; with TIMEOUT, fail after that long without progress
    (None: wait as long as the reader stays).

    A blocking descriptor is written CHUNK bytes at a time, each after poll()
    says it has room (for a pipe, PIPE_BUF bytes then go without blocking).
    """
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        events = poller.poll(-1 if timeout is None else timeout * 1000)
        if not events:
            raise TimeoutError(errno.ETIMEDOUT, f"nothing was read from it for {timeout:g} s")
        if events[0][1] & (select.POLLERR | select.POLLNVAL) and \
                not events[0][1] & select.POLLOUT:
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))
        try:
            n = os.write(fd, view[:chunk] if chunk else view)
        except BlockingIOError:
            continue
        if n == 0:
            raise OSError(errno.EIO, "the write made no progress")
        view = view[n:]


def _fsync_dir(d):
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save(env):
    """Save a result that could not go where it was asked; its path, or None."""
    return _save((dumps(env) + "\n").encode(), _command(env))


def _command(env):
    """The command's name, safe in a file name."""
    return re.sub(r"[^\w.-]", "_", str(env.get("command", "result")))


def saved_text(saved):
    return (f"the result was saved to {saved}" if saved else
            "the result could not be saved anywhere either; it follows on stderr")


def _save(data, command):
    """Save DATA to a new file: the temporary directory, else the working one,
    else home. Return its path; None if nowhere took it (DATA then goes to stderr)."""
    for d in (tempfile.gettempdir(), os.getcwd(), os.path.expanduser("~")):
        try:
            fd, saved = tempfile.mkstemp(prefix=f"smpnet-{command}-", suffix=".json", dir=d)
        except OSError:
            continue
        try:
            _write_all(fd, data, None)
            os.fsync(fd)
            return saved
        except OSError:
            os.unlink(saved)
        finally:
            os.close(fd)
    try:
        _write_all(2, data, _timeout(), chunk=_PIPE_BUF)
    except OSError:
        pass
    return None


def _reason(e):
    return (e.strerror if isinstance(e, OSError) and e.strerror else str(e)) or type(e).__name__


def _show(path, limit=120):
    """PATH for a one-line message: no newline, and not 4 KiB of it."""
    shown = path.encode("unicode_escape").decode("ascii") if not path.isprintable() else path
    return shown if len(shown) <= limit else shown[:limit // 2] + "..." + shown[-limit // 4:]
