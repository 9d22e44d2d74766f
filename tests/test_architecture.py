"""The house rules of issue 11, checked: one module per experiment under a
registry, generic commands that name no experiment, no import cycle, no
Python file over 400 lines, a docs page per experiment."""
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


def test_each_experiment_module_is_a_leaf_under_the_registry():
    """Only the registry imports an experiment module, and no experiment
    module imports another or reaches one through the registry."""
    graph = _graph()
    modules = {f"smpnet.experiments.{n}" for n in NAMES}
    assert modules <= set(graph)
    for mod, imports in graph.items():
        if mod != "smpnet.experiments":
            assert not imports & modules, f"{mod} imports {imports & modules}"
    for mod in modules:
        path = PKG / "experiments" / (mod.rsplit(".", 1)[1] + ".py")
        assert "smpnet.experiments" not in _imports(path), f"{mod} imports the registry"


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
    """A stage of `all` records the same params as its command: the same keys."""
    from smpnet.cli import build_parser

    for e in EXPERIMENTS:
        if e.plan is None:
            continue
        args = build_parser().parse_args([e.name, "--cpus", "all"])
        from smpnet.machine.cpus import parse_cpus
        cpus = parse_cpus("all")
        if len(cpus) < e.min_cpus:
            continue
        own = set(e.params(args, cpus))
        planned = set(e.plan(cpus, True)) - ({"scale"} if "scale" not in own else set())
        assert planned == own, (e.name, planned ^ own)
