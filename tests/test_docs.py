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
