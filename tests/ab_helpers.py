"""What the ab test modules share: the examples, the options that make a
short run with a verdict, one build cache a module, and how a test writes
a file, reads the run's one error line and picks two CPUs."""
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
FAST = ["--loops", "2000", "--rounds", "12"]   # 6 ABBA blocks: the least a verdict needs


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


def two_cpus(allowed):
    """--cpus for a contended run: two real CPUs, or two emulated on one."""
    return (["--cpus", "0,1"] if len(allowed) > 1
            else ["--cpus", str(allowed[0]), "--ncpus", "2", "--oversubscribe"])
