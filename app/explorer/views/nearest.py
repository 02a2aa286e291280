"""Nearest training contexts of the clicked step (default: the last token) and the 2-D
projection of the hidden states, with the trace's path drawn over a sample of training
states. A neighbour's context opens that training input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import ALL, Input, Output, State, dcc, html, no_update

from stateseer.abstraction.colors import ClassColors
from stateseer.app.explorer import ids
from stateseer.app.explorer.page import box
from stateseer.app.explorer.view import Callback, Trigger, View, js, select_outputs
from stateseer.app.explorer.views.core import active_of, visible_token
from stateseer.app.selection import apply_event, to_query
from stateseer.core.errors import StateseerError

__all__ = ["VIEW", "nearest", "nearest_list", "open_neighbour", "projection_figure"]

PROMPT = "Select a row or type an input."


def nearest_list(result: dict[str, Any], query: dict[str, Any], classes: Sequence[str]
                 ) -> html.Div:
    """The neighbours with ±window tokens of context, state, label and correctness,
    then one summary line.

    Parameters
    ----------
    result : dict
        From :func:`stateseer.app.workflows.contexts.nearest_contexts`.
    query : dict
        ``token``, ``step``, ``state`` of the step asked about.
    """
    s = result["summary"]
    k = s["k"]
    labels = ", ".join(f"{c} {n}" for c, n in sorted(s["labels"].items()))
    toks = ", ".join(f"“{t}” ×{n}" for t, n in s["tokens"])
    head = html.Div([
        html.B(f"{k} nearest training steps"), f" to “{query['token']}” (step "
        f"{query['step'] + 1}, state {query['state']}): ",
        html.Span(f"{s['same_state']}/{k} in the same state", className="agg"), " · labels ",
        html.Span(labels, className="agg"), f" · {s['correct']}/{k} correctly classified",
        " · current tokens ", html.Span(toks, className="agg")], className="nn-summary")
    rows = [html.Tr([html.Th("context (click to open the training input)"), html.Th("state"),
                     html.Th("label"), html.Th("✓"), html.Th("dist.")])]
    for j, r in enumerate(result["rows"]):
        ctx = html.Td([
            html.Span(("… " if r["cut_left"] else "") + " ".join(r["left"]) + " "),
            html.Mark(visible_token(r["token"])),
            html.Span(" " + " ".join(r["right"]) + (" …" if r["cut_right"] else ""))],
            title=f"training input #{r['id']}, token {r['position'] + 1}: click to open it",
            # two neighbours may come from one input: the position keeps the ids unique
            id=ids.nn_row(j, r["input"]), n_clicks=0,
            className="nn-ctx")
        rows.append(html.Tr([
            ctx, html.Td(str(r["state"]), className="same" if r["state"] == query["state"]
                         else ""),
            html.Td(r["label"]), html.Td("✓" if r["correct"] else "✗",
                                         className="ok" if r["correct"] else "wrong"),
            html.Td(f"{r['distance']:.2f}")], className="nn-row"))
    return html.Div([head, html.Table(rows, className="mini nn-table")])


def _training_states(sample: dict[str, Any], xy: np.ndarray, palette: np.ndarray
                     ) -> dict[str, Any]:
    """The training states' trace: every one, binned (a WebGL trace named for what it
    aggregates and how many it holds)."""
    count = np.asarray(sample["count"])
    opacity = 0.25 + 0.75 * np.log1p(count) / np.log1p(max(int(count.max()), 1))
    return {"type": "scattergl", "x": xy[:, 0].tolist(), "y": xy[:, 1].tolist(),
            "mode": "markers",
            "name": f"all {sample['n_total']:,} training states, binned "
                    f"{sample['bins']}×{sample['bins']} (colour: most frequent state)",
            "marker": {"size": 5, "symbol": "square",
                       "color": palette[sample["states"]].tolist(),
                       "opacity": opacity.round(3).tolist(), "line": {"width": 0}},
            "customdata": np.stack([np.asarray(sample["states"]), count], 1).tolist(),
            "hovertemplate": "%{customdata[1]:,} steps · mostly state %{customdata[0]}"
                             "<extra></extra>"}


def projection_figure(sample: dict[str, np.ndarray], state_prediction: np.ndarray,
                      path_xy: np.ndarray, path_states: Sequence[int],
                      tokens: Sequence[str], *, step: int | None = None,
                      compare_xy: np.ndarray | None = None,
                      highlight_state: int | None = None,
                      colors: ClassColors | None = None) -> dict[str, Any]:
    """Training states on two principal axes, coloured by their state's prediction mix,
    with the selected trace's path drawn over them: every state, binned
    (:func:`~stateseer.app.workflows.contexts.projection_bins`, a WebGL trace named for
    what it aggregates).

    Returned as a plain Plotly figure dict: with thousands of points, building validated
    ``go`` objects costs ~100 ms per click, the dict a few.

    Parameters
    ----------
    sample : dict
        The bins from :func:`stateseer.app.workflows.contexts.projection_bins`: ``xy``
        (n, 2), ``states`` (n,), ``count`` (n,), ``n_total`` and ``bins``.
    state_prediction : ndarray of shape (n_fsm_states, n_classes)
    path_xy : ndarray of shape (n_tokens + 1, 2)
        The trace, initial state first.
    path_states : sequence of int
    tokens : sequence of str
    step : int, optional
        The selected step (0-based token index), marked.
    compare_xy : ndarray of shape (m, 2), optional
        A second path in the same space.
    highlight_state : int, optional
        Its training states are drawn again on top, outlined (the selected step's state).
    """
    pal = colors or ClassColors(np.shape(state_prediction)[1])
    palette = np.array([pal.mix(p) for p in state_prediction])
    xy = np.asarray(sample["xy"], float).round(3)
    data: list[dict[str, Any]] = [_training_states(sample, xy, palette)]
    if highlight_state is not None:
        hit = np.asarray(sample["states"]) == highlight_state
        if hit.any():
            data.append({
                "type": "scatter", "x": xy[hit, 0].tolist(), "y": xy[hit, 1].tolist(),
                "mode": "markers", "name": f"state {highlight_state}",
                "marker": {"size": 6, "color": palette[highlight_state],
                           "line": {"width": 1, "color": "#111"}},
                "hovertemplate": f"state {highlight_state}<extra></extra>"})
    labels = ["⟨start⟩", *tokens]
    if compare_xy is not None:
        data.append({"type": "scatter", "x": compare_xy[:, 0].tolist(),
                     "y": compare_xy[:, 1].tolist(), "mode": "lines+markers",
                     "name": "compared input", "line": {"color": "#7b2cbf", "dash": "dot"},
                     "marker": {"size": 6}})
    data.append({
        "type": "scatter", "x": path_xy[:, 0].tolist(), "y": path_xy[:, 1].tolist(),
        "mode": "lines+markers+text", "name": "this input",
        "line": {"color": "#ff7f0e", "width": 2}, "marker": {"size": 7, "color": "#ff7f0e"},
        "text": [str(i) for i in range(len(labels))], "textposition": "top center",
        "textfont": {"size": 9},
        "customdata": [[lab, int(s)] for lab, s in zip(labels, path_states, strict=False)],
        "hovertemplate": "%{customdata[0]} → state %{customdata[1]}<extra></extra>"})
    if step is not None and 0 <= step + 1 < len(path_xy):
        data.append({
            "type": "scatter", "x": [float(path_xy[step + 1, 0])],
            "y": [float(path_xy[step + 1, 1])], "mode": "markers", "name": "selected step",
            "marker": {"size": 16, "symbol": "circle-open", "color": "#111",
                       "line": {"width": 3}}, "hoverinfo": "skip"})
    # the legend under the plot: above it, the plotly toolbar would cover its right end
    layout = {"margin": {"l": 30, "r": 10, "t": 30, "b": 30}, "height": 330,
              "legend": {"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top"},
              "plot_bgcolor": "#fafafa",
              "xaxis": {"title": {"text": "PC 1"}, "zeroline": False},
              "yaxis": {"title": {"text": "PC 2"}, "zeroline": False},
              "uirevision": "projection"}
    return {"data": data, "layout": layout}


PROJ_CONFIG = {"displaylogo": False, "displayModeBar": "hover"}
EMPTY_PROJECTION: dict[str, Any] = {"data": [], "layout": {
    "height": 80, "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
    "xaxis": {"visible": False}, "yaxis": {"visible": False}, "plot_bgcolor": "white",
    "annotations": [{"text": "Pick a row or trace a text: its path over the training "
                             "states appears here.", "showarrow": False, "xref": "paper",
                     "yref": "paper", "x": 0.5, "y": 0.5,
                     "font": {"color": "#888", "size": 13}}]}}
"""The projection before a trace is shown (or where there is none to draw)."""


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    controls = html.Div([
        html.B("Nearest training contexts"),
        html.Span(" of the clicked token (default: the last one) ", className="muted"),
        html.Label([" k ", box(dcc.Dropdown(id=ids.NN_K, options=[5, 8, 12, 20], value=8,
                                        clearable=False, style={"width": 70}), 70)],
                   className="inline"),
        html.Label([" context ± ", box(dcc.Dropdown(id=ids.NN_WINDOW, options=[2, 5, 10],
                                                value=5, clearable=False,
                                                style={"width": 70}), 70)],
                   className="inline", title="tokens shown on each side")],
        className="nn-controls")
    near = html.Div([controls, html.Div(id=ids.NN_LIST, children=html.P(
        PROMPT, className="muted"))], className="panel nearest-panel", id=ids.NEAREST_PANEL)
    projection = html.Div([
        html.B("Hidden states on two principal axes"),
        html.Span(" (every training step, binned: each square coloured by its most "
                  "frequent state's prediction and shaded by how many steps it holds; the "
                  "clicked step's state outlined; the selected input's path on top)",
                  className="muted"),
        # on the page from the start: a new trace only changes the figure (redrawn in place)
        html.Div(dcc.Graph(id=ids.PROJ_CHART, figure=EMPTY_PROJECTION, config=PROJ_CONFIG),
                 id=ids.PROJ_BOX),
    ], className="panel projection-panel", id=ids.PROJECTION_PANEL)
    return {"below": [near, projection]}


def nearest(ctx, active, step, k, window):
    """The neighbour list and the projection of the trace on display at ``step``."""
    tr, cmp_ = active_of(active)
    if tr is None:
        return html.P(PROMPT, className="muted"), EMPTY_PROJECTION
    if not tr.tokens:
        return html.P("The input is empty.", className="muted"), EMPTY_PROJECTION
    t = tr.n_tokens - 1 if step is None else int(step)
    t = min(max(t, 0), tr.n_tokens - 1)
    try:
        # clamped here too: the dropdowns bound them only in the browser
        res = ctx.contexts.nearest(tr, t, k=min(max(int(k or 8), 1), 50),
                                   window=min(max(int(window or 5), 0), 20))
        xy = ctx.contexts.project(tr)
    except (StateseerError, TypeError, ValueError) as exc:
        return html.P(str(exc), className="message"), EMPTY_PROJECTION
    query = {"token": tr.tokens[t], "step": t,
             "state": int(tr.states[t + 1]) if tr.has_states else None}
    if not tr.has_states:  # a study condition without states: the list, no projection
        return nearest_list(res, query, ctx.data.classes), EMPTY_PROJECTION
    cxy = None
    if cmp_ is not None and cmp_.run is None:  # a trace of this run: same hidden space
        try:
            cxy = ctx.contexts.project(cmp_)
        except StateseerError:
            cxy = None
    fig = projection_figure(ctx.contexts.projection, ctx.data.fsm.prediction, xy, tr.states,
                            tr.tokens, step=t, compare_xy=cxy, highlight_state=query["state"],
                            colors=ctx.data.palette)
    return nearest_list(res, query, ctx.data.classes), fig


def open_neighbour(ctx, trigger: Trigger, _clicks, sel):
    """A neighbour's context opens its training input (split train, that row); runs in
    the page (:data:`OPEN_NEIGHBOUR_JS`), registered only for runs with a train split."""
    if not trigger.is_type(ids.NN_ROW_TYPE) or "train" not in ctx.data.splits:
        return no_update, no_update
    new = apply_event(apply_event(sel or {}, "split", "train"), "row",
                      int(trigger.id["input"]))
    return new, to_query(new)


OPEN_NEIGHBOUR_JS = js("""
function (_clicks, sel) {
    const nu = window.dash_clientside.no_update;
    const c = window.dash_clientside.callback_context;
    const id = c.triggered_id;
    const fired = c.triggered.length ? c.triggered[0].value : null;
    // a new list of neighbours renders its rows with n_clicks 0: no click
    if (!id || typeof id !== "object" || id.type !== "$row" || !fired) { return [nu, nu]; }
    const s = window.stateseer;
    return s.select(s.applyEvent(sel || s.EMPTY, "split", "train"), "row",
                    parseInt(id.input, 10));
}
""", row=ids.NN_ROW_TYPE)
""":func:`open_neighbour` in the page (a new list of neighbours sent no request)."""


def _has_train(ctx) -> bool:
    return "train" in ctx.data.splits


VIEW = View(
    name="nearest", layout=layout, ids=(ids.NEAREST_PANEL, ids.PROJECTION_PANEL),
    callbacks=(
        Callback(nearest, [Output(ids.NN_LIST, "children"), Output(ids.PROJ_CHART, "figure")],
                 [Input(ids.ACTIVE_TRACE, "data"), Input(ids.STEP, "data"),
                  Input(ids.NN_K, "value"), Input(ids.NN_WINDOW, "value")]),
        Callback(open_neighbour, select_outputs(),
                 [Input(ids.nn_row(ALL, ALL), "n_clicks"), State(ids.SELECTION, "data")],
                 trigger=True, prevent_initial_call=True, clientside=OPEN_NEIGHBOUR_JS,
                 when=_has_train),
    ))
