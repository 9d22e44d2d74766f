"""--kernel-build: each lock entry point inline code or an out-of-line
call, as the named build makes it, read from the built object; the host's
build chosen from its config; DEBUG_SPINLOCK's checks in x86-debug."""
import gzip
import json
import re

import pytest

from conftest import X86, code_of, loop_tag, thunk_addresses
from smpnet import Machine, _core
from smpnet.errors import BadInput
from smpnet.machine import kernel_build, layout
from smpnet.measure.time_bench import BUILT

# the entry points each variant's timed loop reaches, lock then unlock
ENTRIES = {"PLAIN": ("spin_lock", "spin_unlock"), "BH": ("spin_lock_bh", "spin_unlock_bh"),
           "IRQ": ("spin_lock_irq", "spin_unlock_irq"),
           "IRQSAVE": ("spin_lock_irqsave", "spin_unlock_irqrestore"),
           "IRQSAVE_BEFORE_LOCK": ("spin_lock", "spin_unlock"),
           "IRQ_DISABLE_BEFORE_LOCK": ("spin_lock", "spin_unlock")}
# an entry point's out-of-line copy, as its symbol starts
SYMBOL = {"spin_lock": "_raw_spin_lock_SPIN", "spin_unlock": "_raw_spin_unlock_SPIN",
          "spin_lock_bh": "_raw_spin_lock_bh_", "spin_unlock_bh": "_raw_spin_unlock_bh_",
          "spin_lock_irq": "_raw_spin_lock_irq_SPIN", "spin_unlock_irq": "_raw_spin_unlock_irq_",
          "spin_lock_irqsave": "_raw_spin_lock_irqsave_SPIN",
          "spin_unlock_irqrestore": "_raw_spin_unlock_irqrestore_sti_"}


def direct_calls(body):
    """The functions `body` calls directly, or tail-calls (a jmp to a start)."""
    return set(re.findall(r"\b(?:call|jmp) +[0-9a-f]+ <([^>+]+)>", body))


def test_the_core_and_kconfig_agree_on_what_each_build_calls():
    """The core's table (spinlock_api_smp.h) against the entry points
    kernel_build.py reads off a config as each build's Kconfig makes it."""
    assert kernel_build.calls_of("inline") == []
    every = list(_core.SPIN_ENTRIES)
    assert kernel_build.calls_of("x86-preempt") == every == kernel_build.calls_of("x86-debug")
    assert kernel_build.calls_of("x86-nopreempt") == [
        e for e in every if e not in ("spin_unlock", "spin_unlock_irq")]


CONFIGS = {   # what such a kernel's config says (the options' results)
    "x86-preempt": "CONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_UNINLINE_SPIN_UNLOCK=y\n",
    "x86-nopreempt": "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_INLINE_SPIN_UNLOCK_IRQ=y\n",
    "x86-debug": "CONFIG_PREEMPTION=y\nCONFIG_DEBUG_SPINLOCK=y\nCONFIG_UNINLINE_SPIN_UNLOCK=y\n"
                 "CONFIG_TRACE_IRQFLAGS=y\n",
}


@pytest.mark.parametrize("build", sorted(CONFIGS))
def test_host_is_the_build_whose_calls_the_hosts_config_makes(tmp_path, build):
    (tmp_path / "proc").mkdir()
    with gzip.open(tmp_path / "proc" / "config.gz", "wt") as f:
        f.write(CONFIGS[build])
    facts = kernel_build.kernel_build(str(tmp_path))
    builds, record = kernel_build.resolve(["host", "inline", build], facts)
    assert builds == [build, "inline"]          # host first, no repeat
    assert record["host"] == build and record["host_source"] == "/proc/config.gz"
    assert build in kernel_build.describe_model(build, record)
    assert "the host's build" in kernel_build.describe_model(build, record)
    assert "the host's build" not in kernel_build.describe_model("inline", record)
    assert "local_bh_enable() a call" in kernel_build.describe_model(build)
    assert "local_bh_enable()" not in kernel_build.describe_model("inline")
    # what no build models is said: lockdep's traced IRQ state, local_bh_disable() a call
    assert ("TRACE_IRQFLAGS" in kernel_build.describe(facts)) == (build == "x86-debug")


SRSO = {"Mitigation: Safe RET": True, "Vulnerable: Safe RET, no microcode": True,
        "Mitigation: IBPB": False, "Not affected": False}


@pytest.mark.parametrize("line", sorted(SRSO))
def test_host_returns_through_the_thunk_where_sysfs_says_safe_ret(tmp_path, line):
    (tmp_path / "proc").mkdir()
    with gzip.open(tmp_path / "proc" / "config.gz", "wt") as f:
        f.write(CONFIGS["x86-nopreempt"] + "CONFIG_MITIGATION_RETHUNK=y\n")
    vuln = tmp_path / kernel_build.VULN_DIR.lstrip("/")
    vuln.mkdir(parents=True)
    (vuln / "spec_rstack_overflow").write_text(line + "\n")
    facts = kernel_build.kernel_build(str(tmp_path))
    builds, record = kernel_build.resolve(["host"], facts)
    thunk = SRSO[line] and _core.RETURN_THUNK_MODELLED
    assert builds == ["x86-nopreempt+safe-ret" if thunk else "x86-nopreempt"]
    assert (line in record["host_why"]) == SRSO[line]
    assert ("safe-RET thunk" in kernel_build.describe_model(builds[0])) == thunk
    # the thunk changes the return, not what is a call
    assert kernel_build.calls_of(builds[0]) == kernel_build.calls_of("x86-nopreempt")


# sysfs lines (bugs.c's strings) -> the return `host` models
RETURNS = [
    ({"retbleed": "Mitigation: untrained return thunk; SMT enabled with STIBP protection"},
     "+ret-thunk"),
    ({"retbleed": "Mitigation: untrained return thunk",
      "spec_rstack_overflow": "Mitigation: Safe RET"}, "+safe-ret"),   # SRSO's thunk wins
    ({"retbleed": "Mitigation: IBRS"}, ""),
    ({"retbleed": "Vulnerable",
      "indirect_target_selection": "Mitigation: Aligned branch/return thunks"}, ""),
    ({"retbleed": "Mitigation: Stuffing"}, ""),
]


@pytest.mark.parametrize("lines, ret", RETURNS)
def test_host_returns_as_sysfs_says_the_kernel_returns(tmp_path, lines, ret):
    (tmp_path / "proc").mkdir()
    with gzip.open(tmp_path / "proc" / "config.gz", "wt") as f:
        f.write(CONFIGS["x86-preempt"] + "CONFIG_MITIGATION_RETHUNK=y\n")
    vuln = tmp_path / kernel_build.VULN_DIR.lstrip("/")
    vuln.mkdir(parents=True)
    for name, line in lines.items():
        (vuln / name).write_text(line + "\n")
    facts = kernel_build.kernel_build(str(tmp_path))
    builds, record = kernel_build.resolve(["host"], facts)
    ret = ret if _core.RETURN_THUNK_MODELLED else ""
    assert builds == ["x86-preempt" + ret]
    assert kernel_build.split(builds[0]) == ("x86-preempt", ret)
    if ret == "+ret-thunk":
        assert lines["retbleed"] in record["host_why"]
        assert "jmp to a `ret`" in kernel_build.describe_model(builds[0])
    if "indirect_target_selection" in lines:   # ITS: only some returns; said, and the bound named
        assert "lower half of a 64-byte line" in record["host_why"]
        assert "x86-preempt+ret-thunk" in record["host_why"]
    assert kernel_build.calls_of(builds[0]) == kernel_build.calls_of("x86-preempt")


@pytest.mark.parametrize("host, detail", [
    ("x86-preempt", "x86-nopreempt"), ("x86-debug", "x86-nopreempt"),
    ("x86-preempt+safe-ret", "x86-nopreempt+safe-ret"),
    ("x86-debug+ret-thunk", "x86-nopreempt+ret-thunk")])
def test_alls_second_seed_003_build_keeps_the_hosts_return(host, detail):
    from smpnet.experiments import locks
    assert locks._all_seed_003_build(host) == detail


def test_host_without_a_config_is_the_documented_fallback(tmp_path):
    facts = kernel_build.kernel_build(str(tmp_path), release="no-such-release")
    builds, record = kernel_build.resolve(["host"], facts)
    assert builds == [kernel_build.FALLBACK] and "no kernel config readable" in record["host_why"]


def test_an_unknown_build_is_bad_input():
    with pytest.raises(BadInput, match="unknown kernel build 'x86-rt'"):
        kernel_build.resolve(["x86-rt"])


def _ret(build):
    """The number of build's return (KERNEL_RETURN_TABLE): a copy's last digit."""
    return _core.KERNEL_RETURNS[kernel_build.split(build)[1]]


@pytest.mark.skipif(not X86, reason="reads x86 code")
def test_each_loop_calls_exactly_the_entry_points_its_build_makes_calls(core_functions):
    """For every variant and build (qspinlock, checker off, sti): the timed
    loop calls the out-of-line copy of each entry point the build calls,
    directly, the one that returns as the build does, and inlines the
    others; x86-debug's copies call do_raw_spin_lock/unlock out of line,
    the other builds' inline them."""
    checked = 0
    for build in kernel_build.BUILDS:
        calls = set(kernel_build.calls_of(build))
        for variant, (lock, unlock) in ENTRIES.items():
            body = code_of(core_functions,
                           f"tb_lock_loop_VARIANT_{variant}_SPIN_QSPINLOCK_{loop_tag(build)}_0_0")
            called = direct_calls(body)
            assert not re.search(r"\bcall +\*", body), "a call through a pointer"
            for entry in (lock, unlock):
                made = {f for f in called if f.startswith(SYMBOL[entry])}
                assert bool(made) == (entry in calls), (build, variant, entry, called)
                debug = build.startswith("x86-debug")
                for f in made:
                    assert f.endswith(f"QSPINLOCK_0_{int(debug)}_{_ret(build)}"), (build, f)
                    raw = direct_calls(code_of(core_functions, f))
                    assert any(r.startswith("do_raw_spin_") for r in raw) == debug
                checked += 1
    assert checked == len(kernel_build.BUILDS) * len(ENTRIES) * 2


@pytest.mark.skipif(not X86, reason="reads x86 code")
def test_spin_unlock_bh_releases_the_lock_before_it_enables_bhs(core_functions):
    """__raw_spin_unlock_bh(): the lock released, then BHs enabled (a
    softirq run by the enable must find the lock free). Where the release
    is a plain store (tas, ticket, qspinlock; no checker, no debug), each
    copy is that store to the lock, then a tail call of the enable."""
    seen = 0
    for name in core_functions:
        m = re.match(r"_raw_spin_unlock_bh_SPIN_(TAS|TICKET|QSPINLOCK)_0_0_([012])$", name)
        if not m:
            continue
        insns = [line.split("\t", 1)[1].strip() for line in
                 code_of(core_functions, name).splitlines() if "\t" in line]
        insns = [i for i in insns if not i.startswith(("nop", "xchg   %ax,%ax", "data16", "cs "))]
        stores = [k for k, i in enumerate(insns) if re.search(r",\(%rsi\)$", i)]
        assert stores and insns[-1].startswith("jmp") and insns[-1].endswith(
            f"<__local_bh_enable_ip_0_{m[2]}>"), (name, insns)
        assert not any("call" in i for i in insns), (name, insns)
        seen += 1
    assert seen == 9


def test_local_bh_enable_calls_its_out_of_line_copy_in_every_x86_build(core_functions):
    """include/linux/bottom_half.h's local_bh_enable() calls
    __local_bh_enable_ip(), which kernel/softirq.c keeps out of line in
    every kernel: time_bench's local_BH_disable_enable loop calls the copy
    that returns as its build returns in every x86 build and inlines the
    body in `inline` alone; every spin_unlock_bh copy calls (or tail-calls) it."""
    for build in kernel_build.BUILDS:
        loop = code_of(core_functions,
                       f"tb_cpu_loop_TB_OP_LOCAL_BH_DISABLE_ENABLE_{loop_tag(build)}_0_0")
        bh = {f for f in direct_calls(loop) if f.startswith("__local_bh_enable_ip_")}
        assert bh == (set() if build == "inline" else {f"__local_bh_enable_ip_0_{_ret(build)}"})
    copies = 0
    for name in core_functions:
        m = re.match(r"_raw_spin_unlock_bh_\w+_([01])_[01]_([012])$", name)
        if m:
            assert f"__local_bh_enable_ip_{m[1]}_{m[2]}" in direct_calls(
                code_of(core_functions, name)), name
            copies += 1
    # one per algorithm, checker, debug setting and return
    assert copies == len(_core.LOCK_ALGOS) * 4 * len(_core.KERNEL_RETURNS)


def returns_of(body, thunks):
    """(plain `ret`s, {thunk: jumps to it}) in a function's code."""
    return (len(re.findall(r"\tret\b", body)),
            {t: len(re.findall(rf"\bjmp +0*{a} <", body)) for t, a in thunks.items()})


# each return's thunk (kernel_build.h), by the copies' last digit
THUNK_OF = {"1": "smpnet_srso_return_thunk", "2": "smpnet_ret_thunk"}


@pytest.mark.skipif(not (X86 and _core.RETURN_THUNK_MODELLED), reason="GCC's x86 return thunk")
def test_each_copy_returns_only_as_its_build_returns(core_functions):
    """Every out-of-line copy of a +safe-ret build (its do_raw_spin_* ones
    and the PV unlock's too) returns by a jump to SRSO's safe-RET thunk, every copy of a
    +ret-thunk build by a jump to the `ret` thunk, neither with a `ret` of
    its own; every plain build's copies return by `ret` and never jump to
    a thunk. The safe-RET thunk is a call to a `lea 8(%rsp), %rsp; ret`, so
    every return goes to an address the return stack did not predict; the
    other is a `ret; int3` in the upper half of a 64-byte line, as
    retbleed_return_thunk and its_return_thunk are."""
    thunks = thunk_addresses()
    copies = [n for n in core_functions
              if re.match(r"(_raw_spin_|do_raw_spin_|__local_bh_enable_ip_).*[01]_[012]$", n)
              or re.match(r"pv_queued_spin_unlock_[012]$", n)]
    assert {n for n in copies if n.startswith("pv_")} == {f"pv_queued_spin_unlock_{r}"
                                                          for r in "012"}
    assert len(copies) >= 3 * 10 * len(_core.LOCK_ALGOS)
    seen = set()
    for name in copies:
        body = code_of(core_functions, name)
        rets, jumps = returns_of(body, thunks)
        # or ends in a tail call of the model's own function (the PV
        # unlock's copy of the same return; its slow path, a plain `ret`)
        tail = [f for f in re.findall(r"\bjmp +[0-9a-f]+ <([^>+]+)>", body)
                if f not in (name, "__x86_return_thunk") and f not in thunks]
        want = THUNK_OF.get(name[-1])
        assert all(n == 0 for t, n in jumps.items() if t != want), name
        if want:
            assert rets == 0 and (jumps[want] >= 1 or tail), name
            seen.add(want)
        else:
            assert rets >= 1 or tail, name
    assert seen == set(THUNK_OF.values())
    def at(address):    # objdump names a thunk by one of its symbols: find it by address
        return next(body for body in core_functions.values()
                    if body.split(":")[0].strip() == address)

    safe = at(thunks["smpnet_srso_return_thunk"])
    (callee,) = direct_calls(safe)
    assert re.search(r"\bcall\b", safe) and "ud2" in safe
    assert re.search(r"lea +0x8\(%rsp\),%rsp\s*\n.*\tret\b", code_of(core_functions, callee))
    # laid out as the kernel's: the safe RET at page offset 0x104, the thunk
    # right after its `lea; ret; int3` (retpoline.S, vmlinux.lds.S)
    safe_ret = int(re.search(r"call +([0-9a-f]+) <", safe).group(1), 16)
    assert safe_ret % 4096 == 0x104
    assert int(thunks["smpnet_srso_return_thunk"], 16) == safe_ret + 7
    assert int(thunks["smpnet_ret_thunk"], 16) & 0x20       # the upper half of its line
    assert re.match(r"\s*[0-9a-f]+:\s+ret\s*\n\s*[0-9a-f]+:\s+int3",
                    at(thunks["smpnet_ret_thunk"]))
    # and no loop of a build with a plain return reaches either
    for name in core_functions:
        if name.startswith("tb_lock_loop_") and re.search(r"_KSHAPE_\w+_0_[01]_[01]$", name):
            body = code_of(core_functions, name)
            assert not any(re.search(rf"\b0*{a} <", body) for a in thunks.values()), name


def _debug_cpu(m, **kw):
    reg = locks_region(m)
    _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS["tas"], 0)
    return _core.Cpu(m.segment.buf, 0, lock_region=reg, timeout=0.2,
                     kbuild=_core.KERNEL_BUILDS["x86-debug"], **kw)


def _bugs(m):
    return dict(zip(layout.LOCKDEP_BUGS, m.region("irq")["bugs"].sum(axis=0).tolist()))


def test_x86_debug_reports_a_recursion_and_a_foreign_unlock(allowed):
    """DEBUG_SPINLOCK's spin_bug: the second lock of a lock this CPU holds
    (the run is stopped, not left to spin), and an unlock by a CPU that is
    not the owner; the checker off, so the report is the build's own."""
    with Machine(cpus=allowed[:1], ncpus=2, oversubscribe=True,
                 regions=[("locks", layout.LOCK_SLOT, 1)]) as m:
        c0 = _debug_cpu(m)
        c1 = _core.Cpu(m.segment.buf, 1, lock_region=locks_region(m), timeout=0.2,
                       kbuild=_core.KERNEL_BUILDS["x86-debug"])
        c0.spin_lock(0)
        assert _bugs(m)["spin_bug"] == 0
        c1.spin_unlock(0)                   # not the owner
        assert _bugs(m)["spin_bug"] == 1
        c0.spin_lock(0)                     # the lock is free again: no report
        with pytest.raises(RuntimeError, match="aborted"):
            c0.spin_lock(0)                 # recursion
        assert _bugs(m)["spin_bug"] == 2 and int(m.header["stop"]) == 1


def locks_region(m):
    return m.segment.region_names.index("locks")


def test_the_other_builds_make_no_debug_checks(allowed):
    with Machine(cpus=allowed[:1], ncpus=2, oversubscribe=True,
                 regions=[("locks", layout.LOCK_SLOT, 1)]) as m:
        reg = locks_region(m)
        _core.lock_init(m.segment.buf, reg, 0, _core.LOCK_ALGOS["tas"], 0)
        for build in ("inline", "x86-nopreempt", "x86-preempt"):
            c0, c1 = (_core.Cpu(m.segment.buf, cpu, lock_region=reg,
                                kbuild=_core.KERNEL_BUILDS[build]) for cpu in (0, 1))
            c0.spin_lock(0)
            c1.spin_unlock(0)
        assert _bugs(m)["spin_bug"] == 0


def test_a_build_out_of_range_is_refused(allowed):
    with Machine(cpus=allowed[:1], regions=[("locks", layout.LOCK_SLOT, 1)]) as m:
        nr = _core.c_constants()["KBUILD_NR"]
        with pytest.raises(ValueError, match=f"no kernel build {nr}"):
            _core.Cpu(m.segment.buf, 0, kbuild=nr)
        inline_thunk = _core.KERNEL_SHAPES["inline"] + len(_core.KERNEL_SHAPES)
        with pytest.raises(ValueError, match=f"no kernel build {inline_thunk}"):
            _core.Cpu(m.segment.buf, 0, kbuild=inline_thunk)     # inline has no return
        with pytest.raises(ValueError, match="no kernel build -1"):
            _core.kernel_build_calls(-1)


def test_locks_runs_the_suite_once_per_build_with_a_verdict_each(tmp_path, capsys):
    from smpnet.cli import main
    out = tmp_path / "r.json"
    assert main(["locks", "--cpus", "0", "--algo", "tas", "--variant", "irq,irqsave",
                 "--kernel-build", "inline,x86-nopreempt", "--loops", "2000", "--rounds", "12",
                 "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "# kernel build: x86-nopreempt; calls: spin_lock, " in text
    env = json.loads(out.read_text())
    assert env["params"]["kernel_build"] == ["inline", "x86-nopreempt"]
    lock_rows = [r for r in env["results"] if r["algo"]]
    assert {r["kernel_build"] for r in lock_rows} == {"inline", "x86-nopreempt"}
    # the tests on no lock run once, with the first build, but local_bh_enable()'s, a call
    # in x86 builds
    assert {r["kernel_build"] for r in env["results"]
            if not r["algo"] and r["test"] not in BUILT} == {"inline"}
    assert [r["kernel_build"] for r in env["results"]
            if r["test"] in BUILT] == ["inline", "x86-nopreempt"]
    assert re.search(r"^local_BH_disable_enable +- +x86-nopreempt ", text, re.M)
    assert [v["kernel_build"] for v in env["verdicts"]] == ["inline", "x86-nopreempt"]
    assert [v["machine_fact"]["model_calls"] for v in env["verdicts"]] == [
        [], ["spin_lock_irqsave", "spin_unlock_irqrestore", "spin_lock_irq"]]


def test_each_suite_entry_runs_under_its_build_the_built_tests_on_no_lock_too():
    """A later build's plan (locks_only, built_too) holds the lock tests and
    local_BH_disable_enable, and the harness runs each under that build."""
    from smpnet.experiments.common import lockbench
    plan = lockbench.suite_plan(["tas"], ["plain", "bh"], locks_only=True, built_too=True)
    assert [t for t, a in plan if a is None] == ["local_BH_disable_enable"] == list(BUILT)
    assert ("spin_lock_unlock_bh", "tas") in plan
    for build in ("x86-nopreempt", "inline"):
        entries = lockbench.suite_entries(plan, ["tas"], None, 3, False, "sti", build)
        assert {w["kbuild"] for _, w in entries} == {_core.KERNEL_BUILDS[build]}
        assert all(("lock_region" in w) == (t not in BUILT) for t, w in entries)


@pytest.mark.parametrize("arg, message", [
    ("x86-rt", "unknown kernel build 'x86-rt'"), ("inline,", "an empty name")])
def test_a_bad_kernel_build_is_one_line_and_exit_2(capsys, arg, message):
    from smpnet.cli import main
    assert main(["locks", "--kernel-build", arg]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_contended_and_defer_take_one_build(capsys):
    from smpnet.cli import main
    for cmd in (["contended"], ["defer"]):
        assert main(cmd + ["--kernel-build", "inline,x86-preempt"]) == 2
        assert "one build here" in capsys.readouterr().err


def test_all_reports_seed_003_under_the_hosts_build_and_x86_nopreempt():
    from smpnet.experiments import locks
    p = locks.plan([0], quick=True)
    assert p.kernel_build == [p.kernel_build_record["host"]]
    nopreempt = locks._all_seed_003_build(p.kernel_build[0])
    assert p.seed_003_builds == ([] if p.kernel_build == [nopreempt] else [nopreempt])


def test_all_lists_each_of_a_seeds_verdicts_with_its_label_and_figure():
    from smpnet import run_all
    v = {"seed": "003", "claim": "irq is cheaper", "measured": 1.94, "interval": [1.3, 3.01],
         "unit": "cycles", "verdict": "smaller than the seed's"}
    done = {"locks": {"verdicts": [dict(v, label="kernel build x86-preempt"),
                                   dict(v, label="kernel build x86-nopreempt")]}}
    env = {"params": {"quick": True, "cpus": "0"}, "results": [], "warnings": [],
           "verdicts": run_all.verdict_table(done)}
    text = run_all.text(env, [])
    assert ("seed 003 (locks, kernel build x86-nopreempt): irq is cheaper: 1.94 [1.3 .. 3.01] "
            "cycles -> smaller than the seed's") in text
