"""Build smpnet and its one extension, smpnet._core (Cython, -O2)."""
import os
import platform

import Cython
from Cython.Build import cythonize
from setuptools import Extension, setup

# SMPNET_DEBUG=1 builds without optimisation, with debug symbols and without
# NDEBUG, for gdb.
debug = os.environ.get("SMPNET_DEBUG") == "1"


def _files(folder, *endings):
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(endings))


core = Extension(
    "smpnet._core",
    # _core.pyx includes smpnet/core/*.pyx (found next to it, as
    # `include "core/X.pyx"`) and cimports smpnet/kernel/*.pxd; the one
    # C file it compiles to includes smpnet/kernel/*.h
    sources=["smpnet/_core.pyx"],
    include_dirs=["smpnet/kernel"],
    depends=_files("smpnet/kernel", ".h", ".pxd") + _files("smpnet/core", ".pyx", ".pxi"),
    define_macros=[("SMPNET_CYTHON_VERSION", '"%s"' % Cython.__version__)]
    + ([] if debug else [("NDEBUG", "1")]),
    # -mno-red-zone, as the kernel is built: the `pushf; pop` of
    # local_irq_save() writes below the stack pointer
    extra_compile_args=(["-O0", "-g"] if debug else ["-O2"])
    + (["-mno-red-zone"] if platform.machine() in ("x86_64", "AMD64") else []),
)

setup(
    ext_modules=cythonize(
        [core],
        compiler_directives={"language_level": 3},
        annotate=os.environ.get("SMPNET_ANNOTATE") == "1",
    ),
)
