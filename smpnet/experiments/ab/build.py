"""A user's C file, built at run time into an object the core can call.

cffi writes it as a C extension (its API mode: the file, and the glue that
hands back its function pointers as integers), and the C compiler builds
it with the flags Python's own extensions are built with, which are the
core's, plus build_flags' (compiler.py: distutils' two commands, without
distutils, bounded in time, the compiler's diagnostics whole).

The object is cached in the user's cache directory under a hash of the
source, every installed header, the flags (the environment's too), the
programs that build it (compiler.identity()), the core and the Python and
cffi versions: an unchanged file does not compile again; a changed
header, flag, compiler or build option does. Code is loaded from
the cache only where no one else could have put it there (trusted()).
"""
import contextlib
import errno
import hashlib
import io
import importlib.machinery
import importlib.util
import json
import os
import pathlib
import re
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field, replace

import cffi

from ... import _core, build_flags
from ...errors import BadInput
from . import compiler, cpu_roles

MAX_SOURCE_BYTES = 256 * 1024     # a user's file, whole
COMPILE_TIMEOUT_S = 60.0          # one build, compiler and link
MAX_STATE_BYTES = 16 << 20        # every copy of the state, shared and per-CPU, together

PKG = pathlib.Path(__file__).resolve().parent.parent.parent
INCLUDE_DIRS = [str(PKG / "include"), str(PKG / "kernel")]
# the per-CPU section on pages of its own (smpnet.h's per-CPU data)
PERCPU_SCRIPT = PKG / "include" / "smpnet_percpu.ld"

# What Python reads of the object (smpnet.h defines it; ab.h's structures)
CDEF = """
struct smpnet_variant_info {
    char name[32];
    int line;
    int algo;
    uintptr_t loop;
    uintptr_t contended;
    uintptr_t init;
    uintptr_t check;
    ...;
};
struct smpnet_build_info { int algo; int check; int popf; int kbuild; };
const struct smpnet_build_info *smpnet_build(void);
uint64_t smpnet_abi_hash(void);
int smpnet_overflow(void);
int smpnet_nr_variants(void);
const struct smpnet_variant_info *smpnet_variant(int i);
int smpnet_orphan_hook(void);
const char *smpnet_bug_report(void);
const char *smpnet_warn_take(unsigned long *count);
size_t smpnet_shared_size(void);
size_t smpnet_percpu_size(void);
size_t smpnet_percpu_area_size(void);
const char *smpnet_init_failure(void);
const void *smpnet_percpu_template(void);
int smpnet_nr_roles(void);
const char *smpnet_role_names(void);
const char *smpnet_unit(void);
const char *smpnet_skb_defer(void);
"""

VARIANT_RE = re.compile(r"^[ \t]*SMPNET_VARIANT(?:_ALGO)?[ \t]*\([ \t]*(\w+)[ \t]*[,)]", re.M)
# RCU's writer side: grace periods are not modelled (smpnet_rcu.h), so a
# file that waits for one or defers a free to one is refused before it builds
RCU_WRITER_RE = re.compile(r"\b(synchronize_rcu(?:_expedited)?|synchronize_net|call_rcu"
                           r"|kv?free_rcu(?:_mightsleep)?|rcu_barrier)[ \t]*\(")
COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


@dataclass
class Variant:
    name: str
    line: int
    loop: int           # the addresses of its loops and hooks in this process
    contended: int
    init: int
    check: int
    algo: int = -1      # SMPNET_VARIANT_ALGO's lock algorithm; -1: the build's


@dataclass
class UserObject:
    name: str           # the file as the user named it
    key: str            # the cache key (sha256)
    path: str           # the object in the cache
    compiled: bool      # built by this call (False: found in the cache)
    build_s: float      # what finding or building it took
    shared_size: int
    percpu_size: int
    variants: list = field(default_factory=list)
    module: object = None   # keeps the object loaded
    build_info: int = 0     # the address of its smpnet_build_info, which the core reads
    options: dict = field(default_factory=dict)   # that: algo, check, popf, kbuild
    pcpu_template: bytes = b""  # its per-CPU section as built (DEFINE_PER_CPU), whole pages
    cpu_roles: tuple = ()   # SMPNET_ROLES' names, in order; (): none, one role
    unit: str = ""          # SMPNET_UNIT's name of the unit of work; "": the op
    skb_defer: str = ""     # the model's skbs' defer strategy (smpnet_skbuff.h); "": none


def cache_dir():
    """$SMPNET_CACHE_DIR, or smpnet/ab under $XDG_CACHE_HOME (~/.cache)."""
    if os.environ.get("SMPNET_CACHE_DIR"):
        return pathlib.Path(os.environ["SMPNET_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "smpnet" / "ab"


def _unsafe(st, what, dir_above=False):
    """Why `st` (an lstat) cannot be trusted to hold code this process
    loads, or None: owned by another user, or writable by others (a
    directory above the cache may be, if sticky: others can add entries
    there, not replace ours)."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"{what} belongs to uid {st.st_uid}"
    if st.st_mode & 0o022 and not (dir_above and st.st_mode & stat.S_ISVTX):
        return f"{what} can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def trusted(cache):
    """The cache directory, made if missing (private), its links resolved,
    once it can hold code this process runs: it and every directory above
    it owned by this user or root and writable by no one else (a sticky
    one above it, as /tmp, may be). BadInput with one line otherwise, or
    where it cannot be made."""
    try:
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        real = pathlib.Path(os.path.realpath(cache))
        why = _unsafe(os.lstat(real), f"it ({real})")
        for above in real.parents:
            why = why or _unsafe(os.lstat(above), f"{above}", dir_above=True)
    except OSError as e:
        raise BadInput(f"the build cache {cache} cannot be used ({e.strerror or e}): set "
                       "SMPNET_CACHE_DIR to a directory of yours") from None
    if why:
        raise BadInput(f"the build cache {cache} is not safe to load code from: {why}; set "
                       "SMPNET_CACHE_DIR to a directory only you can write")
    return real


def _open_object(path):
    """A descriptor of the cached object at `path`, checked: a regular file
    (a link is not followed), this user's, writable by no one else.
    BadInput otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        why = "a symbolic link" if e.errno == errno.ELOOP else e.strerror
        raise BadInput(f"the cached object {path} is not safe to load: {why}; delete it") from None
    st = os.fstat(fd)
    why = ("not a regular file" if not stat.S_ISREG(st.st_mode)
           else f"it belongs to uid {st.st_uid}" if st.st_uid != os.geteuid()
           else _unsafe(st, "it"))
    if why:
        os.close(fd)
        raise BadInput(f"the cached object {path} is not safe to load: {why}; delete it")
    return fd


def read_source(path):
    """The text of a user's file, bounded; BadInput when it cannot be one."""
    p = pathlib.Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise BadInput(f"{path}: not a file")
        if size > MAX_SOURCE_BYTES:
            raise BadInput(f"{path}: {size} bytes, over the {MAX_SOURCE_BYTES}-byte bound "
                           "on a file ab builds")
        return p.read_text()
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot be read ({e})") from None


def scan(source, name):
    """The variants the file names, [(name, line)], checked before any
    build: at least two, no name twice (the compiler would say
    'redefinition', without the line of the first)."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise BadInput(f"{name}: over the {MAX_SOURCE_BYTES}-byte bound on a file ab builds")
    found = [(m.group(1), source.count("\n", 0, m.start()) + 1)
             for m in VARIANT_RE.finditer(source)]
    seen = {}
    for v, line in found:
        if v in seen:
            raise BadInput(f"{name}:{line}: variant {v!r} is defined twice "
                           f"(first at line {seen[v]})")
        seen[v] = line
    code = COMMENT_RE.sub(lambda m: "\n" * m.group().count("\n"), source)
    writer = RCU_WRITER_RE.search(code)
    if writer:
        raise BadInput(f"{name}:{code.count(chr(10), 0, writer.start()) + 1}: "
                       f"{writer.group(1)}(): RCU's writer side (grace periods) is not "
                       "modelled; ab times the read side (rcu_read_lock(), rcu_dereference(), "
                       "rcu_assign_pointer()): keep what a writer replaces in the state")
    if not found:
        raise BadInput(f"{name}: defines no variant (write SMPNET_VARIANT(name) {{ ... }}, "
                       "two or more: docs/experiments/ab.md)")
    if len(found) == 1:
        raise BadInput(f"{name}: defines one variant ({found[0][0]}): ab compares two or "
                       "more, the first against the others")
    return found


def compile_args(debug):
    """The core's flags, and -g0 unless a debug build: Python's CFLAGS ask
    for debug information, which changes no instruction and is 0.2 s a build."""
    return build_flags.compile_args(debug) + ([] if debug else ["-g0"])


def options_macros(algo, check, popf, kbuild=0):
    return [("SMPNET_BUILD_ALGO", str(algo)), ("SMPNET_BUILD_CHECKER", str(int(check))),
            ("SMPNET_BUILD_POPF", str(int(popf))), ("SMPNET_BUILD_KERNEL", str(int(kbuild)))]


def _headers():
    """Every header a file can include, in include-path order, and the
    linker script every object is linked with."""
    return [p for d in INCLUDE_DIRS for p in sorted(pathlib.Path(d).glob("*.h"))] + \
        [PERCPU_SCRIPT]


def build_key(source, name, macros, debug):
    """sha256 of what the object depends on: the file and the name its
    messages give it (BUG_ON()'s and WARN()'s places, #line), the headers,
    the flags and build options, the programs that build it, the core."""
    h = hashlib.sha256()
    h.update(source.encode() + b"\0" + c_string(name).encode() + b"\0")
    for p in _headers():
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(json.dumps([compile_args(debug), build_flags.define_macros(debug),
                         macros, sys.version, sysconfig.get_config_var("EXT_SUFFIX"),
                         sysconfig.get_config_var("CC"), sysconfig.get_config_var("CFLAGS"),
                         cffi.__version__, hex(_core.AB_ABI_HASH),
                         compiler.identity(), _core_identity()]).encode())
    return h.hexdigest()


def _core_identity():
    """The core's object, by size and time: a rebuilt core (another debug
    setting, another compiler) builds users' objects anew."""
    st = os.stat(_core.__file__)
    return [st.st_size, st.st_mtime_ns]


def _load(modname, path):
    """The object at `path`, once _open_object() found it safe: in a cache
    trusted() no one else can write, what was checked is what loads (by
    its path: dlopen() knows a library by its path, and a reused
    /proc/self/fd name would hand back another)."""
    os.close(_open_object(path))
    loader = importlib.machinery.ExtensionFileLoader(modname, str(path))
    spec = importlib.util.spec_from_file_location(modname, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_LOADED = {}   # key -> UserObject: one load per process


def build(source, name, algo, check=False, popf=False, timeout=COMPILE_TIMEOUT_S,
          stderr=None, kbuild=0):
    """The user's object for these build options: from the cache, or
    compiled into it. A compile error writes the compiler's diagnostics to
    `stderr` (sys.stderr) and raises BadInput."""
    scan(source, name)
    t0 = time.monotonic()
    debug = _core.CORE_DEBUG
    macros = options_macros(algo, check, popf, kbuild)
    key = build_key(source, name, macros, debug)
    if key in _LOADED:   # loaded by an earlier call: not built by this one
        return replace(_LOADED[key], compiled=False, build_s=time.monotonic() - t0)
    modname = f"_smpnet_ab_{key[:24]}"
    cache = trusted(cache_dir())
    path = cache / (modname + sysconfig.get_config_var("EXT_SUFFIX"))
    compiled = not os.path.lexists(path)
    if compiled:
        _compile(source, name, modname, macros, debug, cache, path, timeout,
                 stderr or sys.stderr)
    module = _load(modname, path)
    obj = _describe(module, name, key, str(path), compiled, time.monotonic() - t0)
    _LOADED[key] = obj
    return obj


def c_string(text):
    """`text` as a C string literal's contents: a file name with a quote, a
    backslash or a newline stays one string, and no code; a name's bytes
    that are not UTF-8 (argv's surrogate escapes) as the bytes they were."""
    return "".join(c if c.isprintable() and c not in '"\\' else
                   "\\" + c if c in '"\\' else
                   "".join(f"\\{b:03o}" for b in os.fsencode(c)) for c in text)


def _compile(source, name, modname, macros, debug, cache, path, timeout, stderr):
    with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as tmp:
        # the file's lines keep its own name and numbers in the diagnostics
        text = f'#line 1 "{c_string(name)}"\n{source}\n#line 1 "<smpnet ab glue>"\n'
        ffi = cffi.FFI()
        ffi.cdef(CDEF)
        ffi.set_source(modname, text)
        src, obj, out = (os.path.join(tmp, modname + ext)
                         for ext in (".c", ".o", sysconfig.get_config_var("EXT_SUFFIX")))
        try:
            with contextlib.redirect_stdout(io.StringIO()):     # cffi's "generating ..."
                ffi.emit_c_code(src)
        except OSError as e:
            raise BadInput(f"{name}: not built: its C source could not be written in "
                           f"{tmp}: {e.strerror or e}") from None
        try:
            said = compiler.run(compiler.commands(
                src, obj, out, INCLUDE_DIRS, build_flags.define_macros(debug) + macros,
                compile_args(debug), [f"-Wl,-T,{PERCPU_SCRIPT}"]), timeout, tmp)
        except subprocess.TimeoutExpired:
            raise BadInput(f"{name}: the build took over {timeout:g} s, the bound on one "
                           "build; stopped") from None
        except compiler.Failed as e:
            if not e.stderr.strip():
                raise BadInput(f"{name}: not built: {e}") from None
            stderr.write(e.stderr)
            raise BadInput(f"{name}: does not compile (the compiler's messages are above)"
                           + _hint(e.stderr)) from None
        if "warning:" in said:
            stderr.write(said)
        os.chmod(out, 0o755)      # whatever the umask: no one else writes it
        os.replace(out, path)


def _hint(out):
    if re.search(r"unknown type name .smpnet_(shared|percpu)_t", out):
        return "; declare the state with SMPNET_STATE(shared, per_cpu) before the first variant"
    if "smpnet.h: No such file" in out:
        return "; the file includes <smpnet.h>, which ab puts on the include path"
    return ""


def _describe(module, name, key, path, compiled, build_s):
    ffi, lib = module.ffi, module.lib
    if lib.smpnet_abi_hash() != _core.AB_ABI_HASH:
        raise BadInput(f"{name}: its object ({path}) was built against another layout "
                       f"(ABI {lib.smpnet_abi_hash():#x}, this core's {_core.AB_ABI_HASH:#x}); "
                       "delete it and run again")
    if lib.smpnet_overflow():
        raise BadInput(f"{name}:{lib.smpnet_overflow()}: over {_core.AB_MAX_VARIANTS} variants, "
                       f"or a name of {_core.AB_NAME} characters or more")
    if lib.smpnet_orphan_hook():
        raise BadInput(f"{name}:{lib.smpnet_orphan_hook()}: SMPNET_INIT or SMPNET_CHECK names "
                       "a variant the file does not define")
    variants = []
    for i in range(lib.smpnet_nr_variants()):
        v = lib.smpnet_variant(i)
        variants.append(Variant(ffi.string(v.name).decode(), v.line, int(v.loop),
                                int(v.contended), int(v.init), int(v.check), int(v.algo)))
    variants.sort(key=lambda v: v.line)   # the file's order: the first is the baseline
    info = lib.smpnet_build()
    obj = UserObject(name, key, path, compiled, build_s, int(lib.smpnet_shared_size()),
                     int(lib.smpnet_percpu_size()), variants, module,
                     int(ffi.cast("uintptr_t", info)),
                     {k: int(getattr(info, k)) for k in ("algo", "check", "popf", "kbuild")},
                     bytes(ffi.buffer(lib.smpnet_percpu_template(),
                                      lib.smpnet_percpu_area_size())),
                     cpu_roles.names(_text(ffi, lib.smpnet_role_names())),
                     _text(ffi, lib.smpnet_unit()), _text(ffi, lib.smpnet_skb_defer()))
    if len(variants) < 2:
        raise BadInput(f"{name}: defines {len(variants)} variant(s) once built: ab compares "
                       "two or more, the first against the others")
    return obj


def _text(ffi, p):
    """A C string of the object's, or "" for NULL."""
    return "" if p == ffi.NULL else ffi.string(p).decode(errors="replace")
