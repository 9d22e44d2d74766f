/* smpnet_qspinlock_slowpath.h - kernel/locking/qspinlock.c's
 * queued_spin_lock_slowpath(), native (no PV), for smpnet_qspinlock.h.
 * No include guard: a file includes it again under a name of its own
 * (#define queued_spin_lock_slowpath my_slowpath) after changing what it
 * reads (_Q_PENDING_LOOPS, a helper), as qspinlock.c includes itself for
 * the PV slow path. docs/experiments/ab.md, "The file".
 *
 * The states are (queue tail, pending bit, lock value).
 */

SMPNET_SLOWPATH void queued_spin_lock_slowpath(struct qspinlock *lock, u32 val)
{
	struct mcs_spinlock *prev, *next, *node;
	u32 old, tail;
	int idx;

	if (pv_enabled())
		goto pv_queue;

	if (virt_spin_lock(lock))
		return;

	/* wait, a bounded number of polls, for an in-progress pending ->
	 * locked hand-over: 0,1,0 -> 0,0,1 */
	if (val == _Q_PENDING_VAL) {
		int cnt = _Q_PENDING_LOOPS;
		val = atomic_cond_read_relaxed(&lock->val,
					       (VAL != _Q_PENDING_VAL) || !cnt--);
	}

	/* any contention: queue */
	if (val & ~_Q_LOCKED_MASK)
		goto queue;

	/* trylock || pending: 0,0,* -> 0,1,* -> 0,0,1 */
	val = queued_fetch_set_pending_acquire(lock);

	/* a concurrent locker: undo our pending bit, if we set it, and queue */
	if (unlikely(val & ~_Q_LOCKED_MASK)) {
		if (!(val & _Q_PENDING_MASK))
			clear_pending(lock);
		goto queue;
	}

	/* pending: wait for the owner to go (a load-acquire, to order after
	 * its release), 0,1,1 -> *,1,0, then take it, 0,1,0 -> 0,0,1 */
	if (val & _Q_LOCKED_MASK)
		smp_cond_load_acquire(&lock->locked, !VAL);

	clear_pending_set_locked(lock);
	lockevent_inc(lock_pending);
	return;

queue:
	lockevent_inc(lock_slowpath);
pv_queue:
	node = this_cpu_ptr(&qnodes[0].mcs);
	idx = node->count++;
	tail = encode_tail(smp_processor_id(), idx);

	trace_contention_begin(lock, LCB_F_SPIN);

	/* out of nodes (nested NMIs): spin on the lock itself */
	if (unlikely(idx >= _Q_MAX_NODES)) {
		lockevent_inc(lock_no_node);
		while (!queued_spin_trylock(lock))
			cpu_relax();
		goto release;
	}

	node = grab_mcs_node(node, idx);
	lockevent_cond_inc(lock_use_node2 + idx - 1, idx);

	/* the count before the node: an interrupt taking a lock must not
	 * reuse it */
	barrier();

	node->locked = 0;
	node->next = NULL;
	pv_init_node(node);

	/* a cold node touched: try once more before queueing */
	if (queued_spin_trylock(lock))
		goto release;

	/* the node initialised before the tail publishes it */
	smp_wmb();

	/* p,*,* -> n,*,* */
	old = xchg_tail(lock, tail);
	next = NULL;

	/* a previous node: link behind it and wait to be the head */
	if (old & _Q_TAIL_MASK) {
		prev = decode_tail(old);
		WRITE_ONCE(prev->next, node);

		pv_wait_node(node, prev);
		arch_mcs_spin_lock_contended(&node->locked);

		next = READ_ONCE(node->next);
		if (next)
			prefetchw(next);
	}

	/* the head: wait for the owner and the pending waiter to go,
	 * *,x,y -> *,0,0 */
	if ((val = pv_wait_head_or_lock(lock, node)))
		goto locked;

	val = atomic_cond_read_acquire(&lock->val, !(VAL & _Q_LOCKED_PENDING_MASK));

locked:
	/* claim the lock: n,0,0 -> 0,0,1 if we are the tail as well (the
	 * queue empties), else *,*,0 -> *,*,1 */
	if ((val & _Q_TAIL_MASK) == tail) {
		if (atomic_try_cmpxchg_relaxed(&lock->val, (int *)&val, _Q_LOCKED_VAL))
			goto release;
	}

	set_locked(lock);

	/* hand the MCS lock on to the next waiter, once it has linked */
	if (!next)
		next = smp_cond_load_relaxed(&node->next, (VAL));

	arch_mcs_spin_unlock_contended(&next->locked);
	pv_kick_node(lock, next);

release:
	trace_contention_end(lock, 0);

	/* release the node */
	__this_cpu_dec(qnodes[0].mcs.count);
}
