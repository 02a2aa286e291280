"""The notebooks run from top to bottom, and the README's Python snippet runs as written.

Each notebook starts with a ``parameters`` cell that reads ``STATESEER_NB_FAST`` (small
models, short training: every step still runs) and ``STATESEER_NB_RUNS`` (where run
directories go; a temporary directory here, never the repository). Each notebook ends with
a cell that asserts its key figures and prints ``notebook checks passed``. Notebooks are
stored without outputs.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPECTED = ["01_quickstart", "02_exact_automata", "03_diagnosing_misclassifications",
            "04_bring_your_own_model"]
TIMEOUT_S = 180  # per notebook, on 2 cores (the limit)


def test_the_four_notebooks_exist_and_are_stored_without_outputs():
    import nbformat

    assert [p.stem for p in NOTEBOOKS] == EXPECTED
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        first_code = next(c for c in nb.cells if c.cell_type == "code")
        assert "parameters" in first_code.metadata.get("tags", []), path.name
        assert "STATESEER_NB_FAST" in first_code.source and "RUNS_DIR" in first_code.source
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, (
                    f"{path.name} is stored with outputs; clear them before committing")
        assert "notebook checks passed" in nb.cells[-1].source, path.name


def _error_outputs(nb) -> list[str]:
    return [f"{o.get('ename')}: {o.get('evalue')}" for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif "data" in o:
            parts.append(o["data"].get("text/plain", ""))
    return "".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    """Each notebook runs in fast mode through the function ``make docs`` renders the
    tutorials with, and leaves outputs for the site: text, and the figures it draws."""
    from stateseer.testing import execute_notebook

    t0 = time.perf_counter()
    # the kernel's own timeout (TIMEOUT_S per cell) bounds the run
    nb = execute_notebook(path, tmp_path, fast=True, timeout=TIMEOUT_S)
    print(f"{path.stem}: {time.perf_counter() - t0:.1f} s")
    assert _error_outputs(nb) == []
    last = _text(nb.cells[-1])
    assert "notebook checks passed" in last, last[-2000:]
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert len(outputs) >= 5  # the page shows what each step printed
    kinds = {k for o in outputs for k in o.get("data", {})}
    if path.stem != "04_bring_your_own_model":  # 04 prints tables only
        assert kinds & {"image/svg+xml", "text/html", "application/vnd.plotly.v1+json"}, kinds


def _readme_blocks() -> dict[str, str]:
    """The tested code blocks of the README and the guides (``docs/guide/*.md``) by their
    marker: ``<!-- readme-test: KIND NAME -->`` on the line before the fence (``api``,
    ``file NAME``, ``commands NAME``)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in
                     [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))])
    found = re.findall(r"^<!-- readme-test: (.+?) -->\n```\w*\n(.*?)^```", text,
                       flags=re.S | re.M)
    blocks = dict(found)
    assert len(blocks) == len(found), "two README blocks carry the same readme-test marker"
    return blocks


def _readme_python() -> str:
    blocks = _readme_blocks()
    assert "api" in blocks, "the README's Python API block lost its readme-test marker"
    return blocks["api"]


def _run_readme_commands(name: str, cwd: Path) -> None:
    """Run a README bash block as written, line by line (``serve`` is left out: it
    blocks), with ``stateseer`` and ``python`` of this interpreter."""
    import shlex
    import subprocess
    import sys

    for line in _readme_blocks()[f"commands {name}"].splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[:2] == ["stateseer", "serve"]:
            continue
        cmd = ([sys.executable, "-m", "stateseer.app.cli", *words[1:]] if words[0] == "stateseer"
               else [sys.executable, *words[1:]] if words[0] == "python" else words)
        env = {**os.environ, "PYTHONPATH": f"{cwd}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        assert done.returncode == 0, f"{line!r} failed: {done.stderr[-1500:]}"


def test_readme_bring_your_own_model_runs(tmp_path):
    """The README's mymodel.py and its commands, as written: create, record, abstract."""
    (tmp_path / "mymodel.py").write_text(_readme_blocks()["file mymodel.py"], encoding="utf-8")
    _run_readme_commands("byom", tmp_path)
    run = tmp_path / "runs" / "mine"
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert config["model"]["factory"] == "mymodel:build"
    assert (run / "abstraction" / "fsm.json").exists()
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    assert 0.0 <= metrics["test_accuracy"] <= 1.0


def test_readme_traces_from_another_framework_runs(tmp_path):
    """The README's numpy-only writer and its commands, as written."""
    (tmp_path / "write_traces.py").write_text(_readme_blocks()["file write_traces.py"],
                                              encoding="utf-8")
    _run_readme_commands("jax", tmp_path)
    assert (tmp_path / "runs" / "jax" / "abstraction" / "fsm.json").exists()
    assert (tmp_path / "jax_fsm.svg").read_text(encoding="utf-8").lstrip().startswith("<")


def test_readme_python_snippet_runs(tmp_path, monkeypatch):
    """The README's ten lines, verbatim, with the text-model defaults made tiny."""
    import torch

    from stateseer.rnn_models import train as train_module

    small = dict(train_module.DEFAULTS["text"], embed=16, hidden=16, epochs=1)
    monkeypatch.setitem(train_module.DEFAULTS, "text", small)
    monkeypatch.chdir(tmp_path)
    code = _readme_python()
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 12
    namespace: dict = {"__name__": "readme"}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny GRU trains several times faster so on a busy machine
    try:
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        torch.set_num_threads(threads)
    assert (tmp_path / "runs" / "api" / "abstraction" / "fsm.json").exists()
    assert (tmp_path / "fsm.json").exists()
