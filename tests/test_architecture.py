"""The import contract and the house rules, checked statically (an AST walk over the
checkout; nothing imported):

1. one import name: no code, test, benchmark, notebook or README example imports ``core``,
   ``app``, ``abstraction`` or ``rnn_models`` as a top-level name; everything is
   ``stateseer.…``;
2. the layers import downwards only: ``core`` (torch-free: errors, the run layout, readers,
   writers, the engine) imports nothing else of stateseer; ``rnn_models`` and
   ``abstraction`` import ``core`` and themselves (never each other); ``abstraction``'s
   closure reaches neither torch nor dash, not even through a lazy import; no layer
   imports the public face (``stateseer``) or ``stateseer.testing``;
3. no import loops: the graph of project modules (function-level and ``TYPE_CHECKING``
   imports included) has no cycle;
4. one road to a name: no module imports a name from a module that only re-exports it
   (it imports it from the module that defines it);
5. the run directory's layout is spelled once, in :mod:`stateseer.core.layout`: no other
   module joins one of its names onto a path;
6. one default state count (:data:`stateseer.core.defaults.N_STATES`), and no two public
   functions of the package share a name unless they implement one protocol;
7. tests and benchmarks stay apart: neither imports the other (what both need is in
   :mod:`stateseer.testing`).

A module's name is the one it installs under: ``core/rundir.py`` is
``stateseer.core.rundir``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("core", "rnn_models", "abstraction", "app")
HEAVY = {"torch", "dash"}
CORE = "stateseer.core"


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
    assert module_name(ROOT / "core" / "rundir.py") == "stateseer.core.rundir"
    assert source("stateseer.app.cli.main") == ROOT / "app" / "cli" / "main.py"
    assert source("stateseer") == ROOT / "stateseer" / "__init__.py"
    assert f"{CORE}.errors" in imported(ROOT / "core" / "rundir.py")
    # the model loader imported inside a method is still an import
    assert "stateseer.rnn_models.loading" in imported(ROOT / "rnn_models" / "run.py")
    assert "torch" in closure({"stateseer.rnn_models.run"})["stateseer.rnn_models.loading"]


# -- 2. the layers import downwards -----------------------------------------------------------
#: what each layer may import of stateseer besides itself
ALLOWED = {"core": (), "rnn_models": ("core",), "abstraction": ("core",),
           "app": ("core", "rnn_models", "abstraction")}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "stateseer" and parts[1] in LAYERS \
        else None


def test_layers_import_downwards_only():
    bad = []
    for layer, allowed in ALLOWED.items():
        for f in project_files(layer):
            for m in imported(f):
                if top(m) != "stateseer":
                    continue
                target = layer_of(m)
                if m in ("stateseer", "stateseer.testing") or m.startswith("stateseer.testing."):
                    bad.append(f"{f.relative_to(ROOT)}: {m} (the public face, upwards)")
                elif target is None and source(m) is not None:
                    bad.append(f"{f.relative_to(ROOT)}: {m}")
                elif target not in (layer, *allowed, None):
                    bad.append(f"{f.relative_to(ROOT)}: {m}")
    assert not bad, f"imports against the layers' direction: {bad}"


def test_the_direction_check_knows_the_layers():
    assert layer_of("stateseer.core.rundir") == "core"
    assert layer_of("stateseer.app.cli.main") == "app"
    assert layer_of("stateseer") is None and "app" not in ALLOWED["abstraction"]


def test_heavy_imports_stay_out_of_core_and_abstraction():
    bad = sorted(f"{f.relative_to(ROOT)}: {m}"
                 for f in project_files("core", "abstraction") for m in imported(f)
                 if top(m) in HEAVY)
    assert not bad, f"core/abstraction import torch or dash: {bad}"


def test_abstraction_closure_is_torch_free():
    entry = {m for f in project_files("abstraction") for m in imported(f)
             if m.startswith("stateseer.")}
    reached = closure(entry)
    assert CORE in reached  # the walk found the layer it should
    heavy = sorted(f"{m} imports {i}" for m, ims in reached.items() for i in ims
                   if top(i) in HEAVY)
    assert not heavy, f"abstraction reaches torch/dash: {heavy}"


def test_package_inits_are_torch_free():
    for f in (ROOT / "stateseer" / "__init__.py", ROOT / "rnn_models" / "__init__.py",
              ROOT / "core" / "__init__.py"):
        assert not {i for i in imported(f) if top(i) in HEAVY}, f


# -- 3. no import loops ----------------------------------------------------------------------
def test_the_graph_sees_relative_and_lazy_edges():
    g = import_graph()
    assert g.has_edge("stateseer.rnn_models.run", "stateseer.rnn_models.loading")  # lazy
    assert g.has_edge("stateseer.abstraction.automata.io", f"{CORE}.atomic")  # ..rnn_models...
    assert g.number_of_nodes() == len(package_files())  # every module is a node


def test_no_import_loops():
    loops = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert not loops, f"{len(loops)} import loops: {loops}"


# -- 4. one road to a name ----------------------------------------------------------------------
def top_level_names(path: Path) -> tuple[set[str], set[str]]:
    """(names ``path`` defines, names it only imports) at module level."""
    defined: set[str] = set()
    brought: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            brought |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    return defined, brought - defined


def reexport_imports(files: list[Path]) -> list[str]:
    """``from M import n`` where M only imports ``n`` from elsewhere."""
    bad = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            mod = next((m for m in imported_from(f, node)), None)
            src = source(mod) if mod else None
            if src is None:
                continue
            _, only_imported = top_level_names(src)
            bad += [f"{f.relative_to(ROOT)}:{node.lineno}: {mod}.{a.name}" for a in node.names
                    if a.name in only_imported and source(f"{mod}.{a.name}") is None]
    return bad


def imported_from(path: Path, node: ast.ImportFrom) -> list[str]:
    pkg = module_name(path)
    if path.name != "__init__.py":
        pkg = pkg.rpartition(".")[0]
    if node.level:
        base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
        return [".".join(base + ([node.module] if node.module else []))]
    return [node.module or ""]


def test_no_import_goes_through_a_reexport():
    bad = reexport_imports(package_files())
    assert not bad, f"{len(bad)} imports through a re-export (import from the defining " \
        f"module): {bad}"


def test_the_reexport_check_finds_one():
    # stateseer.rnn_models.engine re-exports engine_scope from stateseer.core.engine
    probe = ROOT / "app" / "_probe_reexport.py"
    probe.write_text("from stateseer.rnn_models.engine import engine_scope\n", encoding="utf-8")
    try:
        assert reexport_imports([probe]) == [
            "app/_probe_reexport.py:1: stateseer.rnn_models.engine.engine_scope"]
    finally:
        probe.unlink()


def test_the_public_face_names_defining_modules():
    """``stateseer.NAME`` is loaded from the module that defines NAME, not a re-export."""
    tree = ast.parse((ROOT / "stateseer" / "__init__.py").read_text(encoding="utf-8"))
    api = next(ast.literal_eval(n.value) for n in ast.walk(tree)
               if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "_API")
    bad = [f"{name}: {mod}" for name, mod in api.items()
           if name not in top_level_names(source(f"stateseer.{mod}"))[0]]
    assert not bad, f"the face names re-exporting modules: {bad}"


# -- 5. the run layout is spelled once --------------------------------------------------------
LAYOUT = ROOT / "core" / "layout.py"


def layout_names() -> set[str]:
    tree = ast.parse(LAYOUT.read_text(encoding="utf-8"))
    return {n.value.value for n in tree.body if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
            and n.targets[0].id.isupper() and n.targets[0].id != "WORK_SUFFIX"}


def path_literals(path: Path, names: set[str]) -> list[str]:
    """Layout names joined onto a path: ``p / "traces"``, ``p.joinpath("fsm.json")``,
    ``os.path.join(p, "model.pt")`` or a literal such as ``"abstraction/dfa.json"``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        parts: list[ast.expr] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = [node.left, node.right]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("joinpath",
                                                                                "join"):
            parts = list(node.args)
        for p in parts:
            if isinstance(p, ast.Constant) and isinstance(p.value, str) and (
                    p.value in names or (p.value.split("/")[0] in names and "/" in p.value)):
                out.append(f"{path.relative_to(ROOT)}:{p.lineno}: {p.value!r}")
    return out


def test_the_run_layout_is_spelled_once():
    names = layout_names()
    assert {"config.json", "traces", "fsm.json", "findings.json"} <= names
    bad = [hit for f in package_files() if f != LAYOUT for hit in path_literals(f, names)]
    assert not bad, f"run layout paths spelled outside core/layout.py: {bad}"


# -- 6. one default, one name per function ---------------------------------------------------
STATE_PARAMS = {"n_states", "states", "auto_cap"}


def state_count_literals(path: Path) -> list[str]:
    """Literal defaults of a state count: ``n_states: int = 40``, ``--states`` or
    ``--auto-cap`` with ``default=40``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults, strict=True))
            pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d]
            out += [f"{path.relative_to(ROOT)}:{d.lineno}: {k.arg}={d.value}"
                    for k, d in pairs if k.arg in STATE_PARAMS and isinstance(d, ast.Constant)
                    and isinstance(d.value, int) and not isinstance(d.value, bool)]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags = {c.value for c in node.args if isinstance(c, ast.Constant)}
            if flags & {"--states", "--auto-cap"}:
                out += [f"{path.relative_to(ROOT)}:{k.value.lineno}: {sorted(flags)}="
                        f"{k.value.value}" for k in node.keywords if k.arg == "default"
                        and isinstance(k.value, ast.Constant) and isinstance(k.value.value, int)]
    return out


def test_the_default_state_count_is_one_constant():
    bad = [hit for f in package_files() for hit in state_count_literals(f)]
    assert not bad, f"state counts written as literals (use N_STATES): {bad}"


#: names several modules define on purpose: each implements one protocol
PROTOCOL_NAMES = {"layout", "register", "component_ids", "job_status"}


def test_no_two_public_functions_share_a_name():
    where: dict[str, list[str]] = {}
    for f in package_files():
        for node in ast.parse(f.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) \
                    and not node.name.startswith("_") and node.name not in PROTOCOL_NAMES:
                where.setdefault(node.name, []).append(str(f.relative_to(ROOT)))
    twins = {k: v for k, v in where.items() if len(v) > 1}
    assert not twins, f"public names defined twice: {twins}"


# -- 7. tests and benchmarks apart -----------------------------------------------------------
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
