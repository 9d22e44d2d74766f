"""The emulated kernel stack's oops, as the model recorded it (dev.h:
stack_enter() keeps the kinds of the frames on each CPU's emulated stack
and, at the first overflow, copies them into lo_stats): what a run's rows
carry and the line that prints it. A library of the loopback experiment,
the one that can overflow the stack (--ack-storm)."""
from ... import _core

# frame kind -> the function that charges it (dev.h's STACK_FRAME_TABLE)
FRAME_NAMES = {v: name for name, v in _core.STACK_FRAMES.items() if v}


def recorded_oops(st):
    """The deepest oops of the run's CPUs as recorded: the frames on the emulated
    stack (innermost first, OOPS_TRACE at most), how many, and the one refused."""
    cpu = max(range(len(st)), key=lambda i: (bool(st["overflow"][i]), int(st["oops_frames"][i])))
    if not st["overflow"][cpu]:
        return {"oops_trace": [], "oops_frames": 0, "oops_refused": None}
    kept = min(int(st["oops_frames"][cpu]), len(st["oops_trace"][cpu]))
    return {"oops_trace": [FRAME_NAMES[int(k)] for k in st["oops_trace"][cpu][:kept]],
            "oops_frames": int(st["oops_frames"][cpu]),
            "oops_refused": FRAME_NAMES[int(st["oops_refused"][cpu])]}


def oops_line(r, stack, shown=8):
    """The recorded oops: the frame refused, then the stack's, innermost first."""
    trace = r["oops_trace"]  # all of 8k's and 16k's frames (OOPS_TRACE keeps 64)
    chain = " <- ".join([f"{r['oops_refused']} (refused)"] + trace[:shown]
                        + (["..."] if r["oops_frames"] > shown else []))
    return (f"oops ({r['mode']}, {r['cpus']} CPU(s)): emulated kernel stack overflow at "
            f"loopback_xmit depth {r['overflow_depth']} ({r['stack_max']} of {stack} bytes): "
            f"{chain} ({r['oops_frames']} frames, {trace.count('loopback_xmit')} loopback_xmit)")
