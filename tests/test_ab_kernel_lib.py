"""ab: the kernel's little libraries in a user's file: include/linux/list.h's
lists (and rculist.h's, published and read), x86's bit operations, minmax.h's helpers; each
behaves as the kernel's, the bit operations as x86's instructions (read from
the built object), a bit lock under contention. No test asserts a timing.
The rest of the kernel API: test_ab_kernel_api.py."""
import json
import re

from ab_helpers import FAST, two_cpus, write
from conftest import object_functions, open_segments, timed_loop
from smpnet import _core
from smpnet.cli import main
from smpnet.experiments.ab import build

LIB = """#include <smpnet.h>
#if BITS_PER_LONG != 64
#error "BITS_PER_LONG is a number the preprocessor reads"
#endif
struct item { struct list_head list; struct hlist_node node; int v; };
struct shared { unsigned long bits, lock, counter; struct list_head head;
		struct hlist_head table[4]; struct item items[8], more[2]; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(bit_lock)
{
	struct item *it, *n;
	int i, sum = 0, seen = 0;
	LIST_HEAD(local);

	INIT_LIST_HEAD(&shared->head);
	for (i = 0; i < 8; i++) {
		shared->items[i].v = i;
		(i & 1 ? list_add_tail : list_add)(&shared->items[i].list, &shared->head);
		hlist_add_head(&shared->items[i].node, &shared->table[i % ARRAY_SIZE(shared->table)]);
	}
	list_for_each_entry(it, &shared->head, list)
		sum += it->v, seen++;
	BUG_ON(sum != 28 || seen != 8);
	BUG_ON(list_first_entry(&shared->head, struct item, list)->v != 6);	/* the last list_add */
	BUG_ON(list_last_entry(&shared->head, struct item, list)->v != 7);	/* the last _tail */
	list_for_each_entry_safe(it, n, &shared->head, list)
		if (it->v % 2)
			list_move_tail(&it->list, &local);
	BUG_ON(list_empty(&local) || list_first_entry(&local, struct item, list)->v % 2 == 0);
	list_del(&shared->items[0].list);
	BUG_ON(shared->items[0].list.next != LIST_POISON1);
	list_splice_init(&local, &shared->head);
	BUG_ON(!list_empty(&local));
	seen = 0;
	hlist_for_each_entry(it, &shared->table[1], node)
		seen += it->v % 4 == 1;
	BUG_ON(seen != 2);
	hlist_del_init(&shared->items[1].node);
	BUG_ON(!hlist_unhashed(&shared->items[1].node));
	{
		LIST_HEAD(published);

		list_add_rcu(&shared->more[1].list, &published);
		list_add_rcu(&shared->more[0].list, &published);
		seen = 0;
		rcu_read_lock();
		list_for_each_entry_rcu(it, &published, list)
			seen += it == &shared->more[seen];
		rcu_read_unlock();
		BUG_ON(seen != 2);
		list_del_rcu(&shared->more[0].list);
		BUG_ON(list_first_entry(&published, struct item, list) != &shared->more[1]);
		list_add_tail_rcu(&shared->more[0].list, &published);
		BUG_ON(list_last_entry(&published, struct item, list) != &shared->more[0]);
	}

	set_bit(3, &shared->bits);
	i = 5;
	__set_bit(i, &shared->bits);
	BUG_ON(shared->bits != (BIT(3) | BIT(5)) || !test_bit(5, &shared->bits));
	BUG_ON(!test_and_clear_bit(3, &shared->bits) || test_and_clear_bit(3, &shared->bits));
	change_bit(i, &shared->bits);
	BUG_ON(shared->bits != 0 || GENMASK(7, 4) != 0xf0);

	i = 0;
	BUG_ON(min(i++, 10) != 0 || i != 1);			/* each argument once */
	{
		int x_ = 5, y_ = 3;				/* the helpers' own names: not captured */

		BUG_ON(max(x_, y_) != 5 || min(y_, x_) != 3);
		swap(x_, y_);
		BUG_ON(x_ != 3 || y_ != 5);
	}
	BUG_ON(max_t(u8, 300, 1) != 44 || clamp(12, 0, 10) != 10 || min3(4, 2, 3) != 2);
	BUG_ON(DIV_ROUND_UP(9, 4) != 3 || ALIGN(9, 8) != 16 || round_down(9, 8) != 8);
}
/* a bit lock, as bit_spin_lock()'s: one bit of a word every CPU takes */
SMPNET_VARIANT(bit_lock)
{
	while (test_and_set_bit_lock(0, &shared->lock))
		cpu_relax();
	shared->counter++;
	clear_bit_unlock(0, &shared->lock);
}
SMPNET_CHECK(bit_lock) { expect(shared->counter == nr_ops, "two CPUs held the bit lock"); }
SMPNET_VARIANT(ops)
{
	int nr = READ_ONCE(shared->counter) & 63;

	set_bit(7, &shared->bits);
	set_bit(nr, &shared->bits);
	__clear_bit(nr, &shared->bits);
	__set_bit(nr + 1, &shared->bits);
	(void)__test_and_set_bit(9, &shared->bits);
	if (test_bit(nr, &shared->bits))
		shared->counter++;
}
"""


def test_lists_bits_and_minmax_behave_as_the_kernels_and_a_bit_lock_excludes(tmp_path, allowed):
    """The init's list, hlist, bit and minmax checks hold (BUG_ON ends a
    run); a bit lock (test_and_set_bit_lock, clear_bit_unlock) on every CPU
    at once counts every op; set_bit() of a constant bit is x86's `lock
    orb`, of a variable one `lock bts`, test_and_set_bit() a `lock bts`,
    __set_bit(), __clear_bit() and __test_and_set_bit() a `bts` or `btr`
    without the lock, test_bit() of a variable bit a `bt` of the string."""
    assert main(["ab", write(tmp_path, LIB, "lib.c"), *two_cpus(allowed),
                 "--duration", "0.01", "--repeat", "2"] + FAST) == 0
    assert open_segments() == set()
    fns = object_functions(build.build(LIB, "lib.c", _core.LOCK_ALGOS["qspinlock"]).path)
    ops, lock = fns[timed_loop(fns, "ops")], fns[timed_loop(fns, "bit_lock")]
    assert re.search(r"lock orb +\$0x80,", ops), ops
    assert re.search(r"lock bts +%r\w+,", ops), ops
    assert re.search(r"\tbtr +%r\w+,", ops) and re.search(r"\tbts +%r\w+,", ops), ops
    assert re.search(r"\tbtsq? +\$0x9,", ops) and re.search(r"\tbtq? +%r\w+,\(", ops), ops
    assert re.search(r"lock btsq? +\$0x0,", lock), lock


DECLARED = """#define CONFIG_ON 1
#define CONFIG_MOD_MODULE 1
#include <smpnet.h>
struct wire { u8 type; u32 len; } __packed;
struct shared { unsigned long n, printed; };
SMPNET_STATE(struct shared, struct smpnet_none);
static __cold noinline void slow_path(struct shared *s) { s->n += 2; }
EXPORT_SYMBOL(slow_path);
SMPNET_INIT(says)
{
	int __maybe_unused spare;

	BUG_ON(!IS_ENABLED(CONFIG_ON) || IS_ENABLED(CONFIG_OFF) || !IS_ENABLED(CONFIG_MOD));
	BUG_ON(IS_REACHABLE(CONFIG_MOD) || !IS_ENABLED(CONFIG_SMP));	/* built in, on SMP */
	BUG_ON(sizeof(struct wire) != 5);
	switch (shared->n) {
	case 0:
		shared->n = 1;
		fallthrough;
	default:
		slow_path(shared);
	}
	BUG_ON(shared->n != 3);
}
SMPNET_VARIANT(says)
{
	if (++shared->n % 1000 == 0)
		net_warn_ratelimited("queue %lu full\\n", shared->printed++);
	pr_debug("never %lu\\n", shared->printed++);
}
SMPNET_CHECK(says) { expect(shared->printed == 0, "a message's arguments were evaluated"); }
SMPNET_VARIANT(quiet) { }
SMPNET_VARIANT(levels)
{
	if (++shared->n % 1000 == 0)
		printk(KERN_ERR "level %lu\\n", shared->printed++);
}
"""


def test_attributes_kconfig_tests_and_printk_as_a_kernel_function_carries_them(tmp_path, capfd):
    """A file with the kernel's attributes, EXPORT_SYMBOL() and
    IS_ENABLED() of options it sets (built in or as a module) and one it
    does not builds and runs; a message in the op is counted and placed as
    a WARN is, never printed (by any process of the run) and its arguments
    never evaluated, and pr_debug() is nothing."""
    f = write(tmp_path, DECLARED, "declared.c")
    assert main(["ab", f, "--cpus", "0", "--no-contended", "--json"] + FAST) == 0
    out, err = capfd.readouterr()
    env = json.loads(out)
    said = [w for w in env["warnings"] if "net_warn_ratelimited" in w]
    assert [w.split(",")[0] for w in said] == ["variant 'says'", "variant 'says (A/A)'"], said
    for w in said:
        assert re.search(r"declared\.c:\d+: net_warn_ratelimited\(\"queue %lu full\\n\"\) "
                         r"fired \d+ times$", w), w
    assert any(re.search(r'printk\(KERN_ERR "level %lu\\n"\) fired \d+ times$', w)
               for w in env["warnings"]), env["warnings"]
    assert "queue 0 full" not in out + err and "never 0" not in out + err
    assert not any("pr_debug" in w for w in env["warnings"])
