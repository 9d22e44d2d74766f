/* smpnet_atomic.h - the kernel's sized types, the annotations pasted code
 * carries, atomic_t, atomic64_t, atomic_long_t and xchg/cmpxchg, refcount_t
 * and llist, for a user's `ab` file (smpnet.h includes it). Docs:
 * docs/experiments/ab.md. */
#ifndef SMPNET_API_ATOMIC_H
#define SMPNET_API_ATOMIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "compiler.h"

/* ---------------------------------------------------------------- the kernel's types */

/* include/linux/types.h's sized types, and the annotations a pasted
 * declaration carries: sparse's address spaces are nothing to the
 * compiler (include/linux/compiler_types.h), the alignments are
 * include/linux/cache.h's for a 64-byte line, __read_mostly a section the
 * kernel groups read-mostly data in (here nothing). */
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;
#define __percpu
#define __rcu
#define __read_mostly
#define __aligned(x)			__attribute__((aligned(x)))
#define ____cacheline_aligned		__aligned(SMP_CACHE_BYTES)
#define ____cacheline_aligned_in_smp	____cacheline_aligned
#define SMP_CACHE_BYTES			64
#define container_of(ptr, type, member)							\
	((type *)((char *)(ptr) - offsetof(type, member)))

/* ---------------------------------------------------------------- atomics, as the kernel's */

/* atomic_t, atomic64_t and atomic_long_t as include/linux/types.h declares
 * them: a signed counter in a struct, so that no plain arithmetic reaches
 * one by mistake; and the ops include/linux/atomic/ generates for each,
 * every RMW a lock-prefixed instruction as arch/x86/include/asm/atomic.h's
 * (GCC's __atomic builtins: lock add/sub/inc/dec where the result is not
 * used, lock xadd where it is, lock cmpxchg; and/or/xor with a result a
 * cmpxchg loop, as x86's arch_atomic_fetch_and() is). */
typedef struct { int counter; } atomic_t;
typedef struct { int64_t counter; } atomic64_t;
typedef struct { long counter; } atomic_long_t;
#define ATOMIC_INIT(i)		{ (i) }
#define ATOMIC64_INIT(i)	{ (i) }
#define ATOMIC_LONG_INIT(i)	{ (i) }

#define SMPNET_ATOMIC_OPS(pfx, type, ctype)						\
static inline ctype pfx##_read(const type *v) { return __atomic_load_n(&v->counter, __ATOMIC_RELAXED); } \
static inline void pfx##_set(type *v, ctype i) { __atomic_store_n(&v->counter, i, __ATOMIC_RELAXED); } \
static inline ctype pfx##_read_acquire(const type *v)					\
	{ return __atomic_load_n(&v->counter, __ATOMIC_ACQUIRE); }			\
static inline void pfx##_set_release(type *v, ctype i)					\
	{ __atomic_store_n(&v->counter, i, __ATOMIC_RELEASE); }				\
static inline void pfx##_add(ctype i, type *v) { __atomic_fetch_add(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline void pfx##_sub(ctype i, type *v) { __atomic_fetch_sub(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline void pfx##_inc(type *v) { __atomic_fetch_add(&v->counter, 1, __ATOMIC_SEQ_CST); }	\
static inline void pfx##_dec(type *v) { __atomic_fetch_sub(&v->counter, 1, __ATOMIC_SEQ_CST); }	\
static inline void pfx##_and(ctype i, type *v) { __atomic_fetch_and(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline void pfx##_or(ctype i, type *v) { __atomic_fetch_or(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline void pfx##_xor(ctype i, type *v) { __atomic_fetch_xor(&v->counter, i, __ATOMIC_SEQ_CST); } \
static inline void pfx##_andnot(ctype i, type *v)					\
	{ __atomic_fetch_and(&v->counter, ~i, __ATOMIC_SEQ_CST); }			\
static inline ctype pfx##_fetch_add(ctype i, type *v)					\
	{ return __atomic_fetch_add(&v->counter, i, __ATOMIC_SEQ_CST); }		\
static inline ctype pfx##_fetch_sub(ctype i, type *v)					\
	{ return __atomic_fetch_sub(&v->counter, i, __ATOMIC_SEQ_CST); }		\
static inline ctype pfx##_fetch_inc(type *v) { return pfx##_fetch_add(1, v); }		\
static inline ctype pfx##_fetch_dec(type *v) { return pfx##_fetch_sub(1, v); }		\
static inline ctype pfx##_fetch_and(ctype i, type *v)					\
	{ return __atomic_fetch_and(&v->counter, i, __ATOMIC_SEQ_CST); }		\
static inline ctype pfx##_fetch_or(ctype i, type *v)					\
	{ return __atomic_fetch_or(&v->counter, i, __ATOMIC_SEQ_CST); }			\
static inline ctype pfx##_fetch_xor(ctype i, type *v)					\
	{ return __atomic_fetch_xor(&v->counter, i, __ATOMIC_SEQ_CST); }		\
static inline ctype pfx##_fetch_andnot(ctype i, type *v) { return pfx##_fetch_and(~i, v); } \
static inline ctype pfx##_add_return(ctype i, type *v) { return pfx##_fetch_add(i, v) + i; } \
static inline ctype pfx##_sub_return(ctype i, type *v) { return pfx##_fetch_sub(i, v) - i; } \
static inline ctype pfx##_inc_return(type *v) { return pfx##_add_return(1, v); }	\
static inline ctype pfx##_dec_return(type *v) { return pfx##_sub_return(1, v); }	\
static inline ctype pfx##_xchg(type *v, ctype i)					\
	{ return __atomic_exchange_n(&v->counter, i, __ATOMIC_SEQ_CST); }		\
static inline ctype pfx##_cmpxchg(type *v, ctype old, ctype new_)			\
{											\
	__atomic_compare_exchange_n(&v->counter, &old, new_, 0, __ATOMIC_SEQ_CST,	\
				    __ATOMIC_SEQ_CST);					\
	return old;									\
}											\
static inline bool pfx##_try_cmpxchg(type *v, ctype *old, ctype new_)			\
{											\
	return __atomic_compare_exchange_n(&v->counter, old, new_, 0, __ATOMIC_SEQ_CST,	\
					   __ATOMIC_SEQ_CST);				\
}											\
static inline bool pfx##_sub_and_test(ctype i, type *v) { return pfx##_sub_return(i, v) == 0; } \
static inline bool pfx##_dec_and_test(type *v) { return pfx##_dec_return(v) == 0; }	\
static inline bool pfx##_inc_and_test(type *v) { return pfx##_inc_return(v) == 0; }	\
static inline bool pfx##_add_negative(ctype i, type *v) { return pfx##_add_return(i, v) < 0; } \
static inline ctype pfx##_fetch_add_unless(type *v, ctype a, ctype u)			\
{											\
	ctype c = pfx##_read(v);							\
											\
	do {										\
		if (c == u)								\
			break;								\
	} while (!pfx##_try_cmpxchg(v, &c, c + a));					\
	return c;									\
}											\
static inline bool pfx##_add_unless(type *v, ctype a, ctype u)				\
	{ return pfx##_fetch_add_unless(v, a, u) != u; }				\
static inline bool pfx##_inc_not_zero(type *v) { return pfx##_add_unless(v, 1, 0); }	\
static inline ctype pfx##_dec_if_positive(type *v)					\
{											\
	ctype c = pfx##_read(v), d;							\
											\
	do {										\
		d = c - 1;								\
		if (d < 0)								\
			break;								\
	} while (!pfx##_try_cmpxchg(v, &c, d));						\
	return d;									\
}

SMPNET_ATOMIC_OPS(atomic, atomic_t, int)
SMPNET_ATOMIC_OPS(atomic64, atomic64_t, int64_t)
SMPNET_ATOMIC_OPS(atomic_long, atomic_long_t, long)

/* xchg(), cmpxchg(), try_cmpxchg() on a word of any size the CPU has
 * (1, 2, 4, 8 bytes: arch/x86/include/asm/cmpxchg.h's xchg and lock
 * cmpxchg by the operand's size) */
#define xchg(ptr, v)		__atomic_exchange_n((ptr), (v), __ATOMIC_SEQ_CST)
#define cmpxchg(ptr, old, new_)								\
	({										\
		__typeof__(*(ptr)) __old = (old);					\
		__atomic_compare_exchange_n((ptr), &__old, (new_), 0, __ATOMIC_SEQ_CST,	\
					    __ATOMIC_SEQ_CST);				\
		__old;									\
	})
#define try_cmpxchg(ptr, pold, new_)							\
	__atomic_compare_exchange_n((ptr), (pold), (new_), 0, __ATOMIC_SEQ_CST,		\
				    __ATOMIC_SEQ_CST)

/* The ordering variants (_acquire, _release, _relaxed) of the ops kernel
 * locking code uses: on x86 each is the full op, the same locked
 * instruction (include/linux/atomic/atomic-arch-fallback.h maps them to
 * it where the arch defines only that). */
#define xchg_relaxed		xchg
#define xchg_acquire		xchg
#define xchg_release		xchg
#define cmpxchg_relaxed		cmpxchg
#define cmpxchg_acquire		cmpxchg
#define cmpxchg_release		cmpxchg
#define try_cmpxchg_relaxed	try_cmpxchg
#define try_cmpxchg_acquire	try_cmpxchg
#define try_cmpxchg_release	try_cmpxchg
#define atomic_xchg_relaxed	atomic_xchg
#define atomic_xchg_acquire	atomic_xchg
#define atomic_xchg_release	atomic_xchg
#define atomic_cmpxchg_relaxed	atomic_cmpxchg
#define atomic_cmpxchg_acquire	atomic_cmpxchg
#define atomic_cmpxchg_release	atomic_cmpxchg
#define atomic_try_cmpxchg_relaxed	atomic_try_cmpxchg
#define atomic_try_cmpxchg_acquire	atomic_try_cmpxchg
#define atomic_try_cmpxchg_release	atomic_try_cmpxchg
#define atomic_fetch_add_relaxed	atomic_fetch_add
#define atomic_fetch_add_acquire	atomic_fetch_add
#define atomic_fetch_add_release	atomic_fetch_add
#define atomic_fetch_or_relaxed		atomic_fetch_or
#define atomic_fetch_or_acquire		atomic_fetch_or
#define atomic_fetch_or_release		atomic_fetch_or
#define atomic_add_return_relaxed	atomic_add_return
#define atomic_add_return_acquire	atomic_add_return
#define atomic_add_return_release	atomic_add_return
/* wait until `c` holds of VAL, the atomic's value (include/linux/atomic.h) */
#define atomic_cond_read_relaxed(v, c)	smp_cond_load_relaxed(&(v)->counter, (c))
#define atomic_cond_read_acquire(v, c)	smp_cond_load_acquire(&(v)->counter, (c))

/* ---------------------------------------------------------------- local_t, seqcount, u64_stats */

/* local_t (arch/x86/include/asm/local.h): a long only its CPU writes,
 * each op one instruction without a lock prefix (safe against the CPU's
 * own interrupts, not against another CPU). */
typedef struct { long a; } local_t;
#define LOCAL_INIT(i)		{ (i) }
#define local_read(l)		READ_ONCE((l)->a)
#define local_set(l, i)		WRITE_ONCE((l)->a, (i))
#if defined(__x86_64__)
#define local_add(i, l)		__asm__ __volatile__("addq %1, %0" : "+m"((l)->a) : "er"((long)(i)))
#define local_sub(i, l)		__asm__ __volatile__("subq %1, %0" : "+m"((l)->a) : "er"((long)(i)))
#define local_inc(l)		__asm__ __volatile__("incq %0" : "+m"((l)->a))
#define local_dec(l)		__asm__ __volatile__("decq %0" : "+m"((l)->a))
#define local_add_return(i, l)								\
	({ long __i = (i), __r = __i; __asm__ __volatile__("xaddq %0, %1"		\
		: "+r"(__r), "+m"((l)->a) : : "memory"); __r + __i; })
#else
#define local_add(i, l)		WRITE_ONCE((l)->a, READ_ONCE((l)->a) + (i))
#define local_sub(i, l)		local_add(-(i), l)
#define local_inc(l)		local_add(1, l)
#define local_dec(l)		local_add(-1, l)
#define local_add_return(i, l)	({ long __r = READ_ONCE((l)->a) + (i); WRITE_ONCE((l)->a, __r); __r; })
#endif
#define local_inc_return(l)	local_add_return(1, l)

/* seqcount_t and seqlock_t (include/linux/seqlock.h): a writer makes the
 * count odd, writes, makes it even again; a reader retries while it was
 * odd or changed. The writers must exclude each other (seqlock_t: its
 * spinlock). */
typedef struct { unsigned int sequence; } seqcount_t;
#define SEQCNT_ZERO(name)	{ 0 }
static inline void seqcount_init(seqcount_t *s) { s->sequence = 0; }
static inline void write_seqcount_begin(seqcount_t *s)
{
	WRITE_ONCE(s->sequence, s->sequence + 1);
	smp_wmb();
}
static inline void write_seqcount_end(seqcount_t *s)
{
	smp_wmb();
	WRITE_ONCE(s->sequence, s->sequence + 1);
}
static inline unsigned int read_seqcount_begin(const seqcount_t *s)
{
	unsigned int seq = smp_cond_load_relaxed(&s->sequence, !(VAL & 1));

	smp_rmb();
	return seq;
}
static inline int read_seqcount_retry(const seqcount_t *s, unsigned int start)
{
	smp_rmb();
	return unlikely(READ_ONCE(s->sequence) != start);
}
#define raw_read_seqcount_begin(s)	read_seqcount_begin(s)
#define raw_write_seqcount_begin(s)	write_seqcount_begin(s)
#define raw_write_seqcount_end(s)	write_seqcount_end(s)

/* u64_stats_sync (include/linux/u64_stats_sync.h) as a 64-bit kernel
 * builds it: nothing to sync (a 64-bit load or store is whole), the
 * counters local64_t, each add one unlocked instruction; a 32-bit kernel's
 * seqcount form where SMPNET_U64_STATS_32 is defined before smpnet.h. */
typedef struct { local_t v; } u64_stats_t;
#ifdef SMPNET_U64_STATS_32
struct u64_stats_sync { seqcount_t seq; };
#define u64_stats_init(syncp)		seqcount_init(&(syncp)->seq)
#define u64_stats_update_begin(syncp)	write_seqcount_begin(&(syncp)->seq)
#define u64_stats_update_end(syncp)	write_seqcount_end(&(syncp)->seq)
#define u64_stats_fetch_begin(syncp)	read_seqcount_begin(&(syncp)->seq)
#define u64_stats_fetch_retry(syncp, s)	read_seqcount_retry(&(syncp)->seq, (s))
#else
struct u64_stats_sync { char unused[0]; };
#define u64_stats_init(syncp)		do { (void)(syncp); } while (0)
#define u64_stats_update_begin(syncp)	do { (void)(syncp); } while (0)
#define u64_stats_update_end(syncp)	do { (void)(syncp); } while (0)
#define u64_stats_fetch_begin(syncp)	({ (void)(syncp); 0U; })
#define u64_stats_fetch_retry(syncp, s)	({ (void)(syncp); (void)(s); false; })
#endif
#define u64_stats_read(p)		((u64)local_read(&(p)->v))
#define u64_stats_set(p, val)		local_set(&(p)->v, (long)(val))
#define u64_stats_add(p, val)		local_add((long)(val), &(p)->v)
#define u64_stats_inc(p)		local_inc(&(p)->v)

/* ---------------------------------------------------------------- refcount_t */

/* include/linux/refcount.h's (5.x on): an atomic_t that saturates at
 * REFCOUNT_SATURATED rather than wrap, on an increment from 0 (a use after
 * free), an overflow, or a decrement below 0; the kernel then WARNs once,
 * which here is the saturated value alone. */
typedef struct refcount_struct { atomic_t refs; } refcount_t;
#define REFCOUNT_INIT(n)	{ .refs = ATOMIC_INIT(n), }
#define REFCOUNT_MAX		INT32_MAX
#define REFCOUNT_SATURATED	(INT32_MIN / 2)

static inline void refcount_set(refcount_t *r, int n) { atomic_set(&r->refs, n); }
static inline unsigned int refcount_read(const refcount_t *r) { return atomic_read(&r->refs); }
static inline void refcount_warn_saturate(refcount_t *r) { atomic_set(&r->refs, REFCOUNT_SATURATED); }

static inline bool refcount_add_not_zero(int i, refcount_t *r)
{
	int old = atomic_read(&r->refs);

	do {
		if (!old)
			break;
	} while (!atomic_try_cmpxchg(&r->refs, &old, old + i));
	if (unlikely(old < 0 || old + i < 0))
		refcount_warn_saturate(r);
	return old;
}

static inline bool refcount_inc_not_zero(refcount_t *r) { return refcount_add_not_zero(1, r); }

static inline void refcount_add(int i, refcount_t *r)
{
	int old = atomic_fetch_add(i, &r->refs);

	if (unlikely(!old || old < 0 || old + i < 0))
		refcount_warn_saturate(r);
}

static inline void refcount_inc(refcount_t *r) { refcount_add(1, r); }

static inline bool refcount_sub_and_test(int i, refcount_t *r)
{
	int old = atomic_fetch_sub(i, &r->refs);

	if (old == i)
		return true;
	if (unlikely(old < 0 || old - i < 0))
		refcount_warn_saturate(r);
	return false;
}

static inline bool refcount_dec_and_test(refcount_t *r) { return refcount_sub_and_test(1, r); }

static inline void refcount_dec(refcount_t *r)
{
	if (unlikely(atomic_fetch_sub(1, &r->refs) <= 1))
		refcount_warn_saturate(r);
}

/* ---------------------------------------------------------------- llist */

/* include/linux/llist.h and lib/llist.c: a lock-less singly linked list,
 * added to with a cmpxchg loop, emptied with one xchg. Its nodes must lie
 * in the file's state (the segment every CPU maps at one address). */
struct llist_node { struct llist_node *next; };
struct llist_head { struct llist_node *first; };
#define LLIST_HEAD_INIT(name)	{ NULL }

static inline void init_llist_head(struct llist_head *list) { list->first = NULL; }
static inline bool llist_empty(const struct llist_head *head) { return READ_ONCE(head->first) == NULL; }
#define llist_entry(ptr, type, member)	container_of(ptr, type, member)

static inline bool llist_add_batch(struct llist_node *new_first, struct llist_node *new_last,
				   struct llist_head *head)
{
	struct llist_node *first = READ_ONCE(head->first);

	do {
		new_last->next = first;
	} while (!try_cmpxchg(&head->first, &first, new_first));
	return !first;
}

static inline bool llist_add(struct llist_node *new_, struct llist_head *head)
{
	return llist_add_batch(new_, new_, head);
}

static inline struct llist_node *llist_del_all(struct llist_head *head)
{
	return xchg(&head->first, NULL);
}

static inline struct llist_node *llist_del_first(struct llist_head *head)
{
	struct llist_node *entry = __atomic_load_n(&head->first, __ATOMIC_ACQUIRE), *next;

	do {
		if (entry == NULL)
			return NULL;
		next = READ_ONCE(entry->next);
	} while (!try_cmpxchg(&head->first, &entry, next));
	return entry;
}

static inline struct llist_node *llist_reverse_order(struct llist_node *head)
{
	struct llist_node *new_head = NULL;

	while (head) {
		struct llist_node *tmp = head;

		head = head->next;
		tmp->next = new_head;
		new_head = tmp;
	}
	return new_head;
}

#define llist_for_each(pos, node)	for ((pos) = (node); (pos); (pos) = (pos)->next)
#define llist_for_each_safe(pos, n, node)						\
	for ((pos) = (node); (pos) && ((n) = (pos)->next, true); (pos) = (n))
#define llist_for_each_entry(pos, node, member)						\
	for ((pos) = llist_entry((node), __typeof__(*(pos)), member);			\
	     (uintptr_t)(pos) + offsetof(__typeof__(*(pos)), member) != 0;		\
	     (pos) = llist_entry((pos)->member.next, __typeof__(*(pos)), member))
#define llist_for_each_entry_safe(pos, n, node, member)					\
	for ((pos) = llist_entry((node), __typeof__(*(pos)), member);			\
	     (uintptr_t)(pos) + offsetof(__typeof__(*(pos)), member) != 0 &&		\
	     ((n) = llist_entry((pos)->member.next, __typeof__(*(n)), member), true);	\
	     (pos) = (n))

#endif
