"""The kernel's cpulist syntax (`0-3,8`): --cpus, which every subcommand
takes (`0,1`, `0-3`, `all`), and the /sys files that list CPUs."""
import os

from ..errors import BadInput


def allowed_cpus():
    """The real CPUs this process may run on (its affinity mask), sorted."""
    return sorted(os.sched_getaffinity(0))


def parse_cpus(spec, allowed=None):
    """Parse a --cpus value into a sorted list of real CPU numbers.

    `all` (or None) means every allowed CPU. Anything outside the affinity
    set, a duplicate, an empty list or a malformed range is a BadInput
    naming the offending part.
    """
    allowed = allowed_cpus() if allowed is None else sorted(allowed)
    if spec is None or str(spec).strip() == "all":
        return list(allowed)
    if not isinstance(spec, str):
        items = list(spec)
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in items):
            raise BadInput(f"CPU list must hold integers, got {spec!r}")
    else:
        text = spec.strip()
        if not text:
            raise BadInput("empty CPU list: give e.g. 0,1 or 0-3 or all")
        items = []
        for part in text.split(","):
            items.extend(_parse_part(part, spec, allowed))
    if not items:
        raise BadInput("empty CPU list: give e.g. 0,1 or 0-3 or all")
    seen = set()
    for c in items:
        if c in seen:
            raise BadInput(f"CPU {c} is listed twice in {spec!r}")
        seen.add(c)
    outside = [c for c in items if c not in set(allowed)]
    if outside:
        raise BadInput(
            f"CPU {outside[0]} is not in this process's affinity set "
            f"({format_cpus(allowed)})"
        )
    return sorted(items)


def _split(part):
    """One comma-separated part, N or LO-HI (spaces around either allowed):
    (LO, HI) as text, HI = LO for N;
    ValueError unless both are ASCII digits (int() would also take '0_1',
    '+1' and full-width digits)."""
    part = part.strip()
    lo, sep, hi = (x.strip() for x in part.partition("-"))     # '0 - 3' as '0-3'
    if not _is_number(lo) or (sep and not _is_number(hi)):
        raise ValueError(f"{part!r} is not a CPU number or range")
    return lo, hi if sep else lo


def parse_cpulist(text):
    """A cpulist as the kernel writes it (/sys/devices/system/cpu/isolated...):
    a sorted list, duplicates merged; '' and whitespace give []. Malformed
    text raises ValueError."""
    cpus = set()
    for part in text.split(",") if text.strip() else ():
        lo, hi = (int(x) for x in _split(part))
        if hi < lo:
            raise ValueError(f"bad cpulist range {part.strip()!r}")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def _parse_part(part, spec, allowed):
    try:
        lo, hi = _split(part)
    except ValueError:
        raise BadInput(
            f"bad CPU list {spec!r}: {part.strip()!r} is not a CPU number or range "
            "(use e.g. 0,1 or 0-3 or all)") from None
    lo, hi = _cpu_number(lo, allowed), _cpu_number(hi, allowed)
    if hi < lo:
        raise BadInput(f"bad CPU list {spec!r}: the range {part.strip()!r} runs backwards")
    if allowed and hi > allowed[-1]:  # before expanding 0-4000000000
        raise BadInput(f"CPU {hi} is not in this process's affinity set "
                       f"({format_cpus(allowed)})")
    return range(lo, hi + 1)


def _is_number(text):
    return text.isascii() and text.isdigit()


def _cpu_number(text, allowed):
    """A CPU number, leading zeros allowed; one longer than any CPU number
    could be is named as outside the set (int() refuses 4,300 digits)."""
    digits = text.lstrip("0") or "0"
    if len(digits) > 9:
        shown = digits if len(digits) <= 12 else digits[:12] + "..."
        raise BadInput(f"CPU {shown} is not in this process's affinity set "
                       f"({format_cpus(allowed)})")
    return int(digits)


def format_cpus(cpus):
    """[0, 1, 2, 5] -> '0-2,5', the kernel's cpulist format."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)
