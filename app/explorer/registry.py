"""The explorer's views, in page order: the one list that builds the page, registers the
callbacks and tells study mode which components belong to which view.

Adding a view is one module in :mod:`app.explorer.views` ending with ``VIEW = View(...)``
and one line in :data:`VIEWS` (or, in a test or a plug-in, ``REGISTRY.add(VIEW)``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from dash import Dash, Output

from .context import ExplorerContext
from .page import REGIONS, page
from .view import Callback, View
from .views import (
    attribution,
    card,
    chart,
    compare,
    core,
    diagram,
    forcing,
    input_box,
    nearest,
    patterns,
    table,
    trace,
)

__all__ = ["REGISTRY", "VIEWS", "Registry"]

VIEWS: tuple[View, ...] = (
    core.VIEW,
    diagram.VIEW,
    card.VIEW,
    patterns.VIEW,
    table.VIEW,
    input_box.VIEW,
    compare.VIEW,
    trace.VIEW,
    attribution.VIEW,
    forcing.VIEW,
    chart.VIEW,
    nearest.VIEW,
)


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


class Registry:
    """An ordered set of views.

    Parameters
    ----------
    views : sequence of View
        In page order (within a region, earlier views come first).
    """

    def __init__(self, views: Sequence[View]) -> None:
        names = [v.name for v in views]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"views named twice: {sorted(dup)}")
        self.views = tuple(views)

    def add(self, view: View) -> Registry:
        """A registry with ``view`` added at the end."""
        return Registry([*self.views, view])

    def __getitem__(self, name: str) -> View:
        for v in self.views:
            if v.name == name:
                return v
        raise KeyError(f"no view {name!r}; views are {self.names()}")

    def names(self, optional_only: bool = True) -> list[str]:
        """The views' names (by default those a study condition may leave out)."""
        return [v.name for v in self.views if v.optional or not optional_only]

    # -- the page -----------------------------------------------------------------------------
    def layout(self, ctx: ExplorerContext, initial: dict[str, Any] | None = None) -> Any:
        """The page for ``ctx`` opening on the selection ``initial``."""
        regions: dict[str, list[Any]] = {r: [] for r in REGIONS}
        for view in self.views:
            for region, parts in view.layout(ctx, initial or {}).items():
                if region not in regions:
                    raise ValueError(f"view {view.name!r} places components in unknown "
                                     f"region {region!r}; regions are {REGIONS}")
                parts = _as_list(parts)
                _check_owned(view, parts)
                regions[region].extend(parts)
        return page(ctx, regions)

    # -- callbacks ----------------------------------------------------------------------------
    def callbacks(self, ctx: ExplorerContext | None = None) -> Iterator[tuple[View, Callback]]:
        """Every ``(view, callback)``; with ``ctx``, only those that apply to it."""
        for view in self.views:
            for cb in view.callbacks:
                if ctx is None or cb.when is None or cb.when(ctx):
                    yield view, cb

    def register(self, app: Dash, ctx: ExplorerContext) -> None:
        """Register every view's callbacks on ``app``."""
        for _view, cb in self.callbacks(ctx):
            app.callback(*_fresh(cb.outputs), *cb.inputs,
                         prevent_initial_call=cb.prevent_initial_call)(cb.bind(ctx))

    # -- what study mode reads ----------------------------------------------------------------
    def targets(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Per optional view, what it places on the page: ``("id", X)`` or ``("tab", X)``."""
        return {v.name: tuple(("id", i) for i in v.ids) + tuple(("tab", t) for t in v.tabs)
                for v in self.views if v.optional}

    def component_ids(self, name: str) -> frozenset[str]:
        """Ids of the components that belong to view ``name``: those it places and those
        its callbacks update or listen to (pattern-matching ids: their ``type``), less
        the core's shared stores."""
        view = self[name]
        own = set(view.ids)
        for cb in view.callbacks:
            own |= cb.ids()
        shared = set().union(*(v.ids for v in self.views if not v.optional))
        return frozenset(own if not view.optional else own - shared)


def _check_owned(view: View, parts: list[Any]) -> None:
    """Every component a view places is declared in its ``ids`` or ``tabs``."""
    for c in parts:
        if type(c).__name__ == "Tab":
            ok = getattr(c, "value", None) in view.tabs
        else:
            ok = getattr(c, "id", None) in view.ids
        if not ok:
            what = f"tab {getattr(c, 'value', None)!r}" if type(c).__name__ == "Tab" else \
                f"component {type(c).__name__} id={getattr(c, 'id', None)!r}"
            raise ValueError(f"view {view.name!r} places {what} that its View does not "
                             "declare; add it to ids= (or tabs=)")


def _fresh(outputs: Sequence[Output]) -> list[Output]:
    """New Output objects (Dash renames duplicate outputs in place on registration)."""
    return [Output(o.component_id, o.component_property,
                   allow_duplicate=getattr(o, "allow_duplicate", False)) for o in outputs]


REGISTRY = Registry(VIEWS)
