"""smpnet: a multiprocess SMP emulator for the Linux networking fast path."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("smpnet")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0+src"

try:
    from . import _core  # noqa: F401
except ImportError as e:  # a source checkout on sys.path, not the installed package
    raise ImportError(
        f"smpnet's compiled core is missing ({e}): install smpnet with `pip install .`, "
        "or build it in place with `python setup.py build_ext --inplace`; "
        "running from the source directory imports the unbuilt sources") from None

from .errors import BadInput, Interrupted, RunFailed, SegmentError, SmpnetError, WorkerDied  # noqa: E402
from .machine import CpuContext, Machine  # noqa: E402

__all__ = ["Machine", "CpuContext", "SmpnetError", "BadInput", "SegmentError",
           "RunFailed", "WorkerDied", "Interrupted", "__version__"]
