/* smpnet_rcu.h - RCU's read side as the run's --kernel-build has it, for a
 * user's `ab` file (smpnet.h includes it): include/linux/rcupdate.h's
 * rcu_read_lock() and its pointer accessors. No writer side: grace periods
 * are not modelled, and `ab` refuses synchronize_rcu(), call_rcu() and the
 * rest before it builds (docs/experiments/ab.md).
 */
#ifndef SMPNET_RCU_H
#define SMPNET_RCU_H

/* PREEMPT_RCU where the build is preemptible (x86-preempt and x86-debug:
 * a PREEMPT_DYNAMIC kernel has PREEMPTION, and PREEMPT_RCU with it) */
static __always_inline int smpnet_preempt_rcu(void)
{
	return kbuild_shape(SMPNET_BUILD_KERNEL) == KSHAPE_X86_PREEMPT ||
	       kbuild_shape(SMPNET_BUILD_KERNEL) == KSHAPE_X86_DEBUG;
}

/* The task's fields kernel/rcu/tree_plugin.h counts in (current's
 * rcu_read_lock_nesting and rcu_read_unlock_special): one task per
 * emulated CPU, each a process of its own, so these are per CPU. */
static int rcu_read_lock_nesting;
static union { struct { u8 blocked, need_qs, exp_hint, need_mb; } b; u32 s; }
	rcu_read_unlock_special;

/* PREEMPT_RCU's, out of line as the kernel's (EXPORT_SYMBOL_GPL): the
 * nesting count, and at the outermost unlock a look at the special
 * state, which nothing sets here (no grace period ever waits on a reader). */
static __attribute__((__noinline__)) SMPNET_RW_VIA void __rcu_read_lock(void)
{
	SMPNET_RW_ENTER;
	WRITE_ONCE(rcu_read_lock_nesting, rcu_read_lock_nesting + 1);
	barrier();	/* the critical section after the entry code */
}

static __attribute__((__noinline__)) SMPNET_RW_VIA void __rcu_read_unlock(void)
{
	SMPNET_RW_ENTER;
	barrier();	/* the critical section before the exit code */
	WRITE_ONCE(rcu_read_lock_nesting, rcu_read_lock_nesting - 1);
	if (rcu_read_lock_nesting == 0) {
		barrier();
		if (unlikely(READ_ONCE(rcu_read_unlock_special.s)))
			BUG();	/* rcu_read_unlock_special(): never, no grace periods */
	}
}

/* rcu_read_lock(): PREEMPT_RCU's call, or (TREE_RCU) preempt_disable() */
#define rcu_read_lock()		do { if (smpnet_preempt_rcu()) __rcu_read_lock(); else preempt_disable(); } while (0)
#define rcu_read_unlock()	do { if (smpnet_preempt_rcu()) __rcu_read_unlock(); else preempt_enable(); } while (0)
#define rcu_read_lock_bh()	local_bh_disable()
#define rcu_read_unlock_bh()	local_bh_enable()
#define rcu_read_lock_sched()	preempt_disable()
#define rcu_read_unlock_sched()	preempt_enable()
#define rcu_read_lock_held()	(smpnet_preempt_rcu() ? rcu_read_lock_nesting > 0 : 1)

/* The accessors: on x86 a load (READ_ONCE) and a release store, a plain
 * store after a compiler barrier (include/linux/rcupdate.h) */
#define rcu_dereference(p)		READ_ONCE(p)
#define rcu_dereference_bh(p)		READ_ONCE(p)
#define rcu_dereference_sched(p)	READ_ONCE(p)
#define rcu_dereference_protected(p, c)	(p)
#define rcu_dereference_raw(p)		READ_ONCE(p)
#define rcu_access_pointer(p)		READ_ONCE(p)
#define rcu_assign_pointer(p, v)	smp_store_release(&(p), (v))
#define RCU_INIT_POINTER(p, v)		WRITE_ONCE(p, v)

#endif
