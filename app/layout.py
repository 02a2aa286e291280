"""Deprecated: the page is built by the explorer's registry
(:meth:`app.explorer.registry.Registry.layout`) from the views' layouts."""

from __future__ import annotations

from typing import Any

from .explorer.context import ExplorerContext
from .explorer.registry import REGISTRY

__all__ = ["build_layout"]


def build_layout(data: Any, initial: dict | None = None) -> Any:
    """The explorer's page (``data``: an :class:`~app.explorer.context.ExplorerContext`
    or a deprecated ``RunData``)."""
    return REGISTRY.layout(data if isinstance(data, ExplorerContext) else data.context,
                           initial)
