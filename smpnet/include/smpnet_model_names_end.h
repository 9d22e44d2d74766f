/* smpnet_model_names_end.h - the model's names given back to a user's
 * file at the end of smpnet.h: each of smpnet_model_names.h's renames
 * undone (a C macro cannot generate its #undef from the same list), and
 * qspinlock_types.h's constants, which smpnet_qspinlock.h gives the file.
 */
#undef cpu_ctx
#undef per_cpu_ptr
#undef cpu_state
#undef irq_cpustat
#undef lock_info
#undef lock_infos
#undef lock_slot
#undef lockfunc_ops
#undef mcs_node
#undef pcpu_lstats
#undef qnode
#undef qnodes
#undef raw_spin_debug_ops
#undef smp_header
#undef smp_region
#undef softnet_data
#undef sk_buff
#undef arch_spin_lock
#undef arch_spin_unlock
#undef decode_tail
#undef encode_tail
#undef mcs_spin_lock
#undef mcs_spin_lock_contended
#undef mcs_spin_unlock
#undef pv_hybrid_queued_unfair_trylock
#undef pv_kick
#undef pv_kick_node
#undef pv_queued_spin_lock
#undef pv_queued_spin_lock_slowpath
#undef pv_queued_spin_unlock_slowpath
#undef pv_wait
#undef pv_wait_head_or_lock
#undef pv_wait_node
#undef qnode_claim
#undef queued_fetch_set_pending_acquire
#undef queued_spin_lock
#undef queued_spin_lock_slowpath
#undef queued_spin_trylock
#undef queued_spin_trylock_fast
#undef queued_spin_unlock
#undef virt_spin_lock
#undef xchg_tail_and_link
#undef prefetchw
/* qspinlock_types.h's constants are the file's (smpnet_qspinlock.h has them) */
#undef _Q_LOCKED_VAL
#undef _Q_PENDING_VAL
#undef _Q_LOCKED_MASK
#undef _Q_PENDING_MASK
#undef _Q_LOCKED_PENDING_MASK
#undef _Q_TAIL_MASK
#undef _Q_TAIL_OFFSET
#undef _Q_TAIL_CPU_OFFSET
#undef _Q_PENDING_OFFSET
#undef _Q_PENDING_LOOPS
#undef _Q_SLOW_VAL
#undef MAX_NODES
