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


class WorkerDied(RunFailed):
    """A worker (one emulated CPU) died or raised: the run was stopped."""

    def __init__(self, cpu, real_cpu, pid, how):
        self.cpu, self.real_cpu, self.pid, self.how = cpu, real_cpu, pid, how
        super().__init__(
            f"emulated CPU {cpu} (real CPU {real_cpu}, pid {pid}) {how}; run stopped"
        )


class RunTimeout(RunFailed):
    """The run outlived its deadline and was stopped."""


class Interrupted(RunFailed):
    """Ctrl-C (SIGINT) or SIGTERM reached the coordinator: exit code 130."""

    exit_code = 130
