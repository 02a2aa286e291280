"""The trace as a chart: the class probability after every token, flips starred, a
compared trace dotted and, after state forcing, the forced run dashed. Hovering a point
marks its state on the diagram."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import Input, Output, State, dcc, html, no_update

from .. import ids
from ..palette import class_color
from ..records import TraceRecord
from ..view import Callback, View, js
from .core import active_of
from .forcing import forced_for
from .trace import flips

__all__ = ["VIEW", "figure_html", "hover_state", "probability_figure", "show_chart"]

_AXIS = {"gridcolor": "white", "linecolor": "white", "ticks": "", "zerolinecolor": "white",
         "zerolinewidth": 2, "automargin": True, "title": {"standoff": 15}}
_TEMPLATE = {"layout": {"font": {"color": "#2a3f5f"}, "hoverlabel": {"align": "left"},
                        "paper_bgcolor": "white", "xaxis": _AXIS, "yaxis": _AXIS}}
"""What the chart takes from plotly's default template (the whole one is ~8 kB a chart)."""

GRAPH_CONFIG = {"displaylogo": False, "displayModeBar": "hover",
                "toImageButtonOptions": {"format": "png", "filename": "trace"}}


def _curves(tr: TraceRecord, classes: Sequence[str], suffix: str, dash: str
            ) -> list[dict[str, Any]]:
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
        "line": {"color": class_color(k, len(classes)), "dash": dash, "width": 2},
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


def probability_figure(trace: TraceRecord, classes: Sequence[str], *,
                       compare: TraceRecord | None = None,
                       forced: dict[str, Any] | None = None) -> dict[str, Any]:
    """Class probability after every token, flips marked; optional second trace and the
    curve of the same input with its states forced to their centroids.

    A plain plotly figure dict (``{"data": [...], "layout": {...}}``; building it with
    ``plotly.graph_objects`` took ~100 ms per trace, this ~1 ms);
    ``plotly.graph_objects.Figure(fig)`` makes it a Figure.
    """
    data = _curves(trace, classes, "", "solid")
    if compare is not None:
        data += _curves(compare, classes, " (compared)", "dot")
    if forced is not None:
        data.append(_forced_curve(trace, classes, forced))
    labels = ["⟨start⟩", *trace.tokens]
    many = len(classes) > 2  # a legend entry per class: a column right of the plot
    shapes = [] if many else [{
        "type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": 0.5,
        "y1": 0.5, "line": {"color": "#999", "dash": "dash", "width": 1}}]
    layout = {
        "margin": {"l": 40, "r": 10, "t": 30, "b": 60},  # the toolbar sits in the top margin
        "height": max(260, 18 * len(classes) + 80) if many else 260,
        "yaxis": {"range": [-0.02, 1.02], "title": {"text": "probability"}},
        "xaxis": {"tickmode": "array", "tickvals": list(range(len(labels))),
                  "ticktext": labels, "tickangle": -45, "automargin": True},
        # above the plot (two classes) or right of it, never under the plotly toolbar
        "legend": {"orientation": "v", "x": 1.01, "y": 1, "xanchor": "left",
                   "yanchor": "top", "font": {"size": 10}, "tracegroupgap": 0} if many else
        {"orientation": "h", "x": 0, "y": 1.0, "xanchor": "left", "yanchor": "bottom"},
        "shapes": shapes, "plot_bgcolor": "#fafafa", "hovermode": "closest",
        "uirevision": "trace", "template": _TEMPLATE}
    return {"data": data, "layout": layout}


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"trace": [html.Div(id=ids.TRACE_CHART_BOX),
                      html.Button("figure as HTML", id=ids.DL_FIGURE, n_clicks=0),
                      html.Div(id=ids.PLOTLY_PRELOAD, style={"display": "none"}),
                      dcc.Interval(id=ids.PRELOAD_TICK, interval=PRELOAD_AFTER_MS,
                                   max_intervals=1)]}


PRELOAD_AFTER_MS = 3000
"""plotly.js (~4 MB, loaded with the first chart) is loaded this long after the page
opened, once no callback is pending and the browser is idle, in a hidden empty chart, so
that the first trace shown does not wait for it (nor the first render for plotly.js).
At 1 s its parsing often coincided with a click made right after the page appeared
(benchmarks/browser_latency.py: first click 2.2x slower with the preload than without,
first row click 2.1x faster)."""

PRELOAD_JS = js("""
function (n) {
    if (!n) { return window.dash_clientside.no_update; }
    const graph = {namespace: "dash_core_components", type: "Graph",
                   props: {figure: {data: [], layout: {}}, config: {staticPlot: true},
                           style: {width: "10px", height: "10px"}}};
    const t0 = Date.now();
    const busy = () => document.querySelector(
        '[data-dash-is-loading="true"]:not(#$me)');
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 0));
    return new Promise((resolve) => {
        const wait = () => (busy() && Date.now() - t0 < 5000)
            ? setTimeout(wait, 100) : idle(() => resolve(graph), {timeout: 1000});
        wait();
    });
}
""", me=ids.PLOTLY_PRELOAD)
""":func:`preload` in the page."""


def preload(ctx, n):
    """The hidden chart that loads plotly.js (runs in the page: :data:`PRELOAD_JS`)."""
    if not n:
        return no_update
    return dcc.Graph(figure={"data": [], "layout": {}}, config={"staticPlot": True},
                     style={"width": "10px", "height": "10px"})


def show_chart(ctx, active, forced):
    """The chart of the trace on display (none yet: the page loads plotly.js only when
    a trace is shown)."""
    main, cmp_ = active_of(active)
    if main is None:
        return None
    fig = probability_figure(main, ctx.data.classes, compare=cmp_,
                             forced=forced_for(main, forced))
    return dcc.Graph(id=ids.TRACE_CHART, figure=fig, config=GRAPH_CONFIG)


def hover_state(ctx, hover_data):
    """The state of the hovered point (marked on the diagram)."""
    try:
        return int(hover_data["points"][0]["customdata"][1])
    except (TypeError, KeyError, IndexError, ValueError):
        return None


def figure_html(ctx, n_clicks, active):
    """The chart as a stand-alone HTML file."""
    main, cmp_ = active_of(active)
    if not n_clicks or main is None:
        return no_update
    import plotly.graph_objects as go

    fig = go.Figure(probability_figure(main, ctx.data.classes, compare=cmp_))
    return {"content": fig.to_html(include_plotlyjs=True),
            "filename": f"{ctx.data.name}-trace.html"}


VIEW = View(
    name="trace_chart", layout=layout,
    ids=(ids.TRACE_CHART_BOX, ids.DL_FIGURE, ids.PLOTLY_PRELOAD, ids.PRELOAD_TICK),
    callbacks=(
        Callback(show_chart, [Output(ids.TRACE_CHART_BOX, "children")],
                 [Input(ids.ACTIVE_TRACE, "data"), Input(ids.FORCED, "data")],
                 fuse="trace"),
        Callback(preload, [Output(ids.PLOTLY_PRELOAD, "children")],
                 [Input(ids.PRELOAD_TICK, "n_intervals")], prevent_initial_call=True,
                 clientside=PRELOAD_JS),
        Callback(hover_state, [Output(ids.HOVER_STATE, "data", allow_duplicate=True)],
                 [Input(ids.TRACE_CHART, "hoverData")], prevent_initial_call=True),
        Callback(figure_html, [Output(ids.DOWNLOAD, "data", allow_duplicate=True)],
                 [Input(ids.DL_FIGURE, "n_clicks"), State(ids.ACTIVE_TRACE, "data")],
                 prevent_initial_call=True),
    ))
