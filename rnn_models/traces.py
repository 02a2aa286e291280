"""Compatibility alias: the traces format lives in :mod:`rnn_models.formats.traces`."""

from __future__ import annotations

from .formats.traces import ARRAYS, FORMAT, VERSION, SplitTraces, Traces

__all__ = ["ARRAYS", "FORMAT", "VERSION", "SplitTraces", "Traces"]
