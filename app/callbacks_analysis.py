"""Deprecated: the analysis views' callbacks live in :mod:`app.explorer.views`
(``attribution``, ``forcing``, ``nearest``, ``compare``) and are registered with the others
by :func:`app.callbacks.register_callbacks`."""

from __future__ import annotations

from typing import Any

from .explorer.records import record_of
from .explorer.views.forcing import forced_for as _forced_for

__all__ = ["forced_for", "register_analysis_callbacks"]


def register_analysis_callbacks(app: Any, data: Any) -> None:
    """Nothing to do: :func:`app.callbacks.register_callbacks` registers every view."""


def forced_for(active: dict | None, forced: dict | None, data: Any = None
               ) -> dict[str, Any] | None:
    """The forced run if it belongs to the trace on display."""
    return _forced_for(record_of((active or {}).get("main")), forced)
