/* smpnet_printk.h - printk() and its pr_*() and net_*_ratelimited() forms in
 * a user's `ab` file; smpnet.h includes it. Docs: docs/experiments/ab.md. */
#ifndef SMPNET_PRINTK_H
#define SMPNET_PRINTK_H

/* A message in a timed op would time the console: as a WARN (smpnet_bug.h),
 * one that prints is counted and its first place reported beside the
 * results, named as the file calls it (_once and _ratelimited too), not
 * printed; its arguments are type-checked as printf's and
 * not evaluated. pr_debug() and net_dbg_ratelimited() are nothing, as in
 * a kernel built without DEBUG or dynamic debug (no_printk()). */
/* include/linux/kern_levels.h: a level is a prefix of the format */
#define KERN_SOH	"\001"
#define KERN_EMERG	KERN_SOH "0"
#define KERN_ALERT	KERN_SOH "1"
#define KERN_CRIT	KERN_SOH "2"
#define KERN_ERR	KERN_SOH "3"
#define KERN_WARNING	KERN_SOH "4"
#define KERN_NOTICE	KERN_SOH "5"
#define KERN_INFO	KERN_SOH "6"
#define KERN_DEBUG	KERN_SOH "7"
#define KERN_DEFAULT	""
#define KERN_CONT	KERN_SOH "c"

static inline __attribute__((__format__(printf, 1, 2))) int smpnet_no_printk(const char *fmt, ...)
{
	(void)fmt;
	return 0;
}
#define no_printk(fmt, ...)	({ if (0) smpnet_no_printk(fmt, ##__VA_ARGS__); 0; })
/* `text`: the format as the file spells it (KERN_ERR unexpanded) */
#define smpnet_printk(what, text, fmt, ...)						\
	({ no_printk(fmt, ##__VA_ARGS__); smpnet_warn(SMPNET_HERE(what "(" text ")")); 0; })
#define printk(fmt, ...)		smpnet_printk("printk", #fmt, fmt, ##__VA_ARGS__)
#define pr_emerg(fmt, ...)		smpnet_printk("pr_emerg", #fmt, fmt, ##__VA_ARGS__)
#define pr_alert(fmt, ...)		smpnet_printk("pr_alert", #fmt, fmt, ##__VA_ARGS__)
#define pr_crit(fmt, ...)		smpnet_printk("pr_crit", #fmt, fmt, ##__VA_ARGS__)
#define pr_err(fmt, ...)		smpnet_printk("pr_err", #fmt, fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...)		smpnet_printk("pr_warn", #fmt, fmt, ##__VA_ARGS__)
#define pr_notice(fmt, ...)		smpnet_printk("pr_notice", #fmt, fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...)		smpnet_printk("pr_info", #fmt, fmt, ##__VA_ARGS__)
#define pr_cont(fmt, ...)		no_printk(fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...)		no_printk(fmt, ##__VA_ARGS__)
#define pr_err_once(fmt, ...)		smpnet_printk("pr_err_once", #fmt, fmt, ##__VA_ARGS__)
#define pr_warn_once(fmt, ...)		smpnet_printk("pr_warn_once", #fmt, fmt, ##__VA_ARGS__)
#define pr_info_once(fmt, ...)		smpnet_printk("pr_info_once", #fmt, fmt, ##__VA_ARGS__)
#define pr_err_ratelimited(fmt, ...)	smpnet_printk("pr_err_ratelimited", #fmt, fmt, ##__VA_ARGS__)
#define pr_warn_ratelimited(fmt, ...)	smpnet_printk("pr_warn_ratelimited", #fmt, fmt, ##__VA_ARGS__)
#define pr_info_ratelimited(fmt, ...)	smpnet_printk("pr_info_ratelimited", #fmt, fmt, ##__VA_ARGS__)
#define net_err_ratelimited(fmt, ...)	smpnet_printk("net_err_ratelimited", #fmt, fmt, ##__VA_ARGS__)
#define net_warn_ratelimited(fmt, ...)	smpnet_printk("net_warn_ratelimited", #fmt, fmt, ##__VA_ARGS__)
#define net_info_ratelimited(fmt, ...)	smpnet_printk("net_info_ratelimited", #fmt, fmt, ##__VA_ARGS__)
#define net_dbg_ratelimited(fmt, ...)	no_printk(fmt, ##__VA_ARGS__)

#endif
