"""The model's skb life cycle in a user's `ab` file (smpnet_skbuff.h):
allocation from the run's one pool, frees back to it, the defer list as
the file's kernel locks it, a free of a dead skb caught, and the
interrupt window that takes the defer kick in the loops (test_ab_roles
holds that a file without skbs has none). No test asserts a timing."""
import json
import shutil

import pytest

from smpnet.cli import main
from smpnet.experiments.ab import skbs

from ab_helpers import EXAMPLES, cache, one_error_line, two_cpus, write  # noqa: F401
from conftest import X86, object_functions

# Each init takes every skb the pool has (POOL: the test writes in the
# pool's size), frees them all, and takes them again: the pool, the
# caches and the slabs lose none and make none. FREE_TWICE frees one twice.
POOL = """#include <smpnet.h>
#include <smpnet_skbuff.h>
SMPNET_SKB_DEFER(bh);
SMPNET_STATE(struct smpnet_none, struct smpnet_none);
static struct sk_buff *held[POOL_SIZE + 1];
static int take_all(void)
{
	int n = 0;
	while (n <= POOL_SIZE && (held[n] = napi_alloc_skb(NULL, 60)) != NULL) {
		expect(held[n]->alloc_cpu == (u32)smp_processor_id() && held[n]->len == 60,
		       "an skb not of this CPU, or not of its length");
		n++;
	}
	return n;
}
static void pool_round_trip(void)
{
	int n = take_all();
	expect(n == POOL_SIZE, "the pool did not give every skb");
	for (int i = 0; i < n; i++)
		kfree_skb(held[i]);
	FREE_TWICE;
	expect(take_all() == POOL_SIZE, "the frees did not give every skb back");
	for (int i = 0; i < n; i++)
		consume_skb(held[i]);
}
SMPNET_INIT(a) { pool_round_trip(); }
SMPNET_INIT(b) { pool_round_trip(); }
SMPNET_VARIANT(a) { barrier(); }
SMPNET_VARIANT(b) { barrier(); }
"""


def _pool_file(tmp_path, free_twice="(void)0", name="pool.c"):
    size = skbs.SKBS + skbs.HELD_PER_CPU   # the uncontended machine's: one CPU
    return write(tmp_path, POOL.replace("POOL_SIZE", str(size)).replace("FREE_TWICE", free_twice),
                 name)


def test_the_pool_gives_every_skb_and_the_frees_give_them_back(capsys, tmp_path):
    """Three inits (each variant's and the A/A control's) on the run's one
    pool each take every skb, free them, and take them all again."""
    assert main(["ab", _pool_file(tmp_path), "--loops", "2000", "--rounds", "2",
                 "--no-contended", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["skb_defer"] == "bh"


def test_an_skb_freed_twice_fails_the_run(capsys, tmp_path):
    """Each of the three inits frees one skb twice: the model counts each
    second free, does not do it, and the run fails after its rounds."""
    f = _pool_file(tmp_path, "kfree_skb(held[0])", "twice.c")
    assert main(["ab", f, "--loops", "2000", "--rounds", "2", "--no-contended"]) == 1
    line = one_error_line(capsys)[-1]
    assert "3 free(s) of an skb not live" in line and "each skb is freed once" in line


@pytest.mark.parametrize("strategy", ["llist", "irq"])
def test_the_example_frees_remotely_or_defers_as_its_variant_says(capsys, tmp_path, allowed,
                                                                  strategy):
    """examples/skb_defer_free.c, contended, its defer list an llist (the
    default) and seed 003's spin_lock_irq() one: kfree frees every skb
    remotely and defers none; defer puts them on the RX CPU's list, which
    that CPU flushes (the counts are the model's, every CPU's)."""
    text = (EXAMPLES / "skb_defer_free.c").read_text()
    if strategy != "llist":
        text = text.replace("#include <smpnet_skbuff.h>\n",
                            f"#include <smpnet_skbuff.h>\nSMPNET_SKB_DEFER({strategy});\n")
    f = write(tmp_path, text, f"skb_defer_{strategy}.c")
    assert main(["ab", f, *two_cpus(allowed), "--loops", "2000", "--rounds", "2",
                 "--duration", "0.02", "--repeat", "2", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["params"]["skb_defer"] == strategy and env["params"]["unit"] == "skb"
    rows = {r["variant"]: r for r in env["results"] if r["mode"] == "contended"}
    kfree, defer = rows["kfree"]["skbs"], rows["defer"]["skbs"]
    assert kfree["allocated"] > 0 and kfree["remote_frees"] > 0 and kfree["deferred"] == 0
    assert defer["deferred"] > 0 and defer["flushed"] > 0
    # every skb a consumer freed was counted where it was freed: a remote
    # free, or a defer (the list full: nodefer, which frees it remotely)
    assert rows["kfree"]["units"] == kfree["remote_frees"]
    assert rows["defer"]["units"] == defer["deferred"] + defer["fallback_frees"]
    if strategy == "llist" and X86 and shutil.which("objdump"):
        # its loops take interrupts between ops (test_ab_roles: aa.c's do not)
        fns = object_functions(env["params"]["object"])
        loops = [fns[f] for f in fns if f.startswith(("smpnet_timed_", "smpnet_hammer_"))]
        assert loops and all("irq_replay" in text for text in loops)


@pytest.mark.parametrize("change, says", [
    ("SMPNET_SKB_DEFER(bh)", "SMPNET_SKB_DEFER(lazy): the defer list is locked as one of none, "
                             "irqsave, irq, bh, llist"),
    ("SMPNET_VARIANT(b)", "the model's skbs (smpnet_skbuff.h) take the run's lock algorithm, and "
                          "variant 'b' names its own")])
def test_skbs_that_cannot_run_are_refused_in_one_line(capsys, tmp_path, change, says):
    new = {"SMPNET_SKB_DEFER(bh)": "SMPNET_SKB_DEFER(lazy)",
           "SMPNET_VARIANT(b)": "SMPNET_VARIANT_ALGO(b, ticket)"}[change]
    f = write(tmp_path, POOL.replace(change, new).replace("POOL_SIZE", "1")
              .replace("FREE_TWICE", "(void)0"), "refused.c")
    assert main(["ab", f, "--loops", "2000", "--no-contended"]) == 2
    assert says in one_error_line(capsys)[-1]
