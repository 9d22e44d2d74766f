"""ab: jiffies in a user's file as the kernel's: ticks of HZ since boot from
INITIAL_JIFFIES, read by one load, advancing between rounds, compared and
converted as include/linux/jiffies.h does; and the example that stamps a
queue with them. No test asserts a timing."""
from ab_helpers import EXAMPLES, FAST, two_cpus, write  # noqa: F401
from conftest import object_functions, open_segments, timed_loop
from smpnet import _core
from smpnet.cli import main
from smpnet.experiments.ab import build

JIFFIES = """#define HZ 300
#include <smpnet.h>
struct shared { unsigned long start, seen; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(ticks)
{
	shared->start = jiffies;
	BUG_ON(!time_after(shared->start, INITIAL_JIFFIES));	/* the TSC's count since boot */
	BUG_ON(!time_after(5UL, (unsigned long)-6) || time_before(5UL, (unsigned long)-6));
	BUG_ON(!time_in_range(7UL, 7UL, 8UL) || time_in_range_open(8UL, 7UL, 8UL));
	/* at HZ 300 a tick is 3.33 ms: to jiffies up, to ms up, to us down */
	BUG_ON(msecs_to_jiffies(1) != 1 || msecs_to_jiffies(4) != 2 || msecs_to_jiffies(10) != 3);
	BUG_ON(usecs_to_jiffies(3334) != 2 || msecs_to_jiffies(-1) != MAX_JIFFY_OFFSET);
	BUG_ON(jiffies_to_msecs(1) != 4 || jiffies_to_msecs(HZ) != 1000 || jiffies_to_usecs(1) != 3333);
}
SMPNET_VARIANT(ticks) { WRITE_ONCE(shared->seen, jiffies); }
SMPNET_CHECK(ticks)
{
	expect(time_after_eq(jiffies, READ_ONCE(shared->seen)), "a round saw a later jiffies");
	/* the rounds before a check take 20 ms and more (the test's options) */
	expect(time_after(jiffies, shared->start + 2), "jiffies did not advance");
}
SMPNET_VARIANT(none) { }
"""


def test_jiffies_tick_at_hz_between_rounds_and_compare_across_the_wrap(tmp_path, allowed):
    """The init's jiffies are past INITIAL_JIFFIES (the TSC has counted since
    boot); comparisons hold across the wrap and conversions round as the
    kernel's, at an HZ that does not divide a second; by the check, after the rounds, jiffies have advanced; in the
    timed loop jiffies is a load, no clock read beside the timing's two."""
    # 12 rounds of 2 M ops a side (a cycle or two each), then two contended
    # rounds of 10 ms a side: 20 ms or more before each check, 6 ticks at HZ 300
    assert main(["ab", write(tmp_path, JIFFIES, "jiffies.c"), *two_cpus(allowed),
                 "--duration", "0.01", "--repeat", "2", "--loops", "2000000", "--rounds", "12"]) == 0
    fns = object_functions(build.build(JIFFIES, "jiffies.c", _core.LOCK_ALGOS["qspinlock"]).path)
    loop = fns[timed_loop(fns, "ticks")]
    assert loop.count("rdtsc") == 2 and "<jiffies>" in loop, loop


def test_the_txq_trans_start_example_stamps_its_queue(allowed):
    """examples/txq_trans_start.c (5337824f4dc4) on two CPUs (emulated on one
    where there is one): its checks held, each CPU's ring counted every
    transmit and the stamp is a jiffies of the run."""
    assert main(["ab", str(EXAMPLES / "txq_trans_start.c"), *two_cpus(allowed),
                 "--duration", "0.01", "--repeat", "2"] + FAST) == 0
    assert open_segments() == set()
