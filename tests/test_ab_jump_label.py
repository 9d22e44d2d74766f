"""ab: static keys in a user's file as the kernel's jump labels: the branch
is code (a 5-byte nop or a `jmp`), never a test of the key, each key
taking its branch as defined; changing a key does not build. No test
asserts a timing. The rest of the kernel API: test_ab_kernel_api.py."""
import re

from ab_helpers import FAST, write
from conftest import object_functions, timed_loop
from smpnet import _core
from smpnet.cli import main
from smpnet.experiments.ab import build

KEYS = """#include <smpnet.h>
DEFINE_STATIC_KEY_FALSE(rps_needed);
DEFINE_STATIC_KEY_TRUE(tstamp_on);
struct shared { unsigned long unlikely_off, likely_on, unlikely_on, likely_off; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(keys) { BUG_ON(static_key_enabled(&rps_needed) || !static_key_enabled(&tstamp_on)); }
SMPNET_VARIANT(keys)
{
	if (static_branch_unlikely(&rps_needed))
		shared->unlikely_off++;
	if (static_branch_likely(&tstamp_on))
		shared->likely_on++;
	if (static_branch_unlikely(&tstamp_on))
		shared->unlikely_on++;
	if (static_branch_likely(&rps_needed))
		shared->likely_off++;
	prefetch(&shared->likely_on);
}
SMPNET_CHECK(keys)
{
	expect(shared->unlikely_off == 0 && shared->likely_off == 0, "a key defined off took its branch");
	expect(shared->likely_on == nr_ops && shared->unlikely_on == nr_ops,
	       "a key defined on did not take its branch");
}
SMPNET_VARIANT(none) { }
"""


def test_a_static_key_takes_the_branch_it_is_defined_with_in_code(tmp_path):
    """Each of a key defined off and one defined on, tested likely and
    unlikely: the branches taken are the definitions' (the check counts
    them over the ops); in the built loop the key is never read, and the
    off key's unlikely branch is x86's 5-byte nop."""
    assert main(["ab", write(tmp_path, KEYS, "keys.c"), "--no-contended", "--cpus", "0"]
                + FAST) == 0
    fns = object_functions(build.build(KEYS, "keys.c", _core.LOCK_ALGOS["qspinlock"]).path)
    loop = fns[timed_loop(fns, "keys")]
    assert "<rps_needed>" not in loop and "<tstamp_on>" not in loop, loop
    assert re.search(r"\tnopl +0x0\(%rax,%rax,1\)", loop), loop
    assert "prefetcht0" in loop


def test_changing_a_static_key_does_not_build(tmp_path, capsys):
    """static_branch_enable() would leave the code's branch stale: one
    compiler error that says to define the key with its state."""
    text = KEYS.replace("SMPNET_VARIANT(none) { }",
                        "SMPNET_INIT(none) { static_branch_enable(&rps_needed); }\n"
                        "SMPNET_VARIANT(none) { }")
    assert main(["ab", write(tmp_path, text, "enable.c"), "--no-contended"] + FAST) == 2
    err = capsys.readouterr().err
    assert "define it with DEFINE_STATIC_KEY_TRUE or _FALSE" in err
    assert err.strip().splitlines()[-1].endswith("does not compile (the compiler's messages "
                                                 "are above)")
