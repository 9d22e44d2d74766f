"""ab: the kernel's API in a user's file, as the kernel has it: each name
builds, compiles to the instruction the kernel's x86 build has (read from
the built object), and behaves as the kernel's, under contention where
that is its point; in the file's own functions too. No test asserts a
timing. Per-CPU data (this_cpu_*, DEFINE_PER_CPU, alloc_percpu,
percpu_counter): test_ab_percpu.py; spinlocks, IRQs and BHs as the kernel
build makes them, and a lock per variant: test_ab_locks.py."""
import json
import re
import subprocess

import pytest

import smpnet
from ab_helpers import EXAMPLES, FAST, cache, one_error_line, two_cpus, write  # noqa: F401
from conftest import object_functions, open_segments, timed_loop
from smpnet.cli import main
from smpnet.experiments.ab import build


BARRIERS = """#include <smpnet.h>
struct shared { unsigned long flag, n; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(full) { shared->n++; smp_mb(); }
SMPNET_VARIANT(ordered) { smp_store_release(&shared->n, smp_load_acquire(&shared->n) + 1);
			  smp_rmb(); smp_wmb(); smp_mb__before_atomic(); smp_mb__after_atomic(); }
SMPNET_VARIANT(spins) { while (!READ_ONCE(shared->flag)) cpu_relax(); }
SMPNET_VARIANT(waits) { smp_cond_load_acquire(&shared->flag, VAL != 0); }
SMPNET_VARIANT(nothing) { }
"""


ATOMICS = """#include <smpnet.h>
struct shared { atomic_t v; atomic64_t v64; atomic_long_t vl; atomic_t bits; int sink; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(inc) { atomic_inc(&shared->v); }
SMPNET_VARIANT(fetch_add) { shared->sink = atomic_fetch_add(2, &shared->v); }
SMPNET_VARIANT(dec_and_test) { if (atomic_dec_and_test(&shared->v)) atomic_set(&shared->v, 1); }
SMPNET_VARIANT(fetch_or) { shared->sink = atomic_fetch_or(1, &shared->bits); }
SMPNET_VARIANT(try_loop) { int old = atomic_read(&shared->v);
			   while (!atomic_try_cmpxchg(&shared->v, &old, old + 1)) ; }
SMPNET_CHECK(try_loop) { expect((uint32_t)atomic_read(&shared->v) == (uint32_t)nr_ops,
				"a try_cmpxchg loop lost an increment"); }
SMPNET_VARIANT(long_ops) { atomic64_add(3, &shared->v64); atomic_long_inc(&shared->vl); }
SMPNET_CHECK(long_ops) { expect(atomic64_read(&shared->v64) == 3 * (int64_t)nr_ops
				&& atomic_long_read(&shared->vl) == (long)nr_ops, "lost an op"); }
"""


def test_the_kernels_atomics_are_x86s_locked_instructions_and_signed(tmp_path, allowed):
    """atomic_t is the kernel's signed counter in a struct, and its ops the
    locked instructions x86's are: inc a lock add or inc, fetch_add a lock
    xadd, dec_and_test a locked dec or sub and a flag, fetch_or a cmpxchg
    loop; a try_cmpxchg loop and the 64-bit and long families lose no op
    with every CPU at once."""
    text = ATOMICS
    fns = object_functions(build.build(text, "atomics.c",
                                        smpnet._core.LOCK_ALGOS["qspinlock"]).path)

    def timed(v):
        return fns[timed_loop(fns, v)]
    assert re.search(r"lock (add|inc)l", timed("inc"))
    assert re.search(r"lock xadd", timed("fetch_add"))
    assert re.search(r"lock (dec|sub)l", timed("dec_and_test")) and "cmpxchg" not in timed(
        "dec_and_test")
    assert re.search(r"lock cmpxchg", timed("fetch_or"))
    f = write(tmp_path, text, "atomics.c")
    cpus = two_cpus(allowed)
    assert main(["ab", f, *cpus, "--variants", "inc,try_loop,long_ops", "--duration", "0.01",
                 "--repeat", "2"] + FAST) == 0
    # signed, as the kernel's: a counter below zero reads below zero
    g = write(tmp_path, """#include <smpnet.h>
struct shared { atomic_t v; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(a) { atomic_dec(&shared->v); }
SMPNET_CHECK(a) { expect(atomic_read(&shared->v) < 0 && atomic_add_negative(0, &shared->v)
			 && !atomic_inc_not_zero(&(atomic_t)ATOMIC_INIT(0)), "not signed"); }
SMPNET_VARIANT(b) { atomic_dec(&shared->v); }
""", "signed.c")
    assert main(["ab", g, "--cpus", str(allowed[0]), "--no-contended"] + FAST) == 0


def test_a_kernel_declaration_builds_as_the_kernel_writes_it(capsys, tmp_path, allowed):
    """The kernel's sized types and annotations, as a pasted declaration
    has them: a struct of u8..s64 fields, ____cacheline_aligned_in_smp,
    __percpu, __rcu, __read_mostly, and container_of() back to it."""
    f = write(tmp_path, """#include <smpnet.h>
struct stats { u64 packets; u32 drops; s16 delta; u8 flags; s8 sign; } ____cacheline_aligned_in_smp;
struct shared { spinlock_t lock; struct stats __percpu *unused; void __rcu *ptr;
		struct stats st ____cacheline_aligned_in_smp; };
SMPNET_STATE(struct shared, struct smpnet_none);
static int limit __read_mostly = 3;
SMPNET_INIT(a) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(a) { struct stats *st = &shared->st; st->packets++;
		    if (container_of(st, struct shared, st) != shared) __builtin_trap(); }
SMPNET_CHECK(a) { expect(_Alignof(struct stats) == 64 && sizeof(s8) == 1 && (s8)-1 < 0
			 && (u64)-1 > 0 && limit == 3 && shared->st.packets == nr_ops, "types"); }
SMPNET_VARIANT(b) { shared->st.drops++; }
""", "types.c")
    assert main(["ab", f, "--cpus", str(allowed[0]), "--no-contended"] + FAST) == 0
    assert "warning" not in capsys.readouterr().err


LISTS = """#include <smpnet.h>
#define POOL 4096
struct item { struct llist_node node; int cpu, seen; };
struct shared { struct llist_head head; refcount_t ref; };
struct pcpu { struct item items[POOL]; unsigned long added; };
SMPNET_STATE(struct shared, struct pcpu);
SMPNET_INIT(adds) { init_llist_head(&shared->head); }
SMPNET_VARIANT(adds) {
	if (this_cpu->added < POOL) {
		struct item *it = &this_cpu->items[this_cpu->added++];
		it->cpu = get_cpu(); put_cpu();
		llist_add(&it->node, &shared->head);
	}
}
SMPNET_CHECK(adds) {
	struct item *it, *n;
	unsigned long added = 0, found = 0;
	int cpu;

	for (cpu = 0; cpu < nr_cpus; cpu++)
		added += per_cpu(cpu)->added;
	llist_for_each_entry_safe(it, n, llist_del_all(&shared->head), node) {
		expect(!it->seen++, "a node came out twice");
		found++;
	}
	expect(found == added && llist_empty(&shared->head), "a node was lost");
}
SMPNET_INIT(refs) { refcount_set(&shared->ref, 1); }
SMPNET_CHECK(refs) {
	refcount_t zero = REFCOUNT_INIT(0);

	expect(refcount_read(&shared->ref) == 1, "an inc and a dec a op left it changed");
	refcount_inc(&shared->ref);
	expect(!refcount_dec_and_test(&shared->ref) && refcount_dec_and_test(&shared->ref),
	       "dec_and_test");
	refcount_inc(&shared->ref);			/* from 0: a use after free */
	expect(refcount_read(&shared->ref) == (unsigned int)REFCOUNT_SATURATED, "from 0");
	expect(!refcount_inc_not_zero(&zero) && refcount_read(&zero) == 0, "inc_not_zero");
	refcount_set(&shared->ref, REFCOUNT_MAX);
	refcount_inc(&shared->ref);			/* an overflow */
	expect(refcount_read(&shared->ref) == (unsigned int)REFCOUNT_SATURATED
	       && !refcount_dec_and_test(&shared->ref), "overflow");
	refcount_set(&shared->ref, 1);
}
SMPNET_VARIANT(refs) { refcount_inc(&shared->ref); refcount_dec(&shared->ref); }
"""


def test_llist_and_refcount_as_the_kernels(tmp_path, allowed):
    """llist_add() on every CPU at once, then llist_del_all(): every node
    comes out once; refcount_t saturates as the kernel's, on an increment
    from zero and on an overflow, and is never freed once saturated."""
    f = write(tmp_path, LISTS, "lists.c")
    cpus = two_cpus(allowed)
    assert main(["ab", f, *cpus, "--duration", "0.01", "--repeat", "2"] + FAST) == 0


STATS = """#include <smpnet.h>
struct shared { seqcount_t seq; u32 lo, hi; unsigned long torn, reads; };
struct pcpu { local_t n; u64_stats_t pkts; struct u64_stats_sync syncp; };
SMPNET_STATE(struct shared, struct pcpu);
SMPNET_VARIANT(local) {
	local_inc(&this_cpu->n);
	u64_stats_update_begin(&this_cpu->syncp);
	u64_stats_inc(&this_cpu->pkts);
	u64_stats_update_end(&this_cpu->syncp);
}
SMPNET_CHECK(local) {
	u64 n = 0, pkts = 0;
	int cpu;

	for (cpu = 0; cpu < nr_cpus; cpu++) {
		unsigned int start;
		u64 p;

		do {
			start = u64_stats_fetch_begin(&per_cpu(cpu)->syncp);
			p = u64_stats_read(&per_cpu(cpu)->pkts);
		} while (u64_stats_fetch_retry(&per_cpu(cpu)->syncp, start));
		n += local_read(&per_cpu(cpu)->n);
		pkts += p;
	}
	expect(n == nr_ops && pkts == nr_ops, "a per-CPU count lost an op");
}
SMPNET_VARIANT(seq) {
	if (smp_processor_id() == 0) {
		write_seqcount_begin(&shared->seq);
		WRITE_ONCE(shared->lo, shared->lo + 1);
		WRITE_ONCE(shared->hi, shared->hi + 1);
		write_seqcount_end(&shared->seq);
	} else {
		unsigned int start;
		u32 lo, hi;

		do {
			start = read_seqcount_begin(&shared->seq);
			lo = READ_ONCE(shared->lo);
			hi = READ_ONCE(shared->hi);
		} while (read_seqcount_retry(&shared->seq, start));
		shared->torn += lo != hi;
		shared->reads++;
	}
}
SMPNET_CHECK(seq) { expect(shared->torn == 0, "a reader saw a torn pair"); }
"""


@pytest.mark.parametrize("width", ["64", "32"])
def test_local_t_u64_stats_and_seqcount_as_the_kernels(tmp_path, allowed, width):
    """local_t and u64_stats count per CPU with unlocked instructions and
    lose nothing; u64_stats' 32-bit form syncs by a seqcount; a seqcount
    reader on one CPU never sees the pair another CPU writes torn."""
    text = ("#define SMPNET_U64_STATS_32\n" if width == "32" else "") + STATS
    fns = object_functions(build.build(text, "stats.c",
                                        smpnet._core.LOCK_ALGOS["qspinlock"]).path)
    loop = fns[next(f for f in fns if f.startswith("smpnet_timed_local"))]
    assert re.search(r"\tincq", loop) and not re.search(r"\block\b", loop)
    f = write(tmp_path, text, "stats.c")
    cpus = two_cpus(allowed)
    assert main(["ab", f, *cpus, "--duration", "0.01", "--repeat", "2"] + FAST) == 0


def test_the_kernels_barriers_compile_to_x86s_instructions():
    """smp_mb() is x86's locked add to the stack; smp_rmb(), smp_wmb(),
    the atomics' smp_mb__*() and release/acquire are no instruction at
    all (arch/x86/include/asm/barrier.h)."""
    fns = object_functions(build.build(BARRIERS, "barriers.c",
                                        smpnet._core.LOCK_ALGOS["qspinlock"]).path)

    def timed(v):
        return fns[timed_loop(fns, v)]
    def fences(v):     # the TSC reads' own lfences are every loop's: count beside an empty one
        return re.findall(r"fence|\block\b|xchg +%r", timed(v))
    assert re.search(r"lock addl \$0x0,-0x4\(%rsp\)", timed("full"))
    assert fences("ordered") == fences("nothing") and "lock" not in fences("nothing")


def test_a_files_own_spin_loop_ends_at_the_stop(capsys, tmp_path, monkeypatch):
    """A variant waiting on a flag no one sets, with cpu_relax() or
    smp_cond_load_acquire(), is stopped by the watchdog and named, and its
    worker leaves at the stop: none is killed after the grace period."""
    import multiprocessing.process
    from smpnet.machine import machine
    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 0.5)
    killed, kill = [], multiprocessing.process.BaseProcess.kill
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "kill",
                        lambda self: (killed.append(self.pid), kill(self)))
    f = write(tmp_path, BARRIERS, "spins.c")
    for variant in ("spins", "waits"):
        assert main(["ab", f, "--cpus", "0", "--variants", f"full,{variant}", "--no-contended"]
                    + FAST) == 1
        err = one_error_line(capsys)[-1]
        assert f"variant '{variant}': emulated CPU 0" in err and "made no progress" in err
    assert killed == [] and open_segments() == set()


HELPERS = """#include <smpnet.h>
struct shared { spinlock_t lock; unsigned long n; };
SMPNET_STATE(struct shared, struct smpnet_none);
static void init_lock(spinlock_t *l) { spin_lock_init(l); }
static unsigned long locked_inc(spinlock_t *l, unsigned long *n, int by)
{
	unsigned long v;

	spin_lock_bh(l);
	v = *n += by;
	spin_unlock_bh(l);
	return v + smp_processor_id();
}
static void counted(unsigned long n) { expect(n == nr_ops, "n is not the ops done"); }
static void relock(spinlock_t *l) { spin_lock(l); spin_lock(l); }
SMPNET_INIT(inline) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(inline) { spin_lock_bh(&shared->lock); shared->n++; spin_unlock_bh(&shared->lock); }
SMPNET_INIT(helper) { init_lock(&shared->lock); }
SMPNET_VARIANT(helper) { locked_inc(&shared->lock, &shared->n, 1); }
SMPNET_CHECK(helper) { counted(shared->n); }
SMPNET_INIT(twice) { init_lock(&shared->lock); }
SMPNET_VARIANT(twice) { locked_inc(&shared->lock, &shared->n, 2); }
SMPNET_CHECK(twice) { counted(shared->n); }
SMPNET_INIT(stuck) { init_lock(&shared->lock); }
SMPNET_VARIANT(stuck) { relock(&shared->lock); }
"""


def test_a_files_own_functions_use_the_kernel_api(capsys, tmp_path, monkeypatch):
    """spin_lock_init(), spin_lock_bh(), smp_processor_id() and expect() in
    static helpers, as in a body: they build and run, a check failed in a
    helper fails its variant, and a helper that deadlocks is stopped and
    named."""
    f = write(tmp_path, HELPERS, "helpers.c")
    assert main(["ab", f, "--cpus", "0", "--variants", "inline,helper", "--no-contended",
                 "--json"] + FAST) == 0
    env = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in env["results"]] == ["inline", "helper", "inline (A/A)"]
    assert main(["ab", f, "--cpus", "0", "--variants", "inline,twice", "--no-contended"]
                + FAST) == 1
    assert one_error_line(capsys)[-1].endswith(
        "variant 'twice': its SMPNET_CHECK failed after the uncontended rounds: "
        "n is not the ops done")
    from smpnet.machine import machine
    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 0.5)
    assert main(["ab", f, "--cpus", "0", "--variants", "inline,stuck", "--no-contended"]
                + FAST) == 1
    err = one_error_line(capsys)[-1]
    assert "variant 'stuck': emulated CPU 0" in err and "made no progress" in err
    assert open_segments() == set()


def test_a_lock_never_initialised_is_named_under_the_checker(capsys, tmp_path):
    """With --check, a lock no SMPNET_INIT gave to spin_lock_init() stops
    its CPU (DEBUG_SPINLOCK's "bad magic"), and the run says so."""
    f = write(tmp_path, HELPERS.replace("SMPNET_INIT(helper) { init_lock(&shared->lock); }\n",
                                        ""), "uninit.c")
    assert main(["ab", f, "--cpus", "0", "--variants", "helper,inline", "--no-contended",
                 "--check"] + FAST) == 1
    err = one_error_line(capsys)[-1]
    assert err.startswith("smpnet-bench: variant 'helper': emulated CPU 0")
    assert "was killed by SIGILL: it took a lock spin_lock_init() never saw" in err
    assert open_segments() == set()


BUGS = """#include <smpnet.h>
struct shared { unsigned long n; };
SMPNET_STATE(struct shared, struct smpnet_none);
static void account(unsigned long *n) { WARN_ON_ONCE(*n % 1000 == 999); ++*n; }
SMPNET_VARIANT(warns) { account(&shared->n); }
SMPNET_VARIANT(quiet) { if (WARN_ON(shared->n == (unsigned long)-1)) shared->n = 0; shared->n++; }
SMPNET_VARIANT(bugs) { BUG_ON(++shared->n == 5000); }
"""


def test_bug_on_ends_the_run_naming_its_line_and_warn_on_is_reported(capsys, tmp_path, allowed):
    """BUG_ON() ends the run naming its variant, file and line; WARN_ON()
    is its condition's value, and where the first fired and how often
    comes back as a warning (from a helper too); one that never fired
    says nothing."""
    f = write(tmp_path, BUGS, "bugs.c")
    assert main(["ab", f, "--cpus", "0", "--variants", "warns,quiet", "--no-contended",
                 "--json"] + FAST) == 0
    env = json.loads(capsys.readouterr().out)
    warned = [w for w in env["warnings"] if "WARN_ON" in w]
    # the variant and its A/A copy, each its own count: every 1000th of its
    # ops, 2000 a round, 12 rounds and a warm-up at the least
    assert [w.split(",")[0] for w in warned] == ["variant 'warns'", "variant 'warns (A/A)'"]
    for w in warned:
        assert re.search(r", uncontended: .*bugs\.c:4: WARN_ON_ONCE\(\*n % 1000 == 999\) "
                         r"fired (\d+) times$", w), w
        assert int(w.split(" fired ")[1].split()[0]) >= 26
    assert main(["ab", f, "--cpus", "0", "--variants", "quiet,bugs", "--no-contended"]
                + FAST) == 1
    err = one_error_line(capsys)[-1]
    assert "variant 'bugs': emulated CPU 0" in err and "bugs.c:7: BUG_ON(++shared->n == 5000)" in err
    assert open_segments() == set()




API_TAGS = {"spinlock", "llist_head", "llist_node", "u64_stats_sync", "refcount_struct"}


def _model_tags():
    """The struct tags the model's headers (smpnet/kernel/) define in a
    file that includes <smpnet.h>, read from the preprocessed file, by
    their names in the headers (smpnet.h renames some)."""
    macros = [f"-D{k}={v}" for k, v in build.options_macros(0, False, False)]
    out = subprocess.run(["gcc", "-E", *macros, *[f"-I{d}" for d in build.INCLUDE_DIRS], "-"],
                         input="#include <smpnet.h>\n", capture_output=True, text=True,
                         check=True).stdout
    tags, here = set(), None
    for line in out.splitlines():
        if line.startswith("# "):
            here = line.split('"')[1] if '"' in line else here
        elif here and "/smpnet/kernel/" in here:
            tags |= set(re.findall(r"\bstruct (?:smpnet_model_)?(\w+) *\{", line))
    return tags


def test_a_file_may_declare_the_kernels_records_that_the_model_has_too():
    """smpnet's own records (softnet_data, pcpu_lstats, qnode, ...) are
    the core's business: a file that declares each, as the kernel's
    headers do, builds, and its variants see its own."""
    tags = _model_tags() - API_TAGS
    own = sorted(t for t in tags if not t.startswith("smpnet_"))
    assert {"softnet_data", "pcpu_lstats", "qnode", "cpu_ctx"} <= set(own), own
    decls = "".join(f"struct {t} {{ long mine_{t}; }};\n" for t in own)
    uses = " + ".join(f"sizeof(((struct {t} *)0)->mine_{t})" for t in own)
    src = ("#include <smpnet.h>\n" + decls +
           "struct shared { unsigned long n; };\n"
           "SMPNET_STATE(struct shared, struct smpnet_none);\n"
           f"SMPNET_VARIANT(a) {{ shared->n += {uses}; }}\n"
           "SMPNET_VARIANT(b) { shared->n++; }\n")
    obj = build.build(src, "records.c", smpnet._core.LOCK_ALGOS["qspinlock"])
    assert [v.name for v in obj.variants] == ["a", "b"]


TOPOLOGY = """#include <smpnet.h>
struct shared { int nodes; int node_of[4]; int llc_shared; unsigned long n; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(local)
{
	int cpu, node, seen = 0;
	shared->nodes = nr_node_ids;
	for (cpu = 0; cpu < nr_cpus; cpu++)
		shared->node_of[cpu] = cpu_to_node(cpu);
	for_each_online_node(node)
		seen++;
	expect(seen == num_online_nodes(), "for_each_online_node");
	shared->llc_shared = cpus_share_cache(0, nr_cpus - 1);
}
SMPNET_VARIANT(local)
{
	BUG_ON(numa_node_id() != cpu_to_node(smp_processor_id()));
	BUG_ON(!cpus_share_cache(smp_processor_id(), smp_processor_id()));
	shared->n++;
}
SMPNET_VARIANT(other) { shared->n++; }
SMPNET_CHECK(local)
{
	expect(shared->nodes == NODES, "nr_node_ids");
	expect(shared->node_of[0] == NODE0 && (nr_cpus == 1 || shared->node_of[1] == NODE1),
	       "cpu_to_node");
	expect(shared->llc_shared == (nr_cpus == 1 || LLC_SHARED), "cpus_share_cache");
}
"""


@pytest.mark.parametrize("emulated", [False, True])
def test_a_file_reads_each_cpus_node_and_cache_as_the_run_sets_them(tmp_path, capsys, allowed,
                                                                     emulated):
    """cpu_to_node(), numa_node_id(), nr_node_ids and cpus_share_cache():
    the real CPUs' (sysfs, as the kernel's sd_llc_id), or --numa-nodes'
    blocks; the JSON records them and says the emulated nodes are."""
    from smpnet.machine import sysinfo
    argv = two_cpus(allowed)
    cpus = [0, 1] if len(allowed) > 1 else [allowed[0]] * 2
    real = sysinfo.cpu_topology(set(cpus))
    nodes = 2 if emulated else sysinfo.nr_node_ids()
    node_of = [0, 1] if emulated else [real[c][0] for c in cpus]
    shared = real[cpus[0]][1] == real[cpus[1]][1]
    src = TOPOLOGY.replace("NODES", str(nodes)).replace("NODE0", str(node_of[0])) \
        .replace("NODE1", str(node_of[1])).replace("LLC_SHARED", str(int(shared)))
    extra = ["--numa-nodes", "2"] if emulated else []
    assert main(["ab", write(tmp_path, src, "topo.c"), *FAST, *argv, *extra, "--repeat", "2",
                 "--duration", "0.01", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    p = env["params"]
    assert p["numa_nodes"] == (2 if emulated else None)
    assert [t["node"] for t in p["topology"]] == node_of
    assert [t["real_cpu"] for t in p["topology"]] == cpus
    assert any("--numa-nodes 2: nodes emulated, node 0: CPU(s) 0, node 1: CPU(s) 1" in w
               for w in env["warnings"]) == emulated


def test_more_nodes_than_cpus_is_one_line(tmp_path, capsys, allowed):
    assert main(["ab", write(tmp_path, TOPOLOGY, "topo.c"), *two_cpus(allowed),
                 "--numa-nodes", "3"]) == 2
    assert one_error_line(capsys)[-1] == ("smpnet-bench: --numa-nodes 3: more nodes than the 2 "
                                          "emulated CPU(s) (each node needs one)")


def test_an_expect_that_fails_in_an_init_ends_the_run_with_its_message(tmp_path, capsys):
    src = ("#include <smpnet.h>\nSMPNET_STATE(struct smpnet_none, struct smpnet_none);\n"
           "SMPNET_INIT(a) { expect(nr_cpus > 1000, \"too few CPUs\"); }\n"
           "SMPNET_VARIANT(a) { }\nSMPNET_VARIANT(b) { }\n")
    assert main(["ab", write(tmp_path, src, "init.c"), "--cpus", "0", *FAST]) == 1
    assert one_error_line(capsys)[-1] == ("smpnet-bench: variant 'a': its SMPNET_INIT failed: "
                                          "too few CPUs; run stopped")
    assert open_segments() == set()
