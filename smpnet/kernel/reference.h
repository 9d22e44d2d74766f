/* reference.h - hand-written C baselines for the Cython loops.
 *
 * The target: spin_lock_unlock (qspinlock, uncontended) within
 * 15 % of the same instruction sequence written directly in C and timed
 * the same way. This is that sequence: preempt_count++, the qspinlock fast
 * path (lock cmpxchg 0 -> 1), the unlock (a byte store-release),
 * preempt_count--. No dispatch on the algorithm, no checker test.
 */
#ifndef SMPNET_REFERENCE_H
#define SMPNET_REFERENCE_H

#include "tsc.h"

static uint64_t ref_spin_lock_unlock(uint32_t *preempt_count, uint32_t *lock, uint64_t loops)
{
	uint64_t i, t0 = tsc_start();

	for (i = 0; i < loops; i++) {
		uint32_t zero = 0;

		(*preempt_count)++;
		barrier();
		while (!__atomic_compare_exchange_n(lock, &zero, 1, 0, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED)) {
			zero = 0;
			cpu_relax();
		}
		__atomic_store_n((uint8_t *)lock, 0, __ATOMIC_RELEASE);
		barrier();
		(*preempt_count)--;
	}
	return tsc_stop() - t0;
}

#endif
