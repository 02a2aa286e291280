"""Deprecated: moved to :mod:`app.explorer.colors`."""

from app.explorer.colors import CATEGORICAL, class_color, mix_color, text_color_on

__all__ = ["CATEGORICAL", "class_color", "mix_color", "text_color_on"]
