"""State forcing: re-run the trace with its hidden state replaced by its abstract state's
centroid (after every token, or after the clicked one) and see whether the prediction
survives. The forced run is drawn on the trace chart."""

from __future__ import annotations

from typing import Any

from dash import Input, Output, State, dcc, html, no_update

from stateseer.app.explorer import ids
from stateseer.app.explorer.page import model_message
from stateseer.app.explorer.view import Callback, Trigger, View
from stateseer.app.explorer.views.core import active_of
from stateseer.app.workflows.records import TraceRecord
from stateseer.core.errors import StateseerError

__all__ = ["VIEW", "force", "forced_for", "reset"]


def forced_for(main: TraceRecord | None, forced: dict[str, Any] | None
               ) -> dict[str, Any] | None:
    """The forced run if it belongs to the trace on display."""
    if main is None or not forced or forced.get("key") != main.key:
        return None
    return forced


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    panel = html.Div([
        html.B("State forcing "),
        html.Button("force every step", id=ids.FORCE_ALL, n_clicks=0,
                    title="replace the hidden state after every token by its abstract "
                          "state's centroid and run on"),
        html.Button("force clicked step", id=ids.FORCE_STEP, n_clicks=0,
                    title="replace only the hidden state after the clicked token"),
        html.Button("clear", id=ids.FORCE_CLEAR, n_clicks=0),
        html.Span(id=ids.FORCE_NOTE, className="force-note"),
    ], id=ids.FORCING_PANEL, className="forcing-panel")
    return {"trace": panel, "stores": dcc.Store(id=ids.FORCED)}


def reset(ctx, active, forced):
    """A new trace drops the forced run and its note (in the same request that draws the
    trace: no chain of callbacks)."""
    return (None if forced is not None else no_update), ""


def force(ctx, trigger: Trigger, _all, _step, _clear, active, step):
    """Force every step (or the selected one); "clear" drops the run."""
    tr, _ = active_of(active)
    if trigger.id == ids.FORCE_CLEAR or tr is None:
        return None, ""
    if not tr.tokens:
        return None, "An empty input has no hidden state to force."
    at = None
    if trigger.id == ids.FORCE_STEP:
        at = tr.n_tokens - 1 if step is None else int(step)
    try:
        res = ctx.models.force(tr, at)
    except StateseerError as exc:
        return None, model_message(exc)
    classes = ctx.data.classes
    before, after = classes[tr.prediction], classes[res["prediction"]]
    where = "every step" if at is None else f"step {at + 1} (“{tr.tokens[at]}”)"
    kept = res["prediction"] == tr.prediction
    note = [f"Forced {where} to its state's centroid: prediction {before} → {after} ",
            html.Span("(survives)" if kept else "(flips)", className="ok" if kept else "wrong")]
    return {**res, "key": tr.key}, note


VIEW = View(
    name="forcing", layout=layout, ids=(ids.FORCING_PANEL, ids.FORCED),
    callbacks=(
        Callback(reset, [Output(ids.FORCED, "data"), Output(ids.FORCE_NOTE, "children")],
                 [Input(ids.ACTIVE_TRACE, "data"), State(ids.FORCED, "data")],
                 fuse="trace"),
        Callback(force, [Output(ids.FORCED, "data", allow_duplicate=True),
                         Output(ids.FORCE_NOTE, "children", allow_duplicate=True)],
                 [Input(ids.FORCE_ALL, "n_clicks"), Input(ids.FORCE_STEP, "n_clicks"),
                  Input(ids.FORCE_CLEAR, "n_clicks"), State(ids.ACTIVE_TRACE, "data"),
                  State(ids.STEP, "data")], trigger=True, prevent_initial_call=True),
    ))
