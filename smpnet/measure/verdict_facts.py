"""The machine fact behind a verdict's size.

A verdict says "smaller than the seed's" or "reproduced"; how large an
effect can be here is set by a cost of this machine that the seed's machine
had at another size, or by a setting. Each verdict whose size depends on one
carries it as `machine_fact`, beside the seed's own, so that the label reads
with its reason:

- 003 (`pushf_pop`): this CPU's flags save, the `pushf; pop` that irqsave
  does and irq does not, measured by irqsave's control
  (lockbench.CONTROL), against the seed's 14 cycles on its E5-1650 v4.
- 002 (`tcp_rr`): the host kernel's cycles per TCP request/response, from
  the calibration profile that was charged (calibration.py), or that none
  was and a transaction cost only the model's own cycles; the seed's
  tbench transaction cost what 2008's whole stack cost, a figure it did not
  give.
- 000 (`tick`): the HZ and where in the tick each ping was sent (the send
  phase), which fix the timer mode's wait, with the timer-mode first pings'
  measured median in ticks; the seed's was HZ=100.

`line(fact)` says one in a sentence; report.verdict_lines prints it under
the verdict's figure and run_all under the verdict table.
"""
from ..machine import kernel_build, sysinfo
from ..seeds import SEED_MACHINE
from . import calibration

PHASE_MEANS = {
    "tick": "each ping sent just after a tick boundary, so the request waits almost a "
            "whole tick",
    "uniform": "each ping sent at a random point of a tick, so the request waits the rest "
               "of it, half a tick on average",
}


# The entry points seed 003 compares (irqsave's pair against irq's)
SEED_003_ENTRY_POINTS = ("spin_lock_irqsave", "spin_unlock_irqrestore", "spin_lock_irq",
                         "spin_unlock_irq")


def pushf_pop(control, cpu=None, build=None, model="inline"):
    """Seed 003's fact from a verdict's `pushf_control` (None: irqsave's
    control did not run, and the cost is not known), with which of the
    seed's entry points this host's kernel calls out of line (`build`:
    kernel_build.kernel_build(), read here when not given) and which the
    kernel build the figures modelled (`model`) calls: a call's cost is in
    a figure only where the modelled build makes one."""
    seed = SEED_MACHINE["003"]
    build = kernel_build.kernel_build() if build is None else build
    fact = {"fact": "pushf_pop", "what": "flags save (pushf; pop)",
            "cpu": cpu or sysinfo.cpu_model(), "cycles": None, "interval": None, "unit": "cycles",
            "seed_cpu": seed["cpu"], "seed_cycles": seed["cycles"],
            "host_build_source": build["source"],
            "host_calls": None if build["calls"] is None else
            [e for e in SEED_003_ENTRY_POINTS if e in build["calls"]],
            "kernel_build": model,
            "model_calls": [e for e in SEED_003_ENTRY_POINTS if e in kernel_build.calls_of(model)]}
    if control and control.get("pushf_pop_cycles") is not None:
        fact.update(cycles=control["pushf_pop_cycles"],
                    interval=list(control["pushf_pop_interval"]))
    return fact


def tcp_rr(profile, v, cpu=None):
    """Seed 002's fact: the host kernel's cycles per TCP request/response
    from `profile` (the calibration profile the run charged; None: none
    was, and a transaction costs what the model executes for one, from the
    verdict's breakdown)."""
    seed = SEED_MACHINE["002"]
    fact = {"fact": "tcp_rr", "cpu": cpu or sysinfo.cpu_model(), "charged": profile is not None,
            "cycles": None, "interval": None, "us": None, "source": None,
            # what the model executes for one transaction: the sizing run's,
            # or uncalibrated a netif_rx transaction's whole cost
            "model_cycles": ((v.get("calibration") or {}).get("model_cycles") if profile
                             else (v.get("breakdown") or {}).get("transaction_cycles")),
            "seed_machine": seed["machine"], "seed_cycles": seed["cycles"]}
    if profile is not None:
        same = profile["tcp_rr"]["same-cpu"]
        lo, hi = same.get("cycles_lo"), same.get("cycles_hi")
        fact.update(cycles=calibration.tcp_rr_cycles(profile),
                    interval=[lo, hi] if lo is not None and hi is not None else None,
                    us=same.get("us"),
                    source=(f"the profile {profile['source']}, measured "
                            f"{profile.get('created', 'at an unknown time')}"
                            if profile.get("source") else "measured in this run"))
        fact["cpu"] = (profile.get("machine") or {}).get("cpu_model") or fact["cpu"]
    return fact


def tick(hz, phase, timer_median_ticks):
    """Seed 000's fact: the HZ, the send phase and the timer-mode first
    pings' median in ticks (measured)."""
    seed = SEED_MACHINE["000"]
    return {"fact": "tick", "hz": hz, "tick_ms": 1000.0 / hz, "phase": phase,
            "phase_means": PHASE_MEANS.get(phase), "timer_median_ticks": timer_median_ticks,
            "seed_hz": seed["hz"], "seed_first_ms": seed["first_ms"]}


def _host_calls(fact):
    """Seed 003's fact's last clauses: the host kernel's calls, and the
    modelled build's."""
    if "host_calls" not in fact:            # a result written before it was recorded
        return ""
    model = fact.get("kernel_build", "inline")      # before builds, every result's
    model_calls = fact.get("model_calls", [])
    modelled = (f"; modelled as {model}: " + (f"{', '.join(model_calls)} out of line"
                                              if model_calls else "all four inline"))
    if fact["host_calls"] is None:
        return "; this host's kernel build is not known (no config readable)" + modelled
    calls = fact["host_calls"]
    where = f"this host's kernel ({fact['host_build_source']})"
    if not calls:
        return f"; {where} inlines all four" + modelled
    return f"; {where} calls {', '.join(calls)} out of line" + modelled


def _cycles(x):
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def line(fact):
    """The fact in one sentence, or None for a fact this smpnet does not know."""
    kind = fact.get("fact")
    if kind == "pushf_pop":
        seed = f"the seed's {fact['seed_cycles']:g} on the {fact['seed_cpu']}"
        if fact["cycles"] is None:
            return (f"this CPU's {fact['what']} was not measured ({fact['cpu']}: irqsave's "
                    f"control did not run); {seed}" + _host_calls(fact))
        lo, hi = fact["interval"]
        return (f"this CPU's {fact['what']} costs {_cycles(fact['cycles'])} "
                f"[{_cycles(lo)} .. {_cycles(hi)}] cycles ({fact['cpu']}) against {seed}"
                + _host_calls(fact))
    if kind == "tcp_rr":
        seed = (f"the seed's tbench transaction on {fact['seed_machine']} ran that year's whole "
                f"TCP stack, " + ("its cost not given" if fact["seed_cycles"] is None
                                  else f"{_cycles(fact['seed_cycles'])} cycles"))
        if not fact["charged"]:
            own = ("not measured" if fact["model_cycles"] is None
                   else f"{_cycles(fact['model_cycles'])} cycles measured here")
            return (f"no calibration profile was charged: a transaction cost only what the "
                    f"model executes, {own}; {seed}")
        where = (f" [{_cycles(fact['interval'][0])} .. {_cycles(fact['interval'][1])}]"
                 if fact["interval"] else "")
        us = f" ({fact['us']:.1f} us)" if fact["us"] is not None else ""
        return (f"this kernel's TCP request/response costs {_cycles(fact['cycles'])}{where} "
                f"cycles{us} a transaction, client and server on one CPU ({fact['cpu']}, "
                f"{fact['source']}), the cost charged; {seed}")
    if kind == "tick":
        measured = ("" if fact["timer_median_ticks"] is None else
                    f"; timer-mode first pings' median {fact['timer_median_ticks']:.2f} tick, "
                    f"measured")
        return (f"HZ={fact['hz']} (a {fact['tick_ms']:g} ms tick), phase {fact['phase']}: "
                f"{fact['phase_means'] or 'an unknown send phase'}{measured}; the seed's: "
                f"HZ={fact['seed_hz']}, first ping {fact['seed_first_ms']:g} ms")
    return None
