"""Deprecated: :class:`RunData` was the explorer's one object for a run. It is split now:

- :class:`app.explorer.context.RunView` — the run, read-only (traces, abstraction, FSM);
- :class:`app.explorer.services.ModelService` — the model: typed inputs, attribution,
  forcing; :class:`app.explorer.services.ContextService` — nearest contexts, projection;
- :class:`app.workflows.comparison.RunComparison` — two runs compared;
- :class:`app.explorer.context.ExplorerContext` — the four together, what views read;
- :mod:`app.explorer.query` — the instance table's query.

This module keeps the old names working (trace records as dicts, as before) until every
caller has moved.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .explorer.context import ExplorerContext, RunView
from .explorer.query import InstanceQuery, SplitIndex, query_instances
from .explorer.records import TraceRecord, record_of
from .explorer.services import MAX_INPUT_CHARS, ContextService, ModelService

__all__ = ["MAX_INPUT_CHARS", "InstanceQuery", "RunData", "SplitIndex", "query_instances"]


class RunData:
    """Deprecated facade over :class:`ExplorerContext` (see the module notes).

    Parameters
    ----------
    run_dir : str or Path
    model : Traceable, optional
    """

    def __init__(self, run_dir: str | Path, model: Any = None) -> None:
        view = RunView(run_dir)
        models = ModelService(view, model=model)
        self.context = ExplorerContext(data=view, models=models,
                                       contexts=ContextService(view, models))
        self._other: RunData | None = None

    @classmethod
    def of(cls, context: ExplorerContext) -> RunData:
        """The facade over an already loaded context."""
        obj = cls.__new__(cls)
        obj.context = context
        obj._other = None
        return obj

    def __getattr__(self, name: str) -> Any:
        # run, config, traces, abstraction, fsm, classes, splits, name, index, positions,
        # metrics: the run view's
        if name in ("context", "_other"):
            raise AttributeError(name)
        return getattr(self.context.data, name)

    @property
    def other(self) -> RunData | None:
        """A second run to compare with."""
        return self._other

    @other.setter
    def other(self, value: RunData | None) -> None:
        from .workflows.comparison import RunComparison

        self._other = value
        cmp_ = None if value is None else RunComparison(self.context.data, value.context.data)
        self.context = replace(self.context, comparison=cmp_)

    @property
    def _cache(self):
        return self.context.models.cache

    def _load_model(self):
        return self.context.models.load()

    @staticmethod
    def trace_key(tr: dict[str, Any] | TraceRecord) -> str:
        return record_of(tr).key

    def trace_text(self, text: str) -> dict[str, Any]:
        return self.context.models.trace_text(text).to_store()

    def trace_instance(self, split: str, i: int) -> dict[str, Any]:
        return self.context.data.trace_instance(split, i).to_store()

    def ids_of(self, tr: dict[str, Any]) -> np.ndarray:
        return self.context.models.token_ids(record_of(tr))

    def hidden_of(self, tr: dict[str, Any], step: int) -> np.ndarray:
        return self.context.models.hidden_at(record_of(tr), step)

    def attribution(self, tr: dict[str, Any], method: str = "ig", target: str = "predicted",
                    baseline: str = "pad"):
        return self.context.models.attribution(record_of(tr), method, target, baseline)

    @property
    def centroids(self) -> np.ndarray:
        return self.context.models.centroids

    def force(self, tr: dict[str, Any], step: int | None = None) -> dict[str, Any]:
        return self.context.models.force(record_of(tr), step)

    def context_index(self, build: bool = True):
        return self.context.contexts.index(build=build)

    def nearest(self, tr: dict[str, Any], step: int, k: int = 8, window: int = 5
                ) -> dict[str, Any]:
        return self.context.contexts.nearest(record_of(tr), step, k=k, window=window)

    @property
    def projection(self) -> dict[str, np.ndarray]:
        return self.context.contexts.projection

    def project_trace(self, tr: dict[str, Any]) -> np.ndarray:
        return self.context.contexts.project(record_of(tr))

    def comparison(self, split: str) -> dict[str, Any]:
        from rnn_models.errors import StateseerError

        if self.context.comparison is None:
            raise StateseerError("no run to compare with; serve with --compare OTHER_RUN")
        return self.context.comparison.compare(split)

    def other_trace(self, split: str, i: int) -> dict[str, Any]:
        self.comparison(split)
        return self.context.comparison.other_trace(split, i).to_store()
