"""The model's headers (smpnet/kernel/*.h): one per kernel concern, each with
a .pxd of the same name that binds it and nothing else, none including
another that includes it back, by #include or by a function it declares
and another header defines (hooks are tables of function pointers
registered at init: softirq_vec, napi_poll_vec, ptype_base)."""
import glob
import os
import re
import shutil
import subprocess

import pytest

KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "smpnet", "kernel")

pytestmark = pytest.mark.skipif(not os.path.isdir(KERNEL), reason="needs the source tree")

# Headers that may go without a .pxd, each with the reason. Only a header
# Cython never needs a name from qualifies (compiler.h-style macros).
NO_PXD = {"qspinlock_paravirt.h": "the guest's locks, which Cython reaches only through "
                                  "spinlock.h's arch_spin_lock(): it names none of them"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
EXTERN = re.compile(r'^cdef extern from "([^"]+)"', re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# a function's head at the top level (column 0, as kernel style writes it),
# static or not: its name, then `;` (declared) or `{` (defined)
FUNCTION = re.compile(
    r"^(?!typedef\b)(?:static\s+)?(?:inline\s+|__attribute__\(\(\w+\)\)\s+)*[A-Za-z_][\w \t\*]*?\b(\w+)"
    r"\s*\(([^;{}]*)\)\s*([;{])", re.M)


def headers():
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(KERNEL, "*.h")))


def pxds():
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(KERNEL, "*.pxd"))
                  if not p.endswith("__init__.pxd"))


def read(name):
    with open(os.path.join(KERNEL, name)) as f:
        return f.read()


def include_graph():
    return {h: INCLUDE.findall(read(h)) for h in headers()}


def find_cycle(graph):
    """One include cycle as a list of headers (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def functions(source):
    """({declared-only names}, {defined names}) of the functions in a header."""
    declared, defined = set(), set()
    for name, _, end in FUNCTION.findall(COMMENT.sub("", source)):
        (declared if end == ";" else defined).add(name)
    return declared - defined, defined


def test_headers_include_only_headers_of_the_model():
    known = set(headers())
    for h, incs in include_graph().items():
        assert set(incs) <= known, f"{h} includes {sorted(set(incs) - known)}, not in smpnet/kernel"


def test_no_include_cycle():
    assert find_cycle(include_graph()) is None


def test_the_cycle_finder_finds_one():
    graph = {"dev.h": ["skbuff.h", "loopback.h"], "loopback.h": ["dev.h"], "skbuff.h": []}
    assert find_cycle(graph) == ["dev.h", "loopback.h", "dev.h"]
    assert find_cycle({"a.h": ["b.h"], "b.h": []}) is None


def test_no_function_declared_here_and_defined_in_another_header():
    # what dev.h's `static void proto_rcv(...);` (defined in loopback.h, which
    # includes dev.h) was: a cycle the #include lines do not show
    for h in headers():
        declared_only, _ = functions(read(h))
        assert declared_only == set(), f"{h} declares {sorted(declared_only)} without defining them"


def test_the_declaration_finder_finds_one():
    src = ("static void proto_rcv(struct cpu_ctx *c, struct net_ctx *n,\n"
           "\t\t      struct sk_buff *skb);\n"
           "static void do_softirq(struct cpu_ctx *c);\n"
           "static __attribute__((noinline)) void do_softirq(struct cpu_ctx *c)\n{\n}\n"
           "static void (*volatile tb_function_ptr)(void) = tb_empty_function;\n"
           "static inline int f(int x) { return x; }\n")
    assert functions(src) == ({"proto_rcv"}, {"do_softirq", "f"})


@pytest.mark.parametrize("header", headers())
def test_each_header_has_a_pxd_of_its_name(header):
    if header in NO_PXD:
        return
    assert header[:-2] + ".pxd" in pxds(), f"{header} has no {header[:-2]}.pxd"


@pytest.mark.parametrize("pxd", pxds())
def test_each_pxd_binds_its_own_header_only(pxd):
    header = pxd[:-4] + ".h"
    assert header in headers(), f"{pxd} has no {header}"
    assert set(EXTERN.findall(read(pxd))) == {header}


def test_no_pxd_exemption_is_stale():
    for header, why in NO_PXD.items():
        assert header in headers() and why
        assert header[:-2] + ".pxd" not in pxds(), f"{header} has a .pxd: drop its exemption"


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
@pytest.mark.parametrize("header", headers())
def test_each_header_compiles_on_its_own(header, tmp_path):
    # Cython includes them in cimport order: each must bring what it uses
    src = tmp_path / "one.c"
    src.write_text(f'#include "{header}"\n')
    r = subprocess.run(["cc", "-fsyntax-only", "-Werror=implicit-function-declaration",
                        "-I", KERNEL, str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
