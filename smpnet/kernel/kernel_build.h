/* kernel_build.h - a kernel build as two facts: its shape, which of the
 * kernel's functions are out-of-line calls, and its return, how every such
 * function returns. docs/experiments/locks.md, "Kernel builds".
 *
 * The shape: the lock entry points by kernel/Kconfig.locks
 * (spinlock_api_smp.h says which, per shape), __local_bh_enable_ip() in
 * every x86 build (irqflags.h). The return: a plain `ret`, or a `jmp` to a
 * return thunk where the kernel was built with MITIGATION_RETHUNK and the
 * CPU's mitigation patched one in (arch/x86/kernel/cpu/bugs.c). A build is
 * one int that carries both, KBUILD(shape, ret), which the compiler folds.
 */
#ifndef SMPNET_KERNEL_BUILD_H
#define SMPNET_KERNEL_BUILD_H

#include "compiler.h"

/* Enumerator, and its name as Python offers it (--kernel-build). */
#define KERNEL_SHAPE_TABLE(X)					\
	X(KSHAPE_INLINE,	"inline")			\
	X(KSHAPE_X86_NOPREEMPT,	"x86-nopreempt")		\
	X(KSHAPE_X86_PREEMPT,	"x86-preempt")			\
	X(KSHAPE_X86_DEBUG,	"x86-debug")

SMP_ENUM(kernel_shape, KERNEL_SHAPE_TABLE, KSHAPE_NR);

/* Each return, and the suffix its builds' names carry. The numbers are
 * the `t` of the out-of-line copies' names (spinlock_api_smp.h). */
#define KERNEL_RETURN_TABLE(X)					\
	X(KRET_RET,		"")				\
	X(KRET_SAFE_RET,	"+safe-ret")			\
	X(KRET_RET_THUNK,	"+ret-thunk")

SMP_ENUM(kernel_return, KERNEL_RETURN_TABLE, KRET_NR);

#define KBUILD(shape, ret)	((shape) + KSHAPE_NR * (ret))
#define KBUILD_NR		(KSHAPE_NR * KRET_NR)

static __always_inline int kbuild_shape(const int build)
{
	return build % KSHAPE_NR;
}

static __always_inline int kbuild_return(const int build)
{
	return build / KSHAPE_NR;
}

/* The inline shape has no out-of-line function to return from: only
 * KBUILD(KSHAPE_INLINE, KRET_RET) is a build. */
static __always_inline int kbuild_valid(const int build)
{
	return build >= 0 && build < KBUILD_NR &&
	       (kbuild_shape(build) != KSHAPE_INLINE || kbuild_return(build) == KRET_RET);
}

/* ---------------------------------------------------------------- the thunks */

/* GCC only: clang has no function_return attribute, and the thunks are
 * x86's. Elsewhere the thunk returns are plain ones; the core says so
 * (RETHUNK_MODELLED), and Python refuses those builds.
 *
 * GCC's function_return("thunk-extern") ends a function in `jmp
 * __x86_return_thunk`, as the kernel's -mfunction-return=thunk-extern does;
 * the kernel then patches each such jump to the thunk its CPU needs
 * (alternative.c, apply_returns()). Here each copy names its thunk itself:
 * RETURN_ENTER sets __x86_return_thunk to it, first thing in the copy's
 * body, so the copy's own jumps, which the assembler meets after it, go
 * there (an assembler symbol set again takes its new value from there on;
 * tests/test_kernel_build.py reads every copy's jumps).
 *
 * The thunks, local to each object (the core's, each user's):
 *   smpnet_srso_return_thunk  SRSO's "Safe RET" (retpoline.S's
 *       srso_alias_return_thunk: `call srso_alias_safe_ret; ud2`, and that
 *       `lea 8(%rsp), %rsp; ret; int3`): every return mispredicts. Laid out
 *       as the kernel's: the safe RET first, the thunk right after it
 *       (retpoline.S), the safe RET at page offset 0x104 (vmlinux.lds.S
 *       puts it at srso_alias_untrain_ret, page aligned, | bits 2, 8, 14
 *       and 20), where a mispredicted return's cost depends on the layout
 *   smpnet_ret_thunk  a `ret; int3` in the upper half of a 64-byte line:
 *       retbleed's untrained return thunk (retbleed_return_thunk) and
 *       ITS's its_return_thunk, which are both that */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define RETHUNK_MODELLED	1
#define __rethunk		__attribute__((function_return("thunk-extern")))
#ifdef __x86_64__
#define SMP_SAFE_RET_LEA	"\tlea 8(%rsp), %rsp\n"
#else
#define SMP_SAFE_RET_LEA	"\tlea 4(%esp), %esp\n"
#endif
__asm__(".pushsection .text.__x86.return_thunk,\"ax\",@progbits\n"
	"\t.p2align 12\n"
	"\t.skip 0x104, 0xcc\n"
	"smpnet_srso_safe_ret:\n"
	SMP_SAFE_RET_LEA
	"\tret\n"
	"\tint3\n"
	"\t.type smpnet_srso_return_thunk, @function\n"
	"smpnet_srso_return_thunk:\n"
	"\tcall smpnet_srso_safe_ret\n"
	"\tud2\n"
	"\t.size smpnet_srso_return_thunk, .-smpnet_srso_return_thunk\n"
	"\t.p2align 6, 0xcc\n"
	"\t.skip 32, 0xcc\n"
	"\t.type smpnet_ret_thunk, @function\n"
	"smpnet_ret_thunk:\n"
	"\tret\n"
	"\tint3\n"
	"\t.size smpnet_ret_thunk, .-smpnet_ret_thunk\n"
	".popsection\n");
#define RETURN_ENTER_1	__asm__ __volatile__(".set __x86_return_thunk, smpnet_srso_return_thunk")
#define RETURN_ENTER_2	__asm__ __volatile__(".set __x86_return_thunk, smpnet_ret_thunk")
#else
#define RETHUNK_MODELLED	0
#define __rethunk
#define RETURN_ENTER_1
#define RETURN_ENTER_2
#endif

/* A copy of return `t` (KERNEL_RETURN_TABLE's number, a literal): its
 * attribute (RETURN_VIA_t) and the first statement of its body
 * (RETURN_ENTER_t). */
#define RETURN_VIA_0
#define RETURN_VIA_1	__rethunk
#define RETURN_VIA_2	__rethunk
#define RETURN_ENTER_0
_Static_assert(KRET_SAFE_RET == 1 && KRET_RET_THUNK == 2 && KRET_NR == 3,
	       "RETURN_VIA_t and RETURN_ENTER_t follow KERNEL_RETURN_TABLE");

/* Of copies fn##_0, fn##_1, fn##_2, the one that returns as `ret` (a
 * constant: a direct call of it) does. */
#define RETURN_COPY(fn, ret)								\
	((ret) == KRET_SAFE_RET ? fn##_1 : (ret) == KRET_RET_THUNK ? fn##_2 : fn##_0)

#endif
