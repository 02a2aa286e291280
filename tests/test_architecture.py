"""The import contract, checked statically (an AST walk; nothing is imported):

1. ``abstraction`` imports from ``rnn_models`` only the torch-free formats layer
   (``rnn_models.formats``), and the transitive closure of those imports through
   ``rnn_models`` reaches neither torch nor dash, not even through a lazy import inside a
   function;
2. ``rnn_models.formats`` imports nothing of ``rnn_models`` outside itself;
3. ``abstraction`` never imports ``app``, torch or dash.

A package ``__init__`` counts as imported on the way to any of its modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"torch", "dash"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


def source(module: str) -> Path | None:
    p = ROOT.joinpath(*module.split("."))
    for candidate in (p.with_suffix(".py"), p / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


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
        stack.extend(p for i in seen[m] if i.split(".")[0] == "rnn_models"
                     for p in with_parents(i))
    return seen


def top(module: str) -> str:
    return module.split(".")[0]


def test_relative_and_function_level_imports_are_seen():
    assert "rnn_models.formats.errors" in imported(ROOT / "rnn_models" / "formats" / "rundir.py")
    assert "rnn_models.formats.traces" in imported(ROOT / "rnn_models" / "formats" / "__init__.py")
    # rnn_models.run imports the model loader inside a method: still an import
    assert "rnn_models.loading" in imported(ROOT / "rnn_models" / "run.py")
    assert "torch" in closure({"rnn_models.run"})["rnn_models.loading"]


def test_abstraction_imports_only_the_formats_layer_of_rnn_models():
    bad = sorted(f"{f.relative_to(ROOT)}: {m}"
                 for f in (ROOT / "abstraction").rglob("*.py") for m in imported(f)
                 if top(m) == "rnn_models" and m != "rnn_models"
                 and not m.startswith("rnn_models.formats"))
    assert not bad, f"abstraction imports rnn_models outside rnn_models.formats: {bad}"


def test_abstraction_never_imports_app_torch_or_dash():
    bad = sorted(f"{f.relative_to(ROOT)}: {m}"
                 for f in (ROOT / "abstraction").rglob("*.py") for m in imported(f)
                 if top(m) in HEAVY | {"app"})
    assert not bad, f"abstraction imports app, torch or dash: {bad}"


def test_abstraction_closure_through_rnn_models_is_torch_free():
    entry = {m for f in (ROOT / "abstraction").rglob("*.py") for m in imported(f)
             if top(m) == "rnn_models"}
    reached = closure(entry)
    assert "rnn_models.formats" in reached  # the walk found the layer it should
    heavy = sorted(f"{m} imports {i}" for m, ims in reached.items() for i in ims
                   if top(i) in HEAVY)
    assert not heavy, f"abstraction reaches torch/dash through rnn_models: {heavy}"


def test_formats_layer_is_closed():
    files = list((ROOT / "rnn_models" / "formats").rglob("*.py"))
    assert len(files) >= 6
    bad = sorted(f"{f.relative_to(ROOT)}: {m}" for f in files for m in imported(f)
                 if (top(m) == "rnn_models" and m != "rnn_models"
                     and not m.startswith("rnn_models.formats")) or top(m) in HEAVY | {"app"})
    assert not bad, f"rnn_models.formats imports outside itself: {bad}"


def test_rnn_models_package_init_is_torch_free():
    ims = imported(ROOT / "rnn_models" / "__init__.py")
    assert not {i for i in ims if top(i) in HEAVY}
