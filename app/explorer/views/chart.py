"""The trace as a chart: the class probability after every token, flips starred, a
compared trace dotted and, after state forcing, the forced run dashed. Hovering a point
marks its state on the diagram."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import Input, Output, State, dcc, html, no_update

from .. import ids
from ..palette import class_color
from ..records import TraceRecord
from ..view import Callback, View
from .core import active_of
from .forcing import forced_for
from .trace import flips

__all__ = ["VIEW", "figure_html", "hover_state", "probability_figure", "show_chart"]

GRAPH_CONFIG = {"displaylogo": False, "displayModeBar": "hover",
                "toImageButtonOptions": {"format": "png", "filename": "trace"}}


def probability_figure(trace: TraceRecord, classes: Sequence[str], *,
                       compare: TraceRecord | None = None,
                       forced: dict[str, Any] | None = None) -> go.Figure:
    """Class probability after every token, flips marked; optional second trace and the
    curve of the same input with its states forced to their centroids."""
    fig = go.Figure()

    def add(tr: TraceRecord, suffix: str, dash: str) -> None:
        p = np.vstack([tr.initial_proba, np.asarray(tr.proba).reshape(-1, len(classes))])
        x = np.arange(len(p))
        labels = ["⟨start⟩", *tr.tokens]
        shown = range(1, len(classes)) if len(classes) == 2 else range(len(classes))
        for k in shown:
            fig.add_trace(go.Scatter(
                x=x, y=p[:, k], mode="lines+markers", name=f"P({classes[k]}){suffix}",
                line={"color": class_color(k, len(classes)), "dash": dash, "width": 2},
                customdata=np.stack([labels, tr.states], axis=1) if tr.has_states
                else np.array(labels)[:, None],
                hovertemplate=("%{customdata[0]} → state %{customdata[1]}<br>" if tr.has_states
                               else "%{customdata[0]}<br>") +
                              f"P({classes[k]}) = %{{y:.3f}}<extra></extra>"))
        fx = [t + 1 for t in flips(tr)]
        if fx:
            k = 1 if len(classes) == 2 else None
            y = p[fx, k] if k is not None else p[fx].max(1)
            fig.add_trace(go.Scatter(
                x=fx, y=y, mode="markers", name=f"prediction flips{suffix}",
                marker={"symbol": "star", "size": 14, "color": "#ff9f1c",
                        "line": {"color": "#333", "width": 1}},
                hovertemplate="flip after %{text}<extra></extra>",
                text=[labels[i] for i in fx]))

    add(trace, "", "solid")
    if compare is not None:
        add(compare, " (compared)", "dot")
    if forced is not None:
        p = np.vstack([trace.initial_proba,
                       np.asarray(forced["proba"]).reshape(-1, len(classes))])
        k = 1 if len(classes) == 2 else int(np.argmax(p[-1]))
        at = "every step" if forced.get("step") is None else f"step {forced['step'] + 1}"
        fig.add_trace(go.Scatter(
            x=np.arange(len(p)), y=p[:, k], mode="lines+markers",
            name=f"P({classes[k]}) forced at {at}",
            line={"color": "#111", "dash": "dash", "width": 2}, marker={"size": 5},
            customdata=np.stack([["⟨start⟩", *trace.tokens], forced["states"]], axis=1),
            hovertemplate="%{customdata[0]} → state %{customdata[1]} (forced run)<br>"
                          f"P({classes[k]}) = %{{y:.3f}}<extra></extra>"))
    if len(classes) == 2:
        fig.add_hline(y=0.5, line={"color": "#999", "dash": "dash", "width": 1})
    labels = ["⟨start⟩", *trace.tokens]
    many = len(classes) > 2  # a legend entry per class: a column right of the plot
    fig.update_layout(
        margin={"l": 40, "r": 10, "t": 30, "b": 60},  # the toolbar sits in the top margin
        height=max(260, 18 * len(classes) + 80) if many else 260,
        yaxis={"range": [-0.02, 1.02], "title": "probability"},
        xaxis={"tickmode": "array", "tickvals": list(range(len(labels))),
               "ticktext": labels, "tickangle": -45, "automargin": True},
        # above the plot (two classes) or right of it, never under the plotly toolbar
        legend={"orientation": "v", "x": 1.01, "y": 1, "xanchor": "left", "yanchor": "top",
                "font": {"size": 10}, "tracegroupgap": 0} if many else
        {"orientation": "h", "x": 0, "y": 1.0, "xanchor": "left", "yanchor": "bottom"},
        plot_bgcolor="#fafafa", hovermode="closest", uirevision="trace")
    return fig


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"trace": [html.Div(id=ids.TRACE_CHART_BOX),
                      html.Button("figure as HTML", id=ids.DL_FIGURE, n_clicks=0)]}


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
    fig = probability_figure(main, ctx.data.classes, compare=cmp_)
    return {"content": fig.to_html(include_plotlyjs=True),
            "filename": f"{ctx.data.name}-trace.html"}


VIEW = View(
    name="trace_chart", layout=layout, ids=(ids.TRACE_CHART_BOX, ids.DL_FIGURE),
    callbacks=(
        Callback(show_chart, [Output(ids.TRACE_CHART_BOX, "children")],
                 [Input(ids.ACTIVE_TRACE, "data"), Input(ids.FORCED, "data")]),
        Callback(hover_state, [Output(ids.HOVER_STATE, "data", allow_duplicate=True)],
                 [Input(ids.TRACE_CHART, "hoverData")], prevent_initial_call=True),
        Callback(figure_html, [Output(ids.DOWNLOAD, "data", allow_duplicate=True)],
                 [Input(ids.DL_FIGURE, "n_clicks"), State(ids.ACTIVE_TRACE, "data")],
                 prevent_initial_call=True),
    ))
