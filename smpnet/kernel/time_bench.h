/* time_bench.h - the call-cost ops of time_bench_sample.c. */
#ifndef SMPNET_TIME_BENCH_H
#define SMPNET_TIME_BENCH_H

#include "compiler.h"

/* An empty function the compiler may not inline: function_call_cost. */
static __attribute__((noinline)) void tb_empty_function(void)
{
	barrier();
}

/* Called through a pointer the compiler cannot see through: func_ptr_call_cost. */
static void (*volatile tb_function_ptr)(void) = tb_empty_function;

#endif
