/* smpnet_qspinlock.h - the kernel's queued spinlock for a file's own locks,
 * by the kernel's names, so that a change to qspinlock is one `ab` file.
 * docs/experiments/ab.md, "The file" (a change to qspinlock itself), has the rest.
 *
 * #include it after <smpnet.h>. It is include/asm-generic/qspinlock.h,
 * qspinlock_types.h, kernel/locking/qspinlock.h and mcs_spinlock.h as x86
 * builds them (NR_CPUS below 16K: the pending byte and the 16-bit tail; the
 * pending bit set by `lock bts`; _Q_PENDING_LOOPS 512), with no PV, no
 * lock events and no tracepoints, on a `struct qspinlock` of the file's
 * state; its per-CPU MCS nodes are a DEFINE_PER_CPU of the file's object.
 * The slow path, queued_spin_lock_slowpath(), is smpnet_qspinlock_slowpath.h,
 * which a file may include again under another name with its own change,
 * as kernel/locking/qspinlock.c includes itself for the PV slow path:
 *
 *	#undef _Q_PENDING_LOOPS
 *	#define _Q_PENDING_LOOPS	1
 *	#define queued_spin_lock_slowpath	generic_spin_lock_slowpath
 *	#include <smpnet_qspinlock_slowpath.h>
 *
 * Its waits are smp_cond_load_*(), which end with the run (smpnet.h).
 */
#ifndef SMPNET_QSPINLOCK_H
#define SMPNET_QSPINLOCK_H

#ifndef SMPNET_H
#error "smpnet_qspinlock.h: #include <smpnet.h> first"
#endif

/* include/asm-generic/qspinlock_types.h */
typedef struct qspinlock {
	union {
		atomic_t val;
		struct {
			u8	locked;
			u8	pending;
		};
		struct {
			u16	locked_pending;
			u16	tail;
		};
	};
} arch_spinlock_t;

#define	__ARCH_SPIN_LOCK_UNLOCKED	{ { .val = ATOMIC_INIT(0) } }

#define _Q_SET_MASK(type)	(((1U << _Q_ ## type ## _BITS) - 1) << _Q_ ## type ## _OFFSET)
#define _Q_LOCKED_OFFSET	0
#define _Q_LOCKED_BITS		8
#define _Q_LOCKED_MASK		_Q_SET_MASK(LOCKED)
#define _Q_PENDING_OFFSET	(_Q_LOCKED_OFFSET + _Q_LOCKED_BITS)
#define _Q_PENDING_BITS		8
#define _Q_PENDING_MASK		_Q_SET_MASK(PENDING)
#define _Q_TAIL_IDX_OFFSET	(_Q_PENDING_OFFSET + _Q_PENDING_BITS)
#define _Q_TAIL_IDX_BITS	2
#define _Q_TAIL_IDX_MASK	_Q_SET_MASK(TAIL_IDX)
#define _Q_TAIL_CPU_OFFSET	(_Q_TAIL_IDX_OFFSET + _Q_TAIL_IDX_BITS)
#define _Q_TAIL_CPU_BITS	(32 - _Q_TAIL_CPU_OFFSET)
#define _Q_TAIL_CPU_MASK	_Q_SET_MASK(TAIL_CPU)
#define _Q_TAIL_OFFSET		_Q_TAIL_IDX_OFFSET
#define _Q_TAIL_MASK		(_Q_TAIL_IDX_MASK | _Q_TAIL_CPU_MASK)
#define _Q_LOCKED_VAL		(1U << _Q_LOCKED_OFFSET)
#define _Q_PENDING_VAL		(1U << _Q_PENDING_OFFSET)
#define _Q_LOCKED_PENDING_MASK	(_Q_LOCKED_MASK | _Q_PENDING_MASK)

/* arch/x86/include/asm/qspinlock.h: a pending -> locked hand-over is
 * waited for up to 512 polls (the generic bound is 1) */
#define _Q_PENDING_LOOPS	(1 << 9)

/* kernel/locking/mcs_spinlock.h and qspinlock.h: a node per context a CPU
 * can spin in (task, softirq, hardirq, NMI) */
struct mcs_spinlock {
	struct mcs_spinlock *next;
	int locked;	/* 1 if lock acquired */
	int count;	/* nesting count */
};

struct qnode {
	struct mcs_spinlock mcs;
};

#define MAX_NODES	4
#define _Q_MAX_NODES	MAX_NODES

static DEFINE_PER_CPU_ALIGNED(struct qnode, qnodes[_Q_MAX_NODES]);

#define arch_mcs_spin_lock_contended(l)	smp_cond_load_acquire(l, VAL)
#define arch_mcs_spin_unlock_contended(l)	smp_store_release((l), 1)

/* What the slow path calls that smpnet has no use for: no PV, no lock
 * events, no tracepoints, no virt_spin_lock() (a guest with PV spinlocks
 * takes the PV path in the kernel; here the native one runs). */
#define pv_enabled()			false
#define virt_spin_lock(lock)		false
#define pv_init_node(node)		do { } while (0)
#define pv_wait_node(node, prev)	do { } while (0)
#define pv_kick_node(lock, node)	do { } while (0)
#define pv_wait_head_or_lock(lock, node)	0
#define lockevent_inc(ev)		do { } while (0)
#define lockevent_cond_inc(ev, c)	do { } while (0)
#define trace_contention_begin(lock, flags)	do { } while (0)
#define trace_contention_end(lock, ret)	do { } while (0)
#define prefetchw(p)			smpnet_model_prefetchw(p)	/* kernel/compiler.h's */

static inline u32 encode_tail(int cpu, int idx)
{
	u32 tail;

	tail  = (u32)(cpu + 1) << _Q_TAIL_CPU_OFFSET;
	tail |= (u32)idx << _Q_TAIL_IDX_OFFSET;	/* assume < 4 */
	return tail;
}

static inline struct mcs_spinlock *decode_tail(u32 tail)
{
	int cpu = (tail >> _Q_TAIL_CPU_OFFSET) - 1;
	int idx = (tail & _Q_TAIL_IDX_MASK) >> _Q_TAIL_IDX_OFFSET;

	return per_cpu_ptr(&qnodes[idx].mcs, cpu);
}

static inline struct mcs_spinlock *grab_mcs_node(struct mcs_spinlock *base, int idx)
{
	return &((struct qnode *)base + idx)->mcs;
}

/* clear the pending bit: *,1,* -> *,0,* */
static __always_inline void clear_pending(struct qspinlock *lock)
{
	WRITE_ONCE(lock->pending, 0);
}

/* take ownership and clear the pending bit: *,1,0 -> *,0,1 */
static __always_inline void clear_pending_set_locked(struct qspinlock *lock)
{
	WRITE_ONCE(lock->locked_pending, _Q_LOCKED_VAL);
}

/* put in the new queue tail code word, the previous tail's returned:
 * p,*,* -> n,*,* (one 16-bit xchg, a full barrier on x86) */
static __always_inline u32 xchg_tail(struct qspinlock *lock, u32 tail)
{
	return (u32)xchg_relaxed(&lock->tail, (u16)(tail >> _Q_TAIL_OFFSET)) << _Q_TAIL_OFFSET;
}

/* fetch the whole lock value and set the pending bit: 0,0,* -> 0,1,*
 * (x86: `lock btsl`, its carry the old pending bit, then a read) */
static __always_inline u32 queued_fetch_set_pending_acquire(struct qspinlock *lock)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned char was;
	u32 val;

	__asm__ __volatile__("lock btsl %2, %0\n\tsetc %1"
			     : "+m"(lock->val.counter), "=q"(was) : "I"(_Q_PENDING_OFFSET)
			     : "memory", "cc");
	val = (was ? _Q_PENDING_VAL : 0);
	val |= atomic_read(&lock->val) & ~_Q_PENDING_MASK;
	return val;
#else
	return atomic_fetch_or_acquire(_Q_PENDING_VAL, &lock->val);
#endif
}

/* *,*,0 -> *,0,1 */
static __always_inline void set_locked(struct qspinlock *lock)
{
	WRITE_ONCE(lock->locked, _Q_LOCKED_VAL);
}

/* out of line, as the kernel's (a direct call: no PLT, no interposing) */
#define SMPNET_SLOWPATH		static __attribute__((__noinline__, unused))
SMPNET_SLOWPATH void queued_spin_lock_slowpath(struct qspinlock *lock, u32 val);

/* include/asm-generic/qspinlock.h */
static __always_inline int queued_spin_is_locked(struct qspinlock *lock)
{
	return atomic_read(&lock->val);
}

static __always_inline int queued_spin_value_unlocked(struct qspinlock lock)
{
	return !lock.val.counter;
}

static __always_inline int queued_spin_is_contended(struct qspinlock *lock)
{
	return atomic_read(&lock->val) & ~_Q_LOCKED_MASK;
}

static __always_inline int queued_spin_trylock(struct qspinlock *lock)
{
	int val = atomic_read(&lock->val);

	if (unlikely(val))
		return 0;
	return likely(atomic_try_cmpxchg_acquire(&lock->val, &val, _Q_LOCKED_VAL));
}

static __always_inline void queued_spin_lock(struct qspinlock *lock)
{
	int val = 0;

	if (likely(atomic_try_cmpxchg_acquire(&lock->val, &val, _Q_LOCKED_VAL)))
		return;
	queued_spin_lock_slowpath(lock, val);
}

static __always_inline void queued_spin_unlock(struct qspinlock *lock)
{
	smp_store_release(&lock->locked, 0);
}

#define arch_spin_is_locked(l)		queued_spin_is_locked(l)
#define arch_spin_is_contended(l)	queued_spin_is_contended(l)
#define arch_spin_value_unlocked(l)	queued_spin_value_unlocked(l)
#define arch_spin_lock(l)		queued_spin_lock(l)
#define arch_spin_trylock(l)		queued_spin_trylock(l)
#define arch_spin_unlock(l)		queued_spin_unlock(l)

#include "smpnet_qspinlock_slowpath.h"

#endif
