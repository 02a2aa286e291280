"""State card and pattern summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import html

from abstraction.fsm import FSM

from .colors import mix_color, text_color_on

__all__ = ["pattern_list", "state_card"]


def _mix_bar(prediction: Sequence[float], classes: Sequence[str]) -> html.Div:
    parts = []
    for k, p in enumerate(prediction):
        onehot = [0.0] * len(prediction)
        onehot[k] = 1.0
        color = mix_color(onehot)
        parts.append(html.Div(f"{classes[k]} {p:.0%}" if p >= 0.12 else "",
                              style={"width": f"{100 * p:.1f}%", "background": color,
                                     "color": text_color_on(color)}, className="mixpart"))
    return html.Div(parts, className="mixbar")


def state_card(fsm: FSM, state: int, patterns: dict[str, Any], forcing: dict | None = None,
               ) -> html.Div:
    """Visits, prediction mix, entering n-grams, contexts and transitions of a state."""
    classes = fsm.classes
    if state == fsm.initial:
        return html.Div([html.H4("Start state"),
                         html.P(f"Every input starts here ({int(fsm.visits[state]):,} inputs). "
                                "Its prediction is the classifier head applied to h0."),
                         _mix_bar(fsm.prediction[state], classes)], className="card-body")
    ngr = patterns.get("ngrams", [])
    ctx = patterns.get("contexts", [])
    rows_f = ngr[state]["frequent"][:8] if state < len(ngr) else []
    rows_l = ngr[state]["lift"][:8] if state < len(ngr) else []

    def ngram_table(rows, title):
        return html.Div([html.H5(title), html.Table(
            [html.Tr([html.Th("n-gram"), html.Th("count"), html.Th("lift")])] +
            [html.Tr([html.Td(r["ngram"]), html.Td(r["count"]), html.Td(f"{r['lift']:.1f}")])
             for r in rows], className="mini")], className="ngram-col")

    contexts = []
    for c in (ctx[state] if state < len(ctx) else [])[:5]:
        toks = c["tokens"]
        f = c["focus"]
        contexts.append(html.Li([html.Span(" ".join(toks[:f]) + " "),
                                 html.Mark(toks[f]),
                                 html.Span(" " + " ".join(toks[f + 1:]))]))
    edges = fsm.state_edges(top_tokens=4)
    out_e = sorted((e for e in edges if e["source"] == state and e["target"] != state),
                   key=lambda e: -e["count"])[:6]
    in_e = sorted((e for e in edges if e["target"] == state and e["source"] != state),
                  key=lambda e: -e["count"])[:6]

    def edge_rows(es, key):
        return [html.Li([html.B(f"{'→' if key == 'target' else '←'} {e[key]}"),
                         f" ×{e['count']}: ",
                         html.Span(", ".join(t for t, _ in e["top_tokens"]), className="toks")])
                for e in es]

    loops = next((e for e in edges if e["source"] == state and e["target"] == state), None)
    body = [
        html.H4(f"State {state}"),
        html.P([html.B(f"{int(fsm.visits[state]):,}"), " visits · mostly predicts ",
                html.B(classes[int(fsm.labels[state])]),
                f" · stays on {loops['count']:,} tokens" if loops else ""]),
        _mix_bar(fsm.prediction[state], classes),
    ]
    if forcing is not None:
        body.append(html.P([
            "State forcing: replacing the hidden state by this state's centroid whenever "
            "the model is here keeps the prediction of ",
            html.B(f"{forcing['agreement']:.0%}"), f" of the {forcing['n']:,} test inputs "
            "that pass through it."], className="forcing-line"))
    body += [
        html.Div([ngram_table(rows_f, "Entering n-grams"),
                  ngram_table(rows_l, "Most specific (lift)")], className="ngram-row"),
        html.H5("Example contexts"), html.Ul(contexts, className="contexts"),
        html.Div([html.Div([html.H5("Incoming"), html.Ul(edge_rows(in_e, "source"))]),
                  html.Div([html.H5("Outgoing"), html.Ul(edge_rows(out_e, "target"))])],
                 className="edge-lists"),
    ]
    return html.Div(body, className="card-body")


def pattern_list(items: list[dict[str, Any]], kind: str, classes: Sequence[str],
                 active: Sequence[int] | None = None) -> html.Div:
    """Influential or buggy patterns as clickable rows with their example phrases."""
    if not items:
        return html.P("No patterns with enough support.", className="muted")
    rows = []
    for j, p in enumerate(items[:25]):
        states = " → ".join(str(s) for s in p["states"])
        if kind == "influential":
            a, b = p["flip"]
            stat = f"{classes[a]}→{classes[b]} · {p['support']} flips · P(flip) {p['lift']:.2f}"
        else:
            stat = (f"{p['support']}/{p['n_inputs']} wrong · lift {p['lift']:.1f} · "
                    f"q {p['q_value']:.1e}")
        phrases = "; ".join(f"“{x['phrase']}” ({x['count']})" for x in p["phrases"])
        is_active = active is not None and list(active) == list(p["states"])
        rows.append(html.Details([
            html.Summary([html.Button(states, id={"type": "pattern", "kind": kind, "index": j},
                                      n_clicks=0, className="pattern-btn" +
                                      (" active" if is_active else ""),
                                      title="filter the table to inputs with this pattern"),
                          html.Span(stat, className="pstat")]),
            html.Div(phrases, className="phrases")], className="pattern"))
    return html.Div(rows)
