"""The import contract, checked statically (an AST walk over the checkout; nothing imported):

1. one import name: no code, test, benchmark, notebook or README example imports ``app``,
   ``abstraction`` or ``rnn_models`` as a top-level name; everything is ``stateseer.…``;
2. ``abstraction`` imports from ``rnn_models`` only the torch-free formats layer
   (``stateseer.rnn_models.formats``), and the transitive closure of those imports reaches
   neither torch nor dash, not even through a lazy import inside a function;
3. the formats layer imports nothing of ``rnn_models`` outside itself;
4. ``abstraction`` never imports ``app``, torch or dash;
5. no import loops: the graph of project modules (function-level and ``TYPE_CHECKING``
   imports included) has no cycle;
6. tests and benchmarks stay apart: neither imports the other (what both need is in
   :mod:`stateseer.testing`).

A module's name is the one it installs under: ``rnn_models/formats/rundir.py`` is
``stateseer.rnn_models.formats.rundir``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("rnn_models", "abstraction", "app")
HEAVY = {"torch", "dash"}
FORMATS = "stateseer.rnn_models.formats"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts and parts[0] in LAYERS:
        parts.insert(0, "stateseer")
    return ".".join(parts)


def source(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "stateseer":
        return None
    if len(parts) > 1 and parts[1] in LAYERS:
        parts = parts[1:]
    p = ROOT.joinpath(*parts)
    for candidate in (p.with_suffix(".py"), p / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imported(path: Path) -> set[str]:
    """Every module an ``import`` anywhere in ``path`` names (function bodies included)."""
    pkg = module_name(path)
    if path.name != "__init__.py":
        pkg = pkg.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}  # `from pkg import module`
    return out


def project_files(*folders: str) -> list[Path]:
    return sorted(f for d in folders for f in (ROOT / d).rglob("*.py"))


def package_files() -> list[Path]:
    return project_files("stateseer", *LAYERS)


def with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def closure(start: set[str]) -> dict[str, set[str]]:
    """Project modules reachable from ``start`` (with their package ``__init__``s) and what
    each imports."""
    seen: dict[str, set[str]] = {}
    stack = [m for s in start for m in with_parents(s)]
    while stack:
        m = stack.pop()
        f = source(m)
        if f is None or m in seen:
            continue
        seen[m] = imported(f)
        stack.extend(p for i in seen[m] if i.startswith("stateseer.") for p in with_parents(i))
    return seen


def top(module: str) -> str:
    return module.split(".")[0]


def import_graph() -> nx.DiGraph:
    """Project module → project module it imports (the module itself, not its parents)."""
    g = nx.DiGraph()
    for f in package_files():
        a = module_name(f)
        g.add_node(a)
        for m in imported(f):
            if source(m) is not None and m != a:
                g.add_edge(a, m)
    return g


# -- 1. one import name ----------------------------------------------------------------------
OLD_NAME = re.compile(r"^\s*(?:from|import)\s+(app|abstraction|rnn_models)\b", re.M)


def test_nothing_imports_the_folders_as_top_level_names():
    bad = [f"{f.relative_to(ROOT)}: {m}"
           for f in project_files("stateseer", *LAYERS, "tests", "benchmarks", "docs")
           for m in imported(f) if top(m) in LAYERS]
    for f in [ROOT / "README.md", *(ROOT / "notebooks").glob("*.ipynb"),
              *(ROOT / "docs").rglob("*.md")]:
        text = f.read_text(encoding="utf-8")
        if f.suffix == ".ipynb":
            text = "".join("".join(c["source"]) + "\n" for c in json.loads(text)["cells"]
                           if c["cell_type"] == "code")
        bad += [f"{f.relative_to(ROOT)}: {m.group(0).strip()}" for m in OLD_NAME.finditer(text)]
    assert not bad, f"imports of the old top-level names: {bad}"


def test_module_names_are_the_installed_ones():
    assert module_name(ROOT / "rnn_models" / "formats" / "rundir.py") == \
        "stateseer.rnn_models.formats.rundir"
    assert source("stateseer.app.cli") == ROOT / "app" / "cli.py"
    assert source("stateseer") == ROOT / "stateseer" / "__init__.py"
    assert f"{FORMATS}.errors" in imported(ROOT / "rnn_models" / "formats" / "rundir.py")
    # the model loader imported inside a method is still an import
    assert "stateseer.rnn_models.loading" in imported(ROOT / "rnn_models" / "run.py")
    assert "torch" in closure({"stateseer.rnn_models.run"})["stateseer.rnn_models.loading"]


# -- 2-4. the torch-free layer ---------------------------------------------------------------
def test_abstraction_imports_only_the_formats_layer_of_rnn_models():
    bad = sorted(f"{f.relative_to(ROOT)}: {m}"
                 for f in project_files("abstraction") for m in imported(f)
                 if m.startswith("stateseer.rnn_models") and not m.startswith(FORMATS))
    assert not bad, f"abstraction imports rnn_models outside {FORMATS}: {bad}"


def test_abstraction_never_imports_app_torch_or_dash():
    bad = sorted(f"{f.relative_to(ROOT)}: {m}"
                 for f in project_files("abstraction") for m in imported(f)
                 if top(m) in HEAVY or m.startswith("stateseer.app"))
    assert not bad, f"abstraction imports app, torch or dash: {bad}"


def test_abstraction_closure_through_rnn_models_is_torch_free():
    entry = {m for f in project_files("abstraction") for m in imported(f)
             if m.startswith("stateseer.")}
    reached = closure(entry)
    assert FORMATS in reached  # the walk found the layer it should
    heavy = sorted(f"{m} imports {i}" for m, ims in reached.items() for i in ims
                   if top(i) in HEAVY)
    assert not heavy, f"abstraction reaches torch/dash: {heavy}"


def test_formats_layer_is_closed():
    files = project_files("rnn_models/formats")
    assert len(files) >= 6
    bad = sorted(f"{f.relative_to(ROOT)}: {m}" for f in files for m in imported(f)
                 if (m.startswith("stateseer.") and not m.startswith(FORMATS))
                 or top(m) in HEAVY)
    assert not bad, f"{FORMATS} imports outside itself: {bad}"


def test_package_inits_are_torch_free():
    for f in (ROOT / "stateseer" / "__init__.py", ROOT / "rnn_models" / "__init__.py"):
        assert not {i for i in imported(f) if top(i) in HEAVY}, f


# -- 5. no import loops ----------------------------------------------------------------------
def test_the_graph_sees_relative_and_lazy_edges():
    g = import_graph()
    assert g.has_edge("stateseer.rnn_models.run", "stateseer.rnn_models.loading")  # lazy
    assert g.has_edge("stateseer.abstraction.io", f"{FORMATS}.atomic")  # ..rnn_models...
    assert g.number_of_nodes() == len(package_files())  # every module is a node


def test_no_import_loops():
    loops = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert not loops, f"{len(loops)} import loops: {loops}"


# -- 6. tests and benchmarks apart -----------------------------------------------------------
def test_tests_and_benchmarks_do_not_import_each_other():
    bad = [f"{f.relative_to(ROOT)}: {m}" for f in project_files("tests") for m in imported(f)
           if top(m) == "benchmarks"]
    bad += [f"{f.relative_to(ROOT)}: {m}" for f in project_files("benchmarks")
            for m in imported(f) if top(m) == "tests"]
    assert not bad, f"tests and benchmarks import each other: {bad}"


def test_test_files_are_named_after_the_modules_they_test():
    """``tests/<layer>/.../test_<name>[_<aspect>].py`` tests ``<layer>/.../<name>`` (a module,
    a package or a folder); cross-cutting tests live at the top of ``tests/``, and browser
    tests, grouped by what they need (Chromium), in ``tests/browser``."""
    bad = []
    for f in (ROOT / "tests").rglob("test_*.py"):
        rel = f.relative_to(ROOT / "tests")
        if len(rel.parts) == 1 or rel.parts[0] == "browser":
            continue
        where = ROOT.joinpath(*rel.parts[:-1])
        words = f.stem.removeprefix("test_").split("_")
        names = ["_".join(words[:k]) for k in range(len(words), 0, -1)]
        if not any((where / f"{n}.py").exists() or (where / n).is_dir() for n in names):
            bad.append(str(rel))
    assert not bad, f"test files named after no module: {bad}"
