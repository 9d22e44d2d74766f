"""ab's CPU roles and unit of work (SMPNET_ROLES, SMPNET_UNIT, SMPNET_WORK):
each CPU runs its role's code, one CPU every role in turn, the figures are
per unit of work where the file names one, and the producer/consumer
example conserves its skbs. No test asserts a timing."""
import json
import shutil
import types

import pytest

import smpnet
from smpnet.cli import main
from smpnet.errors import RunFailed
from smpnet.experiments.ab import build, cpu_roles, figures, rounds

from ab_helpers import EXAMPLES, cache, one_error_line, two_cpus, write  # noqa: F401
from conftest import X86, object_functions

# Each role's body records the CPUs that ran it and counts its turns; the
# checks hold the CPUs to the roles the run gave (ROLE0_CPUS, ROLE1_CPUS:
# bit masks the test writes in) and, uncontended, every role once a turn.
ROLES = """#include <smpnet.h>
SMPNET_ROLES(consumer, producer);
SMPNET_UNIT(item);
struct shared { unsigned long cpus[2]; atomic_long_t turns[2]; };
SMPNET_STATE(struct shared, struct smpnet_none);
static void ran(struct shared *s, int role)
{
	unsigned long bit = 1ul << smp_processor_id();
	if (!(READ_ONCE(s->cpus[role]) & bit))
		__atomic_fetch_or(&s->cpus[role], bit, __ATOMIC_RELAXED);
	atomic_long_inc(&s->turns[role]);
	if (role == consumer)
		SMPNET_WORK(2);
}
SMPNET_VARIANT(a) { ran(shared, role); }
SMPNET_VARIANT(b) { ran(shared, role); }
static void roles_ran(struct shared *s)
{
	if (nr_cpus == 1) {
		expect(s->cpus[0] == 1 && s->cpus[1] == 1, "one CPU did not run every role");
		expect(atomic_long_read(&s->turns[0]) == (long)nr_ops &&
		       atomic_long_read(&s->turns[1]) == (long)nr_ops,
		       "an op did not run each role once");
	} else {
		expect(s->cpus[0] == ROLE0_CPUS, "the consumer ran on other CPUs");
		expect(s->cpus[1] == ROLE1_CPUS, "the producer ran on other CPUs");
	}
}
SMPNET_CHECK(a) { roles_ran(shared); }
SMPNET_CHECK(b) { roles_ran(shared); }
"""


def _roles_file(tmp_path, consumer, producer, name):
    text = ROLES.replace("ROLE0_CPUS", str(consumer)).replace("ROLE1_CPUS", str(producer))
    return write(tmp_path, text, name)


def test_the_object_tells_its_roles_and_unit(tmp_path):
    obj = build.build(ROLES.replace("ROLE0_CPUS", "1").replace("ROLE1_CPUS", "2"), "roles.c",
                      smpnet._core.LOCK_ALGOS["qspinlock"])
    assert obj.cpu_roles == ("consumer", "producer") and obj.unit == "item"
    plain = build.build((EXAMPLES / "aa.c").read_text(), "aa.c",
                        smpnet._core.LOCK_ALGOS["qspinlock"])
    assert plain.cpu_roles == () and plain.unit == ""
    if X86 and shutil.which("objdump"):
        # a file without roles: the role count a constant, its timed loop
        # runs the op once a turn and reads no count (test_ab_percpu's
        # percpu_counter test holds that the op is still inlined); nor,
        # without the model's skbs, does a loop take interrupts between ops
        fns = object_functions(plain.path)
        loops = [fns[f] for f in fns if f.startswith(("smpnet_timed_", "smpnet_hammer_"))]
        assert loops and not any("smpnet_nr_roles_" in text for text in loops)
        assert not any("irq_replay" in text for text in loops)


def test_each_cpu_runs_its_roles_code(capsys, tmp_path, allowed):
    """Contended, each CPU runs its role's code and no other (the checks
    read which CPUs ran each), here as --roles gives them, against the
    file's order; uncontended, the one CPU runs every role once an op. The
    figures are per unit of work: the consumer's two a turn."""
    f = _roles_file(tmp_path, 0b10, 0b01, "roles.c")
    assert main(["ab", f, *two_cpus(allowed), "--loops", "2000", "--rounds", "2", "--duration",
                 "0.005", "--repeat", "2", "--json", "--roles", "producer,consumer"]) == 0
    env = json.loads(capsys.readouterr().out)
    p = env["params"]
    assert p["unit"] == "item" and p["roles"] == ["consumer", "producer"]
    assert p["cpu_roles"] == ["producer", "consumer"]
    con = [r for r in env["results"] if r["mode"] == "contended"]
    assert con and all(set(r["per_role"]) == {"consumer", "producer"} for r in con)
    for r in con:
        assert r["per_role"]["consumer"]["emulated_cpus"] == [1]
        assert r["units"] > 0 and r["per_role"]["producer"]["units_per_s"] == 0
        assert r["per_role"]["consumer"]["units_per_s"] > 0


def test_the_files_order_gives_each_role_a_cpu_the_last_the_rest():
    obj = types.SimpleNamespace(name="f.c", cpu_roles=("consumer", "producer", "reader"))
    assert cpu_roles.assign(obj, None, 4, True) == ["consumer", "producer", "reader", "reader"]
    assert cpu_roles.assign(obj, "reader,producer,consumer", 3, True) == [
        "reader", "producer", "consumer"]
    assert cpu_roles.assign(obj, None, 4, False) is None    # uncontended: one CPU, every role


def test_the_producer_consumer_example_conserves_its_skbs(allowed):
    """examples/defer_free_roles.c: its checks find every skb once after
    both modes (an skb lost, or freed twice, fails them); the consumer frees
    deferred skbs on its CPU."""
    cpus = allowed[:2] if len(allowed) >= 2 else allowed[:1]
    extra = {} if len(cpus) >= 2 else {"ncpus": 2, "oversubscribe": True}
    out = smpnet.ab(EXAMPLES / "defer_free_roles.c", cpus=cpus, loops=2000, rounds=12,
                    duration=0.005, repeat=12, **extra)
    assert [v["variant"] for v in out.verdicts] == ["llist", "llist"]
    con = [r for r in out.rows if r["mode"] == "contended"]
    assert all(r["unit"] == "skb" and r["per_role"]["consumer"]["units_per_s"] > 0
               for r in con)
    assert "per skb" in "\n".join(figures.effect_lines(out.verdicts, "skb"))


@pytest.mark.parametrize("text, argv, says", [
    (ROLES, ["--roles", "producer,consumr"], "--roles: no role 'consumr' in"),
    (ROLES, ["--roles", "producer"], "--roles producer: 1 role(s) for 2 CPUs"),
    (ROLES, ["--roles", "producer,producer"], "role 'consumer' has no CPU of the 2"),
    (ROLES, ["--builtin", "spin_lock_unlock"], "counts its cost per item (SMPNET_UNIT), the "
                                               "built-in tests per op"),
    (ROLES.replace("SMPNET_ROLES(consumer, producer)", "SMPNET_ROLES(consumer = 1, producer)"),
     [], "SMPNET_ROLES(consumer = 1): roles are names, numbered in their order"),
    ((EXAMPLES / "aa.c").read_text(), ["--roles", "a,b"], "declares no SMPNET_ROLES")])
def test_roles_no_cpu_can_run_are_refused_in_one_line(capsys, tmp_path, allowed, text, argv,
                                                      says):
    # the objects test_the_object_tells_its_roles_and_unit built (qspinlock)
    f = write(tmp_path, text.replace("ROLE0_CPUS", "1").replace("ROLE1_CPUS", "2"), "bad.c")
    assert main(["ab", f, *two_cpus(allowed), "--loops", "2000", "--algo", "qspinlock"]
                + argv) == 2
    assert says in one_error_line(capsys)[-1]


@pytest.mark.parametrize("counted, mode", [("(void)0", "a round of 2000 ops"),
                                           ("if (nr_cpus == 1) SMPNET_WORK(2)",
                                            "a contended round")])
def test_a_unit_never_counted_ends_the_run(capsys, tmp_path, allowed, counted, mode):
    f = write(tmp_path, ROLES.replace("SMPNET_WORK(2)", counted).replace(
        "ROLE0_CPUS", "1").replace("ROLE1_CPUS", "2"), f"uncounted{len(counted)}.c")
    assert main(["ab", f, *two_cpus(allowed), "--loops", "2000", "--rounds", "2",
                 "--duration", "0.005", "--repeat", "2", "--algo", "qspinlock"]) == 1
    line = one_error_line(capsys)[-1]
    assert mode in line and "counted no item: SMPNET_WORK() was never reached" in line


def test_a_rounds_cycles_are_per_unit_where_a_unit_is_named():
    assert rounds.per_unit(1000.0, 10, 40, "skb") == 250.0
    assert rounds.per_unit(1000.0, 10, 40, "") == 1000.0
    with pytest.raises(RunFailed, match="counted no skb"):
        rounds.per_unit(1000.0, 10, 0, "skb")


def test_contended_figures_count_units_and_judge_fairness_within_a_role():
    """Two rounds of three CPUs (a consumer that does the work, two
    producers): the cost is every CPU's cycles per unit, the throughput
    units over the longest CPU's time, fairness the producers' alone."""
    # per CPU: (ops, cycles, spins, warnings, units)
    one = [(100, 1000, 0, None, 50), (10, 1000, 0, None, 0), (30, 2000, 0, None, 0)]
    p = {"duration_s": 0.01, "hold_cycles": 0, "think_cycles": 0, "unit": "skb",
         "cpu_roles": ["consumer", "producer", "producer"]}
    [row] = figures.contended_rows(["a"], [figures.VARIANT], [0, 1, 2], [[one, one]], 1000.0,
                                   p, True)
    assert row["cycles"] == 4000 / 50 and row["units"] == 100 and row["ops"] == 280
    assert row["ops_per_s"] == 50 / 2.0
    assert row["fairness"] == pytest.approx((10 + 30) ** 2 / (2 * (10 ** 2 + 30 ** 2)))
    prod = row["per_role"]["producer"]
    assert prod["emulated_cpus"] == [1, 2] and prod["ops_per_s"] == 40 / 2.0
    assert prod["cycles_per_op"] == 3000 / 40 and prod["units_per_s"] == 0
    assert row["per_role"]["consumer"]["units_per_s"] == 50 / 1.0
    # without a unit or roles: ops, and Jain's index over every CPU
    [plain] = figures.contended_rows(["a"], [figures.VARIANT], [0, 1, 2], [[one]], 1000.0,
                                     {**p, "unit": None, "cpu_roles": None}, True)
    assert plain["cycles"] == 4000 / 140 and "per_role" not in plain and "units" not in plain
