"""The process's own set-up, shared by the entry point and the command line:
the signals that interrupt a run, and whether smpnet-bench started with its
stdout closed. Kept light on purpose: entry imports it before anything else.
"""
import os
import signal
import sys

# SIGHUP: the terminal closed; SIGQUIT: Ctrl-\.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

stdout_closed = False  # smpnet-bench was started with fd 1 closed: the result must be saved

# The stop signal cli.main took, if any. Its handler raises
# KeyboardInterrupt, but one raised while Python runs a weakref callback
# or a __del__ is printed as "Exception ignored" and dropped, and the run
# would go on to the end (and exit 0); so the points between a run's steps
# check this too (check_interrupted).
interrupted = []
# cli.main said the run was interrupted (its one line): a signal that comes
# after, between its return and the process's exit, ends it silently
said_interrupted = False


def check_interrupted():
    """Raise KeyboardInterrupt if a stop signal was taken and its
    KeyboardInterrupt got lost on the way."""
    if interrupted:
        raise KeyboardInterrupt


def open_std_fds():
    """Give a closed stdin, stdout or stderr /dev/null, so that no file smpnet
    opens lands on fd 1 or 2, and Python's sys.stdout/stderr exist."""
    global stdout_closed
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, open(fd, mode, closefd=False))
        stdout_closed |= fd == 1
