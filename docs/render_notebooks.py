"""Render the tutorials for the documentation site: run each notebook of ``notebooks/`` top to
bottom and write it, with its outputs, to ``docs/tutorials/`` (not kept in git), where
mkdocs-jupyter turns it into a page.

``make docs`` runs this before ``mkdocs build``. By default the notebooks run in the test
suite's fast mode (small models, short training; a few minutes in all on two cores), and
each page says so; ``--full`` runs them at full size.

Run: ``python docs/render_notebooks.py [--full] [--timeout SECONDS]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    import nbformat

    from stateseer.testing import execute_notebook

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="full-size models (slow)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = p.parse_args(argv)
    # plotly figures as HTML with plotly.js inlined once per page (the pages have no notebook
    # front end to render plotly's own mimetype), and the mimetype beside it
    os.environ.setdefault("PLOTLY_RENDERER", "plotly_mimetype+notebook")
    out = ROOT / "docs" / "tutorials"
    out.mkdir(exist_ok=True)
    mode = ("at full size" if args.full else
            "in the test suite's fast mode (small models, short training: every step runs, "
            "the figures are those of small models; run the notebook yourself for the "
            "full-size ones)")
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            nb = execute_notebook(path, Path(work), fast=not args.full, timeout=args.timeout)
        nb.cells.insert(1, nbformat.v4.new_markdown_cell(
            f"*This page is the notebook `notebooks/{path.name}` as `make docs` ran it, "
            f"{mode}.*"))
        nbformat.write(nb, out / path.name)
        print(f"{path.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
