"""smpnet's errors, each with the exit code smpnet-bench gives it."""


class SmpnetError(Exception):
    """Base of every error smpnet raises on purpose."""

    exit_code = 1


class BadInput(SmpnetError, ValueError):
    """The caller asked for something that cannot be: exit code 2."""

    exit_code = 2


class SegmentError(BadInput):
    """A shared-memory segment that is not ours, or not of this layout."""


class RunFailed(SmpnetError):
    """A run did not complete: exit code 1."""


class NoMemory(RunFailed):
    """The shared segment could not be reserved or mapped: not bad input,
    the machine lacks room for what was asked (exit code 1)."""


class WorkerDied(RunFailed):
    """A worker (one emulated CPU) died or raised: the run was stopped."""

    def __init__(self, cpu, real_cpu, pid, how):
        self.cpu, self.real_cpu, self.pid, self.how = cpu, real_cpu, pid, how
        super().__init__(
            f"emulated CPU {cpu} (real CPU {real_cpu}, pid {pid}) {how}; run stopped"
        )


class RunTimeout(RunFailed):
    """The run outlived its deadline and was stopped."""


class OutputFailed(RunFailed):
    """The run succeeded but its --output could not be written (exit code 1);
    the result was saved to `saved` (None only if nowhere would take it)."""

    def __init__(self, message, saved=None):
        self.saved = saved
        super().__init__(message)


class Stalled(RunTimeout):
    """The watchdog found a worker making no progress past the run's
    expected length: stopped (SIGSTOP), not scheduled, sleeping..."""

    def __init__(self, cpu, real_cpu, pid, state, expected, elapsed, others=""):
        self.cpu, self.real_cpu, self.pid, self.state = cpu, real_cpu, pid, state
        super().__init__(
            f"emulated CPU {cpu} (real CPU {real_cpu}, pid {pid}) made no progress: "
            f"{state}, {elapsed:.1f} s into a run expected to take {expected:.1f} s{others}; "
            "run stopped")


class Interrupted(RunFailed):
    """Ctrl-C (SIGINT), SIGTERM, SIGHUP or SIGQUIT reached the coordinator:
    exit code 130."""

    exit_code = 130
