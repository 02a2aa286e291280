"""Deprecated: moved to :mod:`app.explorer.views.nearest`."""

from app.explorer.views.nearest import nearest_list, projection_figure

__all__ = ["nearest_list", "projection_figure"]
