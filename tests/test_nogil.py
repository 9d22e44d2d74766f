"""Hot loops never call into Python: check the C that Cython generates.

Runs `cython -a` on smpnet/_core.pyx and reads the annotation's per-line
score (the number of Python C-API calls the line compiles to). Every line
inside a `nogil` function or a `with nogil:` block must score 0: a missing
`noexcept`, for one, makes each call re-take the GIL to check for errors.
"""
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYX = os.path.join(HERE, "..", "smpnet", "_core.pyx")
KERNEL = os.path.join(HERE, "..", "smpnet", "kernel")

pytestmark = pytest.mark.skipif(not os.path.exists(PYX), reason="needs the source tree")


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


def test_nogil_code_makes_no_python_calls(tmp_path):
    out_c = tmp_path / "_core.c"
    subprocess.run([sys.executable, "-m", "cython", "-a", "-3", "-I", KERNEL,
                    "-I", os.path.join(HERE, ".."), PYX, "-o", str(out_c)],
                   check=True, capture_output=True, cwd=os.path.join(HERE, ".."))
    html = (tmp_path / "_core.html").read_text()
    scores = {int(n): int(s) for s, n in re.findall(
        r'class="cython line score-(\d+)"[^>]*>[^<]{0,12}<span class="">(\d+)</span>', html)}
    with open(PYX) as f:
        hot = nogil_lines(f.read())
    assert len(hot) >= 10, "found too few nogil lines: the scanner is broken"
    # the annotation parsed: Python-level code scores above zero somewhere
    assert scores and max(scores.values()) > 0, "could not read cython -a scores"
    calls = sorted(n for n in hot if scores.get(n, 0) > 0)
    assert calls == [], f"_core.pyx lines calling into Python inside nogil code: {calls}"


def test_scanner_finds_bodies():
    src = "cdef int f() noexcept nogil:\n    x = 1\n\n    y = 2\ndef g():\n    with nogil:\n        z()\n    w()\n"
    assert nogil_lines(src) == {2, 4, 7}
