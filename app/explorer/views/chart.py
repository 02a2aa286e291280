"""The trace as a chart: the class probability after every token, flips starred, a
compared trace dotted and, after state forcing, the forced run dashed. Hovering a point
marks its state on the diagram."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import Input, Output, State, dcc, html, no_update

from stateseer.abstraction.colors import ClassColors
from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, View
from stateseer.app.explorer.views.core import active_of
from stateseer.app.explorer.views.forcing import forced_for
from stateseer.app.explorer.views.trace import flips
from stateseer.app.workflows.records import TraceRecord

__all__ = ["VIEW", "figure_html", "hover_state", "probability_figure", "show_chart",
           "tick_steps"]

_AXIS = {"gridcolor": "white", "linecolor": "white", "ticks": "", "zerolinecolor": "white",
         "zerolinewidth": 2, "automargin": True, "title": {"standoff": 15}}
_TEMPLATE = {"layout": {"font": {"color": "#2a3f5f"}, "hoverlabel": {"align": "left"},
                        "paper_bgcolor": "white", "xaxis": _AXIS, "yaxis": _AXIS}}
"""What the chart takes from plotly's default template (the whole one is ~8 kB a chart)."""

GRAPH_CONFIG = {"displaylogo": False, "displayModeBar": "hover",
                "toImageButtonOptions": {"format": "png", "filename": "trace"}}


def _curves(tr: TraceRecord, classes: Sequence[str], suffix: str, dash: str,
            palette: ClassColors | None = None) -> list[dict[str, Any]]:
    """The probability curves of one trace (and its flips) as plotly trace dicts."""
    p = np.vstack([tr.initial_proba, np.asarray(tr.proba).reshape(-1, len(classes))])
    x = list(range(len(p)))
    labels = ["⟨start⟩", *tr.tokens]
    custom = [[lab, int(s)] for lab, s in zip(labels, tr.states, strict=True)] \
        if tr.has_states else [[lab] for lab in labels]
    where = "%{customdata[0]} → state %{customdata[1]}<br>" if tr.has_states \
        else "%{customdata[0]}<br>"
    shown = range(1, len(classes)) if len(classes) == 2 else range(len(classes))
    out: list[dict[str, Any]] = [{
        "type": "scatter", "x": x, "y": p[:, k].tolist(), "mode": "lines+markers",
        "name": f"P({classes[k]}){suffix}", "customdata": custom,
        "line": {"color": (palette or ClassColors(len(classes))).solid(k), "dash": dash,
                 "width": 2},
        "hovertemplate": where + f"P({classes[k]}) = %{{y:.3f}}<extra></extra>"}
        for k in shown]
    fx = [t + 1 for t in flips(tr)]
    if fx:
        y = p[fx, 1] if len(classes) == 2 else p[fx].max(1)
        out.append({
            "type": "scatter", "x": fx, "y": y.tolist(), "mode": "markers",
            "name": f"prediction flips{suffix}",
            "marker": {"symbol": "star", "size": 14, "color": "#ff9f1c",
                       "line": {"color": "#333", "width": 1}},
            "hovertemplate": "flip after %{text}<extra></extra>",
            "text": [labels[i] for i in fx]})
    return out


def _forced_curve(trace: TraceRecord, classes: Sequence[str], forced: dict[str, Any]
                  ) -> dict[str, Any]:
    p = np.vstack([trace.initial_proba,
                   np.asarray(forced["proba"]).reshape(-1, len(classes))])
    k = 1 if len(classes) == 2 else int(np.argmax(p[-1]))
    at = "every step" if forced.get("step") is None else f"step {forced['step'] + 1}"
    labels = ["⟨start⟩", *trace.tokens]
    return {"type": "scatter", "x": list(range(len(p))), "y": p[:, k].tolist(),
            "mode": "lines+markers", "name": f"P({classes[k]}) forced at {at}",
            "line": {"color": "#111", "dash": "dash", "width": 2}, "marker": {"size": 5},
            "customdata": [[lab, int(s)] for lab, s in zip(labels, forced["states"],
                                                            strict=False)],
            "hovertemplate": "%{customdata[0]} → state %{customdata[1]} (forced run)<br>"
                             f"P({classes[k]}) = %{{y:.3f}}<extra></extra>"}


TICK_CHARS, TICK_PX = 18, 6.6
"""Tokens longer than this are cut (with an ellipsis) under the chart's x axis (their
hover names them whole); the width of a character of the tick font, in pixels."""


def _tick(label: str) -> str:
    return label if len(label) <= TICK_CHARS else label[: TICK_CHARS - 1] + "…"


MAX_TICKS = 24
"""At most this many labels under the chart's x axis: a longer trace labels every k-th
step (the first one, ⟨start⟩, always), as more would be drawn on top of each other."""


def tick_steps(n_labels: int, most: int = MAX_TICKS) -> list[int]:
    """The steps labelled under the x axis: all of them, or every k-th from the first,
    k the smallest stride that leaves at most ``most`` labels.

    >>> tick_steps(5), tick_steps(61, 30)[:4], len(tick_steps(61, 30))
    ([0, 1, 2, 3, 4], [0, 3, 6, 9], 21)
    """
    stride = max(1, -(-n_labels // max(most, 1)))
    return list(range(0, n_labels, stride))


def probability_figure(trace: TraceRecord, classes: Sequence[str], *,
                       compare: TraceRecord | None = None,
                       forced: dict[str, Any] | None = None,
                       palette: ClassColors | None = None) -> dict[str, Any]:
    """Class probability after every token, flips marked; optional second trace and the
    curve of the same input with its states forced to their centroids. At most
    :data:`MAX_TICKS` steps are labelled under the x axis (:func:`tick_steps`); every
    point's hover names its token.

    A plain plotly figure dict (``{"data": [...], "layout": {...}}``; building it with
    ``plotly.graph_objects`` took ~100 ms per trace, this ~1 ms);
    ``plotly.graph_objects.Figure(fig)`` makes it a Figure.
    """
    data = _curves(trace, classes, "", "solid", palette)
    if compare is not None:
        data += _curves(compare, classes, " (compared)", "dot", palette)
    if forced is not None:
        data.append(_forced_curve(trace, classes, forced))
    labels = ["⟨start⟩", *trace.tokens]
    steps = tick_steps(len(labels))
    ticks = [_tick(labels[t]) for t in steps]
    many = len(classes) > 2  # a legend entry per class: a column right of the plot
    shapes = [] if many else [{
        "type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": 0.5,
        "y1": 0.5, "line": {"color": "#999", "dash": "dash", "width": 1}}]
    layout = {
        # margins fixed from the labels (plotly's automargin measures them and draws the
        # chart twice); the toolbar sits in the top margin
        "margin": {"l": 60, "r": 10, "t": 30,
                   "b": 24 + round(TICK_PX * max(map(len, ticks)) * 0.71)},
        "height": max(260, 18 * len(classes) + 80) if many else 260,
        "yaxis": {"range": [-0.02, 1.02], "title": {"text": "probability", "standoff": 8},
                  "automargin": False},
        "xaxis": {"tickmode": "array", "tickvals": steps, "ticktext": ticks,
                  "tickangle": -45, "automargin": False,
                  # plotly's default ("hide past div") measures every label once per
                  # label drawn: 40 tokens cost ~40 ms of a row click
                  "ticklabeloverflow": "allow"},
        # above the plot (two classes) or right of it, never under the plotly toolbar
        "legend": {"orientation": "v", "x": 1.01, "y": 1, "xanchor": "left",
                   "yanchor": "top", "font": {"size": 10}, "tracegroupgap": 0} if many else
        {"orientation": "h", "x": 0, "y": 1.0, "xanchor": "left", "yanchor": "bottom"},
        "shapes": shapes, "plot_bgcolor": "#fafafa", "hovermode": "closest",
        "uirevision": "trace", "template": _TEMPLATE}
    return {"data": data, "layout": layout}


EMPTY_FIGURE: dict[str, Any] = {"data": [], "layout": {
    "height": 120, "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
    "xaxis": {"visible": False}, "yaxis": {"visible": False}, "plot_bgcolor": "white",
    "template": _TEMPLATE, "annotations": [{
        "text": "Pick a row or trace a text: its class probabilities, token by token, "
                "appear here.", "showarrow": False, "xref": "paper", "yref": "paper",
        "x": 0.5, "y": 0.5, "font": {"color": "#888", "size": 13}}]}}
"""The chart before a trace is shown: one line saying what will be there."""


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    # The chart is on the page from the start and only its figure changes: plotly.js then
    # redraws it in place (a new Graph per trace was torn down and built again, and
    # plotly.js loaded only with the first trace: that row click waited for ~4 MB).
    return {"trace": [html.Div(dcc.Graph(id=ids.TRACE_CHART, figure=EMPTY_FIGURE,
                                         config=GRAPH_CONFIG), id=ids.TRACE_CHART_BOX),
                      html.Button("figure as HTML", id=ids.DL_FIGURE, n_clicks=0)]}


#: the chart of a run whose traces were imported without probabilities
NO_PREDICTIONS_FIGURE: dict[str, Any] = {**EMPTY_FIGURE, "layout": {
    **EMPTY_FIGURE["layout"], "annotations": [{
        **EMPTY_FIGURE["layout"]["annotations"][0],
        "text": "No class probabilities: the traces were imported without them "
                "(no proba.npy)."}]}}


def show_chart(ctx, active, forced):
    """The figure of the trace on display (:data:`EMPTY_FIGURE` while there is none;
    :data:`NO_PREDICTIONS_FIGURE` for a run without predictions)."""
    main, cmp_ = active_of(active)
    if main is None:
        return EMPTY_FIGURE
    if not getattr(ctx.data, "has_predictions", True):
        return NO_PREDICTIONS_FIGURE
    return probability_figure(main, ctx.data.classes, compare=cmp_,
                              forced=forced_for(main, forced), palette=ctx.data.palette)


def hover_state(ctx, hover_data):
    """The state of the hovered point (marked on the diagram); runs in the page
    (:data:`HOVER_STATE_JS`)."""
    try:
        return int(hover_data["points"][0]["customdata"][1])
    except (TypeError, KeyError, IndexError, ValueError):
        return None


HOVER_STATE_JS = """
function (h) {
    try {
        const s = parseInt(h.points[0].customdata[1], 10);
        return Number.isNaN(s) ? null : s;
    } catch (e) { return null; }
}
"""
""":func:`hover_state` in the page (hovering sends no request)."""


def figure_html(ctx, n_clicks, active):
    """A recorded input's trace as one self-contained page (tokens, states, the chart and
    the attribution strip: :func:`~stateseer.app.workflows.html_export.trace_html`); a
    typed text's chart, or a comparison, as a stand-alone Plotly file."""
    main, cmp_ = active_of(active)
    if not n_clicks or main is None:
        return no_update
    if main.recorded and main.id is not None and cmp_ is None:
        from stateseer.app.workflows.html_export import trace_html

        def scores(tr):
            return [float(x) for x in ctx.models.attribution(tr).scores]

        return {"content": trace_html(ctx.data, main.id, split=main.split,
                                      attribution=scores),
                "filename": f"{ctx.data.name}-input-{main.id}.html"}
    import plotly.graph_objects as go

    fig = go.Figure(probability_figure(main, ctx.data.classes, compare=cmp_,
                                       palette=ctx.data.palette))
    return {"content": fig.to_html(include_plotlyjs=True),
            "filename": f"{ctx.data.name}-trace.html"}


VIEW = View(
    name="trace_chart", layout=layout,
    ids=(ids.TRACE_CHART_BOX, ids.DL_FIGURE),
    callbacks=(
        Callback(show_chart, [Output(ids.TRACE_CHART, "figure")],
                 [Input(ids.ACTIVE_TRACE, "data"), Input(ids.FORCED, "data")],
                 fuse="trace"),
        Callback(hover_state, [Output(ids.HOVER_STATE, "data", allow_duplicate=True)],
                 [Input(ids.TRACE_CHART, "hoverData")], prevent_initial_call=True,
                 clientside=HOVER_STATE_JS),
        Callback(figure_html, [Output(ids.DOWNLOAD, "data", allow_duplicate=True)],
                 [Input(ids.DL_FIGURE, "n_clicks"), State(ids.ACTIVE_TRACE, "data")],
                 prevent_initial_call=True),
    ))
