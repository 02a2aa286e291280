"""Deprecated: moved to :mod:`app.explorer.views.card` and :mod:`app.explorer.views.patterns`."""

from app.explorer.views.card import state_card
from app.explorer.views.patterns import pattern_list

__all__ = ["pattern_list", "state_card"]
