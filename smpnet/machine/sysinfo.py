"""Machine facts and timing-reliability warnings.

This is what ``smpnet-bench info`` prints (in the spirit of ``pyperf system
show``) and what goes into the "machine" object of every JSON result, so
that a number can later be judged against the machine that produced it.

Everything is read from /proc and /sys.  Missing files are the normal case
in VMs and containers, so no reader here raises for a missing, unreadable
or malformed file: it reports None, [] or {} instead.
"""

import os
import platform
import re

import numpy

from .. import _core
from .cpus import parse_cpulist
from .kernel_build import host_lock, kernel_build

try:
    import psutil
except ImportError:  # psutil is a dependency, but facts must not need it
    psutil = None


# The few CPU flags that say something about how far cycle counts can be
# trusted; the full flags line is hundreds of words and says nothing more.
RELEVANT_FLAGS = ("constant_tsc", "nonstop_tsc", "tsc_known_freq", "rdtscp", "hypervisor")

# Only on these is the TSC (and so the constant_tsc/nonstop_tsc check) meaningful.
X86_ARCHES = ("x86_64", "amd64", "i386", "i486", "i586", "i686", "x86")

CPU_DIR = "/sys/devices/system/cpu"
NODE_DIR = "/sys/devices/system/node"


def _path(root, path):
    # `path` is absolute ("/sys/..."); joining it as-is would discard root.
    return os.path.join(root, path.lstrip("/"))


def _read(root, path):
    """Stripped text of a file, or None if it is missing or unreadable."""
    try:
        with open(_path(root, path), encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _read_cpulist(root, path):
    """A cpulist file as a list; [] when missing, '(null)' or malformed."""
    text = _read(root, path)
    if text is None or text == "(null)":  # nohz_full reads "(null)" when unset
        return []
    try:
        return parse_cpulist(text)
    except ValueError:
        return []


def _cpuinfo(root):
    """(cpu model, relevant flags) from /proc/cpuinfo; the first CPU is enough."""
    fields = {}
    text = _read(root, "/proc/cpuinfo") or ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        # Keep the first occurrence: CPUs of one machine are (almost always) alike.
        fields.setdefault(key, value.strip())

    if fields.get("model name"):
        model = fields["model name"]
    elif fields.get("Hardware"):  # older ARM kernels
        model = fields["Hardware"]
    elif fields.get("CPU part"):  # ARM without a name: the part number is all there is
        model = "CPU part " + fields["CPU part"]
    else:
        model = platform.processor() or "unknown"

    present = set(fields.get("flags", "").split())
    flags = sorted(flag for flag in RELEVANT_FLAGS if flag in present)
    return model, flags


def cpu_model(root="/"):
    """The CPU's model name, as /proc/cpuinfo gives it."""
    return _cpuinfo(root)[0]


# CPUID leaf 0x40000000 vendor signatures -> names
HYPERVISOR_SIGNATURES = {
    "KVMKVMKVM": "KVM", "Microsoft Hv": "Hyper-V", "VMwareVMware": "VMware",
    "XenVMMXenVMM": "Xen", "TCGTCGTCGTCG": "QEMU (TCG)", "bhyve bhyve": "bhyve",
    "ACRNACRNACRN": "ACRN", "QNXQVMBSQG": "QNX", "VBoxVBoxVBox": "VirtualBox",
}


# The hypervisor's CPUID leaves: the signature (eax: the highest leaf), then,
# for KVM, its features (eax) and hints (edx) (Documentation/virt/kvm/x86/cpuid.rst)
CPUID_SIGNATURE, KVM_CPUID_FEATURES = 0x40000000, 0x40000001


def _cpuid_signature():
    """(the highest hypervisor leaf, the signature's text), or None."""
    regs = _core.cpuid(CPUID_SIGNATURE)
    if not regs or regs[0] < CPUID_SIGNATURE:
        return None
    sig = b"".join(r.to_bytes(4, "little") for r in regs[1:]).rstrip(b"\0").decode("ascii", "replace")
    return regs[0], sig.strip()


def cpuid_hypervisor():
    """The hypervisor's name from its CPUID signature (leaf 0x40000000), or None."""
    found = _cpuid_signature()
    return HYPERVISOR_SIGNATURES.get(found[1], found[1] or None) if found else None


def cpuid_kvm():
    """(features, hints) of KVM's leaf 0x40000001, or None when the CPUID
    signature is not KVM's or has no such leaf."""
    found = _cpuid_signature()
    if not found or found[1] != "KVMKVMKVM" or found[0] < KVM_CPUID_FEATURES:
        return None
    regs = _core.cpuid(KVM_CPUID_FEATURES)
    return regs[0], regs[3]


def _hypervisor(root, flags, cpuid_name=None):
    name = _read(root, "/sys/hypervisor/type")  # e.g. "xen"
    if name:
        return name
    if "hypervisor" not in flags:
        return None
    if cpuid_name:
        return cpuid_name
    # The CPU says it is virtualized but not by whom; DMI usually knows
    # ("QEMU", "Amazon EC2", "Microsoft Corporation", ...).
    for path in ("/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name"):
        name = _read(root, path)
        if name:
            return name
    return "unknown hypervisor"


def _numa_nodes(root):
    try:
        names = os.listdir(_path(root, NODE_DIR))
    except OSError:
        return {}
    node_ids = sorted(int(name[4:]) for name in names if re.fullmatch(r"node\d+", name))
    return {str(node): _read_cpulist(root, "%s/node%d/cpulist" % (NODE_DIR, node)) for node in node_ids}


def _llc_id(root, cpu):
    """The kernel's sd_llc_id for `cpu`: the first CPU of those that share
    its last-level cache (the cache index of the highest level); the CPU
    itself where sysfs says nothing of its caches, as the kernel's with no
    LLC domain (kernel/sched/topology.c, update_top_cache_domain())."""
    base = "%s/cpu%d/cache" % (CPU_DIR, cpu)
    try:
        names = [n for n in os.listdir(_path(root, base)) if re.fullmatch(r"index\d+", n)]
    except OSError:
        names = []
    levels = []
    for name in names:
        level = _read(root, "%s/%s/level" % (base, name))
        shared = _read_cpulist(root, "%s/%s/shared_cpu_list" % (base, name))
        if level and level.isdigit() and cpu in shared:
            levels.append((int(level), min(shared)))
    return max(levels)[1] if levels else cpu


def cpu_topology(cpus, root="/"):
    """{real CPU: (its NUMA node, its LLC id)} for `cpus`: node 0 where
    sysfs has no node directory (a kernel without NUMA has one node)."""
    node_of = {cpu: int(node) for node, members in _numa_nodes(root).items()
               for cpu in members}
    return {cpu: (node_of.get(cpu, 0), _llc_id(root, cpu)) for cpu in cpus}


def nr_node_ids(root="/"):
    """The machine's NUMA nodes, as the kernel counts them (the highest + 1)."""
    nodes = [int(n) for n in _numa_nodes(root)]
    return max(nodes) + 1 if nodes else 1


def _smt_siblings(root, cpus):
    groups = []
    for cpu in sorted(cpus):
        group = _read_cpulist(root, "%s/cpu%d/topology/thread_siblings_list" % (CPU_DIR, cpu))
        # Two selected siblings read the same group; a lone CPU is no sibling.
        if len(group) > 1 and group not in groups:
            groups.append(group)
    return sorted(groups)


def _governors(root, cpus):
    governors = {}
    for cpu in sorted(cpus):
        governor = _read(root, "%s/cpu%d/cpufreq/scaling_governor" % (CPU_DIR, cpu))
        if governor:
            governors[str(cpu)] = governor
    return governors


def _turbo(root):
    # intel_pstate inverts the sense: no_turbo=0 means turbo is on.
    no_turbo = _read(root, CPU_DIR + "/intel_pstate/no_turbo")
    if no_turbo in ("0", "1"):
        return no_turbo == "0"
    boost = _read(root, CPU_DIR + "/cpufreq/boost")  # acpi-cpufreq, amd-pstate
    if boost in ("0", "1"):
        return boost == "1"
    return None


def machine_facts(cpus, root="/"):
    """Facts about this machine, for the selected real CPUs `cpus` (list of ints).

    `root` prefixes every /proc and /sys path read, so tests can point it at
    a fake tree.  Values that come from the running interpreter rather than
    from files (arch, kernel, python, library versions) are always the real
    ones.
    """
    model, flags = _cpuinfo(root)
    online = _read_cpulist(root, CPU_DIR + "/online")

    # The affinity mask belongs to this process, not to the tree under root,
    # so only ask the kernel for it when reading the real machine.
    real = os.path.abspath(root) == "/"
    if real and hasattr(os, "sched_getaffinity"):
        allowed = sorted(os.sched_getaffinity(0))
    else:
        allowed = list(online)

    hypervisor = _hypervisor(root, flags, cpuid_hypervisor() if real else None)
    build = kernel_build(root)
    return {
        "cpu_model": model,
        "arch": platform.machine(),
        "cpu_flags": flags,
        "allowed_cpus": allowed,
        "selected_cpus": sorted(cpus),
        "online_cpus": online,
        "smt_siblings": _smt_siblings(root, cpus),
        "numa_nodes": _numa_nodes(root),
        "hypervisor": hypervisor,
        "governor": _governors(root, cpus),
        "turbo": _turbo(root),
        "isolcpus": _read_cpulist(root, CPU_DIR + "/isolated"),
        "nohz_full": _read_cpulist(root, CPU_DIR + "/nohz_full"),
        "kernel": platform.release(),
        "kernel_build": build,
        # the spinlock a kernel here runs (CPUID's KVM features: the real machine's only)
        "kernel_lock": dict(zip(("algo", "why"), host_lock(hypervisor, build, root, cpuid_kvm())))
        if real else None,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "psutil": psutil.__version__ if psutil is not None else None,
    }


def _join(items):
    """'0', '0 and 2', '0, 2 and 4'."""
    items = [str(item) for item in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _cpu_word(items):
    return "CPU" if len(items) == 1 else "CPUs"


def timing_warnings(facts, oversubscribed=False):
    """Short sentences, each naming one thing that makes timings unreliable.

    Uses only the facts dict (as made by machine_facts), so it works on
    facts loaded from an old JSON result as well as on made-up ones.
    An empty list means nothing known is wrong, not that timings are exact.
    """
    warnings = []
    selected = sorted(facts.get("selected_cpus") or [])

    if oversubscribed:
        warnings.append(
            "oversubscribed: more emulated CPUs than real CPUs, so emulated CPUs "
            "take turns on a real one; results are not valid for timing"
        )

    if facts.get("hypervisor"):
        warnings.append(
            "running under a hypervisor (%s): cycle counts include virtualization "
            "effects; steal time possible" % facts["hypervisor"]
        )

    governors = facts.get("governor") or {}
    slow = sorted((int(cpu), gov) for cpu, gov in governors.items() if gov != "performance")
    if slow:
        warnings.append(
            "CPU frequency governor not 'performance' on %s %s: the clock "
            "speed changes with load"
            % (_cpu_word(slow), _join("%d (%s)" % (cpu, gov) for cpu, gov in slow))
        )

    if facts.get("turbo") is True:
        warnings.append("turbo boost enabled: frequency varies with load and temperature")

    # A sibling group may include unselected CPUs; only two selected CPUs
    # in one group compete for the same core.
    for group in facts.get("smt_siblings") or []:
        sharing = sorted(set(group) & set(selected))
        if len(sharing) > 1:
            warnings.append(
                "selected CPUs %s are SMT siblings: they share a core" % _join(sharing)
            )

    # isolcpus keeps the scheduler off; nohz_full is counted too because it
    # is the other half of the usual isolation setup (as pyperf tunes it).
    isolated = set(facts.get("isolcpus") or []) | set(facts.get("nohz_full") or [])
    if not isolated:
        warnings.append(
            "no isolated CPUs (isolcpus/nohz_full): other tasks can be scheduled "
            "on the selected CPUs"
        )
    else:
        not_isolated = [cpu for cpu in selected if cpu not in isolated]
        if not_isolated:
            warnings.append(
                "selected CPUs not all isolated: %s %s not in isolcpus/nohz_full, "
                "so other tasks can be scheduled there"
                % (_cpu_word(not_isolated), _join(not_isolated))
            )

    arch = (facts.get("arch") or "").lower()
    flags = facts.get("cpu_flags") or []
    if arch in X86_ARCHES:
        missing = [flag for flag in ("constant_tsc", "nonstop_tsc") if flag not in flags]
        if missing:
            warnings.append(
                "%s missing from CPU flags: the TSC may not tick at a constant "
                "rate, so cycle counts may not convert to time" % _join(missing)
            )

    if len(selected) == 1:
        warnings.append("only one CPU selected: no cross-CPU cache traffic is measured")

    return warnings
