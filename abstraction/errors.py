"""The abstraction's user-facing error type.

:class:`AbstractionError` is a :class:`stateseer.core.errors.StateseerError`, so the
command line prints its one-line message without a traceback.
"""

from __future__ import annotations

from stateseer.core.errors import StateseerError

__all__ = ["AbstractionError"]


class AbstractionError(StateseerError, ValueError):
    """Input that cannot be abstracted as given: too many states, NaN states, empty split."""
