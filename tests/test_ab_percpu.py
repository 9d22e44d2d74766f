"""ab: per-CPU data in a user's file as the kernel declares and reaches it:
this_cpu_*() of every width, DEFINE_PER_CPU and alloc_percpu(), percpu_counter
and the examples built on them; each op's x86 instruction read from the
built object (%gs-relative, unlocked) and its sums checked on every CPU at
once. No test asserts a timing. The rest of the kernel API:
test_ab_kernel_api.py."""
import re
import shutil
import subprocess

import pytest

import smpnet
from ab_helpers import EXAMPLES, FAST, cache, two_cpus, write  # noqa: F401
from conftest import X86, object_functions, open_segments
from smpnet.cli import main
from smpnet.experiments.ab import build

PLAIN = """#include <smpnet.h>
SMPNET_STATE(struct smpnet_none, struct smpnet_none);
SMPNET_VARIANT(a) { }
SMPNET_VARIANT(b) { }
"""


PERCPU = """#include <smpnet.h>
struct pcpu { u8 b; u16 h; u32 w; u64 q; u128 pair; };
SMPNET_STATE(struct smpnet_none, struct pcpu);
SMPNET_INIT(ops) {
	struct pcpu *p = per_cpu(0);
	u8 b = 7;

	BUG_ON(this_cpu_add_return(p->b, 250) != 250 || this_cpu_inc_return(p->b) != 251);
	this_cpu_add(p->b, 10);			/* wraps at 2^8, as the kernel's u8 */
	BUG_ON(p->b != 5);
	BUG_ON(this_cpu_cmpxchg(p->h, 0, 9) != 0 || p->h != 9);
	BUG_ON(this_cpu_cmpxchg(p->h, 1, 2) != 9 || p->h != 9);	/* a miss: the old value */
	BUG_ON(this_cpu_try_cmpxchg(p->b, &b, 1) || b != 5);	/* a miss updates the guess */
	BUG_ON(!this_cpu_try_cmpxchg(p->b, &b, 1) || p->b != 1);
	BUG_ON(this_cpu_xchg(p->w, 42) != 0 || this_cpu_xchg(p->w, 1) != 42);
	this_cpu_or(p->q, 0xf0); this_cpu_and(p->q, 0x30); this_cpu_sub(p->q, 0x10);
	BUG_ON(p->q != 0x20 || this_cpu_dec_return(p->q) != 0x1f);
	BUG_ON(this_cpu_cmpxchg128(p->pair, 0, ((u128)1 << 64) | 2) != 0);
	BUG_ON(p->pair != (((u128)1 << 64) | 2));
	p->h = 9;
	this_cpu_write(p->b, 0);		/* a byte's write writes a byte */
	BUG_ON(p->b != 0 || p->h != 9 || this_cpu_read(p->h) != 9);
	p->q = ~0ULL;
	this_cpu_write(p->q, 0);		/* and a u64's all of it */
	BUG_ON(p->q != 0);
	this_cpu_add(p->q, 0xFFFFFFFFu);	/* not a dec: -1 of a u64 is another value */
	BUG_ON(p->q != 0xFFFFFFFFull);
	this_cpu_add(p->w, 0xFFFFFFFFu);	/* a dec, of a u32 */
	BUG_ON(p->w != 0);
}
SMPNET_VARIANT(ops) {
	this_cpu_add_return(this_cpu->b, 1);
	this_cpu_cmpxchg(this_cpu->h, 1, 2);
	this_cpu_xchg(this_cpu->w, 3);
	this_cpu_cmpxchg128(this_cpu->pair, 0, 1);
}
SMPNET_VARIANT(none) { }
"""


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_this_cpu_ops_are_x86s_unlocked_instructions_of_every_width(tmp_path, allowed):
    """this_cpu_add_return() on a u8 is an unlocked, %gs-relative `xadd %?l`,
    this_cpu_cmpxchg() on a u16 an unlocked `cmpxchg %?x`, this_cpu_xchg()
    a loop of unlocked cmpxchg (xchg with memory would lock), the cmpxchg128
    an unlocked cmpxchg16b (arch/x86/include/asm/percpu.h); and each answers
    as the kernel's: a u8 wraps, a missed cmpxchg gives the old value, a
    missed try_cmpxchg updates its guess."""
    fns = object_functions(build.build(PERCPU, "percpu.c",
                                        smpnet._core.LOCK_ALGOS["qspinlock"]).path)
    loop = fns[next(f for f in fns if f.startswith("smpnet_timed_ops"))]
    assert re.search(r"\txadd +%[a-d]l,%gs:", loop)
    assert re.search(r"\tcmpxchg +%(?:[a-ds][xi]|r\d+w),%gs:", loop)
    assert re.search(r"\tcmpxchg +%e\w+,%gs:", loop) and re.search(r"\tcmpxchg16b +%gs:", loop)
    assert not re.search(r"\block\b", loop)
    assert main(["ab", write(tmp_path, PERCPU, "percpu.c"), "--cpus", str(allowed[0])]
                + FAST) == 0


# the kernel's names smpnet.h gives a file on purpose (the API), and its own
PER_CPU_DATA = """#include <smpnet.h>
/* as include/linux/netdevice.h's, and a DEFINE_PER_CPU with a first value */
struct pcpu_sw_netstats { u64_stats_t packets; struct u64_stats_sync syncp; };
struct shared { struct pcpu_sw_netstats __percpu *tstats; };
static DEFINE_PER_CPU(unsigned long, hits) = 7;
SMPNET_STATE(struct shared, struct smpnet_none);

SMPNET_VARIANT(defined) { this_cpu_inc(hits); }
SMPNET_CHECK(defined)
{
	unsigned long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu(hits, cpu) - 7;
	expect(sum == nr_ops, "per_cpu(hits) does not add up to the ops");
}
SMPNET_INIT(allocated)
{
	shared->tstats = alloc_percpu(struct pcpu_sw_netstats);
	expect(shared->tstats != NULL, "alloc_percpu");
	BUG_ON(__alloc_percpu(SMPNET_PERCPU_RESERVE, 64) != NULL);	/* past the reserve */
	BUG_ON(__alloc_percpu(8, 8192) != NULL);	/* an alignment over a page */
	BUG_ON(__alloc_percpu(8, 0) == __alloc_percpu(8, 0));	/* two, apart */
	/* not at this_cpu_off's offset in a page (4K aliasing: a this_cpu_ptr()
	 * loop would wait on its own store), as after the static variables */
	BUG_ON(((unsigned long)shared->tstats - (unsigned long)&this_cpu_off) % 4096
	       < sizeof(this_cpu_off));
	BUG_ON((unsigned long)__alloc_percpu(8, 4096) % 4096);	/* the address aligned */
}
SMPNET_VARIANT(allocated)
{
	struct pcpu_sw_netstats *s = this_cpu_ptr(shared->tstats);

	u64_stats_update_begin(&s->syncp);
	u64_stats_inc(&s->packets);
	u64_stats_update_end(&s->syncp);
}
SMPNET_CHECK(allocated)
{
	unsigned long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += u64_stats_read(&per_cpu_ptr(shared->tstats, cpu)->packets);
	expect(sum == nr_ops, "the per-CPU stats do not add up to the ops");
}
"""


def test_per_cpu_data_as_the_kernel_declares_it_adds_up_on_every_cpu(tmp_path, allowed):
    """DEFINE_PER_CPU (its first value in every CPU's copy) and
    alloc_percpu() reached by this_cpu_inc(), this_cpu_ptr(), per_cpu()
    and per_cpu_ptr(), every CPU at once: each check's sum over the CPUs is
    the ops the copy ran, so no two CPUs shared a copy and none was lost;
    the reserve refuses past its end; its first object does not share
    this_cpu_off's offset in a page, and a page's alignment is the address's."""
    assert main(["ab", write(tmp_path, PER_CPU_DATA, "percpu_data.c"), *FAST,
                 *two_cpus(allowed), "--repeat", "2", "--duration", "0.01",
                 "--algo", "qspinlock", "--kernel-build", "inline"]) == 0
    assert open_segments() == set()


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_per_cpu_ops_are_gs_relative_as_the_kernels():
    """this_cpu_inc() of a DEFINE_PER_CPU variable is one `incq %gs:var(%rip)`,
    as the kernel's percpu_add_op(); this_cpu_ptr() adds this_cpu_off read
    %gs-relative (arch_raw_cpu_ptr()); the per-CPU section is whole pages of
    its own; a file with no per-CPU data of its own has this_cpu_off alone
    there, as every kernel has (zero in the template: each CPU's copy holds
    its offset)."""
    obj = build.build(PER_CPU_DATA, "percpu_data.c", smpnet._core.LOCK_ALGOS["qspinlock"])
    fns = object_functions(obj.path)
    defined = fns[next(f for f in fns if f.startswith("smpnet_timed_defined"))]
    assert re.search(r"\tincq +%gs:0x[0-9a-f]+\(%rip\) +# [0-9a-f]+ <hits>", defined), defined
    allocated = fns[next(f for f in fns if f.startswith("smpnet_timed_allocated"))]
    assert re.search(r"\tmov +%gs:0x[0-9a-f]+\(%rip\),%r\w+ +# [0-9a-f]+ <this_cpu_off>",
                     allocated), allocated
    assert not re.search(r"\block\b", defined + allocated)
    heads = subprocess.run(["objdump", "-h", obj.path], capture_output=True, text=True,
                           check=True).stdout
    size, vma = re.search(r"\bsmpnet_percpu +([0-9a-f]+) +([0-9a-f]+)", heads).groups()
    assert ".debug_info" not in heads       # -g0: debug information, the build's time alone
    assert int(size, 16) == len(obj.pcpu_template) and int(size, 16) % 4096 == 0
    assert int(vma, 16) % 4096 == 0
    syms = subprocess.run(["objdump", "-t", obj.path], capture_output=True, text=True,
                          check=True).stdout
    hits = int(re.search(r"^([0-9a-f]+) .* smpnet_percpu\s+[0-9a-f]+\s+hits$", syms, re.M)[1], 16)
    at = hits - int(vma, 16)
    assert int.from_bytes(obj.pcpu_template[at:at + 8], "little") == 7   # its first value
    plain = build.build(PLAIN, "plain.c", smpnet._core.LOCK_ALGOS["qspinlock"])
    assert plain.pcpu_template == bytes(4096)



@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_the_dev_tstats_example_adds_up_and_reads_its_cpu_by_gs(allowed):
    """examples/dev_tstats.c, the kernel's dev_sw_netstats_rx_add() as it
    is, on two CPUs (emulated on one where there is one): its checks held
    (a run whose check failed raises), and the function's this_cpu_ptr()
    reads this_cpu_off %gs-relative, as the kernel's."""
    cpus = "0,1" if len(allowed) > 1 else str(allowed[0])
    extra = {} if len(allowed) > 1 else {"ncpus": 2, "oversubscribe": True}
    out = smpnet.ab(EXAMPLES / "dev_tstats.c", cpus=cpus, loops=2000, rounds=12, repeat=2,
                    duration=0.01, algo="qspinlock", kernel_build="inline", **extra)
    assert [r["variant"] for r in out.rows if r["role"] == "variant"][:2] == ["locked", "tstats"]
    obj = build.build((EXAMPLES / "dev_tstats.c").read_text(), "dev_tstats.c",
                      smpnet._core.LOCK_ALGOS["qspinlock"])
    fns = object_functions(obj.path)
    tstats = fns[next(f for f in fns if f.startswith("smpnet_timed_tstats"))]
    assert re.search(r"%gs:0x[0-9a-f]+\(%rip\),%r\w+ +# [0-9a-f]+ <this_cpu_off>", tstats)
    assert not re.search(r"\block\b", tstats)


def test_the_dev_core_stats_example_runs_the_patchs_two_listings(allowed):
    """examples/dev_core_stats.c (6510ea973d8d) on two CPUs (emulated on one
    where there is one): its checks held, and each variant's loop is the
    patch's listing: local_inc() an unlocked `incq` through this_cpu_ptr()'s
    %gs-relative read of this_cpu_off, this_cpu_inc() one `incq %gs:(%reg)`
    and no this_cpu_off."""
    cpus = "0,1" if len(allowed) > 1 else str(allowed[0])
    extra = {} if len(allowed) > 1 else {"ncpus": 2, "oversubscribe": True}
    out = smpnet.ab(EXAMPLES / "dev_core_stats.c", cpus=cpus, loops=2000, rounds=12, repeat=2,
                    duration=0.01, algo="qspinlock", kernel_build="inline", **extra)
    assert [r["variant"] for r in out.rows if r["role"] == "variant"][:2] == \
        ["local_inc", "this_cpu_inc"]
    obj = build.build((EXAMPLES / "dev_core_stats.c").read_text(), "dev_core_stats.c",
                      smpnet._core.LOCK_ALGOS["qspinlock"])
    fns = object_functions(obj.path)
    before, after = (fns[next(f for f in fns if f.startswith("smpnet_timed_" + v))]
                     for v in ("local_inc", "this_cpu_inc"))
    assert re.search(r"%gs:0x[0-9a-f]+\(%rip\),%r\w+ +# [0-9a-f]+ <this_cpu_off>", before)
    assert re.search(r"\bincq +\(%r\w+\)", before)
    assert re.search(r"\bincq +%gs:\(%r\w+\)", after) and "this_cpu_off" not in after
    assert not re.search(r"\block\b", before + after)


LOCAL_LOCK = """#include <smpnet.h>
struct cache { local_lock_t bh_lock; unsigned long count; };
static DEFINE_PER_CPU(struct cache, cache) = { .bh_lock = INIT_LOCAL_LOCK(bh_lock) };
struct shared { spinlock_t lock; unsigned long evaluated; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(locked)
{
	spin_lock_init(&shared->lock);
	BUG_ON(sizeof(local_lock_t) != 0);	/* lockdep's fields alone, and no lockdep */
	local_lock_init(this_cpu_ptr(&cache.bh_lock));
}
SMPNET_VARIANT(locked)
{
	unsigned long flags;

	BUG_ON(!preemptible());
	local_lock(&cache.bh_lock);
	BUG_ON(preemptible() || irqs_disabled());	/* preemption off, IRQs on */
	this_cpu_inc(cache.count);
	local_unlock(&cache.bh_lock);
	BUG_ON(!preemptible());
	local_lock_irq(&cache.bh_lock);
	BUG_ON(!irqs_disabled());
	this_cpu_inc(cache.count);
	local_unlock_irq(&cache.bh_lock);
	BUG_ON(irqs_disabled());
	local_lock_irqsave(&cache.bh_lock, flags);
	BUG_ON(!irqs_disabled());
	this_cpu_inc(cache.count);
	local_unlock_irqrestore(&cache.bh_lock, flags);
	BUG_ON(irqs_disabled());
	local_bh_disable();
	local_lock_nested_bh(&cache.bh_lock);
	lockdep_assert_in_softirq();
	BUG_ON(!in_softirq());
	this_cpu_inc(cache.count);
	local_unlock_nested_bh(&cache.bh_lock);
	local_bh_enable();
	spin_lock(&shared->lock);
	lockdep_assert_held(&shared->lock);
	spin_unlock(&shared->lock);
	DEBUG_NET_WARN_ON_ONCE(shared->evaluated++);	/* no CONFIG_DEBUG_NET: not run */
}
SMPNET_CHECK(locked)
{
	unsigned long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu(cache, cpu).count;
	expect(sum == 4 * nr_ops, "a local_lock()ed count lost an op");
	expect(shared->evaluated == 0, "DEBUG_NET_WARN_ON_ONCE() ran its condition");
}
SMPNET_VARIANT(none) { }
"""


def test_local_lock_guards_this_cpus_data_as_a_kernel_without_rt_builds_it(tmp_path, allowed):
    """local_lock_t in a DEFINE_PER_CPU struct, every form taken on every
    CPU at once: local_lock() runs with preemption off and gives it back,
    the _irq and _irqsave forms with IRQs off, the nested one in a BH-off
    section, each CPU's count sums to the ops; the lock holds nothing
    (no lockdep), and lockdep's asserts and DEBUG_NET_WARN_ON_ONCE() build
    but run nothing, as in a kernel without either."""
    assert main(["ab", write(tmp_path, LOCAL_LOCK, "local_lock.c"), *FAST,
                 *two_cpus(allowed), "--repeat", "2", "--duration", "0.01"]) == 0
    assert open_segments() == set()


PLACES = """#include <smpnet.h>
struct pcpu { unsigned long n; };
struct shared { unsigned long *first; };
SMPNET_STATE(struct shared, struct pcpu);
static unsigned long page_offset(const void *p) { return (unsigned long)p % 4096; }
SMPNET_INIT(places)
{
	unsigned long at[4];
	int i, j;

	shared->first = alloc_percpu(unsigned long);
	at[0] = page_offset(shared);
	at[1] = page_offset(per_cpu(0));
	at[2] = page_offset(&this_cpu_off);
	at[3] = page_offset(this_cpu_ptr(shared->first));
	for (i = 0; i < 4; i++)
		for (j = i + 1; j < 4; j++)
			BUG_ON(at[i] / 64 == at[j] / 64);	/* each kind on a line of its own */
}
SMPNET_VARIANT(places) { this_cpu->n++; }
SMPNET_VARIANT(none) { }
"""


def test_each_kind_of_record_begins_at_a_page_offset_of_its_own(tmp_path, allowed):
    """The shared record, CPU 0's per-CPU record, this_cpu_off and the first
    alloc_percpu() object lie at four page offsets, a line apart at the
    least: where two kinds began pages alike, a store to the first field of
    one held a later load of the other (4K aliasing), run to run."""
    assert main(["ab", write(tmp_path, PLACES, "places.c"), "--cpus", str(allowed[0]),
                 "--no-contended"] + FAST) == 0


PERCPU_COUNTER = """#include <smpnet.h>
struct shared { struct percpu_counter c; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(counted)
{
	struct percpu_counter *c = &shared->c;

	expect(percpu_counter_init(c, 5, GFP_KERNEL) == 0, "init");
	percpu_counter_add(c, 3);			/* under the batch: this CPU's part */
	BUG_ON(percpu_counter_read(c) != 5 || percpu_counter_sum(c) != 8);
	percpu_counter_add_batch(c, 40, 32);		/* at the batch: folded under the lock */
	BUG_ON(percpu_counter_read(c) != 48 || *this_cpu_ptr(c->counters) != 0);
	percpu_counter_sub(c, 60);
	BUG_ON(percpu_counter_sum(c) != -12 || percpu_counter_sum_positive(c) != 0);
	BUG_ON(percpu_counter_read_positive(c) != 0 || percpu_counter_read(c) != -12);
	percpu_counter_add(c, 12);
	BUG_ON(percpu_counter_sum(c) != 0);
}
SMPNET_VARIANT(counted) { percpu_counter_inc(&shared->c); }
SMPNET_CHECK(counted)
{
	s64 sum = percpu_counter_sum(&shared->c), read = percpu_counter_read(&shared->c);

	expect(sum == (s64)nr_ops, "percpu_counter_sum() is not the ops");
	expect(read <= sum && sum - read < (s64)nr_cpus * percpu_counter_batch,
	       "percpu_counter_read() more than a batch a CPU off");
}
SMPNET_VARIANT(none) { }
"""


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_percpu_counter_folds_at_the_batch_and_sums_exactly_on_every_cpu(tmp_path, allowed):
    """lib/percpu_counter.c's add: under the batch an unlocked %gs-relative
    cmpxchg of this CPU's part, at it a fold into the count under the lock;
    read() is the count, sum() the count and every part: on two CPUs at once
    the sum is the ops exactly and read() within a batch a CPU of it."""
    assert main(["ab", write(tmp_path, PERCPU_COUNTER, "pcc.c"), *FAST, *two_cpus(allowed),
                 "--repeat", "2", "--duration", "0.01", "--algo", "qspinlock",
                 "--kernel-build", "inline"]) == 0
    fns = object_functions(build.build(PERCPU_COUNTER, "pcc.c",
                                       smpnet._core.LOCK_ALGOS["qspinlock"]).path)
    loop = fns[next(f for f in fns if f.startswith("smpnet_timed_counted"))]
    assert re.search(r"\tcmpxchg +%\w+,%gs:\(%r\w+\)", loop), loop
    assert not re.search(r"\block cmpxchg +%\w+,%gs:", loop)


def test_the_netdev_refcnt_example_balances_on_every_cpu(allowed):
    """examples/netdev_refcnt.c: __dev_hold()/__dev_put() of both builds,
    every CPU at once; each check reads the count back at its init's one
    reference (a run whose check failed raises)."""
    cpus = "0,1" if len(allowed) > 1 else str(allowed[0])
    extra = {} if len(allowed) > 1 else {"ncpus": 2, "oversubscribe": True}
    out = smpnet.ab(EXAMPLES / "netdev_refcnt.c", cpus=cpus, loops=2000, rounds=12, repeat=2,
                    duration=0.01, **extra)
    rows = [(r["mode"], r["variant"]) for r in out.rows if r["role"] == "variant"]
    assert rows == [(m, v) for m in ("uncontended", "contended") for v in ("refcount", "pcpu")]


COPIES = """#include <smpnet.h>
struct shared { unsigned long n; };
struct pcpu { unsigned long n; };
SMPNET_STATE(struct shared, struct pcpu);
SMPNET_VARIANT(count) { shared->n++; this_cpu->n++; }
SMPNET_VARIANT(other) { }
"""


@pytest.mark.parametrize("nr_cpus", [1, 3])
def test_every_copy_of_the_state_lies_at_the_same_page_offset(allowed, nr_cpus):
    """Each variant's copy of the state (and the A/A control's) at the same
    offset in a page, its shared record and each CPU's record: a contended
    line's cost goes with its place in a page, and the copies must differ
    by their code alone. Checked where the core's ops land: copy c's ops,
    run as CPU cpu, are found in its shared record and its per-CPU record
    and nowhere else, at copy 0's page offsets."""
    import mmap

    from smpnet import Machine
    from smpnet.experiments.ab import rounds

    obj = build.build(COPIES, "copies.c", smpnet._core.LOCK_ALGOS["qspinlock"])
    copies, cpu = 3, nr_cpus - 1
    with Machine(cpus=allowed[:1], ncpus=nr_cpus, oversubscribe=True,
                 regions=rounds.regions(obj, copies, nr_cpus)) as m:
        where = rounds.Where(m, [obj] * copies)
        for copy in range(copies):
            smpnet._core.ab_round(obj.variants[0].loop, 10 + copy, m.segment.buf, cpu,
                                  **where.state(copy))
        places = {}
        for name in ("ab_shared", "ab_percpu"):
            region = m.region(name)
            counts = [int.from_bytes(r["bytes"][:8].tobytes(), "little") for r in region]
            ran = {i: n for i, n in enumerate(counts) if n}
            assert sorted(ran.values()) == [10, 11, 12], name       # each copy's ops, once
            places[name] = {(region.ctypes.data + i * region.strides[0]) % mmap.PAGESIZE
                            for i in ran}
        assert len(places["ab_shared"]) == 1 and len(places["ab_percpu"]) == 1, places
