/* smpnet_jump_label.h - static keys and prefetch() in a user's `ab` file:
 * include/linux/jump_label.h's branches as arch/x86/include/asm/jump_label.h
 * emits them, in the state the key is defined with; smpnet.h includes it.
 * Docs: docs/experiments/ab.md. */
#ifndef SMPNET_JUMP_LABEL_H
#define SMPNET_JUMP_LABEL_H

#include <stdbool.h>

/* A static key's branch is code, not a test: a 5-byte nop where the
 * branch goes the way the key was defined, a `jmp` where it does not,
 * which the kernel rewrites (text_poke) when the key changes. Here the
 * key keeps the state it is defined with (DEFINE_STATIC_KEY_TRUE or
 * _FALSE): a variant that needs a key on is written with the key defined
 * on, and static_branch_enable() and the like do not build. */
struct static_key { int enabled; };
struct static_key_true { struct static_key key; };
struct static_key_false { struct static_key key; };

#define STATIC_KEY_TRUE_INIT	{ .key = { .enabled = 1 } }
#define STATIC_KEY_FALSE_INIT	{ .key = { .enabled = 0 } }
#define DEFINE_STATIC_KEY_TRUE(name)	struct static_key_true name = STATIC_KEY_TRUE_INIT
#define DEFINE_STATIC_KEY_FALSE(name)	struct static_key_false name = STATIC_KEY_FALSE_INIT
#define DEFINE_STATIC_KEY_TRUE_RO(name)	DEFINE_STATIC_KEY_TRUE(name)
#define DEFINE_STATIC_KEY_FALSE_RO(name) DEFINE_STATIC_KEY_FALSE(name)
#define DECLARE_STATIC_KEY_TRUE(name)	extern struct static_key_true name
#define DECLARE_STATIC_KEY_FALSE(name)	extern struct static_key_false name

#if defined(__x86_64__) || defined(__i386__)
/* arch_static_branch(): the nop (x86's BYTES_NOP5), falling through */
static __always_inline bool arch_static_branch(void)
{
	__asm__ goto(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00" : : : : l_yes);
	return false;
l_yes:
	return true;
}

/* arch_static_branch_jump(): the `jmp` to the branch */
static __always_inline bool arch_static_branch_jump(void)
{
	__asm__ goto("jmp %l[l_yes]" : : : : l_yes);
	return false;
l_yes:
	return true;
}
#else
static __always_inline bool arch_static_branch(void) { return false; }
static __always_inline bool arch_static_branch_jump(void) { return true; }
#endif

/* ____wrong_branch_error(): a key of neither type, a build error as the kernel's */
extern bool smpnet_wrong_branch_error(void)
	__attribute__((error("static_branch_*() takes a static_key_true or static_key_false")));
/* the key's state is its definition's (above) */
extern void smpnet_static_key_is_fixed(void)
	__attribute__((error("a static key keeps the state it is defined with here: "
			     "define it with DEFINE_STATIC_KEY_TRUE or _FALSE")));

#define SMPNET_KEY_IS(x, type)	__builtin_types_compatible_p(__typeof__(*(x)), struct type)
#define static_branch_likely(x)								\
	likely(SMPNET_KEY_IS(x, static_key_true) ? !arch_static_branch() :		\
	       SMPNET_KEY_IS(x, static_key_false) ? !arch_static_branch_jump() :	\
	       smpnet_wrong_branch_error())
#define static_branch_unlikely(x)							\
	unlikely(SMPNET_KEY_IS(x, static_key_true) ? arch_static_branch_jump() :	\
		 SMPNET_KEY_IS(x, static_key_false) ? arch_static_branch() :		\
		 smpnet_wrong_branch_error())
#define static_key_enabled(x)	(READ_ONCE((x)->key.enabled) > 0)
#define static_branch_enable(x)		smpnet_static_key_is_fixed()
#define static_branch_disable(x)	smpnet_static_key_is_fixed()
#define static_branch_inc(x)		smpnet_static_key_is_fixed()
#define static_branch_dec(x)		smpnet_static_key_is_fixed()
#define static_key_enable(x)		smpnet_static_key_is_fixed()
#define static_key_disable(x)		smpnet_static_key_is_fixed()

/* include/linux/prefetch.h: x86's prefetcht0 (prefetchw() is a name of the
 * model's, the file's own unless it includes smpnet_qspinlock.h) */
#define prefetch(x)	__builtin_prefetch((x), 0, 3)

#endif
