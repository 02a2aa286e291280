"""Deprecated: moved to :mod:`abstraction.colors`."""

from abstraction.colors import CATEGORICAL, class_color, mix_color, text_color_on

__all__ = ["CATEGORICAL", "class_color", "mix_color", "text_color_on"]
