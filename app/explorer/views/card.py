"""The state card: visits, prediction mix, forcing figure, entering n-grams, contexts and
transitions of the selected state (a tab of the side panel)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import Input, Output, State, dcc, html, no_update

from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.colors import ClassColors, text_color_on
from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, Trigger, View
from stateseer.app.explorer.views.core import visible_token

__all__ = ["VIEW", "edge_tokens", "show_card", "state_card"]

PROMPT = "Click a state in the diagram."


def _mix_bar(prediction: Sequence[float], classes: Sequence[str],
             palette: ClassColors | None = None) -> html.Div:
    parts = []
    for k, p in enumerate(prediction):
        onehot = [0.0] * len(prediction)
        onehot[k] = 1.0
        color = (palette or ClassColors(len(classes))).mix(onehot)
        parts.append(html.Div(f"{classes[k]} {p:.0%}" if p >= 0.12 else "",
                              style={"width": f"{100 * p:.1f}%", "background": color,
                                     "color": text_color_on(color)}, className="mixpart"))
    return html.Div(parts, className="mixbar")


def edge_tokens(tokens: Sequence[str]) -> html.Span:
    """Tokens each in its own chip (``code.edge-tok``), no separator between them, so a
    punctuation token ("," or "-") reads as one token; a chip's tooltip quotes its token.
    Text is passed to Dash as text, never as HTML."""
    return html.Span([html.Code(visible_token(t), className="edge-tok", title=repr(t))
                      for t in tokens], className="edge-toks")


def state_card(fsm: FSM, state: int, patterns: dict[str, Any], forcing: dict | None = None,
               ) -> html.Div:
    """Visits, prediction mix, entering n-grams, contexts and transitions of a state."""
    classes = fsm.classes
    if state == fsm.initial:
        return html.Div([html.H4("Start state"),
                         html.P(f"Every input starts here ({int(fsm.visits[state]):,} inputs). "
                                "Its prediction is the classifier head applied to h0."),
                         _mix_bar(fsm.prediction[state], classes, fsm.palette)],
                        className="card-body")
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
                         edge_tokens([t for t, _ in e["top_tokens"]])])
                for e in es]

    loops = next((e for e in edges if e["source"] == state and e["target"] == state), None)
    body = [
        html.H4(f"State {state}"),
        html.P([html.B(f"{int(fsm.visits[state]):,}"), " visits · mostly predicts ",
                html.B(classes[int(fsm.labels[state])]),
                f" · stays on {loops['count']:,} tokens" if loops else ""]),
        _mix_bar(fsm.prediction[state], classes, fsm.palette),
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


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"side": dcc.Tab(label="State", value=ids.TAB_CARD, children=[html.Div(
        id=ids.STATE_CARD, className="card", children=html.P(PROMPT, className="muted")),
        dcc.Store(id=ids.CARD_KEY)])}


def show_card(ctx, trigger: Trigger, sel, tab, shown=None):
    """The selected state's card and the state it shows (``card-key``); a new state
    selection, or a page opening on one (a URL), brings its tab to the front (not while
    a pattern is selected: its tab stays). A selection that keeps the state (a row click)
    changes nothing."""
    state = (sel or {}).get("state")
    if state is not None:
        state = int(state)
    if state == shown and trigger.id == ids.SELECTION:
        return no_update, no_update, no_update
    if state is None:
        return html.P(PROMPT, className="muted"), no_update, None
    switch = ids.TAB_CARD if trigger.id in (ids.SELECTION, None) and tab != ids.TAB_CARD and \
        not (sel or {}).get("pattern") else no_update
    f = ctx.data.forcing_per_state().get(str(state))
    forcing = {"agreement": f["agreement"], "n": f["n_inputs"]} if f else None
    return state_card(ctx.data.fsm, state, ctx.data.abstraction.patterns,
                      forcing=forcing), switch, state


VIEW = View(
    name="card", shows_states=True, layout=layout, tabs=(ids.TAB_CARD,),
    callbacks=(
        Callback(show_card, [Output(ids.STATE_CARD, "children"),
                             Output(ids.SIDE_TABS, "value"), Output(ids.CARD_KEY, "data")],
                 [Input(ids.SELECTION, "data"), State(ids.SIDE_TABS, "value"),
                  State(ids.CARD_KEY, "data")],
                 trigger=True),
    ))
