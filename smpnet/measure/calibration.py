"""Calibration profiles: the host kernel's costs, measured on this machine by
the `kernel` experiment, for the models to charge what they do not execute.

A profile is a small JSON file (`smpnet-bench kernel --save PATH`):

    {"kind": "smpnet-calibration", "version": 1, "smpnet": ..., "machine": {...},
     "tcp_rr": {"same-cpu": {"cycles": ..., "cycles_lo": ..., "cycles_hi": ..., "us": ...},
                "two-cpus": {...}},
     "veth_ping": {"first_us": ..., "later_us": ..., ...} or null,
     "sysctls": {...}}

What each model takes from it (docs/calibration.md):
- loopback: the host kernel's cycles per TCP request/response transaction
  on one CPU (`tcp_rr.same-cpu.cycles`). Each transaction does that, less
  what the model itself executes for one, as real work (stack_work()).
- arp: the real veth round trip (`veth_ping.later_us`): what one frame's
  trip over the emulated link costs, instead of a memory round trip.
A profile belongs to the machine and kernel it was measured on: loading
one from another CPU model or kernel release is refused.
"""
import json
import math
import os
import time

from .. import __version__, jsonfile
from ..errors import BadInput
from ..machine.sysinfo import machine_facts

KIND = "smpnet-calibration"
VERSION = 1
# a transaction's sends and receives: the client's request and the
# server's reply, each sent once and received once (loopback.h)
CALLS_PER_TRANSACTION = 4
# what must match between the machine a profile was measured on and this one
SAME_MACHINE = ("cpu_model", "kernel")


def add_option(p, default="(default: none, the raw model)",
               use="whose measured host-kernel costs the model charges"):
    p.add_argument("--calibration", metavar="PATH",
                   help=f"a calibration profile (smpnet-bench kernel --save PATH) {use} "
                        f"{default}; see docs/calibration.md")


def machine():
    """The facts a profile records about where it was measured."""
    f = machine_facts([])
    return {k: f[k] for k in ("cpu_model", "arch", "kernel", "hypervisor")}


def from_kernel(rows, params, tsc_hz):
    """A profile from the `kernel` experiment's rows and params."""
    tcp = {r["placement"]: {k: r[k] for k in ("cycles", "cycles_lo", "cycles_hi", "us")}
           for r in rows if r.get("test", "tcp_rr") == "tcp_rr"}
    return {"kind": KIND, "version": VERSION, "smpnet": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": dict(machine(), tsc_hz=tsc_hz), "tcp_rr": tcp,
            "veth_ping": veth_summary(rows), "referee": referee_summary(rows),
            "sysctls": params.get("sysctls", {})}


def referee_summary(rows):
    """The kernel as referee, kept with the profile: per op (contended ones
    named so), the kernel's and the model's cycles and their ratio with its
    interval; None where the referee did not run."""
    keys = ("kernel_cycles", "kernel_cycles_lo", "kernel_cycles_hi", "model_cycles",
            "model_over_kernel", "model_over_kernel_lo", "model_over_kernel_hi", "cpus",
            "model_test", "algo", "kernel_build")
    out = {r["test"]: {k: r.get(k) for k in keys}
           | {k: r[k] for k in ("irqs_off", "model_less", "judged_placement") if r.get(k)}
           for r in rows if "model_over_kernel" in r}
    return out or None


def referee_model_test(row):
    """What a referee row's model ran: its test, less its twin test (the
    row's `model_less`) where it has one."""
    return row["model_test"] + (f" less {row['model_less']}" if row.get("model_less") else "")


def veth_summary(rows):
    """The veth ping's first and later round trips (µs), from its rows."""
    by = {r["placement"]: r for r in rows if r.get("test") == "veth_ping"}
    out = {}
    for key, name in (("first", "veth first"), ("later", "veth later")):
        if name in by:
            out[f"{key}_us"] = by[name]["us"]
            out[f"{key}_cycles"] = by[name]["cycles"]
    return out or None


def dumps(profile):
    return json.dumps(profile, indent=2) + "\n"


def load(path):
    """The profile at PATH, checked; BadInput (one line) if it is not one,
    or was measured on another machine or kernel."""
    # bounded, and a FIFO or /dev/zero cannot hang it: as compare reads a result
    profile = jsonfile.read_json(path, f"--calibration {path}")
    if not isinstance(profile, dict) or profile.get("kind") != KIND:
        raise BadInput(f"--calibration {path}: not a calibration profile "
                       f"(make one with smpnet-bench kernel --save PATH)")
    if profile.get("version") != VERSION:
        raise BadInput(f"--calibration {path}: profile version {profile.get('version')!r}, "
                       f"this smpnet reads {VERSION}")
    check_figures(profile, path)
    here, there = machine(), profile.get("machine")
    if not isinstance(there, dict):
        raise BadInput(f"--calibration {path}: no machine facts")
    for k in SAME_MACHINE:
        if there.get(k) != here[k]:
            raise BadInput(f"--calibration {path}: measured with {k} {there.get(k)!r}, this "
                           f"machine has {here[k]!r}; measure one here "
                           f"(smpnet-bench kernel --save PATH)")
    return profile


# what a profile's figures may be: a transaction's cycles (40 ms at 2.5 GHz
# is far past any kernel's), a ping's µs; the runs charge them as work
MAX_CYCLES = 1e8
MAX_US = 1e5


def _number(x, low, high):
    return (isinstance(x, (int, float)) and not isinstance(x, bool)
            and math.isfinite(x) and low < x <= high)


def check_figures(profile, path):
    """BadInput unless the figures the models charge are numbers in range."""
    tcp = profile.get("tcp_rr")
    same = tcp.get("same-cpu") if isinstance(tcp, dict) else None
    if not isinstance(same, dict) or not _number(same.get("cycles"), 0, MAX_CYCLES):
        raise BadInput(f"--calibration {path}: tcp_rr same-cpu cycles must be a number in "
                       f"(0, {MAX_CYCLES:g}]")
    veth = profile.get("veth_ping")
    if veth is None:
        return
    if not isinstance(veth, dict) or not all(
            _number(veth.get(k), 0, MAX_US) for k in ("first_us", "later_us")):
        raise BadInput(f"--calibration {path}: veth_ping first_us and later_us must be "
                       f"numbers in (0, {MAX_US:g}] us")


def from_args(args):
    """What a calibrated experiment's params record: the profile given with
    --calibration and where it came from, or None."""
    path = getattr(args, "calibration", None)
    if path is None:
        return None
    return dict(load(path), source=os.path.abspath(path))


def tcp_rr_cycles(cal):
    """The host kernel's cycles per transaction, client and server on one
    CPU; None without a profile."""
    return cal["tcp_rr"]["same-cpu"]["cycles"] if cal else None


def veth_summary_of(cal):
    """A profile's veth ping (first_us, later_us, ...), or None."""
    veth = (cal or {}).get("veth_ping") or {}
    return veth if veth.get("later_us") and veth.get("first_us") else None


def arp_wire_us(cal):
    """What the arp model's frames cost on the wire, in µs: (an ARP request
    or reply, an echo request or reply), from the real veth ping: half a
    resolved round trip for each echo frame, half of what resolution adds to
    the first for each ARP frame. None without a veth ping in the profile."""
    veth = veth_summary_of(cal)
    if not veth:
        return None
    later = veth["later_us"]
    return max(0.0, veth["first_us"] - later) / 2, later / 2


def stack_work(kernel_cycles, model_cycles):
    """The stack work a transaction does so that it costs what the host
    kernel's does: the kernel's cycles less the model's own (never below
    zero: a model dearer than the kernel does none), split over the
    transaction's sends and receives."""
    work = max(0.0, kernel_cycles - model_cycles)
    return {"kernel_cycles": kernel_cycles, "model_cycles": model_cycles,
            "work_cycles": work, "per_call": int(round(work / CALLS_PER_TRANSACTION))}

