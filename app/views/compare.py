"""Comparison of two runs: the summary, the state matching and the changed inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import html

__all__ = ["compare_panel"]


def compare_panel(cmp_: dict[str, Any], texts: Sequence[str], labels: np.ndarray,
                  pred_a: np.ndarray, classes: Sequence[str], *, ids: Sequence[int] | None = None,
                  limit: int = 12) -> html.Div:
    """Summary figures, the changed inputs (buttons that select them) and the matching.

    Parameters
    ----------
    cmp_ : dict
        From :meth:`app.data.RunData.comparison`.
    texts : sequence of str
        The split's texts.
    labels, pred_a : ndarray of shape (n_inputs,)
        Labels and this run's predictions.
    """
    s, ch, m = cmp_["summary"], cmp_["changed"], cmp_["matching"]
    pred_b = cmp_["pred_b"]
    share = np.where(ch["n_steps"] > 0, ch["n_diff"] / np.maximum(ch["n_steps"], 1), 0.0)
    head = html.Div([
        html.B(f"{s['name_a']} vs {s['name_b']}"), f" on {s['n_inputs']:,} {s['split']} inputs: ",
        f"accuracy {s['accuracy_a']:.3f} → {s['accuracy_b']:.3f} · ",
        html.Span(f"{s['fixed']} fixed", className="ok"), " · ",
        html.Span(f"{s['broken']} broken", className="wrong"),
        f" · {s['prediction_changed']} predictions changed · "
        f"{100 * s['step_agreement']:.1f}% of steps in matched states · "
        f"{s['path_changed']} paths differ somewhere (median input: "
        f"{100 * float(np.median(share)) if len(share) else 0:.0f}% of its steps)"],
        className="cmp-summary")
    # changed inputs: prediction changes first, then by how many steps differ
    order = np.lexsort((-ch["n_diff"], ~ch["prediction_changed"]))
    order = [i for i in order if ch["path_changed"][i] or ch["prediction_changed"][i]][:limit]
    items = []
    for i in order:
        a, b, y = classes[int(pred_a[i])], classes[int(pred_b[i])], classes[int(labels[i])]
        tag = "fixed" if a != y and b == y else "broken" if a == y and b != y else (
            "changed" if a != b else "path")
        items.append(html.Li([
            html.Button(f"#{ids[i] if ids is not None else i}",
                        id={"type": "cmp-row", "index": int(i)}, n_clicks=0,
                        className="cmp-btn", title="show both traces"),
            html.Span(tag, className=f"cmp-tag cmp-{tag}"),
            html.Span(f"{a} → {b} (label {y}) · {int(ch['n_diff'][i])} step(s) differ "),
            html.Span(texts[i][:90] + ("…" if len(texts[i]) > 90 else ""), className="toks")]))
    pairs = sorted(m.pairs()[1:], key=lambda r: -r["jaccard"])
    table = html.Table(
        [html.Tr([html.Th("state here"), html.Th("matched state there"), html.Th("Jaccard"),
                  html.Th("steps here / there")])] +
        [html.Tr([html.Td(str(r["a"])), html.Td(str(r["b"]) if r["b"] >= 0 else "—"),
                  html.Td(f"{r['jaccard']:.2f}"), html.Td(f"{r['steps_a']:,} / "
                                                          f"{r['steps_b']:,}")])
         for r in pairs], className="mini cmp-table")
    return html.Div([head, html.H5("Inputs whose path or prediction changed"),
                     html.Ul(items, className="cmp-list") if items else
                     html.P("No input changed.", className="muted"),
                     html.H5("State matching (by co-occurrence on the same steps)"), table])
