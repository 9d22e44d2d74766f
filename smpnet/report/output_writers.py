"""How each kind of Target (see output_target.py) is written after the run:
without ever leaving half a file where a whole one was, without blocking for
ever on a reader that went away, and without truncating what a shell opened
for us.
"""
import errno
import os
import select
import stat
import sys
import time

from .output_target import DEVICE, FD, FIFO, IN_PLACE, REPLACE, why_in_place

PIPE_BUF = getattr(select, "PIPE_BUF", 4096)


def _write_replace(t, data, timeout):
    parent, name = os.path.split(t.real)
    try:
        st = os.stat(t.real)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EEXIST, "it is no longer a regular file")
    if st is not None and why_in_place(parent, st):
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
        write_all(fd, data, None)
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
    try:
        _reserve(fd, len(data))
    except BaseException:
        os.close(fd)
        raise

    def finish(fd):
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    _write_opened(fd, data, None, stat.S_ISREG, "a regular file", finish)


def _reserve(fd, size):
    """The blocks for `size` bytes, before a byte of the old file is
    overwritten: on a full disk the write fails here, the old file whole
    (and write() saves the result elsewhere). A filesystem that cannot
    reserve (EOPNOTSUPP, EINVAL) is written as before."""
    if not stat.S_ISREG(os.fstat(fd).st_mode) or size == 0:
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise


def _write_fd(t, data, timeout):
    for stream in (sys.stdout, sys.stderr):  # what was printed before comes first
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    st = os.fstat(t.fd)
    if stat.S_ISREG(st.st_mode):
        return write_all(t.fd, data, None)  # at its offset, with its O_APPEND
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
                return write_all(fd, data, None)
            finally:
                os.close(fd)
    write_all(t.fd, data, None, chunk=PIPE_BUF)


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
        write_all(fd, data, timeout)
        if finish is not None:
            finish(fd)
    finally:
        os.close(fd)


WRITERS = {REPLACE: _write_replace, IN_PLACE: _write_in_place, FD: _write_fd,
           FIFO: _write_fifo, DEVICE: _write_device}


def write_all(fd, data, timeout, chunk=None):
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

