"""The abstraction's user-facing error type (a :class:`rnn_models.errors.StateseerError`)."""

from __future__ import annotations

from rnn_models.errors import StateseerError

__all__ = ["AbstractionError"]


class AbstractionError(StateseerError, ValueError):
    """Input that cannot be abstracted as given: too many states, NaN states, empty split."""
