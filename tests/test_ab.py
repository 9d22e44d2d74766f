"""ab: a user's C file, built at run time, its variants paired against the
first. Bad input is refused with one line and exit 2 before anything runs;
a crash, a hang or a failed check names the variant; an unchanged file is
not built twice; the examples run. No test asserts a timing."""
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import smpnet
from smpnet.cli import main
from smpnet.errors import BadInput
from smpnet.experiments.ab import build, figures
from smpnet.machine import kernel_build

from conftest import X86, open_segments, thunk_addresses

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
LABELS = {figures.FASTER, figures.SLOWER, "no measurable difference"}
FAST = ["--loops", "2000", "--rounds", "12"]   # 6 ABBA blocks: the least a verdict needs

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


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """One build cache for the module: each file compiles once here."""
    with pytest.MonkeyPatch.context() as mp:
        d = tmp_path_factory.mktemp("ab-cache")
        mp.setenv("SMPNET_CACHE_DIR", str(d))
        yield d


def write(tmp_path, text, name="change.c"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("smpnet-bench: ")
    return err


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


def test_the_cache_key_follows_source_headers_flags_and_build_options(tmp_path, monkeypatch):
    src = (EXAMPLES / "aa.c").read_text()
    key = build.build_key(src, build.options_macros(3, False, False), False)
    assert key == build.build_key(src, build.options_macros(3, False, False), False)
    assert key != build.build_key(src + "\n", build.options_macros(3, False, False), False)
    for other in (build.options_macros(0, False, False), build.options_macros(3, True, False),
                  build.options_macros(3, False, True)):
        assert key != build.build_key(src, other, False)
    assert key != build.build_key(src, build.options_macros(3, False, False), True)
    monkeypatch.setattr(build.build_flags, "compile_args", lambda debug: ["-O1"])
    assert key != build.build_key(src, build.options_macros(3, False, False), False)
    monkeypatch.undo()
    # another core (rebuilt: another debug setting, another compiler)
    monkeypatch.setattr(build, "_core_identity", lambda: [1, 2])
    assert key != build.build_key(src, build.options_macros(3, False, False), False)
    monkeypatch.undo()
    headers = tmp_path / "kernel"
    shutil.copytree(build.INCLUDE_DIRS[1], headers)
    monkeypatch.setattr(build, "INCLUDE_DIRS", [build.INCLUDE_DIRS[0], str(headers)])
    assert key == build.build_key(src, build.options_macros(3, False, False), False)
    (headers / "spinlock.h").write_text((headers / "spinlock.h").read_text() + "\n")
    assert key != build.build_key(src, build.options_macros(3, False, False), False)


BH = """#include <smpnet.h>
SMPNET_STATE(struct smpnet_none, struct smpnet_none);
SMPNET_VARIANT(bh) { local_bh_disable(); local_bh_enable(); }
SMPNET_VARIANT(preempt) { preempt_disable(); preempt_enable(); }
"""


@pytest.mark.skipif(not X86 or not shutil.which("objdump"), reason="reads x86 code")
def test_a_users_local_bh_enable_follows_the_kernel_build():
    """A user's local_bh_enable() is the kernel's: a call of
    __local_bh_enable_ip() in every x86 build (returning through its
    build's thunk in a +safe-ret or +ret-thunk one), the body inline in
    `inline` alone."""
    thunk_of = {"+safe-ret": "smpnet_srso_return_thunk", "+ret-thunk": "smpnet_ret_thunk"}
    for name, called in (("inline", None), ("x86-nopreempt", "__local_bh_enable_ip_0_0"),
                         ("x86-preempt+safe-ret", "__local_bh_enable_ip_0_1"),
                         ("x86-debug+ret-thunk", "__local_bh_enable_ip_0_2")):
        want = thunk_of.get(kernel_build.split(name)[1])
        if want and not smpnet._core.RETURN_THUNK_MODELLED:
            continue
        obj = build.build(BH, "bh.c", smpnet._core.LOCK_ALGOS["qspinlock"],
                          kbuild=smpnet._core.KERNEL_BUILDS[name])
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj.path],
                             capture_output=True, text=True, check=True).stdout
        calls = set(re.findall(r"\b(?:call|jmp) +[0-9a-f]+ <(__local_bh_enable_ip_\w+)>", asm))
        assert calls == ({called} if called else set()), name
        if called:   # the copy returns as its build returns: by its thunk, or a ret
            body = re.search(rf"<{called}>:\n(.*?)(?:\n\n|\Z)", asm, re.S)[1]
            jumps = {t for t, a in thunk_addresses(obj.path).items()
                     if re.search(rf"\bjmp +0*{a} <", body)}
            assert jumps == ({want} if want else set()), name
            assert bool(re.search(r"\tret\b", body)) != bool(want), name


def test_an_object_of_another_layout_is_refused():
    class Lib:
        def smpnet_abi_hash(self):
            return smpnet._core.AB_ABI_HASH ^ 1

    module = type("M", (), {"ffi": None, "lib": Lib()})
    with pytest.raises(BadInput, match="built against another layout"):
        build._describe(module, "x.c", "k", "/x.so", False, 0.0)


# ---------------------------------------------------------------- the build

def test_a_second_run_of_an_unchanged_file_does_not_compile(tmp_path, monkeypatch):
    src = (EXAMPLES / "aa.c").read_text()
    first = build.build(src, "aa.c", 3)
    build._LOADED.clear()   # as a new process would start
    monkeypatch.setattr(build, "_compile", lambda *a: pytest.fail("compiled again"))
    again = build.build(src, "aa.c", 3)
    assert again.compiled is False and again.path == first.path
    assert [v.name for v in again.variants] == ["a", "b"]
    monkeypatch.undo()
    other = build.build(src, "aa.c", 0)   # another lock algorithm: another object
    assert other.compiled is True and other.path != first.path


def _planted(tmp_path, monkeypatch, marker):
    """A private cache and the path build() would load a new file's object
    from: (its source, the path)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SMPNET_CACHE_DIR", str(cache))
    src = (EXAMPLES / "aa.c").read_text() + f"/* {marker} */\n"
    key = build.build_key(src, build.options_macros(3, False, False), build._core.CORE_DEBUG)
    real = build.trusted(cache)
    return src, real / (f"_smpnet_ab_{key[:24]}" + build.sysconfig.get_config_var("EXT_SUFFIX"))


def test_a_cache_others_can_write_is_refused_in_one_line(capsys, tmp_path, monkeypatch):
    """Root must not load an object another user could have put there."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("SMPNET_CACHE_DIR", str(shared / "ab"))
    f = write(tmp_path, (EXAMPLES / "aa.c").read_text() + "/* open cache */\n")
    assert main(["ab", f, "--no-contended"] + FAST) == 2
    (err,) = one_error_line(capsys)
    assert "is not safe to load code from" in err and f"{shared} can be written by others" in err
    # a sticky one above it (as /tmp) is fine: others cannot replace what is in it
    shared.chmod(0o1777)
    assert build.trusted(shared / "ab") == shared / "ab"
    (shared / "ab").chmod(0o777)
    with pytest.raises(BadInput, match="can be written by others"):
        build.trusted(shared / "ab")


def test_a_planted_object_is_not_loaded(tmp_path, monkeypatch):
    import os
    src, path = _planted(tmp_path, monkeypatch, "a link")
    os.symlink(tmp_path / "elsewhere.so", path)
    with pytest.raises(BadInput, match="is not safe to load: a symbolic link; delete it"):
        build.build(src, "aa.c", 3)
    src, path = _planted(tmp_path, monkeypatch, "writable")
    path.write_bytes(b"not an object")
    path.chmod(0o666)
    with pytest.raises(BadInput, match=r"is not safe to load: it can be written by others"):
        build.build(src, "aa.c", 3)
    if os.geteuid() == 0:       # another user's object, where root can make one
        src, path = _planted(tmp_path, monkeypatch, "another's")
        path.write_bytes(b"not an object")
        os.chown(path, 65534, 65534)
        with pytest.raises(BadInput, match="is not safe to load: it belongs to uid 65534"):
            build.build(src, "aa.c", 3)


def test_the_cache_key_follows_the_environments_compiler_and_flags(monkeypatch):
    src = (EXAMPLES / "aa.c").read_text()
    key = build.build_key(src, build.options_macros(3, False, False), False)
    for var in ("CC", "CFLAGS", "LDFLAGS"):
        monkeypatch.setenv(var, "-O0")
        assert build.build_key(src, build.options_macros(3, False, False), False) != key, var
        monkeypatch.delenv(var)
    assert build.build_key(src, build.options_macros(3, False, False), False) == key


def test_a_file_name_with_quotes_and_a_newline_stays_a_name(capsys, tmp_path):
    """The name goes into the generated C's #line: escaped, it is one
    string and no code, and the compiler's messages carry it."""
    name = 'we"ird\\na\nme.c'
    f = write(tmp_path, "#include <smpnet.h>\nSMPNET_STATE(struct smpnet_none, "
              "struct smpnet_none);\nSMPNET_VARIANT(a) { }\nSMPNET_VARIANT(b) { oops; }\n", name)
    assert main(["ab", f, "--no-contended"] + FAST) == 2
    err = capsys.readouterr().err
    assert "oops" in err and "undeclared" in err and "does not compile" in err
    assert 'we"ird\\na\nme.c: In function' in err      # the compiler's messages name it
    assert build.c_string(name) == 'we\\"ird\\\\na\\012me.c'


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
            where = rounds.Where(m, obj)
            smpnet._core.ab_round(obj.variants[0].loop, 10, m.segment.buf, 0, **where.state(0))
            bugs = dict(zip(layout.LOCKDEP_BUGS, m.region("irq")["bugs"].sum(axis=0).tolist()))
        assert (bugs["unbalanced_irq_restore"] > 0) == check, check


HOLDS = """#include <smpnet.h>
struct shared { unsigned long n, held; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_VARIANT(plain) { shared->n++; }
SMPNET_VARIANT(holds) { uint64_t t = tsc_read_unordered(); hold();
			shared->held += tsc_read_unordered() - t; }
"""


def test_hold_cycles_change_only_the_variants_that_hold(allowed):
    """--hold-cycles is hold()'s: a variant that never calls it keeps its
    contended loop (the deadline read every 16th op: its ops a multiple of
    16 at the deadline), and a hold never runs past the run's end."""
    from smpnet import Machine
    from smpnet.experiments.ab import rounds

    obj = build.build(HOLDS, "holds.c", smpnet._core.LOCK_ALGOS["qspinlock"])
    plain, holds = obj.variants
    with Machine(cpus=allowed[:1], regions=rounds.regions(obj, 2, 1)) as m:
        where = rounds.Where(m, obj)
        for hold in (0, 1000):
            ops, _, _, stopped = smpnet._core.ab_contended(
                plain.contended, 0.01, m.segment.buf, 0, hold_cycles=hold, **where.state(0))
            assert not stopped and ops > 0 and ops % 16 == 0, hold
        # a hold five times the run: cut at the run's end, not held whole 16 times
        hold = int(0.05 * float(m.header["tsc_hz"]))
        ops, cycles, _, stopped = smpnet._core.ab_contended(
            holds.contended, 0.01, m.segment.buf, 0, hold_cycles=hold, **where.state(1))
        assert not stopped and ops == 16
        held = int.from_bytes(m.region("ab_shared")[1]["bytes"][8:16].tobytes(), "little")
        assert held <= cycles


IRQSAVE = """#include <smpnet.h>
struct shared { spinlock_t lock; };
SMPNET_STATE(struct shared, struct smpnet_none);
SMPNET_INIT(irqsave) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(irqsave) { unsigned long flags;
	spin_lock_irqsave(&shared->lock, flags); spin_unlock_irqrestore(&shared->lock, flags); }
SMPNET_INIT(irq) { spin_lock_init(&shared->lock); }
SMPNET_VARIANT(irq) { spin_lock_irq(&shared->lock); spin_unlock_irq(&shared->lock); }
"""


def _object_functions(path):
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True,
                         text=True, check=True).stdout
    return dict(re.findall(r"^[0-9a-f]+ <([^>]+)>:\n(.*?)(?:\n\n|\Z)", asm, re.S | re.M))


def test_a_users_irqsave_saves_the_flags_and_restores_them_as_built():
    """The user's spin_lock_irqsave() runs pushf (not the no-pushf control
    time_bench has), spin_lock_irq() does not, and the unlock restores with
    popf exactly where the object was built with --restore popf."""
    from conftest import reaches
    qspinlock = smpnet._core.LOCK_ALGOS["qspinlock"]
    for popf in (False, True):
        fns = _object_functions(build.build(IRQSAVE, "irqsave.c", qspinlock, popf=popf).path)
        timed = {v: next(f for f in fns if f.startswith(f"smpnet_timed_{v}"))
                 for v in ("irqsave", "irq")}
        assert reaches(fns, timed["irqsave"], r"\tpushf")
        assert not reaches(fns, timed["irq"], r"\tpushf")
        assert reaches(fns, timed["irqsave"], r"\tpopf") == popf, popf


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
    fns = _object_functions(build.build(text, "atomics.c",
                                        smpnet._core.LOCK_ALGOS["qspinlock"]).path)

    def timed(v):
        return fns[next(f for f in fns if f.startswith(f"smpnet_timed_{v}"))]
    assert re.search(r"lock (add|inc)l", timed("inc"))
    assert re.search(r"lock xadd", timed("fetch_add"))
    assert re.search(r"lock (dec|sub)l", timed("dec_and_test")) and "cmpxchg" not in timed(
        "dec_and_test")
    assert re.search(r"lock cmpxchg", timed("fetch_or"))
    f = write(tmp_path, text, "atomics.c")
    cpus = (["--cpus", "0,1"] if len(allowed) > 1
            else ["--cpus", str(allowed[0]), "--ncpus", "2", "--oversubscribe"])
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
    cpus = (["--cpus", "0,1"] if len(allowed) > 1
            else ["--cpus", str(allowed[0]), "--ncpus", "2", "--oversubscribe"])
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
    fns = _object_functions(build.build(text, "stats.c",
                                        smpnet._core.LOCK_ALGOS["qspinlock"]).path)
    loop = fns[next(f for f in fns if f.startswith("smpnet_timed_local"))]
    assert re.search(r"\tincq", loop) and not re.search(r"\block\b", loop)
    f = write(tmp_path, text, "stats.c")
    cpus = (["--cpus", "0,1"] if len(allowed) > 1
            else ["--cpus", str(allowed[0]), "--ncpus", "2", "--oversubscribe"])
    assert main(["ab", f, *cpus, "--duration", "0.01", "--repeat", "2"] + FAST) == 0


def test_the_kernels_barriers_compile_to_x86s_instructions():
    """smp_mb() is x86's locked add to the stack; smp_rmb(), smp_wmb(),
    the atomics' smp_mb__*() and release/acquire are no instruction at
    all (arch/x86/include/asm/barrier.h)."""
    fns = _object_functions(build.build(BARRIERS, "barriers.c",
                                        smpnet._core.LOCK_ALGOS["qspinlock"]).path)

    def timed(v):
        return fns[next(f for f in fns if f.startswith(f"smpnet_timed_{v}"))]
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
    cpus = (["--cpus", "0,1"] if len(allowed) > 1
            else ["--cpus", str(allowed[0]), "--ncpus", "2", "--oversubscribe"])
    assert main(["ab", f, *cpus, "--duration", "0.01", "--repeat", "2"] + FAST) == 1
    assert one_error_line(capsys)[-1].endswith(
        "variant 'a': its SMPNET_CHECK failed after the contended rounds: more than one "
        "CPU ran it")


def test_one_ab_run_builds_its_file_once(tmp_path, monkeypatch):
    calls = []
    real = build.build
    monkeypatch.setattr(build, "build", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    monkeypatch.setenv("SMPNET_CACHE_DIR", str(tmp_path))
    assert main(["ab", str(EXAMPLES / "aa.c"), "--cpus", "0"] + FAST) == 0
    assert calls == [str(EXAMPLES / "aa.c")]


def test_a_compile_error_shows_the_compilers_messages_then_one_line(capsys, tmp_path):
    f = write(tmp_path, "#include <smpnet.h>\nstruct s { int x; };\n"
                        "SMPNET_STATE(struct s, struct smpnet_none);\n"
                        "SMPNET_VARIANT(a) { shared->x++; }\nSMPNET_VARIANT(b) { shared->y++; }\n")
    assert main(["ab", f, "--cpus", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any(f"{f}:5:" in line and "error" in line and "'y'" in line.replace("‘", "'")
               .replace("’", "'") for line in err)
    assert err[-1] == f"smpnet-bench: {f}: does not compile (the compiler's messages are above)"


@pytest.mark.parametrize("source, built", [("int f(void) { return 1; }", True),
                                           ("int f(void) { return y; }", False)])
def test_the_compile_child_answers_one_json_object_and_stderr_is_the_compilers(tmp_path,
                                                                              source, built):
    job = {"modname": "_t_child", "source": source, "include_dirs": [], "define_macros": [],
           "extra_compile_args": [], "cdef": "int f(void);", "tmpdir": str(tmp_path)}
    child = pathlib.Path(build.__file__).with_name("compile.py")
    r = subprocess.run([sys.executable, str(child)], input=json.dumps(job),
                       capture_output=True, text=True, timeout=120)
    answer = json.loads(r.stdout)           # the whole of stdout: one object
    assert list(answer) == (["path"] if built else ["error"])
    assert (r.returncode == 0) == built
    if built:
        assert pathlib.Path(answer["path"]).is_file() and r.stderr == ""
    else:
        assert "error" in r.stderr and "'y'" in r.stderr.replace("‘", "'").replace("’", "'")
        # the build's own lines are not there: only the compiler's
        assert not [line for line in r.stderr.splitlines()
                    if line.startswith(("gcc ", "running ", "building ", "Traceback"))]


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
    _check_outcome(out, ["shared_atomic", "percpu"], ["uncontended", "contended"])
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
