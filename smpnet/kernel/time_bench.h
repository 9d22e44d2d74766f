/* time_bench.h - the call-cost ops of time_bench_sample.c, and the loops
 * of the tests whose ops depend on the lock algorithm, the checker or the
 * restore mode: one compiled loop per combination they can run. */
#ifndef SMPNET_TIME_BENCH_H
#define SMPNET_TIME_BENCH_H

#include "bpf_helpers.h"
#include "compiler.h"
#include "spinlock_variant.h"
#include "tsc.h"

/* An empty function the compiler may not inline: function_call_cost. */
static __attribute__((__noinline__)) void tb_empty_function(void)
{
	barrier();
}

/* The referee's helper_call and irq_save_restore
 * (experiments/kernel/referee.py): an empty function, and local_irq_save()
 * and local_irq_restore() each a call, as the kernel's
 * bpf_local_irq_save()/restore() kfuncs are; one copy per return
 * (kernel_build.h), for the kernel's helpers return as it was built and
 * its CPU patched (a `jmp` to SRSO's safe-RET thunk on a Zen 4 guest).
 * The IRQ bodies are the model's (a real pushf; pop, the mask kept in
 * software, no cli or sti: user space may not run them). */
#define DEFINE_TB_CALLS(t)								\
	static __attribute__((__noinline__)) RETURN_VIA_##t void tb_helper_##t(void)	\
	{										\
		RETURN_ENTER_##t;							\
		TB_HELPER_BODY;								\
	}										\
	static __attribute__((__noinline__)) RETURN_VIA_##t void				\
	tb_irq_save_call_##t(struct cpu_ctx *c, unsigned long *flags)			\
	{										\
		RETURN_ENTER_##t;							\
		*flags = __local_irq_save(c, 0);					\
	}										\
	static __attribute__((__noinline__)) RETURN_VIA_##t void				\
	tb_irq_restore_call_##t(struct cpu_ctx *c, unsigned long *flags)		\
	{										\
		RETURN_ENTER_##t;							\
		__local_irq_restore(c, *flags, 0, 0);					\
	}
/* bpf_get_numa_node_id()'s body as x86-64 builds it: the ftrace site's
 * 5-byte nop (BYTES_NOP5, asm/nops.h: as bytes, since the assembler makes
 * `nopl 0x0(%rax,%rax,1)` the 4-byte form), then numa_node_id(), one
 * per-CPU load (this_cpu_read(): `movslq %gs:numa_node(%rip),%rax`); here
 * of %fs, the segment user space may read (its first word, the thread's
 * own pointer). */
#ifdef __x86_64__
#define TB_HELPER_BODY	__asm__ __volatile__(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"	\
					     "movslq %%fs:0,%%rax" ::: "rax")
#else
#define TB_HELPER_BODY	barrier()
#endif
DEFINE_TB_CALLS(0)
DEFINE_TB_CALLS(1)
DEFINE_TB_CALLS(2)

/* referee.py's UNROLL: the ops an uncontended program runs beyond its twin
 * (256 against 128), and a contended program's ops between two passes of
 * the kernel's test loop (kernel/bpf/test_run.c). */
#define TB_PROG_OPS	128
#define TB_UNROLL	16	/* the atomics' ops in one loop iteration (below) */

/* The referee's calls back to back, as its BPF programs make them (256
 * in a row, the twin 128): TB_PROG_OPS in one loop iteration, of the empty
 * function (helper_call) or of the IRQ save and restore (irq_save_restore),
 * the copies that return as `build` does. One call a loop iteration
 * (function_call_cost) overlaps the call with the loop's own branch, which
 * the empty loop subtracted does not undo: a different op. And 16 a loop
 * iteration are not a run as long as the programs' either: under SRSO's
 * safe RET, whose every return mispredicts, 16 calls in an 80-byte loop
 * cost 14.9-15.1 cycles a call at 11 of 16 placements of the loop and
 * 16.2-16.4 at the rest, 128 in a row 16.0-17.0 at every one (a bare-C
 * sweep on the Zen 4 guest, kernel.md). `loops` counts calls (rounded
 * down to a whole iteration). */
static __always_inline uint64_t tb_calls_back_to_back(struct cpu_ctx *c, uint64_t loops,
						      const int irq, const int build)
{
	uint64_t i, t0 = tsc_start();
	unsigned long flags;

	for (i = 0; i < loops / TB_PROG_OPS; i++) {
		_Pragma("GCC unroll 128")
		for (int j = 0; j < TB_PROG_OPS; j++) {
			if (!irq) {
				RETURN_COPY(tb_helper, kbuild_return(build))();
			} else {
				RETURN_COPY(tb_irq_save_call, kbuild_return(build))(c, &flags);
				RETURN_COPY(tb_irq_restore_call, kbuild_return(build))(c, &flags);
			}
		}
	}
	return tsc_stop() - t0;
}

/* The referee's atomics, TB_UNROLL in a loop iteration as its programs run
 * them back to back: one op a loop iteration overlaps the locked op with the
 * loop's own instructions, and subtracting the empty loop then takes off
 * time the op hid (0.8 cycles of a 5-cycle lock xadd on a Zen 4 guest: a
 * different op). Each op's result is kept in a register and nothing more,
 * as the JIT's (the next op's constant overwrites it): xadd (a result never
 * used, gcc emits lock add), cmpxchg of the word read to itself + 1 (it
 * always succeeds), xchg of a constant. `loops` counts ops (rounded down
 * to a whole iteration). */
enum { TB_ATOMIC_FETCH_ADD, TB_ATOMIC_CMPXCHG, TB_ATOMIC_XCHG, TB_NR_ATOMIC_OPS };

#define TB_KEEP(x)	__asm__ __volatile__("" : : "r"(x))

/* TB_UNROLL of op `op` on `word`, back to back (a failed cmpxchg is not retried) */
static __always_inline void tb_atomics_burst(uint32_t *word, const int op)
{
	uint32_t old;

	_Pragma("GCC unroll 16")
	for (int j = 0; j < TB_UNROLL; j++) {
		if (op == TB_ATOMIC_FETCH_ADD) {
			TB_KEEP(atomic_inc_return(word));
		} else if (op == TB_ATOMIC_CMPXCHG) {
			old = READ_ONCE(*word);
			atomic_cmpxchg(word, old, old + 1);
		} else {
			TB_KEEP(atomic_xchg(word, 1));
		}
	}
}

static __always_inline uint64_t tb_atomics_unrolled(uint32_t *word, uint64_t loops, const int op)
{
	uint64_t i, t0 = tsc_start();

	for (i = 0; i < loops / TB_UNROLL; i++)
		tb_atomics_burst(word, op);
	return tsc_stop() - t0;
}

/* The referee's per-CPU increment as its program runs it: a u64's load,
 * add and store (the JIT's mov, add, mov), TB_PROG_OPS in a row (256 in
 * the program, 128 in its twin), on this CPU's copy of a per-CPU variable
 * (pcpu_lstats.packets), its address held in a register as the JIT holds
 * the map value's (r6: %rbx, arch/x86/net/bpf_jit_comp.c).
 * How many in a row decides the cost where the CPU renames memory: on a
 * Zen 3 guest a chain of up to 24 such ops in a loop, or one on the stack
 * pointer, costs 0.75 cycles an op, its load fed from the store before it
 * without waiting; from 32 in a row on, 5.3-5.8, the store forwarded at its
 * latency, as the kernel's (5.9-6.0). The model's 16 to an iteration on a
 * stack slot came out 0.72 there, until 2026-12-07 (kernel.md, "A third CPU
 * family"). One op to an iteration hid in the loop's own instructions. */
static __always_inline uint64_t tb_this_cpu_inc_unrolled(struct cpu_ctx *c, uint64_t loops)
{
	volatile uint64_t *value = &this_lstats(c)->packets;
	uint64_t i, t0 = tsc_start();

	for (i = 0; i < loops / TB_PROG_OPS; i++) {
		_Pragma("GCC unroll 128")
		for (int j = 0; j < TB_PROG_OPS; j++)
			*value = *value + 1;
	}
	return tsc_stop() - t0;
}

/* Under contention, how often a CPU leaves the line alone moves the cost
 * of an op (a clock read every 16 ops made the model's contended atomics
 * 7-9 % dearer than one every TB_PROG_OPS, on the Intel guest), so the
 * contended loops leave it as often as the referee's programs do. */
_Static_assert(TB_PROG_OPS % TB_UNROLL == 0 && (TB_PROG_OPS & (TB_PROG_OPS - 1)) == 0,
	       "whole iterations of the unrolled loops, a mask for lock_hammer");

/* The referee's contended atomics (experiments/kernel/referee.py): one
 * locked RMW on a word every CPU shares, over and over until `deadline`
 * (read every TB_PROG_OPS ops) or a stop: tb_atomics_unrolled()'s ops, as
 * the kernel's programs run them, back to back between two reads of the
 * clock. One loop per op (a constant): no dispatch inside. Returns the
 * ops; *cycles the time. */

static __always_inline uint64_t __tb_atomic_hammer(const struct smp_header *hdr, uint32_t *word,
						   uint64_t deadline, uint64_t *cycles, const int op)
{
	uint64_t n = 0, t0 = tsc_start();

	for (;;) {
		tb_atomics_burst(word, op);
		n += TB_UNROLL;
		if (n % TB_PROG_OPS == 0 && (tsc_read_unordered() >= deadline || smp_should_stop(hdr)))
			break;
	}
	*cycles = tsc_stop() - t0;
	return n;
}

static inline uint64_t tb_atomic_hammer(const struct smp_header *hdr, uint32_t *word, int op,
					uint64_t deadline, uint64_t *cycles)
{
	switch (op) {
	case TB_ATOMIC_FETCH_ADD:
		return __tb_atomic_hammer(hdr, word, deadline, cycles, TB_ATOMIC_FETCH_ADD);
	case TB_ATOMIC_CMPXCHG:
		return __tb_atomic_hammer(hdr, word, deadline, cycles, TB_ATOMIC_CMPXCHG);
	default:
		return __tb_atomic_hammer(hdr, word, deadline, cycles, TB_ATOMIC_XCHG);
	}
}

/* Called through a pointer the compiler cannot see through: func_ptr_call_cost. */
static void (*volatile tb_function_ptr)(void) = tb_empty_function;

/* ---------------------------------------------------------------- the lock tests' loops */

/* The control for irqsave against irq (issue #12): a pseudo-variant that
 * runs every instruction of spin_lock_irqsave()/spin_unlock_irqrestore()
 * but the save's `pushf; pop` (spinlock_api_smp.h's save_fl_nopushf()),
 * shaped as the build shapes irqsave. So irqsave - control is the pushf;
 * pop alone, and control - irq is smpnet's own bookkeeping of the save
 * (the soft mask read and merged) plus, where the build makes irqsave a
 * call and irq's unlock inline (x86-nopreempt), that call. */
/* And the referee's lock pair: bpf_spin_lock() and bpf_spin_unlock() as
 * the model builds them (bpf_helpers.h), two calls deep each side. */
enum { TB_VARIANT_IRQSAVE_NOPUSHF = SPIN_NR_VARIANTS, TB_VARIANT_BPF_SPIN_LOCK, TB_NR_VARIANTS };

/* One lock test's timed loop: lock and unlock `loops` times in one variant,
 * between two TSC reads; stops early (the cycles so far) when an acquire
 * returns -1, a stopped run. Written once; instantiated below for every
 * (variant, algorithm, checker, popf, kernel build) with constants, so
 * that each instance compiles to that one path: no switch on the
 * algorithm or the variant, no test of the checker, the restore mode or
 * the build inside the loop; an entry point the build calls is a direct
 * call of its out-of-line copy. */
static __always_inline uint64_t tb_lock_loop(struct cpu_ctx *c, spinlock_t *l, uint64_t loops,
					     const int variant, const int algo,
					     const int check, const int popf, const int build)
{
	uint64_t i, t0 = tsc_start();
	unsigned long flags;

	for (i = 0; i < loops; i++) {
		if (variant == TB_VARIANT_BPF_SPIN_LOCK) {
			if (BPF_SPIN_LOCK_OF(algo, check, build).lock(c, l))
				break;
			BPF_SPIN_LOCK_OF(algo, check, build).unlock[popf != 0](c, l);
			continue;
		}
		if (variant == TB_VARIANT_IRQSAVE_NOPUSHF) {
			if (_raw_spin_lock_irqsave_nopushf(c, l, &flags, algo, check, build))
				break;
			_raw_spin_unlock_irqrestore(c, l, flags, algo, check, popf, build);
			continue;
		}
		if (__spin_lock_variant(c, l, variant, &flags, algo, check, build))
			break;
		__spin_unlock_variant(c, l, variant, flags, algo, check, popf, build);
	}
	return tsc_stop() - t0;
}

typedef uint64_t (*tb_lock_loop_t)(struct cpu_ctx *c, spinlock_t *l, uint64_t loops);

#define TB_LOCK_LOOP(variant, algo, shape, ret, check, popf)				\
	static uint64_t tb_lock_loop_##variant##_##algo##_##shape##_##ret##_##check##_##popf( \
		struct cpu_ctx *c, spinlock_t *l, uint64_t loops)			\
	{										\
		return tb_lock_loop(c, l, loops, variant, algo, check, popf,		\
				    KBUILD(shape, ret));					\
	}
#define TB_LOCK_LOOP_ENTRY(variant, algo, shape, ret, check, popf)			\
	[variant][algo][KBUILD(shape, ret)][check][popf] =				\
		tb_lock_loop_##variant##_##algo##_##shape##_##ret##_##check##_##popf,

/* checker off/on, restore by test of IF (sti) / by popf; the kernel
 * builds, shape and return (kernel_build.h: the inline shape returns
 * plainly only); the variants, one line each
 * (SPIN_VARIANT_TABLE's, then the control; the assert below and
 * tb_lock_loop_of's NULL keep the two in step); the algorithms from
 * SPIN_ALGO_TABLE. */
#define TB_MODES(X, ...)								\
	X(__VA_ARGS__, 0, 0) X(__VA_ARGS__, 0, 1) X(__VA_ARGS__, 1, 0) X(__VA_ARGS__, 1, 1)
#define TB_X86_SHAPES(M, ret, ...)							\
	M(__VA_ARGS__, KSHAPE_X86_NOPREEMPT, ret)					\
	M(__VA_ARGS__, KSHAPE_X86_PREEMPT, ret)						\
	M(__VA_ARGS__, KSHAPE_X86_DEBUG, ret)
#define TB_BUILDS(M, ...)								\
	M(__VA_ARGS__, KSHAPE_INLINE, 0)						\
	TB_X86_SHAPES(M, 0, __VA_ARGS__)						\
	TB_X86_SHAPES(M, 1, __VA_ARGS__)						\
	TB_X86_SHAPES(M, 2, __VA_ARGS__)
_Static_assert(KSHAPE_NR == 4 && KRET_NR == 3, "a new shape or return needs its line in TB_BUILDS");
#define TB_LOCK_MODES(X, variant, algo)	TB_BUILDS(TB_MODES, X, variant, algo)
#define TB_LOCK_VARIANTS(X, algo)							\
	TB_LOCK_MODES(X, VARIANT_PLAIN, algo)						\
	TB_LOCK_MODES(X, VARIANT_BH, algo)						\
	TB_LOCK_MODES(X, VARIANT_IRQ, algo)						\
	TB_LOCK_MODES(X, VARIANT_IRQSAVE, algo)						\
	TB_LOCK_MODES(X, VARIANT_IRQSAVE_BEFORE_LOCK, algo)				\
	TB_LOCK_MODES(X, VARIANT_IRQ_DISABLE_BEFORE_LOCK, algo)				\
	TB_LOCK_MODES(X, TB_VARIANT_IRQSAVE_NOPUSHF, algo)				\
	TB_LOCK_MODES(X, TB_VARIANT_BPF_SPIN_LOCK, algo)
_Static_assert(SPIN_NR_VARIANTS == 6, "a new lock variant needs its line in TB_LOCK_VARIANTS");

#define TB_LOCK_LOOPS_OF(algo, name)	TB_LOCK_VARIANTS(TB_LOCK_LOOP, algo)
#define TB_LOCK_ENTRIES_OF(algo, name)	TB_LOCK_VARIANTS(TB_LOCK_LOOP_ENTRY, algo)

SPIN_ALGO_TABLE(TB_LOCK_LOOPS_OF)

static const tb_lock_loop_t tb_lock_loops[TB_NR_VARIANTS][SPIN_NR_ALGOS][KBUILD_NR][2][2] = {
	SPIN_ALGO_TABLE(TB_LOCK_ENTRIES_OF)
};

/* The loop for one combination, chosen once before a round; NULL when
 * there is none (out of range, or a variant TB_LOCK_VARIANTS lacks). */
static inline tb_lock_loop_t tb_lock_loop_of(int variant, int algo, int check, int popf,
					     int build)
{
	if (variant < 0 || variant >= TB_NR_VARIANTS || algo < 0 || algo >= SPIN_NR_ALGOS ||
	    !kbuild_valid(build))
		return NULL;
	return tb_lock_loops[variant][algo][build][check != 0][popf != 0];
}

/* ---------------------------------------------------------------- the IRQ tests' loops */

/* The IRQ-model tests whose ops test the checker or the restore mode or
 * follow the kernel build (local_bh_enable(), a call in the x86 ones; the
 * referee's calls, returning as the build returns), specialised the same
 * way, with the lock loops' type (`l` unused). */
enum tb_cpu_op { TB_OP_LOCAL_BH_DISABLE_ENABLE, TB_OP_LOCAL_IRQ_SAVE_RESTORE, TB_OP_CALLS_EMPTY,
		 TB_OP_CALLS_IRQ_SAVE_RESTORE, TB_NR_CPU_OPS };

static __always_inline uint64_t tb_cpu_loop(struct cpu_ctx *c, uint64_t loops, const int op,
					    const int check, const int popf, const int build)
{
	uint64_t i, t0;
	unsigned long flags;

	if (op == TB_OP_CALLS_EMPTY || op == TB_OP_CALLS_IRQ_SAVE_RESTORE)
		return tb_calls_back_to_back(c, loops, op == TB_OP_CALLS_IRQ_SAVE_RESTORE, build);
	t0 = tsc_start();
	for (i = 0; i < loops; i++) {
		if (op == TB_OP_LOCAL_IRQ_SAVE_RESTORE) {
			flags = __local_irq_save(c, check);
			__local_irq_restore(c, flags, check, popf);
		} else {
			local_bh_disable(c);
			local_bh_enable_ip(c, check, build);
		}
	}
	return tsc_stop() - t0;
}

#define TB_CPU_LOOP(op, shape, ret, check, popf)					\
	static uint64_t tb_cpu_loop_##op##_##shape##_##ret##_##check##_##popf(		\
		struct cpu_ctx *c, spinlock_t *l, uint64_t loops)			\
	{										\
		(void)l;								\
		return tb_cpu_loop(c, loops, op, check, popf, KBUILD(shape, ret));	\
	}
#define TB_CPU_LOOP_ENTRY(op, shape, ret, check, popf)					\
	[op][KBUILD(shape, ret)][check][popf] =						\
		tb_cpu_loop_##op##_##shape##_##ret##_##check##_##popf,
#define TB_CPU_OPS(X)									\
	TB_BUILDS(TB_MODES, X, TB_OP_LOCAL_BH_DISABLE_ENABLE)				\
	TB_BUILDS(TB_MODES, X, TB_OP_LOCAL_IRQ_SAVE_RESTORE)				\
	TB_BUILDS(TB_MODES, X, TB_OP_CALLS_EMPTY)					\
	TB_BUILDS(TB_MODES, X, TB_OP_CALLS_IRQ_SAVE_RESTORE)

TB_CPU_OPS(TB_CPU_LOOP)

static const tb_lock_loop_t tb_cpu_loops[TB_NR_CPU_OPS][KBUILD_NR][2][2] = {
	TB_CPU_OPS(TB_CPU_LOOP_ENTRY)
};

static inline tb_lock_loop_t tb_cpu_loop_of(int op, int check, int popf, int build)
{
	if (op < 0 || op >= TB_NR_CPU_OPS || !kbuild_valid(build))
		return NULL;
	return tb_cpu_loops[op][build][check != 0][popf != 0];
}

#endif
