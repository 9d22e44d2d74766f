/* smpnet_list.h - doubly linked lists in a user's `ab` file, as
 * include/linux/list.h and rculist.h have them (list_head, hlist); smpnet.h
 * includes it. Docs: docs/experiments/ab.md. */
#ifndef SMPNET_LIST_H
#define SMPNET_LIST_H

struct list_head { struct list_head *next, *prev; };
struct hlist_head { struct hlist_node *first; };
struct hlist_node { struct hlist_node *next, **pprev; };

/* include/linux/poison.h's (POISON_POINTER_DELTA 0xdead000000000000 on
 * x86-64): a deleted entry's pointers, a fault where they are followed */
#define LIST_POISON1	((void *)(0xdead000000000000UL + 0x100))
#define LIST_POISON2	((void *)(0xdead000000000000UL + 0x122))

#define LIST_HEAD_INIT(name)	{ &(name), &(name) }
#define LIST_HEAD(name)		struct list_head name = LIST_HEAD_INIT(name)
#define HLIST_HEAD_INIT		{ .first = NULL }
#define HLIST_HEAD(name)	struct hlist_head name = HLIST_HEAD_INIT
#define INIT_HLIST_HEAD(ptr)	((ptr)->first = NULL)

static inline void INIT_LIST_HEAD(struct list_head *list)
{
	WRITE_ONCE(list->next, list);
	WRITE_ONCE(list->prev, list);
}

static inline void __list_add(struct list_head *new_, struct list_head *prev,
			      struct list_head *next)
{
	next->prev = new_;
	new_->next = next;
	new_->prev = prev;
	WRITE_ONCE(prev->next, new_);
}
static inline void list_add(struct list_head *new_, struct list_head *head)
{ __list_add(new_, head, head->next); }
static inline void list_add_tail(struct list_head *new_, struct list_head *head)
{ __list_add(new_, head->prev, head); }

static inline void __list_del(struct list_head *prev, struct list_head *next)
{
	next->prev = prev;
	WRITE_ONCE(prev->next, next);
}
static inline void __list_del_entry(struct list_head *entry) { __list_del(entry->prev, entry->next); }
static inline void list_del(struct list_head *entry)
{
	__list_del_entry(entry);
	entry->next = (struct list_head *)LIST_POISON1;
	entry->prev = (struct list_head *)LIST_POISON2;
}
static inline void list_del_init(struct list_head *entry)
{
	__list_del_entry(entry);
	INIT_LIST_HEAD(entry);
}
static inline void list_move(struct list_head *list, struct list_head *head)
{ __list_del_entry(list); list_add(list, head); }
static inline void list_move_tail(struct list_head *list, struct list_head *head)
{ __list_del_entry(list); list_add_tail(list, head); }
static inline int list_empty(const struct list_head *head) { return READ_ONCE(head->next) == head; }
static inline int list_is_last(const struct list_head *list, const struct list_head *head)
{ return list->next == head; }
static inline void list_splice_init(struct list_head *list, struct list_head *head)
{
	if (!list_empty(list)) {
		struct list_head *first = list->next, *last = list->prev, *at = head->next;

		first->prev = head;
		head->next = first;
		last->next = at;
		at->prev = last;
		INIT_LIST_HEAD(list);
	}
}

#define list_entry(ptr, type, member)		container_of(ptr, type, member)
#define list_first_entry(ptr, type, member)	list_entry((ptr)->next, type, member)
#define list_last_entry(ptr, type, member)	list_entry((ptr)->prev, type, member)
#define list_first_entry_or_null(ptr, type, member)					\
	({ struct list_head *list_head_ = (ptr), *list_pos_ = READ_ONCE(list_head_->next);	\
	   list_pos_ != list_head_ ? list_entry(list_pos_, type, member) : NULL; })
#define list_next_entry(pos, member)	list_entry((pos)->member.next, __typeof__(*(pos)), member)
#define list_for_each(pos, head)	for (pos = (head)->next; pos != (head); pos = pos->next)
#define list_for_each_safe(pos, n, head)						\
	for (pos = (head)->next, n = pos->next; pos != (head); pos = n, n = pos->next)
#define list_for_each_entry(pos, head, member)						\
	for (pos = list_first_entry(head, __typeof__(*pos), member);			\
	     &pos->member != (head); pos = list_next_entry(pos, member))
#define list_for_each_entry_safe(pos, n, head, member)					\
	for (pos = list_first_entry(head, __typeof__(*pos), member),			\
	     n = list_next_entry(pos, member);						\
	     &pos->member != (head); pos = n, n = list_next_entry(n, member))

/* hlist: a one-pointer head, for hash tables */
static inline void INIT_HLIST_NODE(struct hlist_node *h) { h->next = NULL; h->pprev = NULL; }
static inline int hlist_unhashed(const struct hlist_node *h) { return !h->pprev; }
static inline int hlist_empty(const struct hlist_head *h) { return !READ_ONCE(h->first); }
static inline void hlist_add_head(struct hlist_node *n, struct hlist_head *h)
{
	struct hlist_node *first = h->first;

	WRITE_ONCE(n->next, first);
	if (first)
		WRITE_ONCE(first->pprev, &n->next);
	WRITE_ONCE(h->first, n);
	WRITE_ONCE(n->pprev, &h->first);
}
static inline void __hlist_del(struct hlist_node *n)
{
	struct hlist_node *next = n->next, **pprev = n->pprev;

	WRITE_ONCE(*pprev, next);
	if (next)
		WRITE_ONCE(next->pprev, pprev);
}
static inline void hlist_del(struct hlist_node *n)
{
	__hlist_del(n);
	n->next = (struct hlist_node *)LIST_POISON1;
	n->pprev = (struct hlist_node **)LIST_POISON2;
}
static inline void hlist_del_init(struct hlist_node *n)
{
	if (!hlist_unhashed(n)) {
		__hlist_del(n);
		INIT_HLIST_NODE(n);
	}
}
#define hlist_entry(ptr, type, member)	container_of(ptr, type, member)
#define hlist_entry_safe(ptr, type, member)						\
	({ __typeof__(ptr) hlist_p_ = (ptr); hlist_p_ ? hlist_entry(hlist_p_, type, member) : NULL; })
#define hlist_for_each_entry(pos, head, member)						\
	for (pos = hlist_entry_safe((head)->first, __typeof__(*(pos)), member); pos;	\
	     pos = hlist_entry_safe((pos)->member.next, __typeof__(*(pos)), member))
#define hlist_for_each_entry_safe(pos, n, head, member)					\
	for (pos = hlist_entry_safe((head)->first, __typeof__(*pos), member);		\
	     pos && ({ n = pos->member.next; 1; });					\
	     pos = hlist_entry_safe(n, __typeof__(*pos), member))

/* rculist.h: the publishing store a release (rcu_assign_pointer()), the
 * readers' loads READ_ONCE (rcu_dereference(): a plain load on x86) */
static inline void __list_add_rcu(struct list_head *new_, struct list_head *prev,
				  struct list_head *next)
{
	new_->next = next;
	new_->prev = prev;
	smp_store_release(&prev->next, new_);
	next->prev = new_;
}
static inline void list_add_rcu(struct list_head *new_, struct list_head *head)
{ __list_add_rcu(new_, head, head->next); }
static inline void list_add_tail_rcu(struct list_head *new_, struct list_head *head)
{ __list_add_rcu(new_, head->prev, head); }
static inline void list_del_rcu(struct list_head *entry)
{
	__list_del_entry(entry);
	entry->prev = (struct list_head *)LIST_POISON2;	/* next stays: a reader may be on it */
}
static inline void hlist_add_head_rcu(struct hlist_node *n, struct hlist_head *h)
{
	struct hlist_node *first = h->first;

	n->next = first;
	WRITE_ONCE(n->pprev, &h->first);
	smp_store_release(&h->first, n);
	if (first)
		WRITE_ONCE(first->pprev, &n->next);
}
static inline void hlist_del_rcu(struct hlist_node *n)
{
	__hlist_del(n);
	WRITE_ONCE(n->pprev, (struct hlist_node **)LIST_POISON2);
}
#define list_entry_rcu(ptr, type, member)	container_of(READ_ONCE(ptr), type, member)
#define list_for_each_entry_rcu(pos, head, member, ...)				\
	for (pos = list_entry_rcu((head)->next, __typeof__(*pos), member);		\
	     &pos->member != (head);							\
	     pos = list_entry_rcu(pos->member.next, __typeof__(*pos), member))
#define hlist_for_each_entry_rcu(pos, head, member, ...)				\
	for (pos = hlist_entry_safe(READ_ONCE((head)->first), __typeof__(*(pos)), member); \
	     pos; pos = hlist_entry_safe(READ_ONCE((pos)->member.next), __typeof__(*(pos)), member))

#endif
