"""Exception types whose messages speak to the user.

Every error stateseer raises on bad input is a :class:`StateseerError` with a one-line
message that names the problem and the fix. The command line prints the message alone,
without a traceback. This module imports nothing heavy so that ``abstraction`` and
``app`` can share it without pulling in torch.
"""

from __future__ import annotations

import zipfile

__all__ = ["DAMAGED_NPY", "CheckpointError", "DataError", "StateseerError", "TraceError"]

#: What ``np.load`` raises on a damaged ``.npy``/``.npz`` file: unreadable (OSError), a bad
#: header (ValueError), empty (EOFError) or a broken archive (BadZipFile). Every loader
#: catches exactly these and turns them into its one-line error (or a rebuild).
DAMAGED_NPY: tuple[type[Exception], ...] = (OSError, ValueError, EOFError, zipfile.BadZipFile)


class StateseerError(Exception):
    """Base class: a problem with the user's input, explained in one line."""

    def __init__(self, message: str) -> None:
        message = " ".join(str(message).split())  # always one line
        super().__init__(message)


class DataError(StateseerError, ValueError):
    """A data set, file, column or text that cannot be used as given."""


class CheckpointError(StateseerError):
    """A model checkpoint that is missing, corrupt, or does not match its config."""


class TraceError(StateseerError):
    """Recorded traces that are missing, stale or inconsistent."""
