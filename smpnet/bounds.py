"""The bounds of every numeric option, and the one-hour rule.

One table: the command line's parsers take their limits from it, and
docs/cli.md's table is checked against it by a test. A value outside its
bound is refused before anything starts (one line, exit code 2), so no
option can make smpnet build a plan without end, wrap a C counter, or run
for ever. Within the bounds, a request whose estimated run time is over an
hour is refused too, unless the user asks for it with --long.
"""
import re

from .errors import BadInput
from .machine import layout
from .machine.machine import MAX_CPUS, MAX_NUMNODES

MAX_SKBS = 1 << 40         # --skbs
MAX_PACKETS = 1 << 40      # --packets
MAX_DEFER_MAX = 1 << 16    # --defer-max
MAX_REPEAT = 1000          # --repeat: runs per strategy or mode; the plan is built in memory
MAX_TRIALS = 100_000       # --trials
MAX_COUNT = 64             # --count: pings per trial, as ping -c

LONG_RUN_S = 3600.0
# A run of --duration 3600 (the bound) is an hour and its start-up: allowed.
LONG_RUN_GRACE = 1.05

# option: (lowest, highest, unit). Where a bound comes from:
#   --ncpus      Machine.MAX_CPUS (qspinlock's tail field allows 16383)
#   --numa-nodes Machine.MAX_NUMNODES (x86's NODES_SHIFT of 10), and no more than ab's CPUs
#   --loops      a round of 1e9 ops takes seconds to a minute
#   --referee-rounds  6 (stats.MIN_SAMPLES) for a 95 % interval; 1000 rounds of ~0.3 s
#   --hold-cycles, --think-cycles  about 4 s at 2.5 GHz; each must also fit in --duration
#   --scale      Machine.MAX_CPUS, and no more than the CPUs given unless --oversubscribe
#   --rng-seed   any 64-bit value numpy's generator takes
#   --skbs, --packets  2^40: far past an hour at any rate seen, below every C counter
#   --defer-max  65536, the pool is sized from it
#   --batch      layout.SKB_RING_SIZE, the ring's length
#   --size       65535, an IPv4 datagram
#   --count      64, ping results per trial in the segment
#   --transactions  10^8: minutes per round at the ~7 µs a loopback one costs
#   --ipi-cycles, --ipi-entry-cycles  10^7: about 4 ms an IPI at 2.5 GHz, past
#                any machine's (tens of thousands of cycles in a nested guest)
#   --trials     100000 (20 with --peer-down: each waits ~3 s)
BOUNDS = {
    "--ncpus": (1, MAX_CPUS, "emulated CPUs"),
    "--numa-nodes": (1, MAX_NUMNODES, "NUMA nodes"),
    "--loops": (1, 10**9, "ops per round"),
    "--rounds": (1, 1000, "rounds"),
    "--referee-rounds": (6, 1000, "rounds"),
    "--hold-cycles": (0, 10**10, "TSC cycles"),
    "--think-cycles": (0, 10**10, "TSC cycles"),
    "--scale": (1, MAX_CPUS, "CPUs"),
    "--rng-seed": (0, 2**64 - 1, "RNG seed"),
    "--duration": (0.001, 3600.0, "seconds"),
    "--rx-cpus": (1, MAX_CPUS - 1, "CPUs"),
    "--skbs": (1, MAX_SKBS, "skbs"),
    "--defer-max": (1, MAX_DEFER_MAX, "skbs"),
    "--batch": (1, layout.SKB_RING_SIZE, "skbs"),
    "--repeat": (1, MAX_REPEAT, "runs"),
    "--packets": (1, MAX_PACKETS, "packets"),
    "--size": (1, 65535, "bytes"),
    "--trials": (1, MAX_TRIALS, "trials"),
    "--count": (1, MAX_COUNT, "pings"),
    "--hz": (100, 1000, "Hz"),
    "--transactions": (1, 10**8, "transactions"),
    "--ipi-cycles": (0, 10**7, "TSC cycles"),
    "--ipi-entry-cycles": (0, 10**7, "TSC cycles"),
}

_INTEGER = re.compile(r"[0-9]{1,20}")
_DECIMAL = re.compile(r"[0-9]{1,12}(\.[0-9]{0,12})?|\.[0-9]{1,12}")


def parse(option, text):
    """An option's value within its bound: a whole number in ASCII digits
    (int() would also take '1_000', '+1' and full-width digits), or for
    seconds a plain decimal number."""
    low, high, unit = BOUNDS[option]
    seconds = isinstance(high, float)
    pattern, kind = (_DECIMAL, "plain decimal number") if seconds else (_INTEGER, "whole number")
    bound = f"give {_num(low)} to {_num(high)} {unit}"
    if not pattern.fullmatch(text):
        raise BadInput(f"{text!r} is not a {kind} ({bound})")
    value = float(text) if seconds else int(text)
    if not low <= value <= high:
        raise BadInput(f"{text} is out of range ({bound})")
    return value


# the options that take a comma list of values, each within its bound (a sweep)
LISTS = ("--hold-cycles", "--think-cycles", "--scale", "--ipi-cycles")
MAX_LIST = 64   # points of one sweep: each is a whole set of repeated runs


def parse_list(option, text):
    """A comma list of an option's values ('0,100,1000'), each within its
    bound; no empty item, no value twice. Returns them as given."""
    items = text.split(",")
    if len(items) > MAX_LIST:
        raise BadInput(f"{len(items)} values: give at most {MAX_LIST}")
    values = []
    for item in items:
        if not item:
            raise BadInput(f"{text!r} has an empty item (give a comma list such as 0,100,1000)")
        values.append(parse(option, item))
    if len(set(values)) != len(values):
        raise BadInput(f"a value is listed twice in {text!r}")
    return values


def _num(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


def check_run_time(seconds, allow_long):
    """Refuse a run estimated at over an hour unless --long was given."""
    if seconds > LONG_RUN_S * LONG_RUN_GRACE and not allow_long:
        raise BadInput(f"this run would take about {_duration(seconds)} (estimated): "
                       f"over an hour, so pass --long if you mean it")


def _duration(seconds):
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.3g} days"
