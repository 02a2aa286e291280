"""Deprecated: moved to :mod:`app.explorer.views.trace` (the token strip) and
:mod:`app.explorer.views.chart` (the probability chart), which take a
:class:`~app.explorer.records.TraceRecord`; these wrappers still take a trace dict."""

from __future__ import annotations

from typing import Any

from app.explorer.records import TraceRecord
from app.explorer.views import chart as _chart
from app.explorer.views import trace as _trace

__all__ = ["flips", "probability_figure", "token_strip"]


def _rec(trace: Any) -> TraceRecord:
    if isinstance(trace, TraceRecord) or trace is None:
        return trace
    return TraceRecord.from_store({"text": "", **trace})


def flips(trace: Any) -> list[int]:
    return _trace.flips(_rec(trace))


def token_strip(trace: Any, classes, **kw: Any):
    return _trace.token_strip(_rec(trace), classes, **kw)


def probability_figure(trace: Any, classes, *, compare: Any = None, forced: Any = None):
    return _chart.probability_figure(_rec(trace), classes, compare=_rec(compare),
                                     forced=forced)
