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

Here: the two calls and saving what could not be written. What PATH is, and
the checks that refuse it: output_target.py; how each kind is written:
output_writers.py.
"""
import os
import re
import tempfile

from ..errors import BadInput, Interrupted, OutputFailed
# the kinds and Target are part of this module's contract (output.REPLACE...)
from .output_target import (DEVICE, FD, FIFO, IN_PLACE, REPLACE, Target,  # noqa: F401
                            error_text, find_target, show_path)
from .output_writers import PIPE_BUF, WRITERS, write_all
from .report import dumps

TIMEOUT = 10.0  # seconds: for a FIFO's reader to come, and for any reader to read on
TIMEOUT_ENV = "SMPNET_OUTPUT_TIMEOUT"


def prepare(path):
    """Check PATH before a run; return a Target for write(), or None for no --output.

    Raises BadInput (one line) for anything write() could not write.
    """
    if path is None:
        return None
    if not path.strip():
        raise BadInput("--output needs a file name")
    try:
        return find_target(path)
    except BadInput:
        raise
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise BadInput(f"--output {show_path(path)}: {error_text(e)}") from None


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
        WRITERS[target.kind](target, data, timeout)
    except (Exception, KeyboardInterrupt) as e:
        interrupted = isinstance(e, (KeyboardInterrupt, Interrupted))
        reason = ("interrupted" if interrupted else
                  error_text(e) if isinstance(e, OSError) else f"{type(e).__name__}: {e}")
        saved = _save(data, command)
        message = f"cannot write --output {show_path(target.path)}: {reason}; {saved_text(saved)}"
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


def save(env_or_text, command=None):
    """Save a result (an envelope, or text, as write() takes) that could not
    go where it was asked; its path, or None. `command` names the file
    (default: the envelope's command, or "result")."""
    if isinstance(env_or_text, str):
        return _save(env_or_text.encode(), command or "result")
    return _save((dumps(env_or_text) + "\n").encode(), command or _command(env_or_text))


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
            write_all(fd, data, None)
            os.fsync(fd)
            return saved
        except OSError:
            os.unlink(saved)
        finally:
            os.close(fd)
    try:
        write_all(2, data, _timeout(), chunk=PIPE_BUF)
    except OSError:
        pass
    return None

