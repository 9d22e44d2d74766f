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
retbleed/SRSO/ITS in sysfs), every such call also pays that return.

smpnet's lock model follows a named build (--kernel-build, the core's
kernel_build.h): two facts, the shape (each entry point inline code or a
call of an out-of-line copy, spinlock_api_smp.h) and the return (a plain
`ret`, SRSO's safe-RET thunk, or a `jmp` to a `ret`), named together as
SHAPE or SHAPE+RETURN. This module says what the host's build is, and
which named build models it (`host`, the default);
docs/experiments/locks.md, "Kernel builds", has the table.
"""
import gzip
import os
import platform

from .. import _core
from ..errors import BadInput
from .cpus import parse_cpulist

# The named builds smpnet models, in the core's order, and `host`: the one
# the host's config matches.
BUILDS = tuple(sorted(_core.KERNEL_BUILDS, key=_core.KERNEL_BUILDS.get))
HOST = "host"
# Where no config is readable: the build of today's distribution kernels
# (PREEMPT_DYNAMIC, so PREEMPTION: every entry point a call).
FALLBACK = "x86-preempt"
# The shapes (what is a call) and the returns, each build's name the two
# together: a shape, or a shape and a return's suffix (the inline shape has
# no return of its own). A thunk return only where the core could build it
# (GCC on x86).
SHAPES = tuple(sorted(_core.KERNEL_SHAPES, key=_core.KERNEL_SHAPES.get))
SAFE_RET = "+safe-ret"      # SRSO's safe-RET thunk: every return mispredicts
RET_THUNK = "+ret-thunk"    # a jmp to a `ret; int3`: retbleed's untrained thunk, ITS's
assert set(_core.KERNEL_RETURNS) == {"", SAFE_RET, RET_THUNK}

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
           "DEBUG_SPINLOCK", "PARAVIRT", "PARAVIRT_SPINLOCKS", "MITIGATION_RETHUNK",
           "TRACE_IRQFLAGS")

# sysfs's word on the return-thunk mitigations, per vulnerability
VULNERABILITIES = ("retbleed", "spec_rstack_overflow", "indirect_target_selection")
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
                f"--kernel-build host models {FALLBACK}")
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
    if o.get("TRACE_IRQFLAGS"):
        line += ("; TRACE_IRQFLAGS (local_bh_disable() a call and IRQ state traced, which no "
                 "build models)")
    return line + f"; --kernel-build host models {host_model(facts)[0]}"


def split(name):
    """A build's name as its two facts: (shape, return suffix or "")."""
    for ret in (SAFE_RET, RET_THUNK):
        if name.endswith(ret):
            return name[:-len(ret)], ret
    return name, ""


def safe_ret(facts):
    """Whether the host's kernel returns through SRSO's safe-RET thunk: sysfs
    says "Safe RET" (also "Vulnerable: Safe RET, no microcode", where the
    kernel applies the thunk all the same: arch/x86/kernel/cpu/bugs.c)."""
    return "safe ret" in facts.get("return_thunk", {}).get("spec_rstack_overflow", "").lower()


def untrained_ret(facts):
    """Whether the host's kernel returns through retbleed's untrained return
    thunk (bugs.c's RETBLEED_MITIGATION_UNRET: "Mitigation: untrained return
    thunk"), a `jmp` to retbleed_return_thunk's `ret; int3` from every function."""
    return "untrained return thunk" in facts.get("return_thunk", {}).get("retbleed", "").lower()


def its_thunks(facts):
    """Whether ITS's aligned thunks are on ("Mitigation: Aligned branch/return
    thunks"): alternative.c's cpu_wants_rethunk_at() sends a return through
    its_return_thunk only where the `ret` would lie in the lower half of its
    64-byte line, so some of a kernel's returns, which ones its link decides."""
    line = facts.get("return_thunk", {}).get("indirect_target_selection", "").lower()
    return "aligned branch/return thunks" in line


def calls_of(name):
    """The entry points build `name` makes out-of-line calls."""
    return _core.kernel_build_calls(_core.KERNEL_BUILDS[name])


def host_model(facts):
    """(the named build that models the host's, how it was chosen): the
    shape whose calls are the host's (x86-debug where DEBUG_SPINLOCK is
    set), the nearest by entry points where none is, FALLBACK where no
    config is readable; with the return the host's kernel makes (sysfs):
    SRSO's safe-RET thunk, else retbleed's untrained return thunk, else a
    plain `ret` (ITS's thunks, which only some returns take, said)."""
    shape, why = _host_shape(facts)
    vuln = facts.get("return_thunk", {})
    if shape == "inline":
        return shape, why
    if safe_ret(facts):
        ret, how = SAFE_RET, f"SRSO's safe-RET thunk ({vuln['spec_rstack_overflow']})"
    elif untrained_ret(facts):
        ret, how = RET_THUNK, f"retbleed's untrained return thunk ({vuln['retbleed']})"
    elif its_thunks(facts):
        return shape, why + (f"; ITS's return thunk ({vuln['indirect_target_selection']}) "
                             "takes only the returns in the lower half of a 64-byte line, "
                             f"which this kernel's link places: plain returns modelled, "
                             f"{shape + RET_THUNK} is the bound with every return thunked")
    else:
        return shape, why
    if not _core.RETURN_THUNK_MODELLED:
        return shape, why + (f"; its returns go through {how}, which this build of smpnet "
                             "cannot model (it needs GCC on x86)")
    return shape + ret, why + f"; every return through {how}"


def _host_shape(facts):
    if facts["source"] is None:
        return FALLBACK, (f"no kernel config readable ({', '.join(SOURCES)}): {FALLBACK}, "
                          "the build of today's distribution kernels (PREEMPT_DYNAMIC)")
    if facts["options"].get("DEBUG_SPINLOCK"):
        return "x86-debug", f"DEBUG_SPINLOCK is set ({facts['source']})"
    host = set(facts["calls"])
    named = [b for b in SHAPES if b != "x86-debug"]
    exact = [b for b in named if set(calls_of(b)) == host]
    if exact:
        return exact[0], f"its calls are the host's ({facts['source']})"
    near = min(named, key=lambda b: len(set(calls_of(b)) ^ host))
    return near, (f"the nearest: no named build calls exactly the host's entry points "
                  f"({', '.join(facts['calls']) or 'none'}, from {facts['source']})")


def resolve(names, facts=None):
    """The builds a run models, for `names` (names of BUILDS or HOST):
    ([build, ...] without repeats, {"asked": names, "host": build or None,
    "host_why": how the host's was chosen or None, "host_source": the config
    read or None}). facts: kernel_build(), read here when needed."""
    out, host, why, source = [], None, None, None
    for name in names:
        if name == HOST:
            facts = kernel_build() if facts is None else facts
            host, why = host_model(facts)
            source = facts["source"]
            name = host
        elif name not in BUILDS:
            raise BadInput(f"unknown kernel build {name!r}: choose a shape ("
                           f"{', '.join(SHAPES)}), an x86 one with {SAFE_RET} or {RET_THUNK} "
                           f"(e.g. x86-preempt{SAFE_RET}), or {HOST}")
        elif split(name)[1] and not _core.RETURN_THUNK_MODELLED:
            raise BadInput(f"kernel build {name!r} needs smpnet built by GCC on x86 (its "
                           "return thunk); this one was not")
        if name not in out:
            out.append(name)
    return out, {"asked": list(names), "host": host, "host_why": why, "host_source": source}


def describe_model(name, record=None):
    """The build a result modelled, in a line: its name, how `host` chose it,
    and which entry points it calls (and local_bh_enable(), a call in every
    x86 build)."""
    calls = calls_of(name)
    what = ("every entry point inline" if not calls else
            "every entry point a call" if len(calls) == len(_core.SPIN_ENTRIES) else
            f"calls: {', '.join(calls)}; inline: "
            + ", ".join(e for e in _core.SPIN_ENTRIES if e not in calls))
    if calls:   # __local_bh_enable_ip() is out of line in every kernel (irqflags.h)
        what += "; local_bh_enable() a call too"
    ret = split(name)[1]
    if calls and ret == SAFE_RET:
        what += "; every call returns through SRSO's safe-RET thunk"
    elif calls and ret == RET_THUNK:
        what += "; every call returns through a jmp to a `ret` (retbleed's untrained thunk, ITS's)"
    host = ""
    if record and record.get("host") == name:
        host = f" (the host's build: {record['host_why']})"
    return f"{name}{host}; {what}"


# ------------------------------------------------------------------ the lock a kernel here runs

# The bits of KVM's CPUID leaf 0x40000001 (sysinfo.cpuid_kvm()) the choice
# reads: a feature (eax) and a hint (edx)
KVM_FEATURE_PV_UNHALT = 7
KVM_HINTS_REALTIME = 0


def _possible_cpus(root):
    try:
        with open(_path(root, "/sys/devices/system/cpu/possible")) as f:
            return len(parse_cpulist(f.read().strip()))
    except (OSError, ValueError):
        return None


def _cmdline(root):
    try:
        with open(_path(root, "/proc/cmdline")) as f:
            return f.read().split()
    except OSError:
        return []


def host_lock(hypervisor, facts=None, root="/", kvm=None):
    """(the algorithm a kernel on this host runs for its spinlocks, why), as
    arch/x86/kernel/kvm.c's kvm_spinlock_init() and paravirt.c decide it:
    qspinlock on bare metal and where PV spinlocks are off; pvqspinlock in
    a KVM guest with PARAVIRT_SPINLOCKS and the host's PV_UNHALT, unless the
    REALTIME hint, one possible CPU or `nopvspin` turns it off; virt_tas
    (virt_spin_lock()'s test-and-set) in a guest without PV_UNHALT, or with
    PARAVIRT but no PARAVIRT_SPINLOCKS. hypervisor: sysinfo's name, None
    on bare metal; facts: kernel_build(), read when None; kvm: (features,
    hints) of KVM's CPUID leaf (sysinfo.cpuid_kvm()), None: none read."""
    facts = kernel_build(root) if facts is None else facts
    if not hypervisor:
        return "qspinlock", "no hypervisor: the native qspinlock"
    o = facts["options"]
    if facts["source"] is None:
        return "qspinlock", f"under {hypervisor}, kernel config not readable: assumed native"
    if not o.get("PARAVIRT"):
        return "qspinlock", f"under {hypervisor}, but no PARAVIRT: the native qspinlock"
    if hypervisor != "KVM":
        return "qspinlock", (f"under {hypervisor}: its PV spinlocks are not modelled; the "
                             "native qspinlock assumed")
    if not o.get("PARAVIRT_SPINLOCKS"):
        return "virt_tas", "KVM guest without PARAVIRT_SPINLOCKS: virt_spin_lock()'s test-and-set"
    features, hints = kvm if kvm is not None else (0, 0)
    if hints >> KVM_HINTS_REALTIME & 1:
        return "qspinlock", "KVM guest with the REALTIME hint (dedicated pCPUs): PV spinlocks off"
    if not features >> KVM_FEATURE_PV_UNHALT & 1:
        return "virt_tas", ("KVM guest, no PV_UNHALT from the host: virt_spin_lock()'s "
                            "test-and-set")
    if _possible_cpus(root) == 1:
        return "qspinlock", "KVM guest with one possible CPU: PV spinlocks off"
    if "nopvspin" in _cmdline(root):
        return "qspinlock", "KVM guest booted with nopvspin: PV spinlocks off"
    return "pvqspinlock", ("KVM guest with PARAVIRT_SPINLOCKS and the host's PV_UNHALT, no "
                           "REALTIME hint: the paravirt qspinlock")
