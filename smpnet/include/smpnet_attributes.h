/* smpnet_attributes.h - what a pasted kernel function carries besides its
 * code: include/linux/compiler_attributes.h's attributes, kconfig.h's
 * IS_ENABLED() and export.h's EXPORT_SYMBOL(); smpnet.h includes it.
 * Docs: docs/experiments/ab.md. */
#ifndef SMPNET_ATTRIBUTES_H
#define SMPNET_ATTRIBUTES_H

/* the attributes, spelled as the kernel's (smpnet's own headers write
 * __noinline__ and the like, so that these names stay the file's) */
#define noinline		__attribute__((__noinline__))
#define __cold			__attribute__((__cold__))
#define __hot			__attribute__((__hot__))
#define __packed		__attribute__((__packed__))
#define __maybe_unused		__attribute__((__unused__))
#define __always_unused		__attribute__((__unused__))
#define __must_check		__attribute__((__warn_unused_result__))
#define __weak			__attribute__((__weak__))
#define __noreturn		__attribute__((__noreturn__))
#define __pure			__attribute__((__pure__))
#define __used			__attribute__((__used__))
#define fallthrough		__attribute__((__fallthrough__))
#define __cacheline_aligned	____cacheline_aligned
#define __cacheline_aligned_in_smp	____cacheline_aligned_in_smp
/* sections and exports are the linker's matters: nothing here */
#define __init
#define __exit
#define __initdata
#define EXPORT_SYMBOL(sym)
#define EXPORT_SYMBOL_GPL(sym)

/* include/linux/kconfig.h: IS_ENABLED(CONFIG_X) is 1 where the file
 * defines CONFIG_X (or CONFIG_X_MODULE) as 1, else 0, a constant the
 * compiler folds; no option is set unless the file sets it, but SMP
 * and x86-64's (below) */
#define __ARG_PLACEHOLDER_1	0,
#define __take_second_arg(__ignored, val, ...)	val
#define __is_defined(x)		___is_defined(x)
#define ___is_defined(val)	____is_defined(__ARG_PLACEHOLDER_##val)
#define ____is_defined(arg1_or_junk)	__take_second_arg(arg1_or_junk 1, 0)
#define IS_BUILTIN(option)	__is_defined(option)
#define IS_MODULE(option)	__is_defined(option##_MODULE)
#define IS_ENABLED(option)	(IS_BUILTIN(option) || IS_MODULE(option))
#define IS_REACHABLE(option)	(IS_BUILTIN(option) || (IS_MODULE(option) && __is_defined(MODULE)))

/* what every kernel smpnet models is: SMP, 64-bit, x86 (the file may say
 * otherwise first) */
#ifndef CONFIG_SMP
#define CONFIG_SMP	1
#endif
#ifndef CONFIG_64BIT
#define CONFIG_64BIT	1
#endif
#ifndef CONFIG_X86
#define CONFIG_X86	1
#endif
#ifndef CONFIG_X86_64
#define CONFIG_X86_64	1
#endif

#endif
