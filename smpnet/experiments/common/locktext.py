"""What the lock experiments say in text: the harness's rerun rounds, a
row's name when no round of it was clean, figures with their interval,
irqsave's control and the checker's reports. docs/experiments/locks.md.
"""
from ...machine import kernel_build
from ...measure.time_bench import MAX_ATTEMPTS


def dropped_line(rows):
    """What the harness threw out (time_bench.clean_round), in a line, or None."""
    dropped = sum(r.get("dropped_rounds", 0) for r in rows)
    spoiled = sum(r.get("spoiled_rounds", 0) for r in rows)
    if not dropped and not spoiled:
        return None
    line = (f"{dropped} round attempts thrown out and rerun shorter: their thread was switched "
            "out during them (another task ran on the CPU)")
    if spoiled:
        line += (f"; {spoiled} rounds kept switched out after {MAX_ATTEMPTS} attempts: "
                 "the CPU is busy, those figures include other work")
    unclean = sum(1 for r in rows if r.get("no_clean_round"))
    if unclean:
        line += (f"; {unclean} row{'s' if unclean != 1 else ''} had no clean round at all, "
                 f"marked {NO_CLEAN_ROUND}: {'their figures are' if unclean != 1 else 'its figure is'}"
                 " the CPU's other work as much as the op's")
    return line


NO_CLEAN_ROUND = "[no clean round]"


def row_name(r, name):
    """A row's name in a table, marked when every one of its rounds was
    switched out (time_bench.round_counts): its figure is not the op's alone."""
    return f"{name} {NO_CLEAN_ROUND}" if r.get("no_clean_round") else name


def figure(value, interval, digits=2):
    """`value [low .. high]`"""
    return f"{value:.{digits}f} [{interval[0]:.{digits}f} .. {interval[1]:.{digits}f}]"


def extra_calls(build):
    """How many more of its entry points irqsave calls out of line than irq
    does in kernel build `build` (x86-nopreempt: its unlock, 1)."""
    calls = set(kernel_build.calls_of(build))
    return (len(calls & {"spin_lock_irqsave", "spin_unlock_irqrestore"})
            - len(calls & {"spin_lock_irq", "spin_unlock_irq"}))


def control_minus_irq(restore, check, builds=("inline",)):
    """What control - irq holds besides smpnet's bookkeeping of the save,
    in the kernel builds `builds` (one verdict's, or a table's)."""
    extra = (["the popf restore"] if restore == "popf" else []) + (["the checker"] if check else [])
    calls = sorted({extra_calls(b) for b in builds} - {0})
    if calls:
        extra.append("the call irqsave's unlock is and irq's is not" if calls == [1] and
                     len(builds) == 1 else "the calls irqsave makes and irq does not, by build")
    return ("smpnet's bookkeeping" + "".join(f" + {x}" for x in extra)
            + ("" if extra else ", ~0"))


def control_lines(v, restore="sti", check=False):
    """What a seed 003 verdict's control splits irqsave - irq into."""
    if "pushf_control" not in v:
        return []
    c = v["pushf_control"]
    builds = (v.get("kernel_build", "inline"),)
    return [f"  of which the pushf; pop (irqsave - control) = "
            f"{figure(c['pushf_pop_cycles'], c['pushf_pop_interval'])} cycles and control - irq "
            f"({control_minus_irq(restore, check, builds)}) = "
            f"{figure(c['control_minus_irq_cycles'], c['control_minus_irq_interval'])} cycles"]


def checker_text(reports, on):
    if not on:
        return "checker: off (--check turns it on)"
    if not reports:
        return "checker: no reports"
    return "checker: " + ", ".join(f"{k} x{n}" for k, n in reports.items())
