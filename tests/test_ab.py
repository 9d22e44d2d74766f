"""ab: a user's C file, built at run time, its variants paired against the
first. Bad input is refused with one line and exit 2 before anything runs;
a crash, a hang or a failed check names the variant; the examples run (the
build, its cache and its bounds: test_ab_build.py). No test asserts a timing."""
import json
import pathlib

import pytest

import smpnet
from smpnet.cli import main
from smpnet.errors import BadInput
from smpnet.experiments.ab import build, figures

from ab_helpers import EXAMPLES, FAST, ROOT, cache, one_error_line, two_cpus, write  # noqa: F401
from conftest import open_segments

LABELS = {figures.FASTER, figures.SLOWER, "no measurable difference"}

FAULTS = """#include <smpnet.h>
#include <stdlib.h>
#include <unistd.h>
struct shared { int *p; unsigned long n; spinlock_t l; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(ok) { shared->n++; }
SMPNET_VARIANT(segv) { *(volatile int *)shared->p = 1; }
SMPNET_VARIANT(abrt) { abort(); }
SMPNET_VARIANT(forever) { for (;;) barrier(); }
SMPNET_INIT(relocks) { spin_lock_init(&shared->l); return 0; }
SMPNET_VARIANT(relocks) { spin_lock_bh(&shared->l); spin_lock(&shared->l); }
SMPNET_VARIANT(forks) { static int once; if (!once++ && fork() == 0) _exit(0); }
SMPNET_VARIANT(execs) { static int once; if (!once++) execl("/bin/true", "true", (char *)0); }
SMPNET_VARIANT(miscounts) { shared->n += 2; }
SMPNET_CHECK(miscounts) { expect(shared->n == nr_ops, "n is not the ops done"); }
"""


# ---------------------------------------------------------------- refused before a build

@pytest.mark.parametrize("text, says", [
    ("#include <smpnet.h>\n", "defines no variant"),
    ("#include <smpnet.h>\nSMPNET_VARIANT(a) { }\n", "defines one variant (a)"),
    ("SMPNET_VARIANT(a) { }\nSMPNET_VARIANT(b) { }\n  SMPNET_VARIANT(a) { }\n",
     ":3: variant 'a' is defined twice (first at line 1)"),
])
def test_a_file_without_two_distinct_variants_is_refused_unbuilt(capsys, tmp_path, monkeypatch,
                                                                 text, says):
    monkeypatch.setattr(build, "_compile", lambda *a: pytest.fail("compiled"))
    assert main(["ab", write(tmp_path, text), "--cpus", "0"]) == 2
    err = one_error_line(capsys)
    assert len(err) == 1 and says in err[0]


def test_a_missing_or_oversized_file_is_refused(capsys, tmp_path):
    assert main(["ab", str(tmp_path / "nope.c")]) == 2
    assert "no such file" in one_error_line(capsys)[0]
    big = write(tmp_path, "SMPNET_VARIANT(a) {}\nSMPNET_VARIANT(b) {}\n"
                + " " * build.MAX_SOURCE_BYTES)
    assert main(["ab", big]) == 2
    assert f"over the {build.MAX_SOURCE_BYTES}-byte bound" in one_error_line(capsys)[0]


# ---------------------------------------------------------------- options, the core, the hooks

def test_ab_takes_the_lock_and_contended_options_as_declared_once():
    from smpnet.cli import build_parser
    from smpnet.experiments import ab
    from smpnet.experiments.common import lockopts

    def actions(name):
        sub = next(a for a in build_parser()._actions if a.dest == "command").choices[name]
        return {a.option_strings[0]: a for a in sub._actions if a.option_strings}
    ab_opts, con = actions("ab"), actions("contended")
    for option in ("--restore", "--hold-cycles", "--think-cycles", "--duration", "--repeat"):
        assert type(ab_opts[option].type) is type(con[option].type), option
        assert ab_opts[option].choices == con[option].choices, option
    assert f"default: {ab.DURATION}" in ab_opts["--duration"].help
    assert f"default: {lockopts.DURATION}" in con["--duration"].help
    assert "--scale" not in ab_opts and "--scale" in con


def test_the_api_takes_the_options_the_command_line_declares():
    """smpnet.ab() builds its arguments from ab's Option records, no
    parser: the same names and defaults as `smpnet-bench ab FILE.c`, and a
    bad value refused by the same check, in one line."""
    import ast
    from smpnet import api
    from smpnet.cli import build_parser
    from smpnet.experiments import get

    common = {"command", "cpus", "experiment", "format", "func", "json", "long", "output",
              "plot"}
    cli = {k: v for k, v in vars(build_parser().parse_args(["ab", "x.c"])).items()
           if k not in common}
    given = vars(api._args(get("ab"), {}, file="x.c", source=None))
    assert given.pop("source") is None and given == cli
    with pytest.raises(BadInput, match="--hold-cycles") as e:
        smpnet.ab(source="x", hold_cycles=-1)
    assert "\n" not in str(e.value)
    with pytest.raises(BadInput, match="--restore: one of sti, popf, got 'pushf'"):
        smpnet.ab(source="x", restore="pushf")
    with pytest.raises(BadInput, match="--check: True or False, got 'yes'"):
        smpnet.ab(source="x", check="yes")
    tree = ast.parse(pathlib.Path(api.__file__).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {"argparse", "cli"} & imported


UNBALANCED = """#include <smpnet.h>
SMPNET_STATE(struct smpnet_none, struct smpnet_none);
SMPNET_VARIANT(saves) { unsigned long flags; local_irq_save(flags); (void)flags; }
SMPNET_VARIANT(other) { }
"""


def test_the_core_runs_a_variant_as_its_object_was_built(allowed):
    """The checker is on in the object's build options alone: the core,
    given nothing but the object, sets the CPU up with it, so that its own
    end-of-round check (lockdep_end(): a save never restored) reports what
    the variant left; where the object was built without, nothing."""
    from smpnet import Machine
    from smpnet.experiments.ab import rounds
    from smpnet.machine import layout

    qspinlock = smpnet._core.LOCK_ALGOS["qspinlock"]
    for check in (True, False):
        obj = build.build(UNBALANCED, "unbalanced.c", qspinlock, check=check)
        assert obj.options == {"algo": qspinlock, "check": int(check), "popf": 0,
                               "kbuild": 0}
        with Machine(cpus=allowed[:1], regions=rounds.regions(obj, 1, 1)) as m:
            where = rounds.Where(m, [obj])
            smpnet._core.ab_round(obj.variants[0].loop, 10, m.segment.buf, 0, **where.state(0))
            bugs = dict(zip(layout.LOCKDEP_BUGS, m.region("irq")["bugs"].sum(axis=0).tolist()))
        assert (bugs["unbalanced_irq_restore"] > 0) == check, check


HOOKS = """#include <smpnet.h>
struct shared { unsigned long base, n; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(a) { shared->base = 7; }
SMPNET_VARIANT(a) { if (shared->base != 7) __builtin_trap(); shared->n++; }
SMPNET_CHECK(a) { expect(nr_ops > 0 && shared->n == nr_ops, "the rounds ran before the init"); }
SMPNET_VARIANT(b) { shared->n++; }
"""


def test_an_init_runs_before_the_rounds_and_a_check_after(capsys, tmp_path):
    """Variant a traps unless its init ran first; its check fails unless
    it runs after the rounds: a hook of the wrong kind fails the run."""
    f = write(tmp_path, HOOKS, "hooks.c")
    assert main(["ab", f, "--cpus", "0", "--no-contended"] + FAST) == 0
    assert "b - a:" in capsys.readouterr().out


def test_a_check_runs_after_the_contended_rounds_too(capsys, tmp_path, allowed):
    """A check that fails only where more than one CPU ran (the contended
    mode's init and check see its nr_cpus) ends the run after the
    contended rounds, naming the mode."""
    f = write(tmp_path, HOOKS.replace('SMPNET_CHECK(a) {', 'SMPNET_CHECK(a) {\n'
                                      '\texpect(nr_cpus == 1, "more than one CPU ran it");'),
              "contended_check.c")
    cpus = two_cpus(allowed)
    assert main(["ab", f, *cpus, "--duration", "0.01", "--repeat", "2"] + FAST) == 1
    assert one_error_line(capsys)[-1].endswith(
        "variant 'a': its SMPNET_CHECK failed after the contended rounds: more than one "
        "CPU ran it")


def test_a_hook_without_its_variant_and_state_too_large_are_refused(capsys, tmp_path):
    hook = write(tmp_path, (EXAMPLES / "aa.c").read_text() + "SMPNET_CHECK(c) { }\n", "hook.c")
    assert main(["ab", hook, "--cpus", "0"]) == 2
    assert "SMPNET_INIT or SMPNET_CHECK names a variant the file does not define" in \
        one_error_line(capsys)[-1]
    big = write(tmp_path, "#include <smpnet.h>\nstruct s { char b[8 << 20]; };\n"
                          "SMPNET_STATE(struct s, struct smpnet_none);\n"
                          "SMPNET_VARIANT(a) { }\nSMPNET_VARIANT(b) { }\n", "big.c")
    assert main(["ab", big, "--cpus", "0"]) == 2
    assert f"over the {build.MAX_STATE_BYTES}-byte bound" in one_error_line(capsys)[-1]


@pytest.mark.parametrize("argv, says", [
    (["--variants", "a,nope"], "unknown variant 'nope'"),
    (["--variants", "a"], "ab compares two or more"),
    (["--variants", "a,a"], "listed twice"),
    (["--contended"], "--contended needs 2 CPUs or more"),
    (["--no-contended", "--duration", "1"], "--duration: for a contended run only"),
    (["--builtin", "nope"], "unknown time_bench test 'nope'"),
    (["--algo", "nope"], "--algo takes one lock algorithm"),
])
def test_bad_options_get_one_line_and_exit_2(capsys, argv, says):
    assert main(["ab", str(EXAMPLES / "aa.c"), "--cpus", "0"] + argv) == 2
    err = one_error_line(capsys)
    assert len(err) == 1 and says in err[0]


# ---------------------------------------------------------------- faults

@pytest.mark.parametrize("variant, says", [
    ("segv", "was killed by SIGSEGV"), ("abrt", "was killed by SIGABRT"),
    # one fork or exec at the most, even were the worker not contained
    ("forks", "was killed by SIGSYS: it made a new process or ran a program"),
    ("execs", "was killed by SIGSYS: it made a new process or ran a program")])
def test_a_crashing_variant_is_named_with_its_cpu_and_signal(capsys, tmp_path, variant, says,
                                                             allowed):
    f = write(tmp_path, FAULTS)
    assert main(["ab", f, "--cpus", str(allowed[0]), "--variants", f"ok,{variant}"] + FAST) == 1
    err = one_error_line(capsys)[-1]
    assert f"variant '{variant}': emulated CPU 0 (real CPU {allowed[0]}" in err and says in err
    assert open_segments() == set()


def test_a_contained_worker_makes_threads_but_no_process():
    """Past contain(), a thread starts (clone with CLONE_THREAD) and the
    first fork kills the process with SIGSYS; each child forks once."""
    import os
    import signal
    import threading
    from smpnet.experiments.ab import contain

    def child(then_fork):
        pid = os.fork()
        if pid == 0:
            try:
                contain.contain()
                t = threading.Thread(target=lambda: None)
                t.start()
                t.join()
                if then_fork:
                    os.fork()
            finally:
                os._exit(7)
        return os.waitpid(pid, 0)[1]

    status = child(False)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7
    status = child(True)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS


def test_a_variant_that_never_returns_is_stopped_by_the_watchdog(capsys, tmp_path,
                                                                 monkeypatch):
    from smpnet.machine import machine
    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 0.5)   # 3 s by default: the same path
    f = write(tmp_path, FAULTS)
    assert main(["ab", f, "--cpus", "0", "--variants", "ok,forever"] + FAST) == 1
    err = one_error_line(capsys)[-1]
    assert "variant 'forever': emulated CPU 0" in err and "made no progress" in err


def test_a_deadlocked_baseline_is_named_and_not_its_control(capsys, tmp_path, monkeypatch):
    """A variant that takes its lock twice never returns; at the stop its
    loop returns and the entries after it run on (the A/A copy of the same
    code): the message names the one that stalled."""
    from smpnet.machine import machine
    monkeypatch.setattr(machine, "WATCHDOG_SLACK_S", 0.5)
    f = write(tmp_path, FAULTS)
    for _ in range(2):      # every time
        assert main(["ab", f, "--cpus", "0", "--variants", "relocks,ok"] + FAST) == 1
        err = one_error_line(capsys)[-1]
        assert "variant 'relocks': emulated CPU 0" in err and "made no progress" in err
        assert "(A/A)" not in err
    assert open_segments() == set()


def test_a_failed_check_ends_the_run_naming_its_variant(capsys, tmp_path):
    f = write(tmp_path, FAULTS)
    assert main(["ab", f, "--cpus", "0", "--variants", "ok,miscounts"] + FAST) == 1
    assert one_error_line(capsys)[-1] == (
        "smpnet-bench: variant 'miscounts': its SMPNET_CHECK failed after the uncontended "
        "rounds: n is not the ops done")


# ---------------------------------------------------------------- the examples

# every key an ab row had before rows carried their role: none lost
ROW_KEYS = {"uncontended": {"mode", "variant", "cpus", "loops", "overhead_cycles", "cycles",
                            "cycles_min", "cycles_max", "ns", "samples", "rounds"},
            "contended": {"mode", "variant", "cpus", "duration_s", "hold_cycles",
                          "think_cycles", "timing_valid", "ops", "cycles", "cycles_min",
                          "cycles_max", "ns", "samples", "rounds", "ops_per_s",
                          "ops_per_s_interval", "fairness", "fairness_interval",
                          "ops_per_s_samples", "ops_per_s_per_cpu",
                          "ops_per_s_per_cpu_interval"}}


def _check_outcome(out, variants, modes):
    names = variants + [variants[0] + " (A/A)"]
    for mode in modes:
        mine = [r for r in out.rows if r["mode"] == mode]
        assert all(ROW_KEYS[mode] <= set(r) for r in mine)
        rows = [r for r in mine if r["role"] != figures.BUILTIN_ROLE]
        assert [r["variant"] for r in rows] == names
        assert [r["role"] for r in rows] == [figures.VARIANT] * len(variants) + [figures.CONTROL]
        assert all(r["cycles_min"] <= r["cycles"] <= r["cycles_max"] for r in rows)
        vs = [v for v in out.verdicts if v["mode"] == mode]
        assert [v["variant"] for v in vs] == variants[1:]
        for v in vs:
            lo, hi = v["interval"]
            assert lo <= v["measured"] <= hi and v["verdict"] in LABELS
            assert v["verdict"] == figures.label(v["interval"])
            assert v["control"]["sides"] == f"{variants[0]} twice"


def test_the_verdicts_find_the_baseline_and_the_control_by_role_not_label():
    def row(label, role, samples):
        return {"mode": "uncontended", "variant": label, "role": role, "samples": samples}
    base = [10.0, 10.2] * 6
    rows = [row("x (A/A)", figures.VARIANT, base),                 # a label that looks like one
            row("built-in y", figures.VARIANT, [12.0, 12.2] * 6),
            row("ctl", figures.CONTROL, [10.1, 10.1] * 6),
            row("z", figures.BUILTIN_ROLE, [50.0] * 12)]
    (v,) = figures.verdicts(rows, 1e9)
    assert v["baseline"] == "x (A/A)" and v["variant"] == "built-in y"
    assert v["verdict"] == figures.SLOWER and v["control"]["sides"] == "x (A/A) twice"


def test_the_seed_003_example_on_one_cpu(capsys):
    out = smpnet.ab(EXAMPLES / "seed003.c", cpus="0", loops=2000, rounds=12)
    _check_outcome(out, ["irqsave", "irq"], ["uncontended"])
    assert capsys.readouterr().err == ""   # smpnet.h builds without a warning


def test_the_spin_lock_bh_example_beside_the_built_in_op(allowed):
    out = smpnet.ab(str(EXAMPLES / "spin_lock_bh.c"), cpus=allowed[:1], loops=2000,
                    rounds=12, builtin="spin_lock_unlock")
    _check_outcome(out, ["plain", "bh"], ["uncontended"])
    (built_in,) = [r for r in out.rows if r["role"] == figures.BUILTIN_ROLE]
    assert built_in["test"] == "spin_lock_unlock"
    plain = next(r for r in out.rows if r["variant"] == "plain")
    o = plain["over_builtin"]["spin_lock_unlock"]
    assert o["interval"][0] <= o["ratio"] <= o["interval"][1] and o["pairs"] == 6


def test_the_percpu_counter_example_contended_and_checked(allowed):
    cpus = allowed[:2] if len(allowed) >= 2 else allowed[:1]
    extra = {} if len(cpus) >= 2 else {"ncpus": 2, "oversubscribe": True}
    out = smpnet.ab(EXAMPLES / "percpu_counter.c", cpus=cpus, loops=2000, rounds=12,
                    duration=0.005, repeat=12, **extra)
    _check_outcome(out, ["shared_atomic", "percpu", "percpu_counter"],
                   ["uncontended", "contended"])
    con = [r for r in out.rows if r["mode"] == "contended"]
    assert all(len(r["ops_per_s_per_cpu"]) == 2 and 0 < r["fairness"] <= 1 for r in con)
    assert all(r["timing_valid"] == (len(cpus) >= 2) for r in con)


def test_the_aa_example_from_source_text_and_its_result_for_compare(capsys, tmp_path):
    text = (EXAMPLES / "aa.c").read_text()
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert main(["ab", str(EXAMPLES / "aa.c"), "--cpus", "0", "--output", str(out)]
                    + FAST) == 0
    assert "b - a:" in capsys.readouterr().out
    env = json.loads(a.read_text())
    assert env["params"]["source"] == text and env["params"]["variants"] == ["a", "b"]
    assert main(["compare", str(a), str(b)]) == 0
    assert "a (A/A)" in capsys.readouterr().out
    # its object names "<source>" in its messages: its own, built once
    smpnet.ab(source=text, cpus="0", loops=2000, rounds=12)
    out = smpnet.ab(source=text, cpus="0", loops=2000, rounds=12)
    assert out.params["file"] == "<source>" and out.params["compiled"] is False
    # the API's warnings and load are the command line's: the machine's
    # own warnings, and each verdict's load around the run
    from smpnet.machine import sysinfo
    from smpnet.report import report
    machine = sysinfo.timing_warnings(report.machine([0]))
    assert set(machine) <= set(out.warnings) and set(machine) <= set(env["warnings"])
    assert out.verdicts and env["verdicts"]
    assert all(set(v["load"]) == set(env["verdicts"][0]["load"]) for v in out.verdicts)


def test_the_api_takes_a_path_or_source_and_never_guesses(tmp_path):
    for kw in ({}, {"path": str(EXAMPLES / "aa.c"), "source": "x"}):
        with pytest.raises(BadInput, match="a file's path or its text as source="):
            smpnet.ab(**kw)
    # a path that reads like source is a path: the file is not there
    with pytest.raises(BadInput, match="SMPNET_VARIANT.c: no such file"):
        smpnet.ab(str(tmp_path / "SMPNET_VARIANT.c"))


def test_the_api_pages_example_runs(capsys):
    page = (ROOT / "docs" / "api.md").read_text()
    block = page.split("## Your own change: smpnet.ab", 1)[1].split("```python\n", 1)[1]
    exec(block.split("```", 1)[0], {})
    out = capsys.readouterr().out
    assert out.startswith("uncontended percpu - shared_atomic ")
    assert "| A/A:" in out


def test_text_email_and_plot_of_a_run(capsys, tmp_path):
    argv = ["ab", str(EXAMPLES / "aa.c"), "--cpus", "0"] + FAST
    assert main(argv + ["--format", "email", "--plot", str(tmp_path / "pics")]) == 0
    out = capsys.readouterr().out
    assert "b - a:" in out and max(map(len, out.splitlines())) <= 80
    assert (tmp_path / "pics" / "ab.png").stat().st_size > 1000
