"""smpnet-bench's entry point: signal handling first, everything else after.

An interruption at any moment is exit code 130 and one line. Before the
command line has loaded (numpy, the compiled core: about 0.2 s) and after it
has finished, nothing needs stopping or cleaning up, so a signal there ends
the process at once; while it runs, cli.main turns the first one into a
clean stop of the workers (and ignores the rest until that is done). It
ends with os._exit, so the interpreter's shutdown never runs with default
handlers in place.
This module is kept light on purpose: its import must not load anything.
"""
import os
import signal
import sys

from .machine import process
from .machine.process import INTERRUPTS, open_std_fds

def _exit_now(signum, frame):
    # one line a run: where cli.main said it already (a second signal came
    # while it stopped the run, and is taken once its handlers are back)
    if not process.said_interrupted:
        os.write(2, b"smpnet-bench: interrupted\n")
    os._exit(130)


# The address space numpy and the core need to load, one OpenBLAS thread
# (below): 120,000 KiB of `ulimit -v` loaded on the 2-vCPU guest, 100,000
# did not; what is short of this is refused in one line, before OpenBLAS
# prints its own and exits (a Python import cannot catch that).
MIN_ADDRESS_SPACE = 160 << 20


def _address_space_short():
    """The line that says `ulimit -v` is too tight to start, or None."""
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft >= MIN_ADDRESS_SPACE:
        return None
    return (f"smpnet-bench: cannot start: the address-space limit (ulimit -v) is "
            f"{soft >> 20} MiB, under the {MIN_ADDRESS_SPACE >> 20} MiB it takes to load "
            "numpy and smpnet's core; raise it\n")


def main():
    for sig in INTERRUPTS:
        signal.signal(sig, _exit_now)
    open_std_fds()
    short = _address_space_short()
    if short:
        os.write(2, short.encode())
        os._exit(1)
    # smpnet does no linear algebra: one OpenBLAS thread, not one per core
    # (each reserves its buffer at numpy's import)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from .cli import main as run
    except (ImportError, MemoryError) as e:  # numpy under a tight ulimit -v, say
        last = [x for x in str(e).splitlines() if x.strip()][-1:] or [type(e).__name__]
        os.write(2, f"smpnet-bench: cannot start: {last[0]}\n".encode(errors="replace"))
        os._exit(1)

    try:
        code = run()
    except KeyboardInterrupt:  # between cli.main's handlers and its try
        os.write(2, b"smpnet-bench: interrupted\n")
        code = 130
    except SystemExit as e:  # --help, --version
        code = e.code if isinstance(e.code, int) else 0
    for sig in INTERRUPTS:
        signal.signal(sig, _exit_now)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader left: nothing more to say to it
            pass
        except OSError as e:  # /dev/full: what was printed is lost, say so
            if stream is sys.stdout and code == 0:
                os.write(2, f"smpnet-bench: cannot write to stdout: {e.strerror}\n".encode())
                code = 1
    # Leave now, skipping the interpreter's shutdown: it resets every handler
    # to the default first, so a signal then would end the process with no
    # line (-2, -15). Everything is written, flushed and reaped by here.
    os._exit(code)
