cdef extern from "kernel_build.h" nogil:
    # a kernel build: the shape of its calls and its return, one int (KBUILD)
    enum: KSHAPE_NR
    enum: KRET_NR
    enum: KBUILD_NR
    const char *const kernel_shape_names[]
    const char *const kernel_return_names[]
    int KBUILD(int shape, int ret)
    bint kbuild_valid(int build)
    # 1 where the thunk returns are modelled (GCC on x86)
    enum: RETHUNK_MODELLED
