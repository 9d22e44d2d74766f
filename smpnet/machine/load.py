"""Competing load on the selected CPUs during a run: steal and other processes.

A verdict assumes its workers had the selected CPUs to themselves.  Two
things break that without showing in the samples: the hypervisor running
another guest on our vCPU (steal), and other processes of this machine being
scheduled on the selected CPUs.  `start` samples the kernel's per-CPU time
counters and this process tree's own CPU time before a run, `finish` samples
them again and says what share of the selected CPUs' time went to either.

    sample = load.start(cpus)
    ...                                 # the run; its workers reaped
    facts = load.finish(sample)         # {"high": ..., "why": ..., ...}

Cheap on purpose: one read of /proc/stat (through psutil), one times() call
and one small sysfs file per sample; no scan over all processes.

What "other processes" means, and the approximations:

- Busy time of a CPU is what the kernel counts as running something there:
  user, nice, system, irq and softirq.  Idle and iowait are not busy; steal
  is time the CPU did not run at all, reported on its own; guest and
  guest_nice are already inside user and nice.
- This process tree's CPU time is os.times(): this process's threads, and
  the children it has reaped (with the children those reaped).  smpnet's
  workers are forked children reaped before a run ends, so call `finish`
  after they are reaped: a child still alive then is counted as another
  process, and a child reaped by someone else is not ours at all.
- The tree's time is subtracted in full from the selected CPUs' busy time,
  though part of it may have run on CPUs outside the selection (the main
  process usually does).  That part makes others_share come out too low,
  never too high, so the warning errs towards silence; the result is
  clamped at 0.  Interrupts handled on the selected CPUs count as other
  load: they take the CPU from the workers just the same.
- The kernel counts per-CPU time in ticks of 1/USER_HZ (10 ms), so over a
  run of a second a share is good to about 1 % per CPU (and a share is
  capped at 1, which a tick's overshoot can pass). Each of the two samples
  can be a tick off on every CPU and on the tree's time, so a share is
  called high only when it is above the threshold by more than that
  (resolution_share): over a run of 50 ms on two CPUs, 60 % of their time
  could be counting alone, and a short run must not warn of load it cannot see.
"""

import os
import time
from dataclasses import dataclass

import psutil

from .cpus import format_cpus
from .sysinfo import CPU_DIR, _read_cpulist

# Above this share of the selected CPUs' time, competing load is reported.
# The smallest effect a seed claims is about 5 % (seed 002's +5 %); a
# competitor holding the CPUs for that share of the run takes as much time
# as the effect is worth, and unless it lands equally on both sides of a
# comparison (pairing evens out steady load, not bursts) it can make or hide
# the effect.  A quiet machine's own background (kernel threads, timers)
# is far below it: 0.5 % of two CPUs over two idle seconds on the 2-vCPU
# guest this was written on, so a quiet run does not warn.
HIGH_SHARE = 0.05
# One tick of the kernel's time counters (USER_HZ), seconds.
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")

# Fields of psutil's per-CPU times that are not time spent running
# something on that CPU: idle and iowait are idle, steal is time the
# hypervisor gave to someone else, and guest/guest_nice are already counted
# inside user/nice (so adding them would count that time twice).
NOT_BUSY = ("idle", "iowait", "steal", "guest", "guest_nice")


@dataclass(frozen=True)
class Sample:
    """What `start` returns and `finish` takes; its fields are not an API."""
    cpus: tuple      # the selected CPUs, sorted
    times: dict      # CPU number -> psutil per-CPU times, for the selected CPUs present
    clock: float     # time.monotonic(), seconds
    tree: float      # this process tree's CPU seconds so far


def _per_cpu_times(cpus):
    """CPU number -> psutil's times for that CPU, for those of `cpus` online.

    psutil lists the CPUs in /proc/stat's order, which holds online CPUs
    only: with a CPU offline, list index and CPU number part ways, so the
    index is mapped through the online list.  When that list cannot be read
    or does not match, index and number are taken to be the same (as they
    are with every CPU online).
    """
    rows = psutil.cpu_times(percpu=True)
    online = _read_cpulist("/", CPU_DIR + "/online")
    numbers = online if len(online) == len(rows) else range(len(rows))
    wanted = set(cpus)
    return {cpu: row for cpu, row in zip(numbers, rows) if cpu in wanted}


def _tree_seconds():
    """CPU seconds of this process and of the children it has reaped."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def start(cpus):
    """Sample the selected CPUs (an iterable of CPU numbers) before a run."""
    cpus = tuple(sorted(set(cpus)))
    if not cpus:
        raise ValueError("no CPUs to sample")
    # The tree's time is read outside the CPUs' (first here, last in
    # finish), so that what these calls cost is subtracted as ours rather
    # than counted as another process's.
    tree = _tree_seconds()
    times = _per_cpu_times(cpus)
    return Sample(cpus, times, time.monotonic(), tree)


def _busy(row):
    return sum(getattr(row, f) for f in row._fields if f not in NOT_BUSY)


def _percent(share):
    return "%d %%" % round(100 * share)


def _where(cpus):
    if not cpus:
        return "no CPU"
    return "%s %s" % ("CPU" if len(cpus) == 1 else "CPUs", format_cpus(cpus))


def finish(sample):
    """Sample again and say how much of the selected CPUs others had.

    Returns a dict (shares are of the selected CPUs' time, wall seconds
    times the number of CPUs measured, so 1.0 means all of it):

      cpus         the CPUs measured: those selected and online at both samples
      seconds      wall time between the samples (monotonic), seconds
      busy_share   time the CPUs ran anything, this process tree included
      others_share busy time less this process tree's CPU time, clamped at 0
      steal_share  time the hypervisor gave the CPUs to someone else
      steal_known  False where the platform reports no steal (steal_share is then 0)
      threshold    HIGH_SHARE, the share above which load is reported
      resolution_share  what the tick counting alone can put in others_share:
                   a tick off at each sample on each CPU and on the tree's time
      high         steal_share or others_share above the threshold by more
                   than the resolution (steal's: its CPUs' ticks only)
      why          one line saying what was high, or None
    """
    clock = time.monotonic()
    times = _per_cpu_times(sample.cpus)
    tree = _tree_seconds()
    seconds = clock - sample.clock
    cpus = [cpu for cpu in sample.cpus if cpu in sample.times and cpu in times]

    busy = steal = 0.0
    steal_known = bool(cpus)
    for cpu in cpus:
        before, after = sample.times[cpu], times[cpu]
        # The counters only grow; should one still read smaller the second
        # time, that is taken as no time rather than negative time.
        busy += max(0.0, _busy(after) - _busy(before))
        if hasattr(after, "steal") and hasattr(before, "steal"):
            steal += max(0.0, after.steal - before.steal)
        else:
            steal_known = False
    others = max(0.0, busy - (tree - sample.tree))

    capacity = seconds * len(cpus)

    def share(cpu_seconds):
        if capacity <= 0:  # no time passed, or no CPU measured: nothing to share
            return 0.0
        # Counted in whole ticks, a CPU can show a tick more than the wall
        # time; a share is of the time there was, so it stops at all of it.
        return min(1.0, cpu_seconds / capacity)

    facts = {
        "cpus": cpus,
        "seconds": seconds,
        "busy_share": share(busy),
        "others_share": share(others),
        "steal_share": share(steal) if steal_known else 0.0,
        "steal_known": steal_known,
        "threshold": HIGH_SHARE,
        "resolution_share": share(2 * TICK_S * (len(cpus) + 1)),
    }

    where = _where(cpus)
    reasons = []
    if facts["others_share"] > HIGH_SHARE + facts["resolution_share"]:
        reasons.append("other processes used %s of %s during the run"
                       % (_percent(facts["others_share"]), where))
    if facts["steal_share"] > HIGH_SHARE + share(2 * TICK_S * len(cpus)):
        reasons.append("the hypervisor stole %s of %s during the run"
                       % (_percent(facts["steal_share"]), where))
    facts["high"] = bool(reasons)
    facts["why"] = "; ".join(reasons) or None
    return facts


# One list of run samples per around() in progress: while there is one,
# Machine.run samples its own CPUs around each of its runs (a side of a
# pair) and adds the sample to the innermost, so that a burst of load during
# one run shows, which the whole stage's average would dilute.
_recording = []


def run_started(cpus):
    """A sample of a machine's real CPUs before one of its runs, or None when
    no around() is recording (the run is then not sampled)."""
    return start(cpus) if _recording else None


def run_finished(sample):
    """Record the load of one run (after its workers are reaped)."""
    if sample is not None and _recording:
        _recording[-1].append(finish(sample))


def runs_summary(samples):
    """What the runs' own samples saw: how many, and the busiest run's
    shares (a run of 0.1 s on 2 CPUs counts in steps of 5 %: the 10 ms
    ticks of the counters; no high-load verdict comes from one run)."""
    out = {"count": len(samples), "others_share_max": None, "steal_share_max": None,
           "seconds_min": None}
    if samples:
        out.update(others_share_max=max(x["others_share"] for x in samples),
                   steal_share_max=max(x["steal_share"] for x in samples),
                   seconds_min=min(x["seconds"] for x in samples))
    return out


def around(cpus, run):
    """run(), with the load on `cpus` sampled before and after it (finish()
    after run() returns: its workers are reaped by then), and every machine
    run inside it sampled on its own CPUs (Machine.run). Returns (what run
    returned, the load dict, with "runs": runs_summary()); each verdict of
    the result is given the load as "load" by the caller (experiment
    records have no place for it)."""
    sample = start(cpus)
    _recording.append([])
    try:
        out = run()
    finally:
        runs = _recording.pop()
    return out, dict(finish(sample), runs=runs_summary(runs))


def mark(verdicts, seen):
    """Give every verdict the load seen around its run; the warning to show
    when the load was high enough to matter (a list: none or one), for a
    run without verdicts too: its figures may be what later verdicts
    charge (the kernel's calibration)."""
    for v in verdicts:
        v["load"] = seen
    if seen["high"]:
        return [f"competing load during the run: {seen['why']}; its "
                f"{'verdicts' if verdicts else 'figures'} are less reliable"]
    return []


def _shares(others, steal, steal_known):
    return f"others {_percent(others)}, steal " + (_percent(steal) if steal_known
                                                   else "not reported")


def describe(seen, during="the run"):
    """The load seen, in a line, whatever its size: what a verdict whose
    A/A control found a difference says, so that a reader can tell a loaded
    machine from a pipeline that cannot tell identical sides apart."""
    text = (f"load on {_where(seen.get('cpus'))} during {during}: "
            + _shares(seen["others_share"], seen["steal_share"], seen.get("steal_known", True)))
    runs = seen.get("runs") or {}
    if runs.get("count"):
        n = runs["count"]
        text += (f" (sampled run by run, {n} run{'s' if n != 1 else ''}; the most in one: "
                 + _shares(runs["others_share_max"], runs["steal_share_max"],
                           seen.get("steal_known", True)) + ")")
    return text
