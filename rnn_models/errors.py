"""Compatibility alias: the error types live in :mod:`rnn_models.formats.errors`."""

from __future__ import annotations

from .formats.errors import CheckpointError, DataError, StateseerError, TraceError

__all__ = ["CheckpointError", "DataError", "StateseerError", "TraceError"]
