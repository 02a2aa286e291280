"""Deprecated: the callbacks live in the explorer's views now (:mod:`app.explorer.views`),
registered by :meth:`app.explorer.registry.Registry.register`."""

from __future__ import annotations

from typing import Any

from dash import Dash

from .explorer.context import ExplorerContext
from .explorer.registry import REGISTRY

__all__ = ["register_callbacks"]


def register_callbacks(app: Dash, data: Any) -> None:
    """Attach every callback of the explorer to ``app`` (``data``: an
    :class:`~app.explorer.context.ExplorerContext` or a deprecated ``RunData``)."""
    REGISTRY.register(app, data if isinstance(data, ExplorerContext) else data.context)
