/* spin_lock_bh() against spin_lock() in a hot path: what disabling BHs
 * around a critical section costs when no softirq is pending.
 *
 *   smpnet-bench ab examples/spin_lock_bh.c --builtin spin_lock_unlock
 *
 * The first variant, plain, is the baseline, and the very op of the built-in
 * time_bench test spin_lock_unlock: --builtin runs that one in the same
 * rounds and gives each variant's cost over it, so plain / spin_lock_unlock
 * is the harness's own overhead for a user's file (1.00 when it has none).
 * With two CPUs or more the contended rounds hand the lock from CPU to CPU. */
#include <smpnet.h>

struct shared { spinlock_t lock; };
SMPNET_STATE(struct shared, struct smpnet_none);

SMPNET_INIT(plain) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(plain)
{
	spin_lock(&shared->lock);
	spin_unlock(&shared->lock);
}

SMPNET_INIT(bh) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(bh)
{
	spin_lock_bh(&shared->lock);
	spin_unlock_bh(&shared->lock);
}
