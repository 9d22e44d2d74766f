"""The registry: every experiment smpnet-bench runs, in the order `all` runs
them and `--help` lists them. Adding an experiment is one line here (and its
module; see docs/contributing.md). Nothing else names an experiment."""
from . import arp, contended, defer, info, kernel, locks, loopback, null

# kernel before loopback and arp: in `all` it measures the profile they charge
EXPERIMENTS = tuple(m.EXPERIMENT for m in (info, locks, contended, defer, kernel, loopback, arp,
                                           null))
BY_NAME = {e.name: e for e in EXPERIMENTS}


def get(name):
    """The experiment called `name` (KeyError if none is)."""
    return BY_NAME[name]
