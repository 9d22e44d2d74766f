"""The watchdog of a run: when it has outlived its estimate with no progress,
and which worker to blame.

A run is given the seconds it should take (`expected`, the same estimate
its progress lines use) and a count its workers raise as they work (their
heartbeats, and the run's own count where it has one). Past the estimate and
some slack the run is judged stuck, unless the count rose lately: an
oversubscribed or loaded run is slow, and one that still works is not
stopped, however far past its estimate. A stuck run's unfinished workers are then asked
of the kernel (psutil) what they are doing, so that the error names the
worker that made no progress and why: stopped, not scheduled, sleeping.
"""
import time

from ..errors import RunTimeout, Stalled


class Watchdog:
    """The watchdog and the progress count of one run.

    The slack and the poll interval are given, not read here: Machine.run
    passes its WATCHDOG_* settings at each run, so that a caller (a test)
    that changes them there changes what the next run gets.
    """

    def __init__(self, machine, expected, progress, now, slack_s, slack_share, poll_s):
        self.machine, self.expected, self.progress = machine, expected, progress
        self.slack_s, self.poll_s = slack_s, poll_s
        # the slack, and a share of the estimate: long runs' estimates are rougher
        self.at = None if expected is None else now + expected * (1 + slack_share) + slack_s
        # the progress count, sampled every poll_s: when it last rose
        self.seen = None if progress is None else progress(machine)
        self.risen = self.sampled = now

    def stuck(self, now):
        """Sample the count if due; whether the run is past the watchdog with
        its count standing still (a count that rose re-arms it instead)."""
        if self.progress is not None and now - self.sampled >= self.poll_s:
            value, self.sampled = self.progress(self.machine), now
            if value != self.seen:
                self.seen, self.risen = value, now
        if self.at is None or now < self.at:
            return False
        if now - self.risen < self.slack_s:  # slow, not stuck: keep waiting
            self.at = self.risen + self.slack_s
            return False
        return True

    def wakes(self):
        """When the coordinator must look again: the watchdog, the next sample."""
        poll = self.sampled + self.poll_s if self.progress is not None else None
        return [t for t in (self.at, poll) if t is not None]


def stall_error(workers, expected, elapsed):
    """The Stalled error for a run past its watchdog: the unfinished
    workers, the likeliest culprit first (stopped, then not scheduled)."""
    import psutil  # only a stuck run needs it

    seen = []
    for w in workers:
        if w.done:
            continue
        try:
            p = psutil.Process(w.proc.pid)
            seen.append((w, p, p.status(), sum(p.cpu_times()[:2])))
        except psutil.Error:
            continue
    time.sleep(0.2)  # does it get CPU time at all? (clock ticks are 10 ms)
    found = []
    for w, p, status, cpu0 in seen:
        try:
            advanced = sum(p.cpu_times()[:2]) > cpu0
        except psutil.Error:
            continue
        if status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
            state = "stopped"
        elif status == psutil.STATUS_RUNNING and not advanced:
            state = "not scheduled"
        elif status in (psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP) and not advanced:
            state = "sleeping"
        else:
            state = "running"
        found.append((_STALL_ORDER.index(state), w, state))
    found.sort(key=lambda f: (f[0], f[1].cpu))
    if not found:
        return RunTimeout(f"run made no progress, {elapsed:.1f} s into a run expected to "
                          f"take {expected:.1f} s; stopped")
    _, w, state = found[0]
    others = ", ".join(f"CPU {o.cpu} {st}" for _, o, st in found[1:9])
    if len(found) > 9:
        others += f" and {len(found) - 9} more"
    return Stalled(w.cpu, w.real, w.proc.pid, state, expected, elapsed,
                   f" (also unfinished: {others})" if others else "")


_STALL_ORDER = ("stopped", "not scheduled", "sleeping", "running")
