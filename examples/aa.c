/* The A/A file: two identical variants. A sound harness finds no
 * measurable difference between them, nor in its own A/A control.
 *
 *   smpnet-bench ab examples/aa.c */
#include <smpnet.h>

struct shared { spinlock_t lock; };
SMPNET_STATE(struct shared, struct smpnet_none);

SMPNET_INIT(a) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(a)
{
	spin_lock(&shared->lock);
	spin_unlock(&shared->lock);
}

SMPNET_INIT(b) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(b)
{
	spin_lock(&shared->lock);
	spin_unlock(&shared->lock);
}
