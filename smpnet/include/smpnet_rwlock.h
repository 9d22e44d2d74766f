/* smpnet_rwlock.h - rwlock_t as an x86 kernel builds it, for a user's `ab`
 * file (smpnet.h includes it): asm-generic/qrwlock.h's queued rwlock with
 * kernel/locking/qrwlock.c's slow paths, and include/linux/rwlock_api_smp.h's
 * variants, each inline or a call as the run's --kernel-build makes it.
 * Docs: docs/experiments/ab.md.
 */
#ifndef SMPNET_RWLOCK_H
#define SMPNET_RWLOCK_H

/* asm-generic/qrwlock.h: a reader count above a writer byte */
#define _QW_WAITING	0x100		/* a writer is waiting */
#define _QW_LOCKED	0x0ff		/* a writer holds the lock */
#define _QW_WMASK	0x1ff		/* writer mask */
#define _QR_SHIFT	9		/* reader count shift */
#define _QR_BIAS	(1U << _QR_SHIFT)

/* asm-generic/qrwlock_types.h; the wait queue is a spinlock of the run's
 * algorithm (the kernel's is its arch_spinlock_t, the queued spinlock) */
typedef struct {
	union {
		atomic_t cnts;
		struct {
			u8 wlocked;	/* locked for write? (little-endian) */
			u8 __lstate[3];
		};
	};
	spinlock_t wait_lock;
} rwlock_t;

/* In an init, as every lock a variant takes: the count and the queue's lock. */
#define rwlock_init(l)	do { atomic_set(&(l)->cnts, 0); spin_lock_init(&(l)->wait_lock); } while (0)

/* arch_atomic_sub_return_release()'s instruction: a `lock xadd`, as the
 * kernel's asm volatile leaves it even when the result is unused (GCC's
 * builtin would make that a `lock sub`). */
static __always_inline void smpnet_qrw_xadd(atomic_t *v, int i)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("lock xaddl %0, %1" : "+r"(i), "+m"(v->counter) : : "memory", "cc");
#else
	__atomic_fetch_add(&v->counter, i, __ATOMIC_RELEASE);
#endif
}

/* ---------------------------------------------------------------- qrwlock.c */

static __attribute__((__noinline__)) void queued_read_lock_slowpath(rwlock_t *lock)
{
	/* a reader in interrupt context takes the lock at once unless a
	 * writer holds it (a waiting writer does not stop it) */
	if (unlikely(in_interrupt(smpnet_cpu))) {
		smp_cond_load_acquire(&lock->cnts.counter, !(VAL & _QW_LOCKED));
		return;
	}
	atomic_sub(_QR_BIAS, &lock->cnts);
	SMPNET_STOP_IF(__arch_spin_lock(smpnet_cpu, &lock->wait_lock, SMPNET_BUILD_ALGO));
	atomic_add(_QR_BIAS, &lock->cnts);
	smp_cond_load_acquire(&lock->cnts.counter, !(VAL & _QW_LOCKED));
	__arch_spin_unlock(smpnet_cpu, &lock->wait_lock, SMPNET_BUILD_ALGO,
			   kbuild_return(SMPNET_BUILD_KERNEL));
}

static __attribute__((__noinline__)) void queued_write_lock_slowpath(rwlock_t *lock)
{
	int cnts;

	SMPNET_STOP_IF(__arch_spin_lock(smpnet_cpu, &lock->wait_lock, SMPNET_BUILD_ALGO));
	/* no reader: take it at once */
	if (!(cnts = atomic_read(&lock->cnts)) &&
	    atomic_try_cmpxchg(&lock->cnts, &cnts, _QW_LOCKED))
		goto unlock;
	/* readers see the waiting flag and queue behind us */
	atomic_or(_QW_WAITING, &lock->cnts);
	do {
		cnts = smp_cond_load_relaxed(&lock->cnts.counter, VAL == _QW_WAITING);
	} while (!atomic_try_cmpxchg(&lock->cnts, &cnts, _QW_LOCKED));
unlock:
	__arch_spin_unlock(smpnet_cpu, &lock->wait_lock, SMPNET_BUILD_ALGO,
			   kbuild_return(SMPNET_BUILD_KERNEL));
}

/* ---------------------------------------------------------------- qrwlock.h */

static __always_inline int queued_read_trylock(rwlock_t *lock)
{
	int cnts = atomic_read(&lock->cnts);

	if (likely(!(cnts & _QW_WMASK))) {
		cnts = atomic_add_return(_QR_BIAS, &lock->cnts);
		if (likely(!(cnts & _QW_WMASK)))
			return 1;
		atomic_sub(_QR_BIAS, &lock->cnts);
	}
	return 0;
}

static __always_inline int queued_write_trylock(rwlock_t *lock)
{
	int cnts = atomic_read(&lock->cnts);

	if (unlikely(cnts))
		return 0;
	return likely(atomic_try_cmpxchg(&lock->cnts, &cnts, _QW_LOCKED));
}

static __always_inline void queued_read_lock(rwlock_t *lock)
{
	int cnts = atomic_add_return(_QR_BIAS, &lock->cnts);	/* lock xadd */

	if (likely(!(cnts & _QW_WMASK)))
		return;
	queued_read_lock_slowpath(lock);
}

static __always_inline void queued_write_lock(rwlock_t *lock)
{
	int cnts = 0;

	if (likely(atomic_try_cmpxchg(&lock->cnts, &cnts, _QW_LOCKED)))	/* lock cmpxchg */
		return;
	queued_write_lock_slowpath(lock);
}

static __always_inline void queued_read_unlock(rwlock_t *lock)
{
	smpnet_qrw_xadd(&lock->cnts, -(int)_QR_BIAS);
}

static __always_inline void queued_write_unlock(rwlock_t *lock)
{
	smp_store_release(&lock->wlocked, 0);	/* a byte store */
}

/* ---------------------------------------------------------------- rwlock_api_smp.h */

/* Which entry points are calls. kernel/Kconfig.locks: no INLINE_READ_* or
 * INLINE_WRITE_* on x86 (no ARCH_INLINE_*), but INLINE_READ_UNLOCK(_IRQ)
 * and INLINE_WRITE_UNLOCK(_IRQ) hold without PREEMPTION: so x86-nopreempt
 * calls all but the plain and _irq unlocks, the other x86 shapes all. */
static __always_inline int smpnet_rw_calls(const int plain_or_irq_unlock)
{
	switch (kbuild_shape(SMPNET_BUILD_KERNEL)) {
	case KSHAPE_INLINE:
		return 0;
	case KSHAPE_X86_NOPREEMPT:
		return !plain_or_irq_unlock;
	default:
		return 1;
	}
}

/* A call's copy returns as the build's return says (kernel_build.h). */
_Static_assert(KSHAPE_NR == 4, "SMPNET_BUILD_KERNEL / 4 is the build's return");
#if SMPNET_BUILD_KERNEL / 4 == 1
#define SMPNET_RW_VIA	RETURN_VIA_1
#define SMPNET_RW_ENTER	RETURN_ENTER_1
#elif SMPNET_BUILD_KERNEL / 4 == 2
#define SMPNET_RW_VIA	RETURN_VIA_2
#define SMPNET_RW_ENTER	RETURN_ENTER_2
#else
#define SMPNET_RW_VIA	RETURN_VIA_0
#define SMPNET_RW_ENTER	RETURN_ENTER_0
#endif

/* One op (read or write): the eight bodies as rwlock_api_smp.h's
 * __raw_*() compose them, and kernel/locking/spinlock.c's noinline copy
 * of each (_raw_*()). */
#define SMPNET_RW_OPS(rw)								\
static __always_inline void __raw_##rw##_lock(rwlock_t *l)				\
	{ preempt_disable(); queued_##rw##_lock(l); }					\
static __always_inline void __raw_##rw##_lock_bh(rwlock_t *l)				\
	{ local_bh_disable(); queued_##rw##_lock(l); }					\
static __always_inline void __raw_##rw##_lock_irq(rwlock_t *l)				\
	{ local_irq_disable(); preempt_disable(); queued_##rw##_lock(l); }		\
static __always_inline unsigned long __raw_##rw##_lock_irqsave(rwlock_t *l)		\
{											\
	unsigned long flags;								\
											\
	local_irq_save(flags);								\
	preempt_disable();								\
	queued_##rw##_lock(l);								\
	return flags;									\
}											\
static __always_inline void __raw_##rw##_unlock(rwlock_t *l)				\
	{ queued_##rw##_unlock(l); preempt_enable(); }					\
static __always_inline void __raw_##rw##_unlock_bh(rwlock_t *l)				\
	{ queued_##rw##_unlock(l); local_bh_enable(); }					\
static __always_inline void __raw_##rw##_unlock_irq(rwlock_t *l)			\
	{ queued_##rw##_unlock(l); local_irq_enable(); preempt_enable(); }		\
static __always_inline void __raw_##rw##_unlock_irqrestore(rwlock_t *l, unsigned long flags) \
	{ queued_##rw##_unlock(l); local_irq_restore(flags); preempt_enable(); }	\
static __always_inline int __raw_##rw##_trylock(rwlock_t *l)				\
{											\
	preempt_disable();								\
	if (queued_##rw##_trylock(l))							\
		return 1;								\
	preempt_enable();								\
	return 0;									\
}											\
static __attribute__((__noinline__)) SMPNET_RW_VIA void _raw_##rw##_lock(rwlock_t *l)	\
	{ SMPNET_RW_ENTER; __raw_##rw##_lock(l); }					\
static __attribute__((__noinline__)) SMPNET_RW_VIA void _raw_##rw##_lock_bh(rwlock_t *l)	\
	{ SMPNET_RW_ENTER; __raw_##rw##_lock_bh(l); }					\
static __attribute__((__noinline__)) SMPNET_RW_VIA void _raw_##rw##_lock_irq(rwlock_t *l)	\
	{ SMPNET_RW_ENTER; __raw_##rw##_lock_irq(l); }					\
static __attribute__((__noinline__)) SMPNET_RW_VIA unsigned long				\
_raw_##rw##_lock_irqsave(rwlock_t *l)							\
	{ SMPNET_RW_ENTER; return __raw_##rw##_lock_irqsave(l); }			\
static __attribute__((__noinline__)) SMPNET_RW_VIA void _raw_##rw##_unlock(rwlock_t *l)	\
	{ SMPNET_RW_ENTER; __raw_##rw##_unlock(l); }					\
static __attribute__((__noinline__)) SMPNET_RW_VIA void _raw_##rw##_unlock_bh(rwlock_t *l)	\
	{ SMPNET_RW_ENTER; __raw_##rw##_unlock_bh(l); }					\
static __attribute__((__noinline__)) SMPNET_RW_VIA void _raw_##rw##_unlock_irq(rwlock_t *l)	\
	{ SMPNET_RW_ENTER; __raw_##rw##_unlock_irq(l); }				\
static __attribute__((__noinline__)) SMPNET_RW_VIA void					\
_raw_##rw##_unlock_irqrestore(rwlock_t *l, unsigned long flags)				\
	{ SMPNET_RW_ENTER; __raw_##rw##_unlock_irqrestore(l, flags); }			\
static __attribute__((__noinline__)) SMPNET_RW_VIA int _raw_##rw##_trylock(rwlock_t *l)	\
	{ SMPNET_RW_ENTER; return __raw_##rw##_trylock(l); }

SMPNET_RW_OPS(read)
SMPNET_RW_OPS(write)

/* The kernel's names: the build's call or the inline body (a constant
 * condition, folded). A stopped acquire ends the op, as a spinlock's. */
#define SMPNET_RW(name, unlock_inline, ...)						\
	(smpnet_rw_calls(unlock_inline) ? _raw_##name(__VA_ARGS__) : __raw_##name(__VA_ARGS__))
#define read_lock(l)			SMPNET_RW(read_lock, 0, l)
#define read_lock_bh(l)			SMPNET_RW(read_lock_bh, 0, l)
#define read_lock_irq(l)		SMPNET_RW(read_lock_irq, 0, l)
#define read_lock_irqsave(l, flags)	((flags) = SMPNET_RW(read_lock_irqsave, 0, l))
#define read_unlock(l)			SMPNET_RW(read_unlock, 1, l)
#define read_unlock_bh(l)		SMPNET_RW(read_unlock_bh, 0, l)
#define read_unlock_irq(l)		SMPNET_RW(read_unlock_irq, 1, l)
#define read_unlock_irqrestore(l, flags) SMPNET_RW(read_unlock_irqrestore, 0, l, flags)
#define read_trylock(l)			SMPNET_RW(read_trylock, 0, l)
#define write_lock(l)			SMPNET_RW(write_lock, 0, l)
#define write_lock_bh(l)		SMPNET_RW(write_lock_bh, 0, l)
#define write_lock_irq(l)		SMPNET_RW(write_lock_irq, 0, l)
#define write_lock_irqsave(l, flags)	((flags) = SMPNET_RW(write_lock_irqsave, 0, l))
#define write_unlock(l)			SMPNET_RW(write_unlock, 1, l)
#define write_unlock_bh(l)		SMPNET_RW(write_unlock_bh, 0, l)
#define write_unlock_irq(l)		SMPNET_RW(write_unlock_irq, 1, l)
#define write_unlock_irqrestore(l, flags) SMPNET_RW(write_unlock_irqrestore, 0, l, flags)
#define write_trylock(l)		SMPNET_RW(write_trylock, 0, l)

#endif
