"""``stateseer export``: what exporting costs (#53: the benchmark is benchmarks/exports.py)."""

from __future__ import annotations


def test_an_export_imports_no_clustering():
    """#53: an automaton export is a read and a write: importing its module (and the FSM)
    no longer pulls scikit-learn's clustering in through the package's first import."""
    import subprocess
    import sys

    probe = ("import sys, stateseer.abstraction.automata.export, "
             "stateseer.app.workflows.exports; "
             "print(sorted(m for m in ('sklearn.cluster', 'torch', 'dash') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", out
