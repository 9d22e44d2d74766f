"""The host kernel's build, as far as locks go: read from its config.

A kernel's spin_lock() is a call or inline code depending on how it was
built (kernel/Kconfig.locks, include/linux/spinlock_api_smp.h): every
entry point but the plain unlock is inline only where its INLINE_SPIN_*
option is set (those are def_bool y depending on ARCH_INLINE_SPIN_*, which
x86 never selects, except INLINE_SPIN_UNLOCK_IRQ, which holds on a kernel
without PREEMPTION), and the plain unlock is inline unless
UNINLINE_SPIN_UNLOCK is set (PREEMPTION and DEBUG_SPINLOCK builds select
it). The config records the options' results, so which entry points are
calls is read off it, not derived. Where the kernel returns through a
return thunk (MITIGATION_RETHUNK, and the CPU's mitigation of
retbleed/SRSO in sysfs), every such call also pays that return.

smpnet's lock model inlines every entry point whatever the host's build
(docs/experiments/locks.md, "The host kernel's build"); this module says
what the host's build is, so that a reader can tell what smpnet's figures
leave out.
"""
import gzip
import os
import platform

# Where a running kernel's config can be read, in order; {release}: uname -r.
SOURCES = ("/proc/config.gz", "/boot/config-{release}")

# Each lock entry point and the option under which it is inline code
# (spinlock_api_smp.h's `#ifdef CONFIG_INLINE_SPIN_LOCK`, ...).
INLINED_BY = {
    "spin_lock": "INLINE_SPIN_LOCK",
    "spin_lock_bh": "INLINE_SPIN_LOCK_BH",
    "spin_lock_irq": "INLINE_SPIN_LOCK_IRQ",
    "spin_lock_irqsave": "INLINE_SPIN_LOCK_IRQSAVE",
    "spin_unlock_bh": "INLINE_SPIN_UNLOCK_BH",
    "spin_unlock_irq": "INLINE_SPIN_UNLOCK_IRQ",
    "spin_unlock_irqrestore": "INLINE_SPIN_UNLOCK_IRQRESTORE",
}
# The plain unlock is the other way round: a call only under this option.
UNINLINE_UNLOCK = "UNINLINE_SPIN_UNLOCK"

# The config options a result records, besides those above.
OPTIONS = ("PREEMPTION", "PREEMPT_DYNAMIC", "PREEMPT_NONE", "PREEMPT_VOLUNTARY", "PREEMPT",
           "DEBUG_SPINLOCK", "PARAVIRT_SPINLOCKS", "MITIGATION_RETHUNK")

# sysfs's word on the return-thunk mitigations, per vulnerability
VULNERABILITIES = ("retbleed", "spec_rstack_overflow")
VULN_DIR = "/sys/devices/system/cpu/vulnerabilities"


def _path(root, path):
    return os.path.join(root, path.lstrip("/"))


def read_config(root="/", release=None):
    """(where it was read, {option without CONFIG_: value}) from the first
    readable source, or (None, {}) when none is."""
    release = release or platform.release()
    for source in SOURCES:
        path = _path(root, source.format(release=release))
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt", errors="replace") as f:
                text = f.read()
        except (OSError, EOFError):
            continue
        options = {}
        for line in text.splitlines():
            if line.startswith("CONFIG_") and "=" in line:
                name, _, value = line[len("CONFIG_"):].partition("=")
                options[name] = value.strip()
        return source.format(release=release), options
    return None, {}


def _vulnerabilities(root):
    out = {}
    for name in VULNERABILITIES:
        try:
            with open(_path(root, f"{VULN_DIR}/{name}")) as f:
                out[name] = f.read().strip()
        except OSError:
            pass
    return out


def kernel_build(root="/", release=None):
    """The host kernel's lock build: {source (None: no config readable),
    options (OPTIONS: True/False), calls (entry points that are out-of-line
    calls), inline (those that are inline code), return_thunk (sysfs's
    mitigation lines)}; calls and inline are None without a config."""
    source, cfg = read_config(root, release)
    facts = {"source": source, "options": {o: cfg.get(o) == "y" for o in OPTIONS} if source
             else {}, "calls": None, "inline": None, "return_thunk": _vulnerabilities(root)}
    if source is None:
        return facts
    calls = {e for e, option in INLINED_BY.items() if cfg.get(option) != "y"}
    if cfg.get(UNINLINE_UNLOCK) == "y":
        calls.add("spin_unlock")
    every = ["spin_lock", "spin_unlock"] + list(INLINED_BY)[1:]
    facts["calls"] = [e for e in every if e in calls]
    facts["inline"] = [e for e in every if e not in calls]
    return facts


def describe(facts):
    """The build in a line, for info and seed 003's machine fact."""
    if facts["source"] is None:
        return ("not known: no kernel config readable (" + ", ".join(SOURCES) + "); "
                "smpnet inlines every lock entry point")
    o = facts["options"]
    model = ("PREEMPTION" + (" (PREEMPT_DYNAMIC)" if o.get("PREEMPT_DYNAMIC") else "")
             if o.get("PREEMPTION") else "no PREEMPTION")
    calls = ", ".join(facts["calls"]) or "none"
    inline = ", ".join(facts["inline"]) or "none"
    line = f"{model}; calls: {calls}; inline: {inline} (from {facts['source']})"
    if o.get("PARAVIRT_SPINLOCKS"):
        line += "; PARAVIRT_SPINLOCKS"
    if o.get("MITIGATION_RETHUNK"):
        line += "; MITIGATION_RETHUNK"
    return line + "; smpnet inlines every entry point"
