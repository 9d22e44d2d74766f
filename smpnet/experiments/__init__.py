"""The registry: every experiment smpnet-bench runs, in the order `all` runs
them and `--help` lists them. Adding an experiment is its name here, in the
import and in EXPERIMENTS, and its module (docs/contributing.md). Nothing
else names an experiment.

An experiment is a module here, or a package where it has helpers of its own:
its __init__.py is the experiment, its other modules are its alone. What
several experiments share is in common/.

May import, an experiment: its own package, common/, the record
(smpnet.experiment, smpnet.bounds), the output (smpnet.report), the
measurement (smpnet.measure), the machine (smpnet.machine) and the base
(smpnet._core, errors, seeds, jsonfile); never another experiment, nor this
registry (tests/test_architecture.py checks).
"""
from . import ab, arp, contended, defer, info, kernel, locks, loopback, null

# kernel before loopback and arp: in `all` it measures the profile they charge
EXPERIMENTS = tuple(m.EXPERIMENT for m in (info, locks, contended, defer, kernel, loopback, arp,
                                           null, ab))
BY_NAME = {e.name: e for e in EXPERIMENTS}


def get(name):
    """The experiment called `name` (KeyError if none is)."""
    return BY_NAME[name]
