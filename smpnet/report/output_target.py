"""What an --output PATH is, found before the run: the kind write() will treat
it as (see output.py), in a Target, or a one-line BadInput for anything that
could not take the result.

Every check is made now, with nothing written (a probe file is created and
removed, a device or file opened without truncating it), so that a bad path
costs no run; and the messages for both halves of --output are made here,
where most of them are.
"""
import errno
import fcntl
import os
import re
import stat
import tempfile

from ..errors import BadInput

REPLACE, IN_PLACE, FD, FIFO, DEVICE = "replace", "in place", "fd", "fifo", "device"

_OWN_FD_DIR = re.compile(r"/proc/(\d+)/(?:task/\d+/)?fd")


class Target:
    """Where the JSON goes, as prepare() found it.

    kind: REPLACE, IN_PLACE, FD, FIFO or DEVICE; path: as given; real: the
    resolved path (None for FD); fd: for FD, a duplicate of the descriptor named
    (the same open file: same offset, same O_APPEND), held until write().
    """

    def __init__(self, path, kind, real=None, fd=None, why="", named_fd=None):
        self.path, self.kind, self.real, self.fd, self.why = path, kind, real, fd, why
        self.named_fd = named_fd   # for FD: the descriptor PATH named (1: our stdout)

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


def find_target(path):
    """The Target for PATH (not None, not blank); BadInput, OSError or
    ValueError for what cannot take the result."""
    bpath = os.fsencode(path)
    path_max = _conf("/", "PC_PATH_MAX", 4096)
    if len(bpath) >= path_max:
        raise BadInput(f"--output {show_path(path)}: the path is {len(bpath)} bytes, "
                       f"over PATH_MAX ({path_max}, with its terminating NUL)")
    name_max = _conf(_nearest_dir(path), "PC_NAME_MAX", 255)
    for part in bpath.split(b"/"):
        if len(part) > name_max:
            raise BadInput(f"--output {show_path(path)}: a name in it is {len(part)} bytes, "
                           f"over NAME_MAX ({name_max})")

    if path.endswith("/") or os.path.basename(path) in (".", ".."):
        if os.path.isdir(path):
            raise BadInput(f"--output {show_path(path)}: is a directory")
        raise BadInput(f"--output {show_path(path)}: names a directory, not a file")
    fd, real, via_link = _resolve(path)
    if fd is not None:
        return _prepare_fd(path, fd)
    if len(os.fsencode(real)) >= path_max:
        raise BadInput(f"--output {show_path(path)}: it resolves to a path over PATH_MAX")
    if _under_proc_or_sys(real):
        raise BadInput(f"--output {show_path(path)}: {real} is under /proc or /sys "
                       "(only this process's own /proc/self/fd/N may be named)")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return _prepare_new(path, real, via_link)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise BadInput(f"--output {show_path(path)}: is a directory")
    if stat.S_ISREG(mode):
        return _prepare_file(path, real, st)
    if stat.S_ISFIFO(mode):
        if not os.access(real, os.W_OK):
            raise BadInput(f"--output {show_path(path)}: FIFO {real} is not writable")
        return Target(path, FIFO, real)
    if stat.S_ISCHR(mode):
        # opened now as write() will open it: /dev/tty without a terminal, a
        # device without its driver, no permission: all refused before the run
        try:
            os.close(os.open(real, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC))
        except OSError as e:
            raise BadInput(f"--output {show_path(path)}: device {real} cannot be opened for "
                           f"writing ({error_text(e)})") from None
        return Target(path, DEVICE, real)
    what = ("a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a file, FIFO or character device")
    raise BadInput(f"--output {show_path(path)}: {real} is {what}; "
                   "it takes a file, a FIFO, a character device or /dev/stdout")


def _prepare_new(path, real, via_link):
    parent, name = os.path.split(real)
    if via_link:
        raise BadInput(f"--output {show_path(path)}: is a symlink to {real}, which does not exist")
    if not os.path.isdir(parent):
        if os.path.exists(parent):
            raise BadInput(f"--output {show_path(path)}: {parent} is not a directory")
        raise BadInput(f"--output {show_path(path)}: directory {parent} does not exist")
    if not name:
        raise BadInput(f"--output {show_path(path)}: names a directory, not a file")
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
        raise BadInput(f"--output {show_path(path)}: the file is not writable "
                       f"({error_text(e)})") from None
    parent = os.path.dirname(real)
    why = why_in_place(parent, st)
    if why:
        return Target(path, IN_PLACE, real, why=why)
    _probe_dir(path, parent)
    return Target(path, REPLACE, real, why="existing file")


def why_in_place(parent, st):
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
        raise BadInput(f"--output {show_path(path)}: cannot create a file in directory "
                       f"{parent} ({error_text(e)})") from None
    os.close(fd)
    os.unlink(probe)


def _prepare_fd(path, fd):
    try:
        st = os.fstat(fd)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError as e:
        raise BadInput(f"--output {show_path(path)}: file descriptor {fd} is not open "
                       f"({error_text(e)})") from None
    if flags & getattr(os, "O_PATH", 0) or (flags & os.O_ACCMODE) == os.O_RDONLY:
        raise BadInput(f"--output {show_path(path)}: file descriptor {fd} is not open for writing")
    if stat.S_ISBLK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        raise BadInput(f"--output {show_path(path)}: file descriptor {fd} is "
                       f"{'a block device' if stat.S_ISBLK(st.st_mode) else 'a directory'}")
    return Target(path, FD, fd=os.dup(fd), why=f"descriptor {fd}", named_fd=fd)


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
            raise BadInput(f"--output {show_path(path)}: {os.path.join(rd, base)} is under /proc "
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


def error_text(e):
    return (e.strerror if isinstance(e, OSError) and e.strerror else str(e)) or type(e).__name__


def show_path(path, limit=120):
    """PATH for a one-line message: no newline, and not 4 KiB of it."""
    shown = path.encode("unicode_escape").decode("ascii") if not path.isprintable() else path
    return shown if len(shown) <= limit else shown[:limit // 2] + "..." + shown[-limit // 4:]
