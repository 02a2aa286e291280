"""Deprecated location: the analyses moved to :mod:`app.workflows` (``forcing``,
``contexts``). This shim re-exports them until every caller has moved."""

from __future__ import annotations

from .workflows.contexts import context_index, nearest_contexts, projection_sample
from .workflows.forcing import forced_trace, forcing_figures, load_centroids, measure_forcing

__all__ = ["context_index", "forced_trace", "forcing_figures", "load_centroids",
           "measure_forcing", "nearest_contexts", "projection_sample"]
