"""TSC frequency: where it comes from and how sure we are.

Order of trust: what the kernel or the CPU publishes (sysfs tsc_freq_khz on
kernels that have it, CPUID leaf 0x15 on Intel, the hypervisor's timing leaf
0x40000010 under VMware/KVM), checked against a calibration over
CLOCK_MONOTONIC_RAW; the calibration itself when nothing is published or the
published value is more than 1 % off. Without a TSC (not x86), the cycle
counter is clock_gettime in ns and tsc_hz is 1e9.
"""
import functools
import statistics

from .. import _core

CALIBRATION_WINDOWS = 3
CALIBRATION_WINDOW_NS = 20_000_000
AGREEMENT = 0.01  # published vs calibrated


def calibrate(windows=CALIBRATION_WINDOWS, window_ns=CALIBRATION_WINDOW_NS):
    """TSC Hz measured against CLOCK_MONOTONIC_RAW: the median of `windows`
    sleeps of window_ns each. A window whose bracketing clock reads took
    more than 0.1 % of it (a preemption landed there) is measured again, up
    to three times over."""
    rates = []
    for _ in range(3 * windows):
        ticks, ns, uncertainty = _core.tsc_calibrate(window_ns)
        if uncertainty <= window_ns / 1000:
            rates.append(ticks * 1e9 / ns)
        if len(rates) == windows:
            break
    if not rates:  # a very busy machine: take what it gives
        ticks, ns, _ = _core.tsc_calibrate(window_ns)
        rates.append(ticks * 1e9 / ns)
    return statistics.median(rates)


def _sysfs_khz(path="/sys/devices/system/cpu/cpu0/tsc_freq_khz"):
    try:
        with open(path) as f:
            return int(f.read().strip()) * 1000.0
    except (OSError, ValueError):
        return None


def _cpuid_hz():
    """(Hz, source) from CPUID, or (None, None)."""
    leaf15 = _core.cpuid(0x15)
    if leaf15 and leaf15[0] and leaf15[1] and leaf15[2]:
        den, num, crystal = leaf15[0], leaf15[1], leaf15[2]
        return crystal * num / den, "cpuid 0x15"
    leaf1 = _core.cpuid(1)
    if not leaf1 or not leaf1[2] & (1 << 31):  # CPUID.1:ECX.hypervisor
        return None, None
    hv = _core.cpuid(0x40000000)
    if hv and hv[0] >= 0x40000010:
        timing = _core.cpuid(0x40000010)
        if timing and timing[0]:
            return timing[0] * 1000.0, "cpuid 0x40000010 (hypervisor)"
    return None, None


@functools.lru_cache(maxsize=1)
def tsc_info():
    """{"tsc_hz", "tsc_source", "tsc_calibrated_hz", "tsc_published_hz"}, once per process."""
    if not _core.HAVE_TSC:
        return {"tsc_hz": 1e9, "tsc_source": "clock_gettime (no TSC on this CPU)",
                "tsc_calibrated_hz": None, "tsc_published_hz": None}
    calibrated = calibrate()
    published, source = _sysfs_khz(), "sysfs tsc_freq_khz"
    if published is None:
        published, source = _cpuid_hz()
    if published and abs(published - calibrated) <= AGREEMENT * calibrated:
        hz = published
    else:
        if published:
            source = f"calibrated against CLOCK_MONOTONIC_RAW ({source} said {published / 1e6:.3f} MHz)"
        else:
            source = "calibrated against CLOCK_MONOTONIC_RAW"
        hz = calibrated
    return {"tsc_hz": hz, "tsc_source": source,
            "tsc_calibrated_hz": calibrated, "tsc_published_hz": published}


def tsc_hz():
    return tsc_info()["tsc_hz"]
