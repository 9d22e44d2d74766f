"""--plot DIR: the pictures a person would rather look at than read.

Needs matplotlib (the `plot` extra). One PNG per experiment of an
`smpnet-bench all` result, or of one experiment's run (`--plot DIR` on its
command), drawn by the experiment's own `plot`.
"""
import os
import tempfile

from ..errors import BadInput

# Whether smpnet came from a clone ('.[plot]') or an index ('smpnet[plot]')
# its metadata does not reliably say (an editable install from a clone has
# no direct_url), so the hint names matplotlib itself and both extras.
INSTALL = ("pip install matplotlib (the plot extra: pip install '.[plot]' in a clone of smpnet, "
           "or pip install 'smpnet[plot]')")


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
    """Write one PNG per experiment of an `all` result that draws one; returns their paths."""
    from ..experiments import EXPERIMENTS

    stages = {s["stage"]: s for s in env["results"]}
    made = []
    for e in EXPERIMENTS:
        rows = stages.get(e.name, {}).get("results")
        if e.plot is not None and rows:
            made.append(write(e, rows, directory))
    return made


def write(e, rows, directory):
    """Experiment e's picture of `rows` as DIR/NAME.png; returns its path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 5))
    e.plot(ax, rows)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    path = os.path.join(directory, f"{e.name}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
