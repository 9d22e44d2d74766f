"""Hot loops never call into Python: check the C that Cython generates.

Runs `cython -a` on smpnet/_core.pyx and reads the annotation's per-line
score (the number of Python C-API calls the line compiles to) of it and of
every file it includes (smpnet/core/*.pyx: Cython writes one annotation per
included file, next to the C file). Every line inside a `nogil` function or
a `with nogil:` block must score 0: a missing `noexcept`, for one, makes
each call re-take the GIL to check for errors.
"""
import glob
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
PYX = os.path.join(ROOT, "smpnet", "_core.pyx")
CORE = os.path.join(ROOT, "smpnet", "core")
KERNEL = os.path.join(ROOT, "smpnet", "kernel")

pytestmark = pytest.mark.skipif(not os.path.exists(PYX), reason="needs the source tree")

INCLUDE = re.compile(r'^include\s+"([^"]+)"\s*$', re.M)


def nogil_lines(source):
    """Line numbers (1-based) of the bodies of nogil functions and blocks."""
    lines = source.splitlines()
    out = set()
    i = 0
    while i < len(lines):
        text = lines[i]
        stripped = text.strip()
        is_fn = stripped.startswith("cdef ") and stripped.endswith("nogil:")
        is_block = stripped == "with nogil:"
        if is_fn or is_block:
            indent = len(text) - len(text.lstrip())
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or
                                      len(lines[j]) - len(lines[j].lstrip()) > indent):
                if lines[j].strip():
                    out.add(j + 1)
                j += 1
            i = j
        else:
            i += 1
    return out


def included(pyx):
    """The files `pyx` includes, as written there (relative to its folder), recursively."""
    out = []
    folder = os.path.dirname(pyx)
    with open(pyx) as f:
        for rel in INCLUDE.findall(f.read()):
            out.append(rel)
            out += [os.path.join(os.path.dirname(rel), r)
                    for r in included(os.path.join(folder, rel))]
    return out


def annotation_scores(html):
    """{line: score} from a `cython -a` page."""
    return {int(n): int(s) for s, n in re.findall(
        r'class="cython line score-(\d+)"[^>]*>[^<]{0,12}<span class="">(\d+)</span>', html)}


def python_calls_in_nogil(pyx, out_dir, include_dirs=()):
    """Annotate `pyx` and its includes; returns ({file: [lines that call into
    Python inside nogil code]}, number of nogil lines looked at)."""
    out_c = os.path.join(out_dir, os.path.splitext(os.path.basename(pyx))[0] + ".c")
    args = [sys.executable, "-m", "cython", "-a", "-3"]
    for d in include_dirs:
        args += ["-I", d]
    subprocess.run(args + [pyx, "-o", out_c], check=True, capture_output=True, cwd=ROOT)
    calls, looked_at, any_score = {}, 0, False
    folder = os.path.dirname(pyx)
    for rel in [os.path.basename(pyx)] + included(pyx):
        page = os.path.join(out_dir, os.path.splitext(rel)[0] + ".html")
        with open(page) as f:
            scores = annotation_scores(f.read())
        assert scores, f"could not read the cython -a scores of {rel}"
        any_score = any_score or max(scores.values()) > 0
        with open(os.path.join(folder, rel)) as f:
            hot = nogil_lines(f.read())
        looked_at += len(hot)
        bad = sorted(n for n in hot if scores.get(n, 0) > 0)
        if bad:
            calls[rel] = bad
    # the annotation parsed: Python-level code scores above zero somewhere
    assert any_score, "every line scored 0: the annotation was not read"
    return calls, looked_at


def test_nogil_code_makes_no_python_calls(tmp_path):
    calls, looked_at = python_calls_in_nogil(PYX, str(tmp_path), [KERNEL, ROOT])
    assert looked_at >= 100, "found too few nogil lines: the scanner is broken"
    assert calls == {}, f"lines calling into Python inside nogil code: {calls}"


def test_every_core_file_is_included_and_so_checked():
    found = {os.path.relpath(p, os.path.dirname(PYX))
             for p in glob.glob(os.path.join(CORE, "*.pyx")) + glob.glob(os.path.join(CORE, "*.pxi"))}
    assert found and set(included(PYX)) == found


def test_the_check_fails_on_a_python_call_in_an_included_nogil_block(tmp_path):
    # the same check, on a module whose included file has two offences in
    # nogil code: a call to a function without noexcept (each call checks
    # for an exception under the GIL) and an explicit `with gil:` call
    src = tmp_path / "src"
    (src / "core").mkdir(parents=True)
    (src / "m.pyx").write_text('include "core/bad.pyx"\n')
    (src / "core" / "bad.pyx").write_text(
        "cdef int may_raise(int x) nogil:\n"      # 1
        "    return x + 1\n"                        # 2
        "\n"                                        # 3
        "def run(int n):\n"                         # 4
        "    cdef int i, s = 0\n"                   # 5
        "    with nogil:\n"                         # 6
        "        for i in range(n):\n"              # 7
        "            s = may_raise(s)\n"            # 8: offence
        "        with gil:\n"                       # 9
        "            print(s)\n"                    # 10: offence
        "    return s\n")                           # 11
    out = tmp_path / "out"
    out.mkdir()
    calls, looked_at = python_calls_in_nogil(str(src / "m.pyx"), str(out))
    assert looked_at == 5
    assert 8 in calls["core/bad.pyx"] and 10 in calls["core/bad.pyx"]
    assert 7 not in calls["core/bad.pyx"]


def test_scanner_finds_bodies():
    src = "cdef int f() noexcept nogil:\n    x = 1\n\n    y = 2\ndef g():\n    with nogil:\n        z()\n    w()\n"
    assert nogil_lines(src) == {2, 4, 7}
