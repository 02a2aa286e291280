"""Deprecated: moved to :mod:`app.explorer.views.compare`."""

from app.explorer.views.compare import compare_panel

__all__ = ["compare_panel"]
