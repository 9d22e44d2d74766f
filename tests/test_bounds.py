"""Every numeric option has a documented bound, checked before anything
starts; a run estimated at over an hour needs --long; a segment that cannot
be reserved or mapped is one line and exit 1."""
import os
import re
import resource
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smpnet import BadInput, bounds
from smpnet.cli import build_parser, main

DOCS = os.path.join(os.path.dirname(__file__), "..", "docs", "cli.md")


def numeric_options():
    """(subcommand, option) for every option that takes a number."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out = []
    for name, p in sub.choices.items():
        for a in p._actions:
            if a.option_strings and a.type is not None:
                out.append((name, a.option_strings[0]))
    return out


def test_every_numeric_option_has_a_bound_and_a_row_in_the_docs():
    text = open(DOCS).read()
    options = numeric_options()
    assert len(options) >= 15  # the list is real: every subcommand's numbers
    for command, option in options:
        assert option in bounds.BOUNDS, f"{command} {option} has no bound"
        low, high, unit = bounds.BOUNDS[option]
        row = re.search(rf"^\| `{re.escape(option)}` \|([^\n]*)$", text, re.M)
        assert row, f"docs/cli.md has no row for {option}"
        shown = f"{high:g}" if isinstance(high, float) else str(high)
        assert f" {shown} " in row.group(1), f"docs/cli.md gives another bound for {option}"
        takers = [c for c, o in options if o == option]
        assert row.group(1).split("|")[3].strip() == ", ".join(takers), \
            f"docs/cli.md: {option} is taken by {', '.join(takers)}"


def _parse(command, option, text):
    """The command line `command option text`, with a placeholder for each
    positional argument the command requires (ab's FILE.c)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    positional = [a.metavar or a.dest for a in sub._actions if not a.option_strings]
    return parser.parse_args([command] + positional + [option, text])


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(numeric_options()),
       value=st.one_of(st.integers(-10, 10), st.integers(-2**70, 2**70),
                       st.sampled_from([0, 1, 64, 65, 1000, 1001, 4096, 4097, 10**9, 10**9 + 1,
                                        2**40, 2**40 + 1, 10**10, 10**10 + 1])),
       form=st.sampled_from(["plain", "underscore", "plus", "fullwidth", "space", "float"]))
def test_an_option_value_is_taken_exactly_when_in_bounds(case, value, form):
    command, option = case
    low, high, _ = bounds.BOUNDS[option]
    text = str(value)
    if form == "underscore" and abs(value) >= 10:
        text = text[:-1] + "_" + text[-1]
    elif form == "plus" and value >= 0:
        text = "+" + text
    elif form == "fullwidth":
        text = text.translate({ord(d): 0xFF10 + int(d) for d in "0123456789"})
    elif form == "space":
        text = " " + text
    elif form == "float":
        text = text + ".0"
    takes = re.fullmatch(r"[0-9]+", text) is not None or (
        option == "--duration" and re.fullmatch(r"[0-9]+\.0", text) is not None)
    if takes and low <= value <= high:
        args = _parse(command, option, text)
        # a sweep option takes a comma list: one value is a list of one
        expected = [value] if option in bounds.LISTS else value
        assert getattr(args, option[2:].replace("-", "_")) == expected
    else:
        with pytest.raises(BadInput, match=f"argument {option}"):
            _parse(command, option, text)


@pytest.mark.parametrize("argv", [
    ["locks", "--loops", "1000000000", "--rounds", "1000"],
    ["locks", "--contended", "--algo", "all", "--variant", "all", "--duration", "3600"],
    ["defer", "--duration", "3600", "--repeat", "2"],
    ["defer", "--skbs", str(2**40)],
    ["loopback", "--duration", "200", "--repeat", "10"],
    ["arp", "--trials", "100000", "--count", "64"],
    ["arp", "--trials", "100000", "--hz", "100"],
])
def test_a_run_of_over_an_hour_needs_long(argv, capsys, monkeypatch):
    from smpnet.machine import machine

    def no_machine(self):
        raise AssertionError("a machine was opened before the check")

    monkeypatch.setattr(machine.Machine, "open", no_machine)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pass --long if you mean it" in err[0]
    assert "estimated" in err[0]


def test_long_lets_a_long_estimate_through():
    bounds.check_run_time(bounds.LONG_RUN_S * 10, True)  # no error
    bounds.check_run_time(bounds.LONG_RUN_S + 60, False)  # an hour and start-up
    with pytest.raises(BadInput, match="about 64 min"):
        bounds.check_run_time(bounds.LONG_RUN_S * 1.05 + 60, False)


def test_the_testers_huge_values_are_refused_before_anything_runs(capsys):
    for argv, option in ((["defer", "--repeat", "99999999999999999999", "--skbs", "1000"],
                          "--repeat"),
                         (["loopback", "--repeat", "99999999999999999999"], "--repeat"),
                         (["locks", "--loops", "18446744073709551616"], "--loops"),
                         (["locks", "--loops", "9223372036854775807"], "--loops"),
                         (["locks", "--rounds", "99999999999999999999"], "--rounds")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"argument {option}" in err[0] and "out of range" in err[0]


# ------------------------------------------------------------ room for the segment

def _bench_with_limit(tmp_path, limit, value, argv):
    def child():
        resource.setrlimit(limit, (value, value))

    return subprocess.run([sys.executable, "-m", "smpnet"] + argv, cwd=tmp_path,
                          capture_output=True, text=True, preexec_fn=child, timeout=120)


def _the_line(err):
    return [ln for ln in err.splitlines() if not re.match(r"smpnet-bench \w+: \[", ln)]


def test_a_segment_over_the_file_size_limit_is_one_line_and_exit_1(tmp_path):
    # posix_fallocate() of the segment meets the limit: before any worker starts
    r = _bench_with_limit(tmp_path, resource.RLIMIT_FSIZE, 4096,
                          ["defer", "--duration", "0.05", "--repeat", "1", "--strategy", "irq",
                           "--ncpus", "2", "--oversubscribe"])
    assert r.returncode == 1, r.stderr
    lines = _the_line(r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert re.search(r"cannot reserve \d+\.\d MiB of shared memory: over the file size limit",
                     lines[0])


def test_a_segment_that_cannot_be_mapped_is_one_line_and_exit_1(tmp_path):
    # the tester's case: 256 emulated CPUs and 100000 skbs want ~300 MiB of
    # address space under `ulimit -v 250000`
    r = _bench_with_limit(tmp_path, resource.RLIMIT_AS, 250_000 * 1024,
                          ["defer", "--skbs", "100000", "--repeat", "1", "--strategy", "irq",
                           "--ncpus", "256", "--oversubscribe"])
    assert r.returncode == 1, r.stderr
    lines = _the_line(r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert re.search(r"cannot (map|reserve) \d+\.\d MiB of shared memory", lines[0])


def test_a_deadline_run_is_not_stretched_by_the_oversubscription():
    """A --duration run ends at its deadline: 8 emulated CPUs on 2 add their
    start-up, not four times the duration; a count of work is stretched."""
    from smpnet.experiments import contended, defer

    assert contended.contended_seconds(1, 1200, 8, 2) < 1201
    # the run's 30 s and its set-up, beside the per-op suite (no strategy: the suite alone)
    assert defer.estimate_seconds(1, 1, None, 30, 8, 2) - \
        defer.estimate_seconds(0, 1, None, 30, 8, 2) < 31
    assert defer.estimate_seconds(1, 1, 10**8, None, 8, 2) > \
        3.9 * defer.estimate_seconds(1, 1, 10**8, None, 2, 2) - 4
