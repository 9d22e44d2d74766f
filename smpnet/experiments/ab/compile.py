"""The child process that builds a user's file (build.py runs it, bounded
in time): reads the job as JSON on stdin, compiles it with cffi, and
answers with one JSON object on stdout, {"path": the built object} or
{"error": why}; stderr carries the compiler's own messages and nothing else."""
import json
import logging
import os
import sys


def _quiet_build():
    """The build's own chatter (the commands it runs, its progress) off:
    distutils' log and setuptools' logging kept to warnings."""
    logging.getLogger().setLevel(logging.WARNING)
    try:
        from distutils import log
    except ImportError:     # no distutils shim: setuptools logs through logging alone
        return
    log.set_threshold(log.WARN)


def main():
    job = json.load(sys.stdin)
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)           # whatever else the build prints goes to stderr, not the answer
    _quiet_build()
    # setuptools builds with Cython's build_ext where Cython imports, and
    # imports its compiler to be sure (0.3 s a build); a C file needs none
    sys.modules["Cython"] = None
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(job["cdef"])
    ffi.set_source(job["modname"], job["source"], include_dirs=job["include_dirs"],
                   define_macros=[tuple(m) for m in job["define_macros"]],
                   extra_compile_args=job["extra_compile_args"],
                   extra_link_args=job.get("extra_link_args", []))
    try:
        out = {"path": ffi.compile(tmpdir=job["tmpdir"], verbose=False)}
    except Exception as e:   # the compiler said why, on stderr
        out = {"error": f"{type(e).__name__}: {e}"}
    json.dump(out, answer)
    answer.close()
    sys.exit(0 if "path" in out else 1)


if __name__ == "__main__":
    main()
