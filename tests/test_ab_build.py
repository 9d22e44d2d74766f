"""ab's build of a user's file: the cache (its key, what it may load) and
an unchanged file not built twice; the compiler's two commands, their
environment, their bound and their failures, each one line; the file's
name in the compiler's messages (docs/experiments/ab.md, "The build")."""
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import time

import pytest

import smpnet
from smpnet.cli import main
from smpnet.errors import BadInput
from smpnet.experiments.ab import build, compiler

from ab_helpers import EXAMPLES, FAST, cache, one_error_line, write  # noqa: F401


def test_the_cache_key_follows_source_name_headers_flags_and_build_options(tmp_path, monkeypatch):
    src = (EXAMPLES / "aa.c").read_text()
    key = build.build_key(src, "aa.c", build.options_macros(3, False, False), False)
    assert key == build.build_key(src, "aa.c", build.options_macros(3, False, False), False)
    assert key != build.build_key(src + "\n", "aa.c", build.options_macros(3, False, False), False)
    # the name its messages give it: a copy under another name names itself
    assert key != build.build_key(src, "copy/aa.c", build.options_macros(3, False, False), False)
    for other in (build.options_macros(0, False, False), build.options_macros(3, True, False),
                  build.options_macros(3, False, True)):
        assert key != build.build_key(src, "aa.c", other, False)
    assert key != build.build_key(src, "aa.c", build.options_macros(3, False, False), True)
    monkeypatch.setattr(build.build_flags, "compile_args", lambda debug: ["-O1"])
    assert key != build.build_key(src, "aa.c", build.options_macros(3, False, False), False)
    monkeypatch.undo()
    # another core (rebuilt: another debug setting, another compiler)
    monkeypatch.setattr(build, "_core_identity", lambda: [1, 2])
    assert key != build.build_key(src, "aa.c", build.options_macros(3, False, False), False)
    monkeypatch.undo()
    headers = tmp_path / "kernel"
    shutil.copytree(build.INCLUDE_DIRS[1], headers)
    monkeypatch.setattr(build, "INCLUDE_DIRS", [build.INCLUDE_DIRS[0], str(headers)])
    assert key == build.build_key(src, "aa.c", build.options_macros(3, False, False), False)
    (headers / "spinlock.h").write_text((headers / "spinlock.h").read_text() + "\n")
    assert key != build.build_key(src, "aa.c", build.options_macros(3, False, False), False)


def test_an_object_of_another_layout_is_refused():
    class Lib:
        def smpnet_abi_hash(self):
            return smpnet._core.AB_ABI_HASH ^ 1

    module = type("M", (), {"ffi": None, "lib": Lib()})
    with pytest.raises(BadInput, match="built against another layout"):
        build._describe(module, "x.c", "k", "/x.so", False, 0.0)


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
    private = tmp_path / "cache"
    monkeypatch.setenv("SMPNET_CACHE_DIR", str(private))
    src = (EXAMPLES / "aa.c").read_text() + f"/* {marker} */\n"
    key = build.build_key(src, "aa.c", build.options_macros(3, False, False), build._core.CORE_DEBUG)
    real = build.trusted(private)
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
    _clean_build_env(monkeypatch)
    src = (EXAMPLES / "aa.c").read_text()
    key = build.build_key(src, "aa.c", build.options_macros(3, False, False), False)
    for var in ("CC", "CFLAGS", "LDFLAGS"):
        monkeypatch.setenv(var, "-O0")
        assert build.build_key(src, "aa.c", build.options_macros(3, False, False), False) != key, var
        monkeypatch.delenv(var)
    assert build.build_key(src, "aa.c", build.options_macros(3, False, False), False) == key


def _clean_build_env(monkeypatch):
    """The build's environment variables as a user's shell may have set
    them, unset: each test sets its own."""
    for var in compiler.BUILD_ENV + compiler.SEARCH_ENV:
        monkeypatch.delenv(var, raising=False)


def _program(path, text="#!/bin/sh\nexit 1\n"):
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_the_cache_key_follows_the_programs_path_finds_and_the_search_path(tmp_path,
                                                                          monkeypatch):
    """Another compiler first on PATH (behind a wrapper too), the same one
    upgraded in place (through the link an alternatives system makes),
    another linker, assembler or header search path: each builds anew; the
    same programs on another PATH (another venv's) do not."""
    _clean_build_env(monkeypatch)
    src = (EXAMPLES / "aa.c").read_text()

    def key():
        return build.build_key(src, "aa.c", build.options_macros(3, False, False), False)
    cc = shlex.split(sysconfig.get_config_var("CC"))[0]
    first = key()
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "empty"), os.environ["PATH"]]))
    assert key() == first
    # another compiler first on PATH, reached through a link: touching its
    # binary (an upgrade in place) builds anew
    real = _program(tmp_path / "lib" / "cc-99")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / os.path.basename(cc)).symlink_to(real)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "bin"), os.environ["PATH"]]))
    other = key()
    assert other != first
    os.utime(real, ns=(10**18, 10**18))
    assert key() != other
    other = key()
    # behind a wrapper, the same
    monkeypatch.setenv("CC", f"env {cc}")
    wrapped = key()
    os.utime(real, ns=(2 * 10**18, 2 * 10**18))
    assert key() != wrapped
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", os.environ["PATH"].split(os.pathsep, 1)[1])
    assert key() == first
    # the linker alone, and gcc's assembler and linker as PATH finds them
    ld = _program(tmp_path / "ld-bin" / "my-ld")
    monkeypatch.setenv("LDSHARED", f"{ld} -shared")
    linked = key()
    os.utime(ld, ns=(10**18, 10**18))
    assert key() != linked
    monkeypatch.delenv("LDSHARED")
    for tool in ("as", "ld"):
        _program(tmp_path / tool / tool)
        monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / tool), os.environ["PATH"]]))
        assert key() != first, tool
        monkeypatch.setenv("PATH", os.environ["PATH"].split(os.pathsep, 1)[1])
    assert key() == first
    for var in ("CPATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH"):
        monkeypatch.setenv(var, str(tmp_path))
        assert key() != first, var
        monkeypatch.delenv(var)
    assert key() == first


def test_a_relative_compiler_is_the_users_not_the_build_directorys(tmp_path, monkeypatch):
    """CC=./cc names the user's file: the build, which runs in a directory
    of its own, runs it by its absolute path, and the key follows it."""
    _clean_build_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    _program(tmp_path / "cc")
    comp, link = compiler.commands("f.c", "f.o", "f.so", [], [], [], [],
                                   env={"CC": "./cc -m64", "PATH": os.defpath})
    assert comp[:2] == [str(tmp_path / "cc"), "-m64"]
    monkeypatch.setenv("CC", "./cc")
    assert compiler.identity()[0]["./cc"][0] == str(tmp_path / "cc")


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


def test_a_file_name_not_utf8_is_its_bytes_in_the_build(tmp_path):
    """A name whose bytes are not UTF-8 (argv's surrogate escapes) goes into
    the #line as those bytes: the build's messages name the file, no traceback."""
    name = os.fsdecode(b"a\xff.c")
    assert build.c_string(name) == "a\\377.c"
    f = write(tmp_path, "#include <smpnet.h>\nSMPNET_STATE(struct smpnet_none, "
              "struct smpnet_none);\nSMPNET_VARIANT(a) { }\nSMPNET_VARIANT(b) { oops; }\n", name)
    # a child, as a user runs it: its stderr writes what it cannot encode escaped
    p = subprocess.run([sys.executable, "-m", "smpnet", "ab", f, "--no-contended"] + FAST,
                       capture_output=True, cwd=tmp_path, timeout=120)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2, err
    assert "oops" in err and "undeclared" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("does not compile (the compiler's messages "
                                                 "are above)")


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


def test_the_compilers_commands_take_the_environment_as_distutils_does():
    """CC replaces the compiler, in the link too; LDFLAGS, CFLAGS and CPPFLAGS
    are added, in that order; the build's own flags come last, to win."""
    cc, ldshared = sysconfig.get_config_var("CC"), sysconfig.get_config_var("LDSHARED")

    def cmds(env):
        return compiler.commands("f.c", "f.o", "f.so", ["/inc"], [("A", "1"), ("B", None)],
                                 ["-O2"], ["-Wl,-T,x.ld"], env=env)
    comp, link = cmds({})
    assert comp[:len(shlex.split(cc))] == shlex.split(cc)
    assert comp[-5:] == ["-c", "f.c", "-o", "f.o", "-O2"]
    # the file's include path before Python's headers', as an Extension's
    python = "-I" + sysconfig.get_path("include")
    assert [a for a in comp if a in ("-DA=1", "-DB", "-I/inc", python)] == \
        ["-DA=1", "-DB", "-I/inc", python]
    assert link == shlex.split(ldshared) + ["f.o", "-o", "f.so", "-Wl,-T,x.ld"]
    comp, link = cmds({"CC": "clang -m64", "CFLAGS": "-Dcf", "CPPFLAGS": "-Dcpp",
                       "LDFLAGS": "-Lld"})
    assert comp[:2] == ["clang", "-m64"] and comp.index("-Dcf") < comp.index("-Dcpp")
    if ldshared.startswith(cc):
        assert link[:2] == ["clang", "-m64"]
    assert link[link.index("-Lld"):link.index("f.o")] == ["-Lld", "-Dcf", "-Dcpp"]
    assert cmds({"LDSHARED": "ld -shared"})[1][:2] == ["ld", "-shared"]


def _gone(pid):
    """Whether `pid` has ended: no such process, or a zombie its new parent
    (init, once its own parent was killed) has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_compiler_past_the_bound_is_stopped_with_its_children(tmp_path):
    """The compiler's own children (cc1, as) are in its process group: all
    stopped; one outside it that keeps the pipe open (a daemon a compiler
    wrapper starts) does not hold the build past its bound."""
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    argv = ["sh", "-c", f"sleep 60 & echo $! > {inside}; setsid sleep 60 & echo $! > {outside}; "
                        "wait"]
    t0 = time.monotonic()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            compiler.run([argv], 2, str(tmp_path))
        assert time.monotonic() - t0 < 20      # not the 60 s the outsider holds the pipe
        child = int(inside.read_text())
        deadline = time.monotonic() + 10
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(child)
    finally:
        if outside.exists():
            os.kill(int(outside.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("env, says", [
    ({"CFLAGS": '-DX="'}, "the build's flags (CFLAGS) cannot be split into words: "
                          "No closing quotation"),
    ({"CC": str(pathlib.Path("/nonexistent") / "no-cc")}, "not built: /nonexistent/no-cc: "
                                                          "No such file or directory"),
    ({"CC": " "}, "not built: CC is empty: no compiler to run"),
    ({"LDSHARED": ""}, "not built: LDSHARED is empty: no linker to run")])
def test_flags_that_cannot_run_are_one_line(capsys, tmp_path, monkeypatch, env, says):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SMPNET_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["ab", str(EXAMPLES / "aa.c"), "--cpus", "0"] + FAST) == 2
    assert one_error_line(capsys)[-1].endswith(says)


def test_a_compiler_killed_by_a_signal_is_named_so(tmp_path):
    with pytest.raises(compiler.Failed, match="^sh was killed by signal 9$"):
        compiler.run([["sh", "-c", "kill -9 $$"]], 30, str(tmp_path))
