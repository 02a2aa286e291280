"""What a view declares: its name, its layout, its callbacks, the ids it owns.

A view module ends with one ``VIEW = View(...)``; :mod:`stateseer.app.explorer.registry` lists
the views. A callback is a module-level function ``fn(ctx, *values)`` (or
``fn(ctx, trigger, *values)`` with ``trigger=True``) that takes plain data from the
page and returns plain data or components: a unit test calls it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dash import Input, Output, State
from dash.exceptions import PreventUpdate

from stateseer.app.workflows.records import StoreError

if TYPE_CHECKING:
    from stateseer.app.explorer.context import ExplorerContext

__all__ = ["Callback", "Layout", "Trigger", "View", "js", "select_outputs"]

# region name -> the components a view places there, in page order
Layout = Mapping[str, Any]


@dataclass(frozen=True)
class Trigger:
    """What fired a callback: the component id and the new value of its property.

    ``Trigger("diagram")``; a pattern-matching id is a dict,
    ``Trigger({"type": "token", "index": 3}, 1)``.
    """

    id: str | dict[str, Any] | None = None
    value: Any = None

    @classmethod
    def current(cls) -> Trigger:
        """The trigger of the running Dash callback."""
        from dash import ctx

        trig = ctx.triggered
        return cls(ctx.triggered_id, trig[0].get("value") if trig else None)

    @staticmethod
    def fired_props() -> list[str]:
        """``"id.prop"`` of every Input that fired the running Dash callback (none on the
        page's first call)."""
        from dash import ctx

        return list(ctx.triggered_prop_ids)

    def is_type(self, kind: str) -> bool:
        """Whether a pattern-matching id of ``kind`` fired (with a truthy value: a
        component re-rendered with ``n_clicks=0`` fires too, and is no click)."""
        return isinstance(self.id, dict) and self.id.get("type") == kind and bool(self.value)


@dataclass(frozen=True)
class Callback:
    """One Dash callback of a view.

    Parameters
    ----------
    fn : callable
        ``fn(ctx, *values)``, values in the order of ``inputs`` (Inputs and States);
        ``fn(ctx, trigger, *values)`` when ``trigger`` is true.
    outputs : sequence of Output
    inputs : sequence of Input or State
    trigger : bool
        Pass a :class:`Trigger` (what fired the callback).
    prevent_initial_call : bool
    when : callable, optional
        ``when(ctx)``: register only if true (e.g. only with a compared run).
    clientside : str, optional
        The same rule in JavaScript (``function (...values) {...}``, values in the order
        of ``inputs``): the page runs it without a server round trip, and ``fn`` stays its
        reference (unit tests). Only for callbacks that need nothing but the page's data.
    fuse : str, optional
        Callbacks of the same ``fuse`` group are registered as ONE Dash callback (the
        union of their inputs, their outputs one after the other): one request and one
        render for views that follow the same store. A member runs only when one of its
        own Inputs fired (its outputs are left unchanged otherwise).
    """

    fn: Callable[..., Any]
    outputs: Sequence[Output]
    inputs: Sequence[Input | State]
    trigger: bool = False
    prevent_initial_call: bool = False
    when: Callable[[ExplorerContext], bool] | None = None
    clientside: str | None = None
    fuse: str | None = None

    def bind(self, ctx: ExplorerContext) -> Callable[..., Any]:
        """The function Dash calls: ``fn`` with ``ctx`` (and the trigger) filled in."""
        fn, trigger = self.fn, self.trigger

        def run(*values: Any) -> Any:
            try:
                if trigger:
                    return fn(ctx, Trigger.current(), *values)
                return fn(ctx, *values)
            except StoreError as exc:  # a forged store: refused, nothing updated
                raise PreventUpdate from exc

        run.__name__ = fn.__name__
        run.__doc__ = fn.__doc__
        return run

    def ids(self) -> set[str]:
        """Ids of its outputs and Inputs (pattern-matching ids: their type)."""
        out = set()
        for dep in (*self.outputs, *self.inputs):
            if isinstance(dep, State):
                continue
            cid = dep.component_id
            out.add(str(cid.get("type")) if isinstance(cid, dict) else str(cid))
        return out


@dataclass(frozen=True)
class View:
    """One view of the explorer.

    Parameters
    ----------
    name : str
        Its name; study conditions list views by these names.
    layout : callable
        ``layout(ctx, initial)`` -> ``{region: component or list of components}``
        (regions: see :data:`stateseer.app.explorer.page.REGIONS`); ``initial`` is the page's
        first selection.
    callbacks : sequence of Callback
    ids : sequence of str
        The ids of the components it places (each must have one), so that study mode can
        hide or refuse it; a ``dcc.Tab`` is named by its ``value`` in ``tabs`` instead.
    tabs : sequence of str
    optional : bool
        False for the page's core (stores, the active trace), which every condition has.
    shows_states : bool
        It shows abstract states (a study condition without any such view hides the
        states everywhere, and the server refuses requests that name one).
    presets : sequence of str
        The study presets it belongs to besides ``full`` (e.g. ``baseline``: what a
        participant without state abstraction sees).
    """

    name: str
    layout: Callable[[ExplorerContext, dict[str, Any]], Layout]
    callbacks: Sequence[Callback] = ()
    ids: Sequence[str] = ()
    tabs: Sequence[str] = ()
    optional: bool = True
    shows_states: bool = False
    presets: Sequence[str] = ()
    doc: str = field(default="", compare=False)


def js(source: str, **names: str) -> str:
    """A clientside callback's JavaScript with ``$name`` placeholders filled in (component
    ids from :mod:`stateseer.app.explorer.ids`, so that no id is spelled twice).

    >>> js('function (x) { return "$sel"; }', sel="selection")
    'function (x) { return "selection"; }'
    """
    from string import Template

    return Template(source).substitute(names)


def select_outputs() -> list[Output]:
    """The outputs of a callback that changes the selection: the selection store and the
    page URL (every view that handles its own clicks writes both; new objects for every
    callback, as Dash marks duplicate outputs in place)."""
    from stateseer.app.explorer import ids

    return [Output(ids.SELECTION, "data", allow_duplicate=True),
            Output(ids.URL, "search", allow_duplicate=True)]
