"""The C flags smpnet's core is built with, in one place: setup.py builds
smpnet._core with them, and `ab` a user's file (experiments/ab/build.py),
so that a user's op compiles to the code the built-in ops compile to.
Plain Python with no imports of smpnet's: setup.py runs it before any of
smpnet is built."""
import platform


def compile_args(debug=False):
    # -mno-red-zone, as the kernel is built: the `pushf; pop` of
    # local_irq_save() writes below the stack pointer
    return ((["-O0", "-g"] if debug else ["-O2"])
            + (["-mno-red-zone"] if platform.machine() in ("x86_64", "AMD64") else []))


def define_macros(debug=False):
    return [] if debug else [("NDEBUG", "1")]
