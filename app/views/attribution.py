"""Deprecated: moved to :mod:`app.explorer.views.attribution`."""

from app.explorer.views.attribution import attribution_note, attribution_strip

__all__ = ["attribution_note", "attribution_strip"]
