"""--plot DIR: the pictures a person would rather look at than read.

Needs matplotlib (the `plot` extra). One PNG per experiment of an
`smpnet-bench all` result, or of one experiment's run (`--plot DIR` on its
command), drawn by the experiment's own `plot`.
"""
import os
import stat
import tempfile

from ..errors import BadInput
from ..machine.cpus import format_cpus

# Whether smpnet came from a clone ('.[plot]') or an index ('smpnet[plot]')
# its metadata does not reliably say (an editable install from a clone has
# no direct_url), so the hint names matplotlib itself and both extras.
INSTALL = ("pip install matplotlib (the plot extra: pip install '.[plot]' in a clone of smpnet, "
           "or pip install 'smpnet[plot]')")


def _writable_dir(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def _config_dir():
    """Where matplotlib keeps its config and font cache: None for its own
    default (XDG's, else ~/.config and ~/.cache) where both can be written;
    else smpnet's, one per user in the temporary directory, reused by every
    run. matplotlib's own fallback prints two warnings on stderr (one line
    per error is the rule) and makes a directory per run that only an
    atexit handler removes, which smpnet-bench's os._exit never runs."""
    home = os.path.expanduser("~")
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    if all(_writable_dir(os.path.join(d, "matplotlib")) for d in (config, cache)):
        return None
    ours = os.path.join(tempfile.gettempdir(), f"smpnet-matplotlib-{os.getuid()}")
    try:
        try:
            os.mkdir(ours, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(ours)
        # someone else's, a link, or one others may write in: not ours to use
        if (st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode)
                or stat.S_IMODE(st.st_mode) & 0o022):
            return tempfile.mkdtemp(prefix="smpnet-matplotlib-")
        return ours
    except OSError as e:   # a full or read-only temporary directory
        raise BadInput(f"--plot: matplotlib's home cannot be written and neither can "
                       f"{tempfile.gettempdir()} ({e.strerror or e})") from None


def require():
    """Fail before a long run, not after it, if the pictures cannot be made."""
    if "MPLCONFIGDIR" not in os.environ:
        where = _config_dir()
        if where:
            os.environ["MPLCONFIGDIR"] = where
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
        stage = stages.get(e.name, {})
        rows = stage.get("results")
        if e.plot is not None and rows:
            made.append(write(e, rows, directory, env.get("machine"), stage.get("load")))
    return made


def footer(machine, load=None):
    """The lines under a picture: the machine it was measured on, the date,
    and the load that makes its figures less reliable, if any was seen
    (`load`: load.around()'s facts, as a result records them)."""
    import textwrap
    import time

    m = machine or {}
    what = [m.get("cpu_model") or "unknown CPU"]
    if m.get("hypervisor"):
        what.append(f"a {m['hypervisor']} guest")
    if m.get("kernel"):
        what.append(f"Linux {m['kernel']}")
    if m.get("selected_cpus"):
        what.append(f"CPUs {format_cpus(m['selected_cpus'])}")
    what.append(f"smpnet {m.get('smpnet', '?')}")
    what.append(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    seen = (f"competing load during the run: {load['why']}" if load and load.get("high")
            else "no competing load seen on these CPUs")
    lines = ["; ".join(what), seen]
    return [x for line in lines for x in textwrap.wrap(line, 150)]


def write(e, rows, directory, machine=None, load=None):
    """Experiment e's picture of `rows` as DIR/NAME.png, with the footer of
    the machine and run (footer()); returns its path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(directory, exist_ok=True)
    fig, ax = plt.subplots(figsize=(11, 5.5))
    e.plot(ax, rows)
    for a in fig.axes:
        a.grid(True, alpha=0.3)
    lines = footer(machine, load)
    # the footer's height in figure units, then everything above it; a
    # title that would not fit is wrapped by the experiment, and kept in
    fig.tight_layout(rect=(0, 0.035 * len(lines) * 5.5 / fig.get_size_inches()[1], 1, 1))
    fig.text(0.01, 0.008, "\n".join(lines), fontsize=7, color="0.35", ha="left", va="bottom")
    path = os.path.join(directory, f"{e.name}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
