"""The compiler's two commands for a user's file, as distutils builds a
Python extension on Linux, run bounded in time (build.py writes the C
source with cffi, then calls run()). docs/experiments/ab.md, "The build"."""
import os
import shlex
import shutil
import signal
import subprocess
import sysconfig
import time

# what the commands take from the environment, as distutils' customize_compiler()
BUILD_ENV = ("CC", "CFLAGS", "CPPFLAGS", "LDFLAGS", "LDSHARED")
# what else the compiler reads from it: where it looks for headers (gcc's
# and clang's variables) and for its own programs (cc1, as, ld). Not PATH
# itself, which every venv's activation changes: the programs PATH finds
# are in the cache key by what they are (identity())
SEARCH_ENV = ("CPATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH")


class Failed(Exception):
    """A command failed: .stderr is what the compiler said (may be empty)."""
    def __init__(self, why, stderr=""):
        super().__init__(why)
        self.stderr = stderr


def commands(src, obj, out, include_dirs, macros, compile_args, link_args, env=None):
    """[the compile's argv, the link's]: Python's own CC, CFLAGS, CCSHARED and
    LDSHARED, with the environment's CC, LDSHARED, LDFLAGS, CFLAGS and
    CPPFLAGS over them as customize_compiler() puts them (Lib/distutils/
    sysconfig.py), the include path of Python's headers after `include_dirs`,
    and `compile_args`/`link_args` last, so that they win."""
    env = os.environ if env is None else env
    cc, cflags, ccshared, ldshared = _tools(env)
    python = [sysconfig.get_path("include"), sysconfig.get_path("platinclude")]
    dirs = list(dict.fromkeys(list(include_dirs) + python))
    cc, ldshared = _split(cc, env), _split(ldshared, env)
    for var, what, words in (("CC", "compiler", cc), ("LDSHARED", "linker", ldshared)):
        if not words:   # its first word would be a flag's, run as the program
            raise Failed(f"{var} is empty: no {what} to run")
    cc[:1], ldshared[:1] = map(_program, cc[:1]), map(_program, ldshared[:1])
    return ([*cc, *_split(cflags, env), *_split(ccshared, env),
             *(f"-D{n}" if v is None else f"-D{n}={v}" for n, v in macros),
             *(f"-I{d}" for d in dirs), "-c", src, "-o", obj, *compile_args],
            [*ldshared, obj, "-o", out, *link_args])


def _tools(env):
    """(CC, CFLAGS, CCSHARED, LDSHARED) as the build runs them: Python's, the
    environment's over them."""
    cc, cflags, ccshared, ldshared = (sysconfig.get_config_var(v) or ""
                                      for v in ("CC", "CFLAGS", "CCSHARED", "LDSHARED"))
    if "CC" in env:
        if "LDSHARED" not in env and ldshared.startswith(cc):
            ldshared = env["CC"] + ldshared[len(cc):]
        cc = env["CC"]
    if "LDSHARED" in env:
        ldshared = env["LDSHARED"]
    if "LDFLAGS" in env:
        ldshared += " " + env["LDFLAGS"]
    for v in ("CFLAGS", "CPPFLAGS"):
        if v in env:
            cflags += " " + env[v]
            ldshared += " " + env[v]
    return cc, cflags, ccshared, ldshared


def identity(env=None):
    """What the build's output depends on beyond its command lines: each
    program its commands name (a wrapper's compiler too: `ccache gcc`) and
    the assembler and linker gcc runs (`as`, `ld`), as the build's PATH
    finds them, each by its path, size and time (another compiler first on
    PATH, or the same one upgraded in place, builds anew), and where the
    compiler searches (SEARCH_ENV), with the variables the commands take
    (BUILD_ENV). A word that names no program, or flags that do not split,
    are left out: the build says why it fails."""
    env = os.environ if env is None else env
    # the build runs in a directory of its own, where a relative PATH entry finds nothing
    path = os.pathsep.join(d for d in env.get("PATH", os.defpath).split(os.pathsep)
                           if os.path.isabs(d))
    cc, _, _, ldshared = _tools(env)
    words = []
    for line in (cc, ldshared):
        try:
            words += _split(line, env)
        except Failed:
            pass
    programs = {}
    for word in dict.fromkeys(words + ["as", "ld"]):
        found = shutil.which(_program(word), path=path)
        try:
            st = os.stat(found) if found else None     # an alternatives link: its binary
        except OSError:
            st = None
        if st:
            programs[word] = [found, st.st_size, st.st_mtime_ns]
    return [programs, {v: env.get(v) for v in BUILD_ENV + SEARCH_ENV}]


def _program(word):
    """A command's program as the build runs it: a relative path (./cc)
    made absolute here, since the build runs in a directory of its own."""
    return os.path.abspath(word) if "/" in word else word


def _split(flags, env):
    """A command line's words, as a shell splits them; Failed, naming the
    environment's flags, where they cannot be (an unclosed quote)."""
    try:
        return shlex.split(flags)
    except ValueError as e:
        where = ", ".join(v for v in BUILD_ENV if v in env) or "Python's own"
        raise Failed(f"the build's flags ({where}) cannot be split into words: {e}") from None


def run(argvs, timeout, cwd):
    """Each argv in turn, in a process group of its own (a compiler's own
    children die with it), all within `timeout` seconds: the compilers'
    stderr, together. Raises Failed (a command failed or is missing) or
    subprocess.TimeoutExpired."""
    deadline = time.monotonic() + timeout
    said = []
    for argv in argvs:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(argv, timeout)
        try:
            p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, errors="replace", start_new_session=True)
        except OSError as e:
            raise Failed(f"{argv[0]}: {e.strerror or e}") from None
        with p:     # the pipe closed on every way out
            try:
                out, _ = p.communicate(timeout=left)
            except BaseException:
                # past the bound, or interrupted: the group killed and reaped,
                # never read again (a process outside it may hold the pipe)
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                raise
        said.append(out)
        if p.returncode:
            how = (f"was killed by signal {-p.returncode}" if p.returncode < 0
                   else f"exited with status {p.returncode}")
            raise Failed(f"{os.path.basename(argv[0])} {how}", "".join(said))
    return "".join(said)
