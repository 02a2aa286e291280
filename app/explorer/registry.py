"""The explorer's views, in page order: the one list that builds the page, registers the
callbacks and tells study mode which components belong to which view.

Adding a view is one module in :mod:`stateseer.app.explorer.views` ending with ``VIEW = View(...)``
and one line in :data:`VIEWS` (or, in a test or a plug-in, ``REGISTRY.add(VIEW)``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from dash import Dash, Input, Output, State, no_update
from dash.exceptions import PreventUpdate

from stateseer.app.explorer.context import ExplorerContext
from stateseer.app.explorer.page import REGIONS, page
from stateseer.app.explorer.tree import walk
from stateseer.app.explorer.view import Callback, Trigger, View
from stateseer.app.explorer.views import (
    attribution,
    automaton,
    card,
    chart,
    compare,
    core,
    diagram,
    findings,
    forcing,
    input_box,
    nearest,
    patterns,
    sweep,
    table,
    trace,
)

__all__ = ["REGISTRY", "VIEWS", "Registry"]

VIEWS: tuple[View, ...] = (
    core.VIEW,
    diagram.VIEW,
    findings.VIEW,
    card.VIEW,
    patterns.VIEW,
    sweep.VIEW,
    automaton.VIEW,
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

    def state_views(self) -> frozenset[str]:
        """The views that show abstract states (``View.shows_states``)."""
        return frozenset(v.name for v in self.views if v.shows_states)

    def presets(self) -> dict[str, tuple[str, ...]]:
        """Study presets: ``full`` (every optional view) and each name a view lists in
        ``View.presets``, in page order."""
        out: dict[str, tuple[str, ...]] = {"full": tuple(self.names())}
        for v in self.views:
            for p in v.presets:
                out[p] = (*out.get(p, ()), v.name)
        return out

    # -- the page -----------------------------------------------------------------------------
    def layout(self, ctx: ExplorerContext, initial: dict[str, Any] | None = None, *,
               views: Sequence[str] | None = None) -> Any:
        """The page for ``ctx`` opening on the selection ``initial``.

        ``views``: the optional views to place (default: all); the others are not in the
        page at all (the core always is). Callbacks that read a component of a view left
        out get None for it (see :meth:`register`).
        """
        regions: dict[str, list[Any]] = {r: [] for r in REGIONS}
        shown = None if views is None else set(views)
        if shown is not None and shown - set(self.names()):
            raise ValueError(f"unknown views {sorted(shown - set(self.names()))}; "
                             f"views are {self.names()}")
        for view in self.views:
            if shown is not None and view.optional and view.name not in shown:
                continue
            for region, parts in view.layout(ctx, initial or {}).items():
                if region not in regions:
                    raise ValueError(f"view {view.name!r} places components in unknown "
                                     f"region {region!r}; regions are {REGIONS}")
                parts = _as_list(parts)
                _check_owned(view, parts)
                regions[region].extend(parts)
        out = page(ctx, regions)
        if shown is not None:
            out.children = [*out.children, *self._placeholders(ctx, out)]
        return out

    def _placeholders(self, ctx: ExplorerContext, layout: Any) -> list[Any]:
        """Empty hidden components for the outputs, on views left out, of callbacks that
        also update a component on the page (Dash refuses a callback whose outputs are
        only partly in the page). They hold nothing until such a callback writes them."""
        from dash import dcc, html

        present = {i for c in walk(layout) if isinstance(i := getattr(c, "id", None), str)}
        groups: dict[Any, list[Output]] = {}  # per Dash callback (a fuse group is one)
        for n, (_view, cb) in enumerate(self.callbacks(ctx)):
            groups.setdefault(cb.fuse or n, []).extend(cb.outputs)
        missing: dict[str, str] = {}
        for outputs in groups.values():
            outs = [(o.component_id, o.component_property) for o in outputs
                    if isinstance(o.component_id, str)]
            if any(i in present for i, _ in outs):
                missing.update((i, prop) for i, prop in outs if i not in present)
        # of a type that has the property (Dash refuses to set an unknown one)
        return [dcc.Store(id=i) if prop == "data" else
                dcc.Graph(id=i, style={"display": "none"}) if prop == "figure" else
                html.Div(id=i, hidden=True) for i, prop in missing.items()]

    # -- callbacks ----------------------------------------------------------------------------
    def callbacks(self, ctx: ExplorerContext | None = None) -> Iterator[tuple[View, Callback]]:
        """Every ``(view, callback)``; with ``ctx``, only those that apply to it."""
        for view in self.views:
            for cb in view.callbacks:
                if ctx is None or cb.when is None or cb.when(ctx):
                    yield view, cb

    def register(self, app: Dash, ctx: ExplorerContext) -> None:
        """Register every view's callbacks on ``app``: clientside ones as JavaScript, a
        ``fuse`` group as one callback. An Input or State that names a component another
        optional view places is optional (None when that view is not on the page)."""
        groups: dict[str, list[Callback]] = {}
        for view, cb in self.callbacks(ctx):
            inputs = self._optional_deps(view, cb.inputs)
            if cb.fuse:
                groups.setdefault(cb.fuse, []).append(
                    Callback(cb.fn, cb.outputs, inputs, trigger=cb.trigger))
            elif cb.clientside:
                app.clientside_callback(cb.clientside, *_fresh(cb.outputs), *inputs,
                                        prevent_initial_call=cb.prevent_initial_call)
            else:
                app.callback(*_fresh(cb.outputs), *inputs,
                             prevent_initial_call=cb.prevent_initial_call)(cb.bind(ctx))
        for members in groups.values():
            outputs, inputs, run = fuse(members, ctx)
            app.callback(*_fresh(outputs), *inputs)(run)

    def _optional_deps(self, view: View, deps: Sequence[Input | State]
                       ) -> list[Input | State]:
        """``deps`` with those on another optional view's components made optional."""
        others = {i for v in self.views if v.optional and v is not view for i in v.ids}
        out = []
        for d in deps:
            cid = d.component_id
            if isinstance(cid, str) and cid in others and cid not in view.ids:
                d = type(d)(cid, d.component_property, allow_optional=True)
            out.append(d)
        return out

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


def _key(dep: Input | State | Output) -> tuple[str, str]:
    cid = dep.component_id
    return (cid if isinstance(cid, str) else repr(sorted(cid.items())), dep.component_property)


def fuse(members: Sequence[Callback], ctx: ExplorerContext
         ) -> tuple[list[Output], list[Input | State], Any]:
    """One Dash callback for ``members``: ``(outputs, inputs, function)``.

    Its inputs are the union of the members' (an Input in any member is an Input); on a
    call, each member whose own Inputs include a fired one (or every member, on the
    first call) runs with its own values, the others return ``no_update``.

    Members are *chained*: one whose output another member reads runs first, and what
    it writes reaches the reader in the same request, as if that input had fired (the
    core's choice of trace and the views that draw it: one round trip, not two). The
    value passes through ``ctx.relay`` on the way (study mode strips abstract states
    there, as it does from what it sends the page).
    """
    members = _dependency_order(members)
    deps: dict[tuple[str, str], Input | State] = {}
    for cb in members:
        for d in cb.inputs:
            k = _key(d)
            if k not in deps or (isinstance(d, Input) and isinstance(deps[k], State)):
                deps[k] = d
    order = list(deps)
    outputs = [o for cb in members for o in cb.outputs]
    bound = [(cb, cb.bind(ctx), {_key(d) for d in cb.inputs if isinstance(d, Input)})
             for cb in members]
    relay = getattr(ctx, "relay", None) or (lambda _cid, value: value)

    def run(*values: Any) -> list[Any]:
        fired = {_fired_key(p) for p in Trigger.fired_props()}
        first = not fired
        current = dict(zip(order, values, strict=True))
        out: list[Any] = []
        for cb, fn, mine in bound:
            n = len(cb.outputs)
            res: Any = [no_update] * n
            if first or mine & fired:
                try:
                    res = fn(*(current[_key(d)] for d in cb.inputs))
                except PreventUpdate:
                    pass
            res = list(res) if n > 1 else [res]
            for o, value in zip(cb.outputs, res, strict=True):
                k = _key(o)
                if value is not no_update and k in current:  # a later member reads it
                    current[k] = relay(o.component_id, value)
                    fired.add(k)
            out.extend(res)
        return out

    run.__name__ = "fused_" + "_".join(cb.fn.__name__ for cb in members)
    return outputs, [deps[k] for k in order], run


def _dependency_order(members: Sequence[Callback]) -> list[Callback]:
    """``members`` with every writer of a property before its readers (otherwise in the
    given order; a cycle keeps the given order)."""
    left, done = list(members), []
    while left:
        written = {_key(o) for cb in left for o in cb.outputs}
        ready = next((cb for cb in left
                      if not ({_key(d) for d in cb.inputs} & written
                              - {_key(o) for o in cb.outputs})), left[0])
        done.append(ready)
        left.remove(ready)
    return done


def _fired_key(prop_id: str) -> tuple[str, str]:
    """``("id", "prop")`` of a fired ``"id.prop"`` (a pattern id: its JSON, sorted)."""
    cid, _, prop = prop_id.rpartition(".")
    if cid.startswith("{"):
        return (repr(sorted(json.loads(cid).items())), prop)
    return (cid, prop)


def _fresh(outputs: Sequence[Output]) -> list[Output]:
    """New Output objects (Dash renames duplicate outputs in place on registration)."""
    return [Output(o.component_id, o.component_property,
                   allow_duplicate=getattr(o, "allow_duplicate", False)) for o in outputs]


REGISTRY = Registry(VIEWS)
