"""--plot DIR: the pictures a person would rather look at than read.

Needs matplotlib (the `plot` extra). One PNG per experiment of an
`smpnet-bench all` result: lock costs by algorithm and variant, contended
throughput by CPU count, the defer strategies, the loopback modes by CPU
count, and first-ping histograms per ARP probe mode.
"""
import os
import tempfile

from .errors import BadInput

INSTALL = "pip install 'smpnet[plot]'"


def require():
    """Fail before a long run, not after it, if the pictures cannot be made."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput(f"--plot needs matplotlib: {INSTALL}") from None


def check_dir(path):
    """Refuse, before the run, a --plot DIR whose pictures cannot be written:
    a file is made and removed where they will go (os.access says yes to
    root, even under /proc)."""
    if not path.strip():
        raise BadInput("--plot needs a directory name")
    if os.path.exists(path) and not os.path.isdir(path):
        raise BadInput(f"--plot {path}: exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BadInput(f"--plot {path}: directory {parent} does not exist")
    where = path if os.path.isdir(path) else parent
    try:
        with tempfile.TemporaryFile(dir=where):
            pass
    except OSError as e:
        raise BadInput(f"--plot {path}: cannot write in {where}: {e.strerror or e}") from None


def write_all(env, directory):
    """Write the PNGs for an `all` result; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    stages = {s["stage"]: s for s in env["results"]}
    made = []
    for name, draw in (("locks", _locks), ("contended", _contended), ("defer", _defer),
                       ("loopback", _loopback), ("arp", _arp)):
        rows = stages.get(name, {}).get("results")
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(9, 5))
        draw(ax, rows)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = os.path.join(directory, f"{name}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        made.append(path)
    return made


def _locks(ax, rows):
    lock_rows = [r for r in rows if r["algo"]]
    tests = list(dict.fromkeys(r["test"] for r in lock_rows))
    algos = list(dict.fromkeys(r["algo"] for r in lock_rows))
    width = 0.8 / max(len(algos), 1)
    for i, algo in enumerate(algos):
        ys = [next((r["cycles"] for r in lock_rows if r["test"] == t and r["algo"] == algo), 0)
              for t in tests]
        ax.bar([x + i * width for x in range(len(tests))], ys, width, label=algo)
    ax.set_xticks([x + width * (len(algos) - 1) / 2 for x in range(len(tests))])
    ax.set_xticklabels(tests, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TSC cycles per lock + unlock (median)")
    ax.set_title("Uncontended lock costs by algorithm and variant")
    ax.legend()


def _contended(ax, rows):
    for (algo, variant) in dict.fromkeys((r["algo"], r["variant"]) for r in rows):
        pts = sorted((len(r["cpus"]), r["acq_per_s"] / 1e6) for r in rows
                     if r["algo"] == algo and r["variant"] == variant)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{algo} {variant}")
    ax.set_xticks(sorted({len(r["cpus"]) for r in rows}))
    ax.set_xlabel("CPUs hammering one lock")
    ax.set_ylabel("million acquisitions per second")
    ax.set_title("Contended lock throughput by CPU count")
    ax.legend()


def _defer(ax, rows):
    names = [r["strategy"] for r in rows]
    med = [r["skbs_per_s"] / 1e6 for r in rows]
    err = [[m - r["skbs_per_s_min"] / 1e6 for m, r in zip(med, rows)],
           [r["skbs_per_s_max"] / 1e6 - m for m, r in zip(med, rows)]]
    ax.bar(names, med, yerr=err, capsize=6)
    ax.set_ylabel("million skbs per second, end to end (median, min-max)")
    ax.set_title("skb defer-free list strategies")


def _loopback(ax, rows):
    for mode in dict.fromkeys(r["mode"] for r in rows):
        pts = sorted((r["cpus"], r["pps"] / 1e6) for r in rows if r["mode"] == mode)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
    ax.set_xticks(sorted({r["cpus"] for r in rows}))
    ax.set_xlabel("CPUs")
    ax.set_ylabel("million packets per second (all CPUs)")
    ax.set_title("Loopback modes by CPU count")
    ax.legend()


def _arp(ax, rows):
    import numpy as np

    bins = np.logspace(-4, 2, 61)   # 0.1 us to 100 ms
    for r in rows:
        if r.get("first_samples_ms"):
            ax.hist(r["first_samples_ms"], bins=bins, alpha=0.6,
                    label=f"{r['probe']} (HZ={r['hz']})")
    ax.set_xscale("log")
    ax.set_xlabel("first ping after arp -d, ms")
    ax.set_ylabel("trials")
    ax.set_title("ARP resolution: first-ping latency by probe mode")
    ax.legend()
