"""Trace view: tokens coloured by intermediate prediction, the state strip, the chart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from dash import html

from .colors import class_color, mix_color, text_color_on

__all__ = ["flips", "probability_figure", "token_strip"]


def flips(trace: dict[str, Any]) -> list[int]:
    """Token positions (0-based) after which the predicted class differs from before."""
    p = np.asarray(trace["proba"])
    if len(p) == 0:
        return []
    pred = np.concatenate([[int(np.argmax(trace["initial_proba"]))], p.argmax(1)])
    return [int(t) for t in np.flatnonzero(pred[1:] != pred[:-1])]


def token_strip(trace: dict[str, Any], classes: Sequence[str], *,
                highlight: Sequence[int] = (), pattern_steps: Sequence[int] = (),
                id_type: str = "token") -> html.Div:
    """Tokens as coloured chips with their abstract state underneath.

    ``id_type`` names the chips' pattern-matching ids (``{"type": id_type, "index": t}``);
    a second strip on the page needs another one, or clicks would read the wrong chip.

    Every string is passed to Dash as text (never as HTML), so texts from the data set or
    the input box cannot inject markup.
    """
    tokens, proba, states = trace["tokens"], trace["proba"], trace["states"]
    flip_at = set(flips(trace))
    pat = set(pattern_steps)
    chips = []
    start_color = mix_color(trace["initial_proba"])
    chips.append(html.Div([
        html.Span("⟨start⟩", className="tok tok-start",
                  style={"background": start_color, "color": text_color_on(start_color)}),
        html.Span(str(states[0]), className="st")],
        className="chip", title="initial state (before any token)"))
    for t, tok in enumerate(tokens):
        color = mix_color(proba[t])
        cls = ["tok"]
        if not trace["known"][t]:
            cls.append("unknown")
        if t in flip_at:
            cls.append("flip")
        if t in highlight:
            cls.append("hl")
        pcls = classes[int(np.argmax(proba[t]))]
        title = (f"token {t + 1}: {tok!r}{' (unknown word)' if not trace['known'][t] else ''}"
                 f" → state {states[t + 1]}; P({pcls}) = {max(proba[t]):.3f}"
                 + ("; prediction flips here" if t in flip_at else ""))
        chips.append(html.Div([
            html.Span(tok, className=" ".join(cls),
                      style={"background": color, "color": text_color_on(color)}),
            html.Span(str(states[t + 1]),
                      className="st" + (" st-pattern" if (t + 1) in pat else ""))],
            className="chip", title=title, id={"type": id_type, "index": t}, n_clicks=0))
    return html.Div(chips, className="token-strip")


def probability_figure(trace: dict[str, Any], classes: Sequence[str], *,
                       compare: dict[str, Any] | None = None,
                       forced: dict[str, Any] | None = None) -> go.Figure:
    """Class probability after every token, flips marked; optional second trace and the
    curve of the same input with its states forced to their centroids."""
    fig = go.Figure()

    def add(tr: dict[str, Any], suffix: str, dash: str) -> None:
        p = np.vstack([tr["initial_proba"], np.asarray(tr["proba"]).reshape(-1, len(classes))])
        x = np.arange(len(p))
        labels = ["⟨start⟩", *tr["tokens"]]
        shown = range(1, len(classes)) if len(classes) == 2 else range(len(classes))
        for k in shown:
            fig.add_trace(go.Scatter(
                x=x, y=p[:, k], mode="lines+markers", name=f"P({classes[k]}){suffix}",
                line={"color": class_color(k, len(classes)), "dash": dash, "width": 2},
                customdata=np.stack([labels, tr["states"]], axis=1),
                hovertemplate="%{customdata[0]} → state %{customdata[1]}<br>"
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
        p = np.vstack([trace["initial_proba"],
                       np.asarray(forced["proba"]).reshape(-1, len(classes))])
        k = 1 if len(classes) == 2 else int(np.argmax(p[-1]))
        at = "every step" if forced.get("step") is None else f"step {forced['step'] + 1}"
        fig.add_trace(go.Scatter(
            x=np.arange(len(p)), y=p[:, k], mode="lines+markers",
            name=f"P({classes[k]}) forced at {at}",
            line={"color": "#111", "dash": "dash", "width": 2}, marker={"size": 5},
            customdata=np.stack([["⟨start⟩", *trace["tokens"]], forced["states"]], axis=1),
            hovertemplate="%{customdata[0]} → state %{customdata[1]} (forced run)<br>"
                          f"P({classes[k]}) = %{{y:.3f}}<extra></extra>"))
    if len(classes) == 2:
        fig.add_hline(y=0.5, line={"color": "#999", "dash": "dash", "width": 1})
    labels = ["⟨start⟩", *trace["tokens"]]
    fig.update_layout(
        margin={"l": 40, "r": 10, "t": 10, "b": 60}, height=260,
        yaxis={"range": [-0.02, 1.02], "title": "probability"},
        xaxis={"tickmode": "array", "tickvals": list(range(len(labels))),
               "ticktext": labels, "tickangle": -45, "automargin": True},
        legend={"orientation": "h", "y": 1.12, "x": 0}, plot_bgcolor="#fafafa",
        hovermode="closest", uirevision="trace")
    return fig
