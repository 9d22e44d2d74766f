/* smpnet_bug.h - BUG_ON() and WARN_ON() in a user's `ab` file
 * (include/asm-generic/bug.h); smpnet.h includes it. Docs:
 * docs/experiments/ab.md. */
#ifndef SMPNET_BUG_H
#define SMPNET_BUG_H

/* BUG_ON() and WARN_ON(), as a kernel developer's code has them: a BUG
 * ends the op and the run, naming its file and line (the harness asks
 * smpnet_bug_report()); a WARN is the condition's value, as the kernel's,
 * and the first one's place and the count are reported beside the results
 * (smpnet_warn_take()), not printed. */
static const char *smpnet_bug_;
static const char *smpnet_warned_;
static unsigned long smpnet_warns_;
const char *smpnet_bug_report(void) { return smpnet_bug_; }
const char *smpnet_warn_take(unsigned long *count)
{
	const char *first = smpnet_warned_;

	*count = smpnet_warns_;
	smpnet_warned_ = NULL;
	smpnet_warns_ = 0;
	return first;
}
static inline void smpnet_warn(const char *where)
{
	if (!smpnet_warns_++)
		smpnet_warned_ = where;
}
#define SMPNET_STR_(x)	#x
#define SMPNET_STR(x)	SMPNET_STR_(x)
#define SMPNET_HERE(what)	__FILE__ ":" SMPNET_STR(__LINE__) ": " what
#undef BUG
#define BUG()		do { smpnet_bug_ = SMPNET_HERE("BUG()"); longjmp(smpnet_unwind, 1); } while (0)
#define BUG_ON(cond)									\
	do {										\
		if (unlikely(cond)) {							\
			smpnet_bug_ = SMPNET_HERE("BUG_ON(" #cond ")");			\
			longjmp(smpnet_unwind, 1);					\
		}									\
	} while (0)
#define WARN_ON(cond)									\
	({ int __ret = !!(cond); if (unlikely(__ret)) smpnet_warn(SMPNET_HERE("WARN_ON(" #cond ")")); __ret; })
#define WARN_ON_ONCE(cond)								\
	({ int __ret = !!(cond); if (unlikely(__ret))					\
		smpnet_warn(SMPNET_HERE("WARN_ON_ONCE(" #cond ")")); __ret; })
#define WARN(cond, ...)									\
	({ int __ret = !!(cond); if (unlikely(__ret)) smpnet_warn(SMPNET_HERE("WARN(" #cond ")")); __ret; })
#define WARN_ONCE(cond, ...)	WARN(cond, __VA_ARGS__)

/* A kernel without CONFIG_DEBUG_NET (include/net/net_debug.h) and without
 * lockdep (include/linux/lockdep.h): the condition and the lock are type
 * checked, never run, as BUILD_BUG_ON_INVALID() has them. */
#define SMPNET_UNEVALUATED(e)		((void)sizeof((long)(e)))
#define DEBUG_NET_WARN_ON_ONCE(cond)	SMPNET_UNEVALUATED(cond)
#define DEBUG_NET_WARN_ONCE(cond, ...)	SMPNET_UNEVALUATED(cond)
#define lockdep_assert(cond)		SMPNET_UNEVALUATED(cond)
#define lockdep_assert_held(l)		do { (void)(l); } while (0)
#define lockdep_assert_held_once(l)	do { (void)(l); } while (0)
#define lockdep_assert_not_held(l)	do { (void)(l); } while (0)
#define lockdep_assert_irqs_disabled()	do { } while (0)
#define lockdep_assert_irqs_enabled()	do { } while (0)
#define lockdep_assert_in_softirq()	do { } while (0)
#define lockdep_assert_preemption_disabled()	do { } while (0)

#endif
