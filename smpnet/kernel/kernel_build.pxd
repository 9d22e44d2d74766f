cdef extern from "kernel_build.h" nogil:
    # the kernel builds the lock entry points and local_bh_enable() follow
    enum: KBUILD_NR
    const char *const kernel_build_names[]
    # 1 where the +safe-ret builds' copies return through the return thunk
    enum: RETHUNK_MODELLED
