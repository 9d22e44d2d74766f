"""Reading a JSON file as smpnet reads its inputs (a result for compare,
a calibration profile): a bounded read, so that /dev/zero cannot run away;
a FIFO or a pipe too, with a time limit, so that one with no writer cannot
hang; and one clear BadInput line naming the file for anything that is
not JSON."""
import json
import os
import select
import stat

from .errors import BadInput

MAX_BYTES = 64 * 1024 * 1024      # the most smpnet reads of one file
READ_TIMEOUT_S = 10.0             # a FIFO or pipe that gives nothing for this long is refused


def read_json(path, name=None):
    """The JSON in a file: a bounded read (a FIFO or a pipe too, with a
    time limit); anything else is a BadInput that starts with `name` (the
    path, printable, by default)."""
    name = shown(path) if name is None else name
    return _parse(name, _read(path, name))


def _read(path, name):
    try:
        # O_NONBLOCK: a FIFO with no writer must not block the open for ever
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode):
                data = _read_pipe(fd, name)
            else:
                os.set_blocking(fd, True)
                with os.fdopen(fd, "rb", closefd=False) as f:
                    data = f.read(MAX_BYTES + 1)   # bounded: /dev/zero cannot run away
        finally:
            os.close(fd)
    except OSError as e:
        raise BadInput(f"{name}: cannot read it: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:
        raise BadInput(f"{name}: larger than {MAX_BYTES // (1024 * 1024)} MiB, "
                       "the most smpnet reads of a file")
    return data


def _read_pipe(fd, name):
    """A FIFO or a pipe (`<(ssh host cat a.json)`): read to its end, at most
    MAX_BYTES + 1, giving up after READ_TIMEOUT_S without data."""
    chunks, size = [], 0
    while size <= MAX_BYTES:
        ready, _, _ = select.select([fd], [], [], READ_TIMEOUT_S)
        if not ready:
            raise BadInput(f"{name}: nothing came through it for {READ_TIMEOUT_S:g} s")
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _parse(name, data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{name}: not JSON (not UTF-8 text: byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{name}: not JSON ({e.msg}, line {e.lineno})") from None
    except RecursionError:
        raise BadInput(f"{name}: not JSON smpnet can read (nested too deeply)") from None
    except ValueError as e:   # int digits limit ("Exceeds the limit ... integer string")
        why = ("a number with too many digits" if "digits" in str(e)
               else oneline(str(e)))
        raise BadInput(f"{name}: not JSON smpnet can read ({why})") from None


def shown(path):
    """A path as one printable line (undecodable bytes and controls escaped)."""
    s = str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return s if s.isprintable() else repr(s)


def oneline(s):
    return s if s.isprintable() else repr(s)[1:-1]
