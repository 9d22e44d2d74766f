"""smpnet: a multiprocess SMP emulator for the Linux networking fast path.

Importing the package loads nothing heavy (no numpy, no compiled core):
`smpnet-bench` must be able to handle a signal from its first milliseconds.
Machine, CpuContext, ab, _core and __version__ load on first use (PEP 562).
"""
from .errors import BadInput, Interrupted, RunFailed, SegmentError, SmpnetError, WorkerDied

__all__ = ["Machine", "CpuContext", "ab", "SmpnetError", "BadInput", "SegmentError",
           "RunFailed", "WorkerDied", "Interrupted", "__version__"]


def __getattr__(name):
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version
        try:
            value = version("smpnet")
        except PackageNotFoundError:  # running from a source tree
            value = "0.4.0+src"
    elif name == "_core":
        import importlib
        try:
            value = importlib.import_module("._core", __name__)
        except ImportError as e:  # a source checkout on sys.path, not the installed package
            raise ImportError(
                f"smpnet's compiled core is missing ({e}): install smpnet with `pip install .`, "
                "or build it in place with `python setup.py build_ext --inplace`; "
                "running from the source directory imports the unbuilt sources") from None
    elif name == "ab":
        from .api import ab as value
    elif name in ("Machine", "CpuContext"):
        from .machine import machine
        value = getattr(machine, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
