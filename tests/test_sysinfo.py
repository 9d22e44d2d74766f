"""Tests for smpnet.sysinfo: facts read from a fake /proc + /sys tree, and
the timing warnings derived from facts dicts."""

import importlib.util
import os
import pathlib
import platform

import pytest

try:
    from smpnet.machine import sysinfo
except ImportError:
    # smpnet/__init__.py may import the compiled extension, which need not be
    # built for these tests; sysinfo itself needs nothing from the package.
    _path = pathlib.Path(__file__).resolve().parent.parent / "smpnet" / "machine" / "sysinfo.py"
    _spec = importlib.util.spec_from_file_location("smpnet_sysinfo", _path)
    sysinfo = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sysinfo)


FACT_KEYS = {
    "cpu_model", "arch", "cpu_flags", "allowed_cpus", "selected_cpus",
    "online_cpus", "smt_siblings", "numa_nodes", "hypervisor", "governor",
    "turbo", "isolcpus", "nohz_full", "kernel", "kernel_build", "kernel_lock", "python", "numpy",
    "psutil",
}

CPUINFO_X86 = """\
processor\t: {n}
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Fake CPU @ 2.00GHz
flags\t\t: fpu tsc msr rdtscp lm constant_tsc nonstop_tsc tsc_known_freq sse2 hypervisor avx2

"""


def write(root, path, text):
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.fixture
def fake_root(tmp_path):
    """4 CPUs, SMT pairs (0,2) and (1,3), one pair per NUMA node, powersave
    on CPU 1, turbo on (intel_pstate), nothing isolated, a QEMU guest."""
    write(tmp_path, "/proc/cpuinfo", "".join(CPUINFO_X86.format(n=n) for n in range(4)))
    cpu = "/sys/devices/system/cpu"
    write(tmp_path, cpu + "/online", "0-3\n")
    write(tmp_path, cpu + "/isolated", "\n")
    write(tmp_path, cpu + "/nohz_full", "(null)\n")
    write(tmp_path, cpu + "/intel_pstate/no_turbo", "0\n")
    for n, siblings in enumerate(["0,2", "1,3", "0,2", "1,3"]):
        write(tmp_path, "%s/cpu%d/topology/thread_siblings_list" % (cpu, n), siblings + "\n")
        governor = "powersave" if n == 1 else "performance"
        write(tmp_path, "%s/cpu%d/cpufreq/scaling_governor" % (cpu, n), governor + "\n")
    write(tmp_path, "/sys/devices/system/node/node0/cpulist", "0,2\n")
    write(tmp_path, "/sys/devices/system/node/node1/cpulist", "1,3\n")
    write(tmp_path, "/sys/devices/system/node/online", "0-1\n")  # not a node dir
    write(tmp_path, "/sys/class/dmi/id/sys_vendor", "QEMU\n")
    return tmp_path



def test_topology_is_each_cpus_node_and_first_sharer_of_its_last_level_cache(fake_root):
    cpu = "/sys/devices/system/cpu"
    # an L1 of its own, an L3 per node; CPU 3's caches unknown to sysfs
    for n, l3 in ((0, "0,2"), (1, "1,3"), (2, "0,2")):
        write(fake_root, f"{cpu}/cpu{n}/cache/index0/level", "1\n")
        write(fake_root, f"{cpu}/cpu{n}/cache/index0/shared_cpu_list", f"{n}\n")
        write(fake_root, f"{cpu}/cpu{n}/cache/index3/level", "3\n")
        write(fake_root, f"{cpu}/cpu{n}/cache/index3/shared_cpu_list", l3 + "\n")
    topo = sysinfo.cpu_topology([0, 1, 2, 3], root=str(fake_root))
    assert topo == {0: (0, 0), 1: (1, 1), 2: (0, 0), 3: (1, 3)}
    assert sysinfo.nr_node_ids(str(fake_root)) == 2


def test_without_numa_in_sysfs_every_cpu_is_on_node_0(tmp_path):
    write(tmp_path, "/sys/devices/system/cpu/online", "0-1\n")
    assert sysinfo.cpu_topology([0, 1], root=str(tmp_path)) == {0: (0, 0), 1: (0, 1)}
    assert sysinfo.nr_node_ids(str(tmp_path)) == 1

def ideal_facts(**changes):
    """Bare metal, tuned for benchmarking: should give no warnings at all."""
    facts = {
        "cpu_model": "Ideal CPU",
        "arch": "x86_64",
        "cpu_flags": ["constant_tsc", "nonstop_tsc", "rdtscp", "tsc_known_freq"],
        "allowed_cpus": [0, 1, 2, 3],
        "selected_cpus": [2, 3],
        "online_cpus": [0, 1, 2, 3],
        "smt_siblings": [],
        "numa_nodes": {"0": [0, 1, 2, 3]},
        "hypervisor": None,
        "governor": {"2": "performance", "3": "performance"},
        "turbo": False,
        "isolcpus": [2, 3],
        "nohz_full": [2, 3],
        "kernel": "6.1.0",
        "python": "3.11.7",
        "numpy": "2.0.0",
        "psutil": "6.0.0",
    }
    facts.update(changes)
    return facts


# --- parse_cpulist -------------------------------------------------------

from smpnet.machine.cpus import parse_cpulist  # noqa: E402 (the parser machine_facts uses)

@pytest.mark.parametrize("text, expected", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
    ("0-3,8,10-11\n", [0, 1, 2, 3, 8, 10, 11]),
    ("5", [5]),
    ("0", [0]),
    ("7-7", [7]),
    ("", []),
    ("   \n\t", []),
    ("3,1,1-2", [1, 2, 3]),      # unsorted and overlapping input: sorted, no duplicates
    (" 0-1 , 4 ", [0, 1, 4]),    # spaces around parts
])
def test_parse_cpulist(text, expected):
    assert parse_cpulist(text) == expected


@pytest.mark.parametrize("text", ["x", "3-1", "1-", "-2", "(null)", "0-2-4"])
def test_parse_cpulist_rejects_malformed(text):
    with pytest.raises(ValueError):
        parse_cpulist(text)


# --- machine_facts on a fake tree ---------------------------------------

def test_facts_from_fake_tree(fake_root):
    facts = sysinfo.machine_facts([2, 0, 1], root=str(fake_root))

    assert set(facts) == FACT_KEYS
    assert facts["cpu_model"] == "Intel(R) Xeon(R) Fake CPU @ 2.00GHz"
    assert facts["cpu_flags"] == ["constant_tsc", "hypervisor", "nonstop_tsc", "rdtscp", "tsc_known_freq"]
    assert facts["allowed_cpus"] == [0, 1, 2, 3]   # from the fake online file, not our affinity
    assert facts["selected_cpus"] == [0, 1, 2]
    assert facts["online_cpus"] == [0, 1, 2, 3]
    assert facts["smt_siblings"] == [[0, 2], [1, 3]]  # CPUs 0 and 2 read the same group once
    assert facts["numa_nodes"] == {"0": [0, 2], "1": [1, 3]}
    assert facts["hypervisor"] == "QEMU"
    assert facts["governor"] == {"0": "performance", "1": "powersave", "2": "performance"}
    assert facts["turbo"] is True
    assert facts["isolcpus"] == []
    assert facts["nohz_full"] == []
    assert facts["arch"] == platform.machine()
    assert facts["kernel"] == platform.release()
    assert facts["python"] == platform.python_version()


def test_warnings_from_fake_tree(fake_root):
    facts = sysinfo.machine_facts([0, 1, 2], root=str(fake_root))
    facts["arch"] = "x86_64"  # the real arch is not part of the fake tree
    warnings = sysinfo.timing_warnings(facts)
    text = "\n".join(warnings)

    assert "hypervisor (QEMU)" in text
    assert "not 'performance' on CPU 1 (powersave)" in text
    assert "turbo boost enabled" in text
    assert "selected CPUs 0 and 2 are SMT siblings" in text
    assert "no isolated CPUs" in text
    # CPU 3 is not selected, so its pairing with CPU 1 is no conflict.
    assert "1 and 3" not in text
    # constant_tsc and nonstop_tsc are present; three CPUs are selected.
    assert "TSC" not in text
    assert "only one CPU" not in text
    assert "oversubscribed" not in text
    assert len(warnings) == 5


def test_missing_tree_is_not_an_error(tmp_path):
    facts = sysinfo.machine_facts([0, 1], root=str(tmp_path))

    assert set(facts) == FACT_KEYS
    assert facts["cpu_model"] == (platform.processor() or "unknown")
    assert facts["cpu_flags"] == []
    assert facts["allowed_cpus"] == []
    assert facts["selected_cpus"] == [0, 1]
    assert facts["online_cpus"] == []
    assert facts["smt_siblings"] == []
    assert facts["numa_nodes"] == {}
    assert facts["hypervisor"] is None
    assert facts["governor"] == {}
    assert facts["turbo"] is None
    assert facts["kernel_build"] == {"source": None, "options": {}, "calls": None,
                                     "inline": None, "return_thunk": {}}
    assert facts["isolcpus"] == []
    assert facts["nohz_full"] == []


def test_malformed_cpulist_files_read_as_empty(fake_root):
    cpu = "/sys/devices/system/cpu"
    write(fake_root, cpu + "/online", "garbage\n")
    write(fake_root, cpu + "/isolated", "5-2\n")
    write(fake_root, cpu + "/cpu0/topology/thread_siblings_list", "?\n")
    facts = sysinfo.machine_facts([0], root=str(fake_root))
    assert facts["online_cpus"] == []
    assert facts["isolcpus"] == []
    assert facts["smt_siblings"] == []


def test_isolation_files_parsed(fake_root):
    cpu = "/sys/devices/system/cpu"
    write(fake_root, cpu + "/isolated", "2-3\n")
    write(fake_root, cpu + "/nohz_full", "1-3\n")
    facts = sysinfo.machine_facts([2, 3], root=str(fake_root))
    assert facts["isolcpus"] == [2, 3]
    assert facts["nohz_full"] == [1, 2, 3]


def test_hypervisor_type_file_wins(fake_root):
    write(fake_root, "/sys/hypervisor/type", "xen\n")
    assert sysinfo.machine_facts([0], root=str(fake_root))["hypervisor"] == "xen"


def test_hypervisor_product_name_then_unknown(fake_root):
    os.remove(fake_root / "sys/class/dmi/id/sys_vendor")
    write(fake_root, "/sys/class/dmi/id/product_name", "KVM\n")
    assert sysinfo.machine_facts([0], root=str(fake_root))["hypervisor"] == "KVM"

    os.remove(fake_root / "sys/class/dmi/id/product_name")
    assert sysinfo.machine_facts([0], root=str(fake_root))["hypervisor"] == "unknown hypervisor"


def test_no_hypervisor_flag_means_bare_metal(fake_root):
    write(fake_root, "/proc/cpuinfo", CPUINFO_X86.format(n=0).replace(" hypervisor", ""))
    facts = sysinfo.machine_facts([0], root=str(fake_root))
    assert "hypervisor" not in facts["cpu_flags"]
    assert facts["hypervisor"] is None  # DMI naming QEMU alone does not count


@pytest.mark.parametrize("no_turbo, boost, expected", [
    ("1", None, False),
    ("0", "0", True),   # intel_pstate is asked first
    (None, "1", True),
    (None, "0", False),
    (None, None, None),
])
def test_turbo(fake_root, no_turbo, boost, expected):
    cpu = "/sys/devices/system/cpu"
    os.remove(fake_root / (cpu.lstrip("/") + "/intel_pstate/no_turbo"))
    if no_turbo is not None:
        write(fake_root, cpu + "/intel_pstate/no_turbo", no_turbo + "\n")
    if boost is not None:
        write(fake_root, cpu + "/cpufreq/boost", boost + "\n")
    assert sysinfo.machine_facts([0], root=str(fake_root))["turbo"] is expected


@pytest.mark.parametrize("cpuinfo, expected", [
    ("processor\t: 0\nHardware\t: BCM2835\nCPU part\t: 0xd08\n", "BCM2835"),
    ("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n", "CPU part 0xd0c"),
])
def test_cpu_model_fallbacks(tmp_path, cpuinfo, expected):
    write(tmp_path, "/proc/cpuinfo", cpuinfo)
    facts = sysinfo.machine_facts([0], root=str(tmp_path))
    assert facts["cpu_model"] == expected
    assert facts["cpu_flags"] == []


# --- timing_warnings on made-up facts ----------------------------------

def test_ideal_machine_has_no_warnings():
    assert sysinfo.timing_warnings(ideal_facts()) == []


@pytest.mark.parametrize("changes, expected", [
    ({"hypervisor": "KVM"}, "running under a hypervisor (KVM)"),
    ({"governor": {"2": "performance", "3": "ondemand"}}, "not 'performance' on CPU 3 (ondemand)"),
    ({"turbo": True}, "turbo boost enabled"),
    ({"smt_siblings": [[2, 3]]}, "selected CPUs 2 and 3 are SMT siblings: they share a core"),
    ({"isolcpus": [], "nohz_full": []}, "no isolated CPUs"),
    ({"isolcpus": [3], "nohz_full": []}, "selected CPUs not all isolated: CPU 2 "),
    ({"cpu_flags": ["nonstop_tsc"]}, "constant_tsc missing"),
    ({"cpu_flags": ["constant_tsc"]}, "nonstop_tsc missing"),
    ({"cpu_flags": []}, "constant_tsc and nonstop_tsc missing"),
    ({"selected_cpus": [2], "governor": {"2": "performance"}}, "only one CPU selected"),
])
def test_each_condition_gives_exactly_its_warning(changes, expected):
    warnings = sysinfo.timing_warnings(ideal_facts(**changes))
    assert len(warnings) == 1, warnings
    assert expected in warnings[0]


def test_oversubscribed():
    warnings = sysinfo.timing_warnings(ideal_facts(), oversubscribed=True)
    assert len(warnings) == 1
    assert "oversubscribed" in warnings[0]
    assert "not valid for timing" in warnings[0]


def test_governors_named_together():
    facts = ideal_facts(selected_cpus=[0, 1, 2], isolcpus=[0, 1, 2],
                        governor={"0": "powersave", "1": "performance", "2": "schedutil"})
    warnings = sysinfo.timing_warnings(facts)
    assert warnings == [
        "CPU frequency governor not 'performance' on CPUs 0 (powersave) and 2 "
        "(schedutil): the clock speed changes with load"
    ]


def test_sibling_group_with_one_selected_cpu_is_quiet():
    # CPU 2's sibling is 0, which is not selected: nothing shares a core.
    assert sysinfo.timing_warnings(ideal_facts(smt_siblings=[[0, 2], [1, 3]])) == []


def test_three_selected_siblings_named():
    facts = ideal_facts(selected_cpus=[0, 1, 2, 3], isolcpus=[0, 1, 2, 3],
                        governor={}, smt_siblings=[[0, 1, 2, 3]])
    assert sysinfo.timing_warnings(facts) == [
        "selected CPUs 0, 1, 2 and 3 are SMT siblings: they share a core"
    ]


def test_nohz_full_alone_counts_as_isolation():
    assert sysinfo.timing_warnings(ideal_facts(isolcpus=[], nohz_full=[2, 3])) == []


def test_no_tsc_warning_off_x86():
    assert sysinfo.timing_warnings(ideal_facts(arch="aarch64", cpu_flags=[])) == []


def test_partial_facts_do_not_crash():
    # e.g. the "machine" object of an old JSON result with fewer keys
    warnings = sysinfo.timing_warnings({"selected_cpus": [0, 1]})
    assert warnings == [
        "no isolated CPUs (isolcpus/nohz_full): other tasks can be scheduled on the selected CPUs"
    ]


# --- the real machine --------------------------------------------------

def test_real_machine_types():
    cpus = sorted(os.sched_getaffinity(0))[:2]
    facts = sysinfo.machine_facts(cpus)

    assert set(facts) == FACT_KEYS
    assert facts["selected_cpus"] == cpus
    assert facts["allowed_cpus"] == sorted(os.sched_getaffinity(0))
    assert isinstance(facts["cpu_model"], str) and facts["cpu_model"]
    assert isinstance(facts["arch"], str)
    assert set(facts["cpu_flags"]) <= set(sysinfo.RELEVANT_FLAGS)
    assert facts["cpu_flags"] == sorted(facts["cpu_flags"])
    for key in ("online_cpus", "isolcpus", "nohz_full"):
        assert isinstance(facts[key], list)
        assert all(isinstance(cpu, int) for cpu in facts[key])
    assert all(isinstance(g, list) and len(g) > 1 for g in facts["smt_siblings"])
    assert all(isinstance(k, str) and isinstance(v, list) for k, v in facts["numa_nodes"].items())
    assert facts["hypervisor"] is None or isinstance(facts["hypervisor"], str)
    assert set(facts["governor"]) <= {str(cpu) for cpu in cpus}
    assert facts["turbo"] in (True, False, None)
    assert isinstance(facts["numpy"], str)
    assert facts["psutil"] is None or isinstance(facts["psutil"], str)
    assert all(isinstance(w, str) for w in sysinfo.timing_warnings(facts))


def test_several_unisolated_cpus_named():
    facts = ideal_facts(selected_cpus=[0, 1, 2], isolcpus=[2], nohz_full=[],
                        governor={})
    assert sysinfo.timing_warnings(facts) == [
        "selected CPUs not all isolated: CPUs 0 and 1 not in isolcpus/nohz_full, "
        "so other tasks can be scheduled there"
    ]
