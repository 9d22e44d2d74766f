"""The child process that builds a user's file (build.py runs it, bounded
in time): reads the job as JSON on stdin, compiles it with cffi, prints
the built object's path last. The compiler's diagnostics go to stderr."""
import json
import sys


def main():
    job = json.load(sys.stdin)
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(job["cdef"])
    ffi.set_source(job["modname"], job["source"], include_dirs=job["include_dirs"],
                   define_macros=[tuple(m) for m in job["define_macros"]],
                   extra_compile_args=job["extra_compile_args"])
    try:
        path = ffi.compile(tmpdir=job["tmpdir"], verbose=False)
    except Exception as e:   # the compiler said why, on stderr, above
        print(f"smpnet-ab-built: failed ({type(e).__name__})", file=sys.stderr)
        sys.exit(1)
    print(f"smpnet-ab-built: {path}")


if __name__ == "__main__":
    main()
