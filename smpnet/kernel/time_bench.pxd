cdef extern from "time_bench.h" nogil:
    void tb_empty_function()
    void (*tb_function_ptr)()
