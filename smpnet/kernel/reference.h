/* reference.h - the hand-written C baselines for spin_lock_unlock.
 *
 * What `locks` sets beside smpnet's spin_lock_unlock on every algorithm,
 * interleaved with it, to report harness_overhead = smpnet / bare (issue
 * #12's target: at most 1.05 except for pthread). Each is the instruction
 * sequence of one algorithm's uncontended lock and unlock written directly
 * in C, on nothing of smpnet's but the lock word (or the mutex) and a
 * per-CPU preempt count: preempt_count++, the acquire, the release,
 * preempt_count--. No cpu_ctx, no IRQ state, no checker, no stop flag; a
 * contended acquire just spins (these loops only ever run uncontended).
 *
 *   tas        xchg 1; release: store 0
 *   ttas       load, then xchg 1; release: store 0
 *   ticket     xadd of the next-ticket half, compare with now-serving;
 *              release: now-serving + 1 (a 16-bit store)
 *   qspinlock  cmpxchg 0 -> 1 (the fast path); release: the locked byte := 0
 *   mcs        the node's locked := 0 and next := 0, xchg of the tail (a
 *              node on the loop's stack, as the kernel's callers give one);
 *              release: next is 0, so cmpxchg the tail back to 0
 *   clh        the textbook's: the node's locked := 1, xchg of the tail,
 *              the predecessor's locked read (0: released); release: the
 *              node's locked := 0, one store, and the predecessor's node is
 *              the next acquire's (two nodes on the loop's stack, recycled)
 * (mcs and clh: the uncontended path only, these loops' lock is never
 * contended; smpnet's own adds finding a free per-CPU node, giving the
 * predecessor's back to its CPU, and at the unlock checking that the node
 * the CPU kept is this lock's. The loop takes the lock's word for itself,
 * outside the timing, and gives it back as it found it.)
 *   pthread    pthread_mutex_trylock (smpnet's uncontended path too), spinning
 *              while busy / pthread_mutex_unlock
 */
#ifndef SMPNET_REFERENCE_H
#define SMPNET_REFERENCE_H

#include <pthread.h>
#include "spinlock_types.h"
#include "tsc.h"

/* What the bare mcs and clh put in the lock word: any tail but 0. */
#define REF_TAIL 1U

static __always_inline void ref_lock(uint32_t *word, pthread_mutex_t *mutex,
				     struct mcs_node *node, struct mcs_node *other, const int algo)
{
	uint32_t v;

	switch (algo) {
	case SPIN_TAS:
		while (__atomic_exchange_n(word, 1, __ATOMIC_ACQUIRE))
			cpu_relax();
		break;
	case SPIN_TTAS:
		while (__atomic_load_n(word, __ATOMIC_RELAXED) ||
		       __atomic_exchange_n(word, 1, __ATOMIC_ACQUIRE))
			cpu_relax();
		break;
	case SPIN_TICKET:
		v = __atomic_fetch_add(word, 1U << 16, __ATOMIC_ACQUIRE);
		while ((uint16_t)v != (uint16_t)(v >> 16)) {
			cpu_relax();
			v = (v & 0xffff0000U) | __atomic_load_n((uint16_t *)word, __ATOMIC_ACQUIRE);
		}
		break;
	case SPIN_QSPINLOCK:
	case SPIN_PVQSPINLOCK:
	case SPIN_VIRT_TAS:
		v = 0;
		while (!__atomic_compare_exchange_n(word, &v, 1, 0, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED)) {
			v = 0;
			cpu_relax();
		}
		break;
	case SPIN_MCS:
		WRITE_ONCE(node->locked, 0);
		WRITE_ONCE(node->next, 0);
		__atomic_exchange_n(word, REF_TAIL, __ATOMIC_SEQ_CST);
		break;
	case SPIN_CLH:	/* the predecessor: the other node, released */
		WRITE_ONCE(node->locked, 1);
		if (__atomic_exchange_n(word, REF_TAIL, __ATOMIC_SEQ_CST))
			while (__atomic_load_n(&other->locked, __ATOMIC_ACQUIRE))
				cpu_relax();
		break;
	default:
		while (pthread_mutex_trylock(mutex))
			cpu_relax();
	}
}

static __attribute__((__noinline__)) void ref_pv_unlock(uint8_t *locked)
{
	uint8_t v = 1;

	__atomic_compare_exchange_n(locked, &v, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

static __always_inline void ref_unlock(uint32_t *word, pthread_mutex_t *mutex,
				       struct mcs_node *node, const int algo)
{
	uint32_t v = REF_TAIL;

	switch (algo) {
	case SPIN_TAS:
	case SPIN_TTAS:
		__atomic_store_n(word, 0, __ATOMIC_RELEASE);
		break;
	case SPIN_TICKET:	/* only the holder writes the now-serving half */
		__atomic_store_n((uint16_t *)word, (uint16_t)(*(uint16_t *)word + 1),
				 __ATOMIC_RELEASE);
		break;
	case SPIN_QSPINLOCK:
	case SPIN_VIRT_TAS:
		__atomic_store_n((uint8_t *)word, 0, __ATOMIC_RELEASE);
		break;
	case SPIN_PVQSPINLOCK:	/* a call and a locked cmpxchg, as the kernel's */
		ref_pv_unlock((uint8_t *)word);
		break;
	case SPIN_MCS:
		if (__atomic_load_n(&node->next, __ATOMIC_ACQUIRE))
			break;	/* never: nobody queues behind */
		__atomic_compare_exchange_n(word, &v, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		break;
	case SPIN_CLH:
		__atomic_store_n(&node->locked, 0, __ATOMIC_RELEASE);
		break;
	default:
		pthread_mutex_unlock(mutex);
	}
}

/* The loop, timed as the time_bench loops are (tsc.h), one instance per
 * algorithm with the algorithm a constant. */
static __always_inline uint64_t ref_loop(uint32_t *preempt_count, uint32_t *word,
					 pthread_mutex_t *mutex, uint64_t loops, const int algo)
{
	struct mcs_node node[2] = { { 0 } };
	uint32_t found = 0, tail;
	uint64_t i, t0, t;

	if (algo == SPIN_CLH)	/* (an smpnet CLH lock's word may hold a released node) */
		found = __atomic_exchange_n(word, 0, __ATOMIC_ACQ_REL);
	t0 = tsc_start();
	for (i = 0; i < loops; i++) {
		struct mcs_node *n = &node[algo == SPIN_CLH ? i & 1 : 0];

		(*preempt_count)++;
		barrier();
		ref_lock(word, mutex, n, &node[algo == SPIN_CLH ? (i & 1) ^ 1 : 0], algo);
		ref_unlock(word, mutex, n, algo);
		barrier();
		(*preempt_count)--;
	}
	t = tsc_stop() - t0;
	tail = loops ? REF_TAIL : 0;	/* what the loop left in the word */
	if (algo == SPIN_CLH)
		__atomic_compare_exchange_n(word, &tail, found, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
	return t;
}

typedef uint64_t (*ref_loop_t)(uint32_t *preempt_count, uint32_t *word,
			       pthread_mutex_t *mutex, uint64_t loops);

#define REF_LOOP(algo, name)								\
	static uint64_t ref_spin_lock_unlock_##algo(uint32_t *preempt_count, uint32_t *word,	\
						    pthread_mutex_t *mutex, uint64_t loops)	\
	{										\
		return ref_loop(preempt_count, word, mutex, loops, algo);		\
	}
#define REF_LOOP_ENTRY(algo, name)	[algo] = ref_spin_lock_unlock_##algo,

SPIN_ALGO_TABLE(REF_LOOP)

static const ref_loop_t ref_loops[SPIN_NR_ALGOS] = { SPIN_ALGO_TABLE(REF_LOOP_ENTRY) };

/* The baseline for lock `l`'s algorithm, chosen before its loop from the
 * lock's side-table entry `li`; it takes only the word (or the mutex).
 * time_bench_round() has checked li->algo, as it does for every lock test. */
static inline uint64_t ref_spin_lock_unlock(uint32_t *preempt_count, spinlock_t *l,
					    struct lock_info *li, uint64_t loops)
{
	return ref_loops[li->algo](preempt_count, &l->val, &li->mutex, loops);
}

#endif
