"""The docs follow the code's tables: every choice a list offers is on its
experiment's page, every relative link resolves, the README keeps its two
set-up lines and fits on a screen or two."""
import pathlib
import re

import pytest

from smpnet.experiments import EXPERIMENTS, arp, defer, loopback
from smpnet.experiments.common import lockbench
from smpnet.measure import time_bench
from smpnet.report import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "experiments"


@pytest.mark.parametrize("page, names", [
    ("locks.md", lockbench.ALGOS + lockbench.VARIANTS + lockbench.RESTORES
     + tuple(t for t, _ in time_bench.SUITE)),
    ("contended.md", lockbench.ALGOS),
    ("defer.md", defer.STRATEGIES),
    ("loopback.md", loopback.MODES + loopback.PROTOCOLS + tuple(loopback.STACKS)),
    ("arp.md", arp.PROBES + tuple(str(hz) for hz in arp.HZ_VALUES)),
])
def test_every_choice_is_on_its_page(page, names):
    text = (PAGES / page).read_text()
    missing = [n for n in names if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
    assert not missing, f"{page} does not name {missing}"


def _markdown():
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("md", _markdown(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(md):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", md.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (md.parent / target.split("#")[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert not broken, f"{md.name}: {broken}"


def test_the_readme_fits_and_keeps_its_two_set_up_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 170
    assert sum(ln.startswith("python3 -m venv .venv && ") for ln in lines) == 2
    for e in EXPERIMENTS:   # one line per subcommand, linking to its page
        assert any(f"(docs/experiments/{e.name}.md)" in ln for ln in lines), e.name


def test_every_stage_of_all_has_its_row_in_all_md():
    from smpnet import run_all

    text = (ROOT / "docs" / "all.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|", text, re.M)
    assert [r for r in rows if r in {e.name for e in EXPERIMENTS}] == \
        [e.name for e in run_all.stages()]


def test_the_api_pages_first_example_runs_as_written(capsys):
    """docs/api.md's example, run as a reader would paste it: it ends by
    printing its verdict, so too few rounds for one fails here."""
    text = (ROOT / "docs" / "api.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "docs/api.md", "exec"), {})
    last = capsys.readouterr().out.strip().splitlines()[-1]
    measured, interval = last.split(" ", 1)
    lo, hi = (float(x) for x in interval.strip("[]").split(","))
    assert lo <= float(measured) <= hi


def test_compares_table_of_rows_is_each_experiments_metric():
    """docs/compare.md's table: per experiment, its key fields, its value and
    its samples, as its Metric (what compare really matches and judges)."""
    text = (ROOT / "docs" / "compare.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[re.match(r"`(\w+)`", cells[0]).group(1)] = cells
    assert set(rows) == {e.name for e in EXPERIMENTS}
    for e in EXPERIMENTS:
        _, keys, value, noise = rows[e.name]
        m = e.metric
        assert re.findall(r"`(\w+)`", keys) == list(m.keys), e.name
        assert value == f"`{results.field_name(m.value)}`", e.name
        if m.samples:
            assert noise.startswith(f"`{m.samples}`"), e.name
        else:
            assert noise.startswith("no samples"), e.name


# ------------------------------------------------------------------ the docs' code blocks

def _blocks(lang=None):
    """(page, language, text) of every fenced block in the README and docs/."""
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [(p.relative_to(ROOT).as_posix(), lg, body) for p in pages
            for lg, body in re.findall(r"^```(\w*)\n(.*?)^```", p.read_text(), re.S | re.M)
            if lang is None or lg == lang]


def _commands():
    """Every concrete smpnet-bench command line in a block: continuation
    lines joined, comments cut, synopses (`[--x]`, `COMMAND`, `FILE.c`) and
    shell loops left out; with the line that follows a `$ ` command, which
    is what it prints."""
    out = []
    for page, _, body in _blocks():
        lines = body.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            shown = line.startswith("$ ")
            cmd = line[2:] if shown else line
            if not cmd.startswith("smpnet-bench "):
                continue
            cmd = re.split(r"\s+#", cmd)[0].strip()
            if "[" in cmd or re.search(r"\b[A-Z]{2,}|\b[A-Z]\d?\.json|FILE", cmd):
                continue
            printed = lines[i + 1] if shown and i + 1 < len(lines) else None
            out.append(pytest.param(cmd.split()[1:], printed, id=f"{page}: {cmd[:60]}"))
    return out


@pytest.mark.parametrize("argv, printed", _commands())
def test_every_command_in_the_docs_is_one_smpnet_accepts(argv, printed, capsys, tmp_path,
                                                         monkeypatch):
    """What a reader copies parses and validates as written, its run time
    estimated within the bounds (nothing runs); one shown with what it
    prints prints exactly that."""
    from smpnet import bounds, cli
    from smpnet.machine.cpus import parse_cpus

    if printed is not None:
        assert cli.main(argv) == 2
        assert capsys.readouterr().err.strip() == printed
        return
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(cli._compare_sides(argv))
    e = getattr(args, "experiment", None)
    if e is None:
        return              # all: its options parsed; compare's files are the reader's
    if "--calibration" in argv:
        return              # reads the profile the line before it saved: parsed above
    if e.delegate and e.delegate(args):
        from smpnet.experiments import get
        e = get(e.delegate(args))
    cpus = parse_cpus(args.cpus)
    bounds.check_run_time(e.seconds(e.params(args, cpus), cpus), args.long)


def test_the_docs_show_commands_to_check():
    # the parametrisation above found the pages' commands (a filter that
    # dropped them all would pass it vacuously)
    assert len(_commands()) >= 6


@pytest.mark.parametrize("page, code", [
    pytest.param(page, body, id=f"{page}#{i}") for i, (page, _, body)
    in enumerate(_blocks("python"))])
def test_every_python_block_in_the_docs_runs(page, code, capsys, allowed):
    """Pasted as it stands; the machine example needs two real CPUs."""
    if '"0-1"' in code and len(allowed) < 2:
        pytest.skip("the example takes CPUs 0-1; this runner has one")
    exec(compile(code, page, "exec"), {})
    assert capsys.readouterr().out.strip()      # each ends by printing what it shows
