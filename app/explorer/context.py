"""What the explorer shows of a run, loaded once and only read.

:class:`ExplorerContext` bundles the run (:class:`~stateseer.app.workflows.runview.RunView`)
with the services that load lazily (the model, the nearest-context index) and, with
``serve --compare``, the comparison with a second run. Every view's layout and callbacks
receive the context; nothing in it is changed after it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateseer.app.explorer.services import ContextService, ModelService
from stateseer.app.workflows.comparison import RunComparison
from stateseer.app.workflows.jobs import JobRunner
from stateseer.app.workflows.runview import RunView

__all__ = ["ExplorerContext", "RunView"]


@dataclass(frozen=True)
class ExplorerContext:
    """Everything the views read, built once per app.

    Parameters
    ----------
    data : RunView
        The run.
    models : ModelService
        The model (loaded on first use): typed inputs, attribution, forcing.
    contexts : ContextService
        The nearest-context index and the projection (loaded on first use).
    comparison : RunComparison, optional
        The comparison with a second run (``serve --compare``).
    jobs : JobRunner, optional
        Runs long work started from the page (a repair) as a separate process; None where
        the page may start none (study mode).
    relay : callable, optional
        ``relay(component_id, value)``: what a chained callback passes on within one
        request (:func:`stateseer.app.explorer.registry.fuse`), as the page would receive
        it; study mode strips abstract states there. Default: the value itself.
    """

    data: RunView
    models: ModelService
    contexts: ContextService
    comparison: RunComparison | None = None
    jobs: JobRunner | None = None
    relay: Callable[[Any, Any], Any] | None = None

    @classmethod
    def load(cls, run_dir: str | Path, *, model: Any = None,
             compare: str | Path | RunView | None = None,
             jobs: bool = False) -> ExplorerContext:
        """Load ``run_dir`` (and the run to compare with) into a context.

        ``model`` is your own model (a :class:`stateseer.rnn_models.protocol.Traceable`) when the
        run's ``model.pt`` is not one of the built-in classifiers. ``jobs``: the page may
        start long work (a repair), kept in a temporary folder.
        """
        data = RunView(run_dir)
        models = ModelService(data, model=model)
        other = None
        if compare is not None:
            other = compare if isinstance(compare, RunView) else RunView(compare)
        runner = JobRunner.temporary() if jobs else None
        return cls(data=data, models=models, contexts=ContextService(data, models),
                   comparison=RunComparison(data, other) if other is not None else None,
                   jobs=runner)
