"""smpnet: a multiprocess SMP emulator for the Linux networking fast path."""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("smpnet")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.1.0+src"

from .errors import BadInput, Interrupted, RunFailed, SegmentError, SmpnetError, WorkerDied  # noqa: E402
from .machine import CpuContext, Machine  # noqa: E402

__all__ = ["Machine", "CpuContext", "SmpnetError", "BadInput", "SegmentError",
           "RunFailed", "WorkerDied", "Interrupted", "__version__"]
