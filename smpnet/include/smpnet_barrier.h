/* smpnet_barrier.h - the kernel's memory barriers in a user's `ab` file
 * (arch/x86/include/asm/barrier.h, include/asm-generic/barrier.h);
 * smpnet.h includes it. Docs: docs/experiments/ab.md. */
#ifndef SMPNET_BARRIER_H
#define SMPNET_BARRIER_H

/* The kernel's barriers, as arch/x86/include/asm/barrier.h has them:
 * mb/rmb/wmb the fences; smp_mb() a locked add to the stack (cheaper than
 * mfence); smp_rmb/wmb and the atomics' smp_mb__*() compiler barriers
 * alone (x86's loads and stores are ordered, its locked ops full
 * barriers); release and acquire a plain store and load, ordered by the
 * compiler (include/asm-generic/barrier.h's x86 forms). */
#if defined(__x86_64__) || defined(__i386__)
#define mb()		__asm__ __volatile__("mfence" ::: "memory")
#define rmb()		__asm__ __volatile__("lfence" ::: "memory")
#define wmb()		__asm__ __volatile__("sfence" ::: "memory")
#define smp_mb()	__asm__ __volatile__("lock addl $0,-4(%%rsp)" ::: "memory", "cc")
#define smp_rmb()	barrier()
#define smp_wmb()	barrier()
#define smp_mb__before_atomic()	barrier()
#define smp_mb__after_atomic()	barrier()
#define smp_store_release(p, v)	do { barrier(); WRITE_ONCE(*(p), (v)); } while (0)
#define smp_load_acquire(p)	({ __typeof__(*(p)) ___p1 = READ_ONCE(*(p)); barrier(); ___p1; })
#define smp_acquire__after_ctrl_dep()	barrier()
#else
#define mb()		__atomic_thread_fence(__ATOMIC_SEQ_CST)
#define rmb()		__atomic_thread_fence(__ATOMIC_ACQUIRE)
#define wmb()		__atomic_thread_fence(__ATOMIC_RELEASE)
#define smp_mb()	__atomic_thread_fence(__ATOMIC_SEQ_CST)
#define smp_rmb()	__atomic_thread_fence(__ATOMIC_ACQUIRE)
#define smp_wmb()	__atomic_thread_fence(__ATOMIC_RELEASE)
#define smp_mb__before_atomic()	smp_mb()
#define smp_mb__after_atomic()	smp_mb()
#define smp_store_release(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define smp_load_acquire(p)	__atomic_load_n((p), __ATOMIC_ACQUIRE)
#define smp_acquire__after_ctrl_dep()	__atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif
#define smp_store_mb(var, value)	do { WRITE_ONCE(var, value); smp_mb(); } while (0)
/* Wait until `cond_expr` (on VAL, the value just read) holds; the value. */
#define smp_cond_load_relaxed(ptr, cond_expr)						\
	({										\
		__typeof__(ptr) __PTR = (ptr);						\
		__typeof__(READ_ONCE(*(ptr))) VAL;	/* unqualified */		\
		for (;;) {								\
			VAL = READ_ONCE(*__PTR);					\
			if (cond_expr)							\
				break;							\
			cpu_relax();							\
		}									\
		VAL;									\
	})
#define smp_cond_load_acquire(ptr, cond_expr)						\
	({ __typeof__(READ_ONCE(*(ptr))) _val = smp_cond_load_relaxed(ptr, cond_expr);	\
	   smp_acquire__after_ctrl_dep(); _val; })

#endif
