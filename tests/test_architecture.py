"""The house rules of issues 11 and 23, checked: one module (or package) per
experiment under a registry, generic commands that name no experiment, no
import cycle, imports only down the layers, no Python file over 400 lines, a
docs page per experiment."""
import ast
import pathlib
import re

import pytest

from smpnet.experiments import EXPERIMENTS

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "smpnet"
GENERIC = ("cli.py", "run_all.py", "report/compare.py", "report/results.py", "report/plot.py",
           "report/report.py")
# a word that is an experiment's name but means something else where it is:
# (file, function it is in) -> why
ALSO_A_WORD = {
    ("report/results.py", "_type"): "JSON's null, naming a value's type",
    ("report/results.py", "_key_value"): "JSON's null, among the values a key may hold",
    ("report/compare.py", "compare"): "JSON's null, a row with no value",
    ("report/compare.py", "_condition_differences"): "the machine's kernel release, a field of `machine`",
    ("report/results.py", "conditions"): "the machine's kernel release, a field of `machine`",
    ("report/plot.py", "footer"): "the machine's kernel release, a field of `machine`",
}
NAMES = {e.name for e in EXPERIMENTS}


def _module(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path):
    """The smpnet modules `path` imports (relative imports resolved)."""
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("smpnet")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            if not base.startswith("smpnet"):
                continue
            for a in node.names:   # `from . import x` imports the module x when there is one
                sub = f"{base}.{a.name}"
                out.add(sub if _exists(sub) else base)
    return out


def _exists(mod):
    p = ROOT.joinpath(*mod.split("."))
    return any(p.with_suffix(x).exists() for x in (".py", ".pyx")) or (p / "__init__.py").exists()


def _graph():
    """module -> the smpnet modules it imports, at module level or in a
    function. An import of a module's own package (`from . import
    __version__`) is left out: Python loads the package first anyway, and the
    package's lazy attributes (PEP 562) load their module only when used."""
    graph = {}
    for p in PKG.rglob("*.py"):
        mod = _module(p)
        graph[mod] = {m for m in _imports(p) if not mod.startswith(m + ".")}
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(m, path):
        state[m] = "open"
        for n in sorted(graph.get(m, ())):
            if n not in graph:
                continue
            if state.get(n) == "open":
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n, path + [n])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def test_the_import_graph_has_no_cycle():
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()))


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _experiment_of(mod):
    """The experiment whose module or package `mod` is part of, or None."""
    parts = mod.split(".")
    if len(parts) >= 3 and parts[:2] == ["smpnet", "experiments"] and parts[2] in NAMES:
        return parts[2]
    return None


def test_each_experiment_is_a_leaf_under_the_registry():
    """Only the registry imports an experiment, and only an experiment's own
    package imports its helpers; no experiment, helper or common module
    imports another experiment or reaches one through the registry."""
    graph = _graph()
    modules = {f"smpnet.experiments.{n}" for n in NAMES}
    assert modules <= set(graph)
    for mod, imports in graph.items():
        for imp in imports:
            owner = _experiment_of(imp)
            if owner is None or owner == _experiment_of(mod):
                continue
            assert mod == "smpnet.experiments" and imp in modules, f"{mod} imports {imp}"
    for p in (PKG / "experiments").rglob("*.py"):
        if p != PKG / "experiments" / "__init__.py":
            assert "smpnet.experiments" not in _imports(p), f"{_module(p)} imports the registry"


def test_each_common_module_is_shared_by_two_experiments_or_more():
    """A module under experiments/common/ that one experiment alone uses
    belongs in that experiment's package."""
    graph = _graph()
    common = [m for m in graph if m.startswith("smpnet.experiments.common.")]
    assert common
    for mod in common:
        users = {_experiment_of(m) for m, imports in graph.items() if mod in imports} - {None}
        assert len(users) >= 2, f"{mod} is used by {sorted(users) or 'no experiment'}"


# The layers, lowest first. A module may import the modules of its own layer
# and of the layers below it; an experiment's modules, those of its own
# package and not another experiment's. The package `smpnet` itself is no
# edge: every module's ancestor, loaded first, its attributes lazy (PEP 562).
LAYERS = (
    ("base", ("smpnet._core", "smpnet.errors", "smpnet.seeds", "smpnet.jsonfile",
              "smpnet.build_flags")),
    ("machine", ("smpnet.machine",)),
    ("measure", ("smpnet.measure",)),
    ("report", ("smpnet.report",)),
    ("record", ("smpnet.experiment", "smpnet.bounds")),
    ("common", ("smpnet.experiments.common",)),
    ("experiment", ()),   # smpnet.experiments.<name>, each a layer of its own width
    ("registry", ()),     # smpnet.experiments itself
    ("top", ("smpnet.cli", "smpnet.entry", "smpnet.run_all", "smpnet.__main__", "smpnet.api",
             "smpnet.runner")),
)
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
# the one import up the layers: (from layer, module) -> why
UP = {("report", "smpnet.experiments"): "plot and results learn the experiments from the "
                                         "registry, at call time, never one by name"}


def _layer(mod):
    """(layer, group) of a module: the group tells one experiment from
    another. A module no layer holds is an error: a new top-level module
    or package takes its place in LAYERS deliberately."""
    if mod in ("smpnet", "smpnet.experiments"):
        return ("top", "") if mod == "smpnet" else ("registry", "")
    for name, prefixes in LAYERS:
        for pre in prefixes:
            if mod == pre or mod.startswith(pre + "."):
                return name, ""
    if _experiment_of(mod):
        return "experiment", _experiment_of(mod)
    raise KeyError(f"{mod} is in no layer of tests/test_architecture.py's LAYERS")


def _upward(graph):
    """The imports of `graph` that go up the layers or across experiments."""
    bad = []
    for mod, imports in graph.items():
        layer, group = _layer(mod)
        for imp in sorted(imports):
            to, to_group = _layer(imp)
            if (RANK[to] < RANK[layer] or (to == layer and to_group == group)
                    or (layer, imp) in UP):
                continue
            bad.append(f"{mod} ({layer}) imports {imp} ({to})")
    return bad


def _layer_graph():
    """module -> the smpnet modules it imports, its ancestors too (a
    package's __init__ runs when any of its modules is imported) but not the
    package `smpnet` itself."""
    return {_module(p): _imports(p) - {"smpnet", _module(p)} for p in PKG.rglob("*.py")}


def test_imports_only_go_down_the_layers():
    graph = _layer_graph()
    assert len(graph) > 40 and sum(map(len, graph.values())) > 150
    for mod in graph:
        _layer(mod)   # every module has its layer
    assert not _upward(graph), "\n".join(_upward(graph))


def test_the_layer_check_finds_an_import_up_or_across():
    ok = {"smpnet.experiments.defer.defer_rows": {"smpnet.experiments.common.net",
                                                   "smpnet.measure.stats"},
          "smpnet.experiments.defer": {"smpnet.experiments.defer.defer_rows"},
          "smpnet.report.plot": {"smpnet.experiments"},
          "smpnet.report.report": {"smpnet.measure.verdict_facts", "smpnet.machine.load"},
          "smpnet.run_all": {"smpnet.experiments", "smpnet.report.report"}}
    assert _upward(ok) == []
    for mod, imp in (("smpnet.machine.segment", "smpnet.measure.stats"),
                     ("smpnet.measure.calibration", "smpnet.report.report"),
                     ("smpnet.report.plot", "smpnet.experiments.arp"),
                     ("smpnet.experiments.common.net", "smpnet.experiments.loopback.kstack"),
                     ("smpnet.experiments.defer", "smpnet.experiments.loopback.seed002"),
                     ("smpnet.experiments.null", "smpnet.experiments"),
                     ("smpnet.experiment", "smpnet.cli")):
        assert len(_upward({mod: {imp}})) == 1, (mod, imp)
    with pytest.raises(KeyError):
        _layer("smpnet.newcomer")


def test_each_layer_says_what_it_is_and_what_it_may_import():
    for pkg in ("machine", "measure", "report", "experiments/common", "experiments"):
        doc = ast.get_docstring(ast.parse((PKG / pkg / "__init__.py").read_text()))
        assert doc and "May import" in doc, pkg


def test_every_package_is_installed():
    """pyproject.toml lists its packages by name: one left out is missing
    from a non-editable install, which an editable one hides."""
    listed = set(re.findall(r'"(smpnet[\w.]*)"',
                            re.search(r"packages = \[([^]]*)\]",
                                      (ROOT / "pyproject.toml").read_text()).group(1)))
    found = {_module(p.parent / "__init__.py") for p in PKG.rglob("__init__.py")}
    assert listed == found | {"smpnet.kernel"}


def _words(text):
    return set(re.findall(r"[A-Za-z_][\w-]*", text))


@pytest.mark.parametrize("name", GENERIC)
def test_the_generic_commands_name_no_experiment(name):
    """No word of a string (docstrings aside), no name and no attribute in
    cli, run_all, compare, results, plot or report is an experiment's name:
    they learn the experiments from the registry."""
    tree = ast.parse((PKG / name).read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    exempt = {id(c) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
              and (name, f.name) in ALSO_A_WORD for c in ast.walk(f)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                found |= _words(node.value) & NAMES
        elif isinstance(node, ast.Name) and node.id in NAMES:
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in NAMES:
            found.add(node.attr)
        elif isinstance(node, ast.alias) and node.name.split(".")[-1] in NAMES:
            found.add(node.name)
    assert not found, f"{name} names {sorted(found)}"


def test_no_python_file_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long


def test_every_experiment_has_its_page_its_subcommand_and_a_compare_metric():
    from smpnet.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for e in EXPERIMENTS:
        assert (ROOT / "docs" / "experiments" / f"{e.name}.md").exists(), e.name
        assert e.name in sub.choices, e.name
        assert e.metric is not None and e.metric.keys, e.name
        if e.kinds:
            assert set(e.kinds[1].values()) <= NAMES, e.name
    assert len(NAMES) == len(EXPERIMENTS)


def test_every_plan_for_all_is_what_its_own_params_would_give():
    """A stage of `all` records the same params as its command: one frozen
    dataclass of Params per experiment, whose fields its record keeps (ab's
    contended settings only in a contended run)."""
    import dataclasses

    from smpnet.cli import build_parser
    from smpnet.experiment import Params
    from smpnet.machine.cpus import parse_cpus

    cpus = parse_cpus("all")
    for e in EXPERIMENTS:
        argv = [e.name, "--cpus", "all"] + ([str(ROOT / "examples" / "aa.c")] if e.name == "ab" else [])
        own = e.params(build_parser().parse_args(argv), cpus)
        assert isinstance(own, Params) and dataclasses.is_dataclass(own), e.name
        with pytest.raises(dataclasses.FrozenInstanceError):
            own.cpus = "0"
        fields = [f.name for f in dataclasses.fields(own) if f.metadata.get("record", True)]
        assert list(own.record()) == [f for f in fields
                                      if f not in own.OPTIONAL or getattr(own, f) is not None]
        if e.plan is not None and len(cpus) >= e.min_cpus:
            assert type(e.plan(cpus, True)) is type(own), e.name
