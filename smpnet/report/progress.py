"""Progress on stderr for long runs: one line per step, rewritten in place on a terminal."""
import sys

from ..machine import process


def printer(command):
    """A progress(n, total, what) callable that prints `[n+1/total] what`."""
    tty = sys.stderr.isatty()

    def show(n, total, what):
        process.check_interrupted()     # a step is where a lost interrupt is found
        line = f"smpnet-bench {command}: [{n + 1}/{total}] {what}"
        if tty:
            sys.stderr.write("\r\033[K" + line)
            if n + 1 == total:
                sys.stderr.write("\r\033[K")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    return show
