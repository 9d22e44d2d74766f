"""The kernel's qspinlock for a file's own locks (smpnet_qspinlock.h): its
slow path excludes under contention, on every path, also generated again
with a change; its instructions are x86's; a file may define the kernel's
lock names itself; and a this_cpu_ptr() another CPU reads is the
publisher's copy, as the kernel's MCS queue needs. No test asserts a timing."""
import re
import shutil

import pytest

import smpnet
from smpnet.cli import main
from smpnet.experiments.ab import build

from ab_helpers import EXAMPLES, FAST, cache, write  # noqa: F401
from conftest import X86, object_functions

QSPIN = smpnet._core.LOCK_ALGOS["qspinlock"]

# The slow path generated again with lockevent_inc() counting, per CPU, each
# path a locker took; the checks hold the count to the ops (exclusion) and
# that the lock was contended at all.
COUNTED = """#include <smpnet.h>
#include <smpnet_qspinlock.h>
static DEFINE_PER_CPU(unsigned long, lock_pending_n);
static DEFINE_PER_CPU(unsigned long, lock_slowpath_n);
#undef lockevent_inc
#define lockevent_inc(ev)	this_cpu_inc(ev##_n)
#define lock_no_node_n		lock_slowpath_n
#define queued_spin_lock_slowpath	counted_slowpath
#include <smpnet_qspinlock_slowpath.h>
#undef queued_spin_lock_slowpath
struct shared { struct qspinlock lock; unsigned long count; };
SMPNET_STATE(struct shared, struct smpnet_none);
static void take(struct qspinlock *lock)
{
	int val = 0;
	if (!atomic_try_cmpxchg_acquire(&lock->val, &val, _Q_LOCKED_VAL))
		counted_slowpath(lock, val);
}
SMPNET_VARIANT(kernels) { queued_spin_lock(&shared->lock); shared->count++; queued_spin_unlock(&shared->lock); }
SMPNET_VARIANT(counted) { take(&shared->lock); shared->count++; queued_spin_unlock(&shared->lock); }
SMPNET_CHECK(kernels) { expect(shared->count == nr_ops, "kernels: an increment lost"); }
SMPNET_CHECK(counted)
{
	unsigned long slow = 0;
	int cpu;

	expect(shared->count == nr_ops, "counted: an increment lost");
	expect(!queued_spin_is_locked(&shared->lock), "counted: still held");
	for_each_possible_cpu(cpu)
		slow += per_cpu(lock_pending_n, cpu) + per_cpu(lock_slowpath_n, cpu);
	expect(nr_cpus == 1 || slow > 0, "counted: contended, no locker took the slow path");
}
"""


def test_the_kernels_qspinlock_excludes_on_every_path(allowed):
    """Four emulated CPUs on the machine's (two, or one oversubscribed: a
    holder descheduled, so waiters pend and queue, each MCS node reached
    through another CPU's this_cpu_ptr()): every increment is there, for
    the header's slow path and for the one generated again."""
    out = smpnet.ab(source=COUNTED, cpus=allowed[:2], ncpus=4,
                    oversubscribe=True, algo="qspinlock", loops=2000, rounds=2,
                    duration=0.05, repeat=2)
    con = [r for r in out.rows if r["mode"] == "contended"]
    assert len(con) == 3 and all(r["ops"] > 0 for r in con)


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_the_qspinlock_is_x86s_instructions(allowed):
    """examples/qspinlock_pending_loops.c runs (its checks hold); the fast
    path is a `lock cmpxchg` of the word; the pending bit set by `lock
    bts`; xchg_tail() a 16-bit `xchg` (x86's xchg is locked); the next
    node fetched with `prefetchw`; the unlock a byte store; the pending
    wait bounded by 512 in the header's slow path and by 1 in the
    example's generic one."""
    example = EXAMPLES / "qspinlock_pending_loops.c"
    out = smpnet.ab(example, cpus=allowed[:1], contended=False, algo="qspinlock",
                    kernel_build="inline", loops=2000, rounds=2)
    assert [r["variant"] for r in out.rows] == ["x86", "generic", "x86 (A/A)"]
    obj = build.build(example.read_text(), str(example), QSPIN)
    fns = object_functions(obj.path)
    timed = fns[next(f for f in fns if f.startswith("smpnet_timed_x86"))]
    assert re.search(r"\block cmpxchg +%\w+,", timed), timed
    assert re.search(r"\tcall +[0-9a-f]+ <queued_spin_lock_slowpath[.\w]*>", timed), timed
    assert re.search(r"\tmovb +\$0x0,", timed), timed
    for name, bounded in (("queued_spin_lock_slowpath", True),
                          ("generic_spin_lock_slowpath", False)):
        slow = fns[next(f for f in fns if re.fullmatch(rf"{name}(\.\w+)*", f))]
        assert re.search(r"\block btsl +\$0x8,", slow), slow
        assert re.search(r"\txchg +%\w+w,0x2\(%\w+\)", slow), slow    # the tail's half
        assert re.search(r"\tprefetchw ", slow), slow      # the next node's, as the kernel's
        assert bool(re.search(r"\$0x(1ff|200|201),", slow)) == bounded, (name, slow)


def test_a_file_may_define_the_kernels_lock_names(capsys, tmp_path):
    """Without smpnet_qspinlock.h, the kernel's qspinlock names are the
    file's: smpnet's own lock model does not take them."""
    names = ("queued_spin_lock_slowpath", "queued_spin_lock", "queued_spin_unlock",
             "queued_spin_trylock", "queued_fetch_set_pending_acquire", "encode_tail",
             "decode_tail", "arch_spin_lock", "arch_spin_unlock", "virt_spin_lock", "pv_wait",
             "pv_kick", "mcs_spin_lock", "mcs_spin_unlock", "prefetchw")
    src = ("#include <smpnet.h>\n#define _Q_PENDING_LOOPS 3\n#define MAX_NODES 4\n"
           "struct qnode { int x; };\n"
           + "".join(f"static int {n}(int a) {{ return a + 1; }}\n" for n in names)
           + "struct shared { int n; };\nSMPNET_STATE(struct shared, struct smpnet_none);\n"
           + "SMPNET_VARIANT(a) { shared->n = queued_spin_lock_slowpath(shared->n) + "
             "_Q_PENDING_LOOPS; }\nSMPNET_VARIANT(b) { shared->n = encode_tail(shared->n); }\n")
    assert main(["ab", write(tmp_path, src, "names.c"), "--cpus", "0", "--algo", "qspinlock",
                 *FAST]) == 0, capsys.readouterr().err


PUBLISH = """#include <smpnet.h>
static DEFINE_PER_CPU(unsigned long, mine);
struct shared { unsigned long *ptr[4]; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(a)
{
	this_cpu_write(mine, smp_processor_id() + 100);
	WRITE_ONCE(shared->ptr[smp_processor_id()], this_cpu_ptr(&mine));
}
SMPNET_VARIANT(b) { barrier(); }
SMPNET_CHECK(a)
{
	for (int cpu = 0; cpu < nr_cpus; cpu++) {
		expect(shared->ptr[cpu] == per_cpu_ptr(&mine, cpu), "this_cpu_ptr is not per_cpu_ptr");
		expect(*shared->ptr[cpu] == (unsigned long)cpu + 100, "another CPU's pointer");
	}
}
"""


def test_a_this_cpu_ptr_another_cpu_reads_is_the_publishers_copy(allowed):
    """Each CPU publishes this_cpu_ptr(&mine) in the shared state; the
    check, on CPU 0, reads every CPU's through its pointer: that CPU's
    copy, at per_cpu_ptr()'s address, as in the kernel."""
    out = smpnet.ab(source=PUBLISH, cpus=allowed[:2], ncpus=2,
                    oversubscribe=len(allowed) < 2, algo="qspinlock", loops=2000, rounds=2,
                    duration=0.01, repeat=2)
    assert any(r["mode"] == "contended" for r in out.rows)
