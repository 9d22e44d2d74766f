/* kernel_build.h - the kernel builds smpnet models, and the return thunk.
 *
 * Which of the kernel's functions are out-of-line calls depends on how it
 * was built: the lock entry points by kernel/Kconfig.locks
 * (spinlock_api_smp.h says which, per build), __local_bh_enable_ip() in
 * every build (irqflags.h); and with SRSO's "Safe RET" every such
 * function returns through the return thunk. This header names the builds
 * and defines that thunk, for both.
 */
#ifndef SMPNET_KERNEL_BUILD_H
#define SMPNET_KERNEL_BUILD_H

#include "compiler.h"

/* ---------------------------------------------------------------- builds */

/* Enumerator, and its name as Python offers it (--kernel-build). */
#define KERNEL_BUILD_TABLE(X)						\
	X(KBUILD_INLINE,		"inline")			\
	X(KBUILD_X86_NOPREEMPT,		"x86-nopreempt")		\
	X(KBUILD_X86_PREEMPT,		"x86-preempt")			\
	X(KBUILD_X86_DEBUG,		"x86-debug")			\
	X(KBUILD_X86_NOPREEMPT_SRSO,	"x86-nopreempt+safe-ret")	\
	X(KBUILD_X86_PREEMPT_SRSO,	"x86-preempt+safe-ret")		\
	X(KBUILD_X86_DEBUG_SRSO,	"x86-debug+safe-ret")

SMP_ENUM(kernel_build, KERNEL_BUILD_TABLE, KBUILD_NR);

/* A +safe-ret build is its plain build's shape (what is a call) with the
 * return thunk: the first KBUILD_NR_SHAPES builds, then the x86 ones again. */
#define KBUILD_NR_SHAPES	(KBUILD_X86_DEBUG + 1)
_Static_assert(KBUILD_NR == 2 * KBUILD_NR_SHAPES - 1, "every x86 build has its +safe-ret");

static __always_inline int kbuild_shape(const int build)
{
	return build >= KBUILD_NR_SHAPES ? build - KBUILD_NR_SHAPES + KBUILD_X86_NOPREEMPT : build;
}

static __always_inline int kbuild_rethunk(const int build)
{
	return build >= KBUILD_NR_SHAPES;
}

/* ---------------------------------------------------------------- the return thunk */

/* GCC only: clang has no function_return attribute, and the thunk is x86's.
 * Elsewhere the +safe-ret copies return as the others do; the core says so
 * (RETHUNK_MODELLED), and Python refuses those builds. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define RETHUNK_MODELLED	1
#define __rethunk		__attribute__((function_return("thunk-extern")))
/* Hidden: the core and each user's object have their own. */
__asm__(".pushsection .text.__x86.return_thunk,\"ax\",@progbits\n"
	"\t.p2align 6\n"
	"\t.globl __x86_return_thunk\n"
	"\t.hidden __x86_return_thunk\n"
	"\t.type __x86_return_thunk, @function\n"
	"__x86_return_thunk:\n"
	"\tcall smpnet_srso_safe_ret\n"
	"\tud2\n"
	"\t.size __x86_return_thunk, .-__x86_return_thunk\n"
	"smpnet_srso_safe_ret:\n"
#ifdef __x86_64__
	"\tlea 8(%rsp), %rsp\n"
#else
	"\tlea 4(%esp), %esp\n"
#endif
	"\tret\n"
	"\tint3\n"
	".popsection\n");
#else
#define RETHUNK_MODELLED	0
#define __rethunk
#endif

/* a copy's return: 0 a plain `ret`, 1 through the return thunk */
#define RETURN_VIA_0
#define RETURN_VIA_1	__rethunk

#endif
