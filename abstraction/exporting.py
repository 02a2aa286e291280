"""Deprecated location, kept until ``notebooks/02_exact_automata.ipynb`` imports from the new one.

The run-level workflows moved out of the engine: ``export_run`` and ``load_run_fsm`` to
:mod:`app.workflows.exports`, ``extract_run_dfa`` to :mod:`app.workflows.dfa`. The pure
writers stay in :mod:`abstraction.export`. This shim resolves the old names lazily; it is
the one module of ``abstraction`` allowed to import ``app`` (tests/test_architecture.py).
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []  # names resolved lazily by __getattr__ below


def __getattr__(name: str) -> Any:
    if name in ("DFA_FILE", "extract_run_dfa"):
        from app.workflows import dfa

        return getattr(dfa, name)
    if name in ("export_run", "load_run_fsm"):
        from app.workflows import exports

        return getattr(exports, name)
    raise AttributeError(f"module 'abstraction.exporting' has no attribute {name!r}")
