"""smpnet-bench: exit codes, one-line errors, the JSON envelope."""
import json
import os
import stat
import subprocess
import sys

import pytest

from smpnet import BadInput
from smpnet.cli import main

MACHINE_KEYS = {"cpu_model", "allowed_cpus", "tsc_hz", "tsc_source", "hypervisor", "kernel"}
ENVELOPE_KEYS = {"schema", "smpnet", "command", "machine", "params", "results", "verdicts", "warnings"}


def test_info_text(capsys, allowed):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for label in ("CPU model", "TSC", "Hypervisor", "Governor", "isolcpus", "Kernel",
                  "Python", "numpy", "smpnet", "SMT siblings", "NUMA nodes"):
        assert label in out
    assert "cycles" in out and "ns" in out  # timer costs, with units


def test_info_json_envelope(capsys, allowed, tmp_path):
    out_file = tmp_path / "info.json"
    assert main(["info", "--json", "--cpus", str(allowed[0])]) == 0
    env = json.loads(capsys.readouterr().out)
    assert main(["info", "--json", "--cpus", str(allowed[0]), "--output", str(out_file)]) == 0
    assert capsys.readouterr().out == ""      # --json --output: the file alone
    assert set(env) == ENVELOPE_KEYS
    assert env["schema"] == 3 and env["command"] == "info"
    assert MACHINE_KEYS <= set(env["machine"])
    assert env["machine"]["selected_cpus"] == [allowed[0]]
    assert env["machine"]["allowed_cpus"] == allowed
    assert {r["test"] for r in env["results"]} == {"for_loop", "tsc_read"}
    saved = json.loads(out_file.read_text())
    assert saved["machine"]["cpu_model"] == env["machine"]["cpu_model"]
    assert saved["params"] == env["params"]
    assert env["params"]["cpus"] == str(allowed[0])


def bad_cpus(allowed):
    return [str(max(allowed) + 1), f"{allowed[0]},{allowed[0]}", "garbage", "", "2-1", "-3"]


@pytest.mark.parametrize("index", range(6))
def test_bad_cpus_exit_2_with_one_line(capsys, allowed, index):
    assert main(["info", "--cpus", bad_cpus(allowed)[index]]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("smpnet-bench: ")


@pytest.mark.parametrize("argv", [[], ["nope"], ["info", "--bogus"], ["info", "--cpus"]])
def test_usage_errors_exit_2_with_one_line(capsys, argv):
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "smpnet-bench" in lines[0]


def test_output_to_a_missing_directory_is_refused_before_running(capsys, tmp_path):
    assert main(["info", "--output", str(tmp_path / "no" / "such.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["info", "--output", ""]) == 2
    assert "file name" in capsys.readouterr().err


def test_output_to_a_fifo_writes_through_it(tmp_path):
    # a non-regular target (a FIFO here, /dev/stdout for a user) is written
    # in place, never replaced by a renamed file
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    assert main(["info", "--output", str(fifo)]) == 0
    out, _ = reader.communicate(timeout=30)
    assert json.loads(out)["command"] == "info"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_huge_cpu_range_is_refused_at_once(capsys, allowed):
    assert main(["info", "--cpus", "0-4000000000"]) == 2
    assert "4000000000" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [["smpnet-bench"], [sys.executable, "-m", "smpnet"]])
def test_entry_points_run_without_traceback(cmd, tmp_path):
    # cwd away from the source tree, which `python -m` would put on sys.path
    ok = subprocess.run(cmd + ["info", "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["command"] == "info"
    bad = subprocess.run(cmd + ["info", "--cpus", "x"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("redirect,why", [(">&-", "stdout is closed"),
                                          ("--output /dev/stdout >&-", "stdout is closed"),
                                          ("> /dev/full", "No space left on device")])
def test_a_stdout_that_cannot_take_the_result_saves_it(tmp_path, redirect, why):
    """smpnet-bench info >&- gave an AttributeError traceback, > /dev/full an
    OSError one, and the result was lost; --output /dev/stdout >&- wrote it
    where the closed stdout goes (nowhere), exit 0."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m smpnet info {redirect}"],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"smpnet-bench: cannot print the result: {why}; "
                           f"the result was saved to {tmp_path}/smpnet-info-")
    saved = line.rsplit(" saved to ", 1)[1]
    assert json.loads(open(saved).read())["command"] == "info"


def test_a_closed_stderr_does_not_send_errors_to_stdout(tmp_path):
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m smpnet info --cpus 99 2>&-"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""


def test_a_failed_output_is_reported_when_stdout_s_reader_has_left(tmp_path):
    """--output /dev/full | true: the pipe's early exit must not hide that
    the result could not be written where asked."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m smpnet info --output /dev/full | "
                       "true; exit ${PIPESTATUS[0]}"],
                       capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("smpnet-bench: cannot write --output /dev/full: ")


@pytest.mark.parametrize("text", ["none,,irq", "irq,", ",irq", "irq, ,none"])
def test_a_name_list_with_an_empty_item_is_refused(text):
    """As the numeric lists refuse '1,,2': a name left out is a typo, not a choice."""
    from smpnet.experiment import parse_list
    with pytest.raises(BadInput, match="an empty strategy name"):
        parse_list(text, ("none", "irq", "irqsave"), "strategy")
    assert parse_list(" none , irq ", ("none", "irq"), "strategy") == ["none", "irq"]


def test_an_unknown_argument_points_at_its_subcommands_help(capsys):
    assert main(["all", "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["smpnet-bench: unrecognized arguments: --duration 1 "
                   "(see smpnet-bench all --help)"]


def test_a_tight_address_space_limit_is_one_line_naming_it(tmp_path):
    """Under ulimit -v 100000 OpenBLAS printed its own line at numpy's
    import and exited; smpnet-bench says what is short, and by how much."""
    r = subprocess.run(["bash", "-c", f"ulimit -v 100000; {sys.executable} -m smpnet info"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("smpnet-bench: cannot start: the address-space limit (ulimit -v) "
                           "is 97 MiB, under the ")
