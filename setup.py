"""Build smpnet and its one extension, smpnet._core (Cython, -O2)."""
import os
import runpy

import Cython
from Cython.Build import cythonize
from setuptools import Extension, setup

# SMPNET_DEBUG=1 builds without optimisation, with debug symbols and without
# NDEBUG, for gdb.
debug = os.environ.get("SMPNET_DEBUG") == "1"
# the flags, shared with `ab`'s build of a user's file
flags = runpy.run_path(os.path.join("smpnet", "build_flags.py"))


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
    + flags["define_macros"](debug),
    extra_compile_args=flags["compile_args"](debug),
)

setup(
    ext_modules=cythonize(
        [core],
        compiler_directives={"language_level": 3},
        annotate=os.environ.get("SMPNET_ANNOTATE") == "1",
    ),
)
