/* smpnet_local_lock.h - local_lock_t in a user's `ab` file, as
 * include/linux/local_lock.h and local_lock_internal.h build it in a
 * kernel without PREEMPT_RT and without lockdep; smpnet.h includes it.
 * Docs: docs/experiments/ab.md. */
#ifndef SMPNET_LOCAL_LOCK_H
#define SMPNET_LOCAL_LOCK_H

/* Without DEBUG_LOCK_ALLOC a local_lock_t holds nothing (its dep_map and
 * owner are lockdep's): taking one is what protects this CPU's data, no
 * more. local_lock() disables preemption, local_lock_irq() and
 * _irqsave() IRQs, local_lock_nested_bh() nothing (its caller has BHs
 * off, which lockdep alone asserts); the acquire and release on
 * this_cpu_ptr(lock) are lockdep's and compile to nothing (SMPNET_UNEVALUATED(),
 * smpnet_bug.h's: not even this_cpu_ptr()'s read of this_cpu_off, which
 * is asm here). */
typedef struct { } local_lock_t;
#define INIT_LOCAL_LOCK(lockname)	{ }
#define local_lock_init(lock)		do { (void)(lock); } while (0)
#define local_lock_acquire(l)		SMPNET_UNEVALUATED(l)
#define local_lock_release(l)		SMPNET_UNEVALUATED(l)

#define local_lock(lock)		do { preempt_disable(); local_lock_acquire(this_cpu_ptr(lock)); } while (0)
#define local_unlock(lock)		do { local_lock_release(this_cpu_ptr(lock)); preempt_enable(); } while (0)
#define local_lock_irq(lock)		do { local_irq_disable(); local_lock_acquire(this_cpu_ptr(lock)); } while (0)
#define local_unlock_irq(lock)		do { local_lock_release(this_cpu_ptr(lock)); local_irq_enable(); } while (0)
#define local_lock_irqsave(lock, flags)							\
	do { local_irq_save(flags); local_lock_acquire(this_cpu_ptr(lock)); } while (0)
#define local_unlock_irqrestore(lock, flags)						\
	do { local_lock_release(this_cpu_ptr(lock)); local_irq_restore(flags); } while (0)
#define local_lock_nested_bh(lock)	local_lock_acquire(this_cpu_ptr(lock))
#define local_unlock_nested_bh(lock)	local_lock_release(this_cpu_ptr(lock))

#endif
