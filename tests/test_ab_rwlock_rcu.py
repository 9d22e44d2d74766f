"""ab: rwlock_t and RCU's read side in a user's file, as an x86 kernel has
them: the qrwlock's instructions and calls per kernel build (read from the
built object), its exclusion under contention, its trylocks' answers, RCU's
nesting per build, and the writer side refused before the build. No test
asserts a timing."""
import re
import shutil

import pytest

import smpnet
from ab_helpers import FAST, cache, one_error_line, two_cpus, write  # noqa: F401
from conftest import X86, object_functions, timed_loop
from smpnet.cli import main
from smpnet.experiments.ab import build

RW = """#include <smpnet.h>
struct shared { rwlock_t lock; unsigned long a, b; struct entry *table; };
struct pcpu { unsigned long reads, torn, writes; };
struct entry { int value; };
SMPNET_STATE(struct shared, struct pcpu);
SMPNET_INIT(mixed) {
	unsigned long flags;

	rwlock_init(&shared->lock);
	read_lock(&shared->lock);
	BUG_ON(!read_trylock(&shared->lock));	/* readers share it */
	BUG_ON(write_trylock(&shared->lock));	/* a writer waits for them */
	read_unlock(&shared->lock);
	read_unlock(&shared->lock);
	write_lock_irqsave(&shared->lock, flags);
	BUG_ON(read_trylock(&shared->lock) || !irqs_disabled());
	write_unlock_irqrestore(&shared->lock, flags);
	BUG_ON(irqs_disabled() || !write_trylock(&shared->lock));
	write_unlock(&shared->lock);
}
SMPNET_VARIANT(mixed) {
	if (smp_processor_id() == 0 && (this_cpu->reads++ & 3) == 0) {
		write_lock_bh(&shared->lock);
		WRITE_ONCE(shared->a, shared->a + 1);
		WRITE_ONCE(shared->b, shared->b + 1);
		this_cpu->writes++;
		write_unlock_bh(&shared->lock);
	} else {
		read_lock(&shared->lock);
		this_cpu->torn += READ_ONCE(shared->a) != READ_ONCE(shared->b);
		read_unlock(&shared->lock);
	}
}
SMPNET_CHECK(mixed) {
	unsigned long torn = 0, writes = 0;
	int cpu;

	for (cpu = 0; cpu < nr_cpus; cpu++) {
		torn += per_cpu(cpu)->torn;
		writes += per_cpu(cpu)->writes;
	}
	expect(torn == 0, "a reader saw a writer's half-done pair");
	expect(shared->a == writes && shared->b == writes, "a writer's update was lost");
	expect(atomic_read(&shared->lock.cnts) == 0, "the lock was left held");
}
SMPNET_INIT(rcu) { rwlock_init(&shared->lock); }
SMPNET_VARIANT(rcu) {
	struct entry *t;

	rcu_read_lock();
	rcu_read_lock();
	t = rcu_dereference(shared->table);
	BUG_ON(!rcu_read_lock_held() || t);
	rcu_read_unlock();
	rcu_read_unlock();
}
SMPNET_CHECK(rcu) { expect(rcu_read_lock_nesting == 0, "RCU's read side left nested"); }
"""


def test_rwlock_excludes_writers_and_shares_readers(tmp_path, allowed):
    """On two CPUs at once, CPU 0 writing a pair under write_lock_bh() one
    op in four and reading under read_lock() otherwise, the other reading:
    no reader sees the pair half-written, no write is lost, and the lock
    ends free; the trylocks answer as the kernel's (a second reader gets
    it, a writer does not; a writer shuts readers out, irqsave's flags
    restored); RCU's read side nests and ends unheld."""
    f = write(tmp_path, RW, "rw.c")
    assert main(["ab", f, *two_cpus(allowed), "--duration", "0.01", "--repeat", "2"]
                + FAST) == 0


OPS = """#include <smpnet.h>
struct shared { rwlock_t lock; int *p; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(reader) { read_lock(&shared->lock); read_unlock(&shared->lock); }
SMPNET_VARIANT(writer) { write_lock(&shared->lock); write_unlock(&shared->lock); }
SMPNET_VARIANT(rcu) { rcu_read_lock(); (void)rcu_dereference(shared->p); rcu_read_unlock(); }
"""


def _functions(kernel_build):
    return object_functions(build.build(OPS, "ops.c", smpnet._core.LOCK_ALGOS["qspinlock"],
                                        kbuild=smpnet._core.KERNEL_BUILDS[kernel_build]).path)


def _calls(fns, variant):
    loop = fns[timed_loop(fns, variant)]
    return loop, set(re.findall(r"\bcall +[0-9a-f]+ <(\w+)>", loop))


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_rwlock_and_rcu_compile_as_each_kernel_build_has_them():
    """qrwlock's fast paths: read_lock a `lock xadd`, read_unlock a `lock
    xadd` of -_QR_BIAS, write_lock a `lock cmpxchg`, write_unlock a byte
    store of 0; each a call in x86-preempt (kernel/locking/spinlock.c's
    _raw_*), the plain unlocks inline in x86-nopreempt (Kconfig.locks'
    INLINE_*_UNLOCK without PREEMPTION), all inline in `inline`. RCU's read
    side: PREEMPT_RCU's __rcu_read_lock()/__rcu_read_unlock() calls in
    x86-preempt, the preempt count alone (no call) without PREEMPTION."""
    fns = _functions("x86-preempt")
    assert _calls(fns, "reader")[1] == {"_raw_read_lock", "_raw_read_unlock"}
    assert _calls(fns, "writer")[1] == {"_raw_write_lock", "_raw_write_unlock"}
    assert _calls(fns, "rcu")[1] == {"__rcu_read_lock", "__rcu_read_unlock"}
    assert re.search(r"lock xadd %\w+,\(%\w+\)", fns["_raw_read_lock"])
    assert re.search(r"mov +\$0xfffffe00,%\w+\n.*lock xadd", fns["_raw_read_unlock"], re.S)
    assert re.search(r"lock cmpxchg %\w+,\(%\w+\)", fns["_raw_write_lock"])
    assert re.search(r"movb +\$0x0,\(%\w+\)", fns["_raw_write_unlock"])
    assert "lock" not in fns["_raw_write_unlock"]

    fns = _functions("x86-nopreempt")
    loop, calls = _calls(fns, "reader")
    assert calls == {"_raw_read_lock"} and re.search(r"lock xadd", loop)
    assert _calls(fns, "writer")[1] == {"_raw_write_lock"}
    assert _calls(fns, "rcu")[1] == set()

    fns = _functions("inline")     # the slow paths alone are calls, as qrwlock.c's
    loop, calls = _calls(fns, "reader")
    assert calls == {"queued_read_lock_slowpath"} and len(re.findall(r"lock xadd", loop)) == 2
    loop, calls = _calls(fns, "writer")
    assert calls == {"queued_write_lock_slowpath"} and re.search(r"lock cmpxchg", loop)


@pytest.mark.parametrize("call, line", [("synchronize_rcu()", 4), ("call_rcu(&h, f)", 4),
                                        ("kfree_rcu(p, rcu)", 4)])
def test_rcus_writer_side_is_refused_before_the_build(capsys, tmp_path, call, line):
    """Grace periods are not modelled: a file that waits for one is refused
    in one line naming its line, before anything builds; a comment that
    names one is not code."""
    text = ("#include <smpnet.h>\nSMPNET_STATE(struct smpnet_none, struct smpnet_none);\n"
            "/* synchronize_rcu() would wait here */\n"
            f"SMPNET_VARIANT(a) {{ {call}; }}\nSMPNET_VARIANT(b) {{ }}\n")
    assert main(["ab", write(tmp_path, text, "w.c"), "--cpus", "0"]) == 2
    err = one_error_line(capsys)
    assert len(err) == 1 and f"w.c:{line}: {call.split('(')[0]}(): RCU's writer side" in err[0]


def test_the_rwlock_vs_rcu_example_runs_and_checks(allowed):
    """examples/rwlock_vs_rcu.c, contended on two CPUs (emulated on one where
    one is allowed): every lookup finds its flow under either read side,
    the rwlock ends free, and each mode has a verdict beside its A/A
    control."""
    from ab_helpers import EXAMPLES
    cpus = allowed[:2] if len(allowed) >= 2 else allowed[:1]
    extra = {} if len(cpus) >= 2 else {"ncpus": 2, "oversubscribe": True}
    out = smpnet.ab(EXAMPLES / "rwlock_vs_rcu.c", cpus=cpus, loops=2000, rounds=12,
                    duration=0.005, repeat=12, **extra)
    for mode in ("uncontended", "contended"):
        assert [r["variant"] for r in out.rows if r["mode"] == mode] == [
            "rwlock", "rcu", "rwlock (A/A)"]
        (v,) = [v for v in out.verdicts if v["mode"] == mode]
        assert v["variant"] == "rcu" and v["control"]["sides"] == "rwlock twice"
