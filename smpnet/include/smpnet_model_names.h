/* smpnet_model_names.h - the model's own names out of a user's file's way,
 * for smpnet.h: included before the model's headers, and
 * smpnet_model_names_end.h after the last of smpnet.h's macros that name
 * them. docs/experiments/ab.md, "The file".
 */
/* The model's own records, under names a file cannot meet: a file may
 * declare the kernel's struct softnet_data, pcpu_lstats, qnode, ... itself.
 * smpnet.h's macros name them as renamed. */
#define cpu_ctx	smpnet_model_cpu_ctx
#define per_cpu_ptr	smpnet_model_per_cpu_ptr
#define cpu_state	smpnet_model_cpu_state
#define irq_cpustat	smpnet_model_irq_cpustat
#define lock_info	smpnet_model_lock_info
#define lock_infos	smpnet_model_lock_infos
#define lock_slot	smpnet_model_lock_slot
#define lockfunc_ops	smpnet_model_lockfunc_ops
#define mcs_node	smpnet_model_mcs_node
#define pcpu_lstats	smpnet_model_pcpu_lstats
#define qnode	smpnet_model_qnode
#define qnodes	smpnet_model_qnodes
#define raw_spin_debug_ops	smpnet_model_raw_spin_debug_ops
#define smp_header	smpnet_model_smp_header
#define smp_region	smpnet_model_smp_region
#define softnet_data	smpnet_model_softnet_data
#define sk_buff	smpnet_model_sk_buff
/* The model's lock functions whose names are the kernel's (qspinlock's,
 * MCS's, PV's): a file may define them, or take smpnet_qspinlock.h's. */
#define arch_spin_lock	smpnet_model_arch_spin_lock
#define arch_spin_unlock	smpnet_model_arch_spin_unlock
#define decode_tail	smpnet_model_decode_tail
#define encode_tail	smpnet_model_encode_tail
#define mcs_spin_lock	smpnet_model_mcs_spin_lock
#define mcs_spin_lock_contended	smpnet_model_mcs_spin_lock_contended
#define mcs_spin_unlock	smpnet_model_mcs_spin_unlock
#define pv_hybrid_queued_unfair_trylock	smpnet_model_pv_hybrid_queued_unfair_trylock
#define pv_kick	smpnet_model_pv_kick
#define pv_kick_node	smpnet_model_pv_kick_node
#define pv_queued_spin_lock	smpnet_model_pv_queued_spin_lock
#define pv_queued_spin_lock_slowpath	smpnet_model_pv_queued_spin_lock_slowpath
#define pv_queued_spin_unlock_slowpath	smpnet_model_pv_queued_spin_unlock_slowpath
#define pv_wait	smpnet_model_pv_wait
#define pv_wait_head_or_lock	smpnet_model_pv_wait_head_or_lock
#define pv_wait_node	smpnet_model_pv_wait_node
#define qnode_claim	smpnet_model_qnode_claim
#define queued_fetch_set_pending_acquire	smpnet_model_queued_fetch_set_pending_acquire
#define queued_spin_lock	smpnet_model_queued_spin_lock
#define queued_spin_lock_slowpath	smpnet_model_queued_spin_lock_slowpath
#define queued_spin_trylock	smpnet_model_queued_spin_trylock
#define queued_spin_trylock_fast	smpnet_model_queued_spin_trylock_fast
#define queued_spin_unlock	smpnet_model_queued_spin_unlock
#define virt_spin_lock	smpnet_model_virt_spin_lock
#define xchg_tail_and_link	smpnet_model_xchg_tail_and_link
/* and compiler.h's prefetchw(): the kernel's name, which a file may define
 * (or take smpnet_qspinlock.h's, which is this one) */
#define prefetchw	smpnet_model_prefetchw
