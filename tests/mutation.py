"""A mutation run: each mutant of tests/mutants.py applied to a scratch copy
of HEAD, and the tests that must kill it run there. `python tests/mutation.py [--list] [ID ...]`, from the repository
root; docs/contributing.md ("Mutation runs") says what counts and how to add one."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

from mutants import EQUIVALENT, MUTANTS

TIMEOUT_S = 600
# what every copy starts from, fixed when the run starts: a commit made or a core rebuilt
# in the working tree meanwhile changes nothing in the run
Base = namedtuple("Base", "root commit core")


def in_core(path):
    """Whether setup.py compiles `path` into smpnet/_core (_core.pyx, with the
    smpnet/core/ files it includes and the smpnet/kernel/ headers it cimports);
    smpnet/include/ is compiled at run time by `ab` itself."""
    return path == "smpnet/_core.pyx" or path.startswith(("smpnet/core/", "smpnet/kernel/"))


def run(cmd, cwd, env=None):
    """(exit code, output), or (None, output) past TIMEOUT_S. In a session of its own, so
    that a timeout or Ctrl-C ends the workers pytest started too."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out = p.communicate(timeout=TIMEOUT_S)[0]
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return None, p.communicate()[0] + f"\n(timed out after {TIMEOUT_S} s)"
    finally:
        if p.returncode is None:        # Ctrl-C: the group goes with us
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def scratch(base, work, mutant=None):
    """A copy of the commit in `work` (committed files only: edits in the working tree stay
    out), the mutant applied, with a core: the working tree's, or rebuilt where the
    mutant is in it. (the copy, None), or (None, why) when the rebuild failed."""
    tree = os.path.join(work, "tree")
    os.mkdir(tree)
    archive = subprocess.run(["git", "archive", base.commit], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
    if mutant:
        path = os.path.join(tree, mutant.file)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace(mutant.old, mutant.new))
    if mutant and in_core(mutant.file):
        rc, out = run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], tree)
        if rc != 0:
            return None, "rebuild failed: " + out
    else:
        for so in os.listdir(base.core):
            shutil.copy2(os.path.join(base.core, so), os.path.join(tree, "smpnet"))
    return tree, None


def pytest(work, tree, tests):
    """pytest on `tests` in the copy: its smpnet imported (PYTHONPATH, for subprocesses
    too), a fresh ab build cache and pytest's temporary files in `work`, private (the
    build cache refuses a directory others can write above it)."""
    cache, temp = os.path.join(work, "cache"), os.path.join(work, "tmp")
    os.mkdir(cache, 0o700)
    # COLUMNS: pytest's summary line keeps more of the failed assertion
    env = dict(os.environ, PYTHONPATH=tree, SMPNET_CACHE_DIR=cache, COLUMNS="200")
    return run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                "--basetemp", temp, *tests], tree, env)


def attempt(base, name, tests, mutant=None):
    """(pytest's exit code or None, its output) for `tests` on a copy of the commit, the
    mutant applied; the copy removed after."""
    work = os.path.join(base.root, name)
    os.mkdir(work, 0o700)
    try:
        tree, why = scratch(base, work, mutant)
        return pytest(work, tree, tests) if tree else (None, why)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def tail(out, n=15):
    return "\n".join("    " + line for line in out.strip().splitlines()[-n:])


def check_table(chosen, commit):
    """One line and exit 2 for a mutant whose old text is not in the commit's file exactly
    once (else the replacement would change nothing, or more than the fault)."""
    for m in chosen:
        shown = subprocess.run(["git", "show", f"{commit}:{m.file}"], capture_output=True,
                               text=True)
        count = shown.stdout.count(m.old) if shown.returncode == 0 else 0
        if count != 1:
            print(f"mutation.py: {m.id}: its old text occurs {count} times in {m.file} at "
                  f"{commit[:7]}, not once", file=sys.stderr)
            sys.exit(2)


def main(argv):
    by_id = {m.id: m for m in MUTANTS}
    if "--list" in argv:
        for m in MUTANTS:
            print(f"{m.id:26} {m.file:36} {m.why}")
        return 0
    unknown = [a for a in argv if a not in by_id]
    if unknown:
        print(f"mutation.py: unknown mutant {unknown[0]!r} (--list names them)", file=sys.stderr)
        return 2
    chosen = [by_id[a] for a in argv] or MUTANTS
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    check_table(chosen, commit)
    cores = [f for f in os.listdir("smpnet") if f.startswith("_core") and f.endswith(".so")]
    if not cores:
        print("mutation.py: no built core in smpnet/ (python setup.py build_ext --inplace)",
              file=sys.stderr)
        return 2
    if subprocess.run(["git", "diff", "--quiet", commit, "--", "smpnet/_core.pyx",
                       "smpnet/core", "smpnet/kernel"]).returncode:
        print("mutation.py: warning: this tree's core sources differ from HEAD; the copies "
              "take its smpnet/_core*.so all the same, which may not be HEAD's", file=sys.stderr)
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="smpnet-mutation-")
    try:
        base = Base(root, commit, os.path.join(root, "core"))
        os.mkdir(base.core)
        for so in cores:
            shutil.copy2(os.path.join("smpnet", so), base.core)
        # a mutant is killed only by a test that passes without it
        tests = sorted({t for m in chosen for t in m.tests})
        print(f"unmutated HEAD ({commit[:7]}): {len(tests)} tests", file=sys.stderr)
        rc, out = attempt(base, "head", tests)
        if rc != 0:
            print(f"mutation.py: the tests fail on HEAD unmutated (exit {rc}):\n{tail(out)}",
                  file=sys.stderr)
            return 2
        results = []
        for k, m in enumerate(chosen, 1):
            print(f"[{k}/{len(chosen)}] {m.id}: {m.file}"
                  + (" (rebuilding the core)" if in_core(m.file) else ""), file=sys.stderr)
            t0 = time.monotonic()
            rc, out = attempt(base, m.id, m.tests, m)
            # exit 1: a test failed; 0: all passed; anything else says nothing of the mutant
            result = {1: "killed", 0: "survived"}.get(rc, "error")
            results.append((m, result, time.monotonic() - t0, out))
        print(f"HEAD {commit[:7]}\n{'mutant':26} {'file':36} {'result':8} seconds")
        for m, result, s, out in results:
            print(f"{m.id:26} {m.file:36} {result:8} {s:7.1f}")
            if result == "killed":      # by which test, and its assertion (pytest's -ra line)
                print(next(("    " + line[:200] for line in out.splitlines()
                            if line.startswith("FAILED ")), ""))
            else:
                print(tail(out))
        print("\nequivalent, left out:")
        for where, why in EQUIVALENT:
            print(f"  {where}: {why}")
        killed = sum(r == "killed" for _, r, _, _ in results)
        print(f"\nkilled {killed} of {len(results)} ({100 * killed / len(results):.0f} %) "
              f"in {time.monotonic() - started:.0f} s")
        return 0 if killed >= 0.95 * len(results) else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # so that finally runs
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
