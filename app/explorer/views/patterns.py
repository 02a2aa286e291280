"""Influential and buggy patterns: state sequences that flip predictions or gather the
model's errors, as two tabs of the side panel; a click filters the table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import ALL, Input, Output, State, dcc, html, no_update

from app.selection import apply_event, pattern_items, to_query

from .. import ids
from ..view import Callback, Trigger, View, select_outputs

__all__ = ["VIEW", "pattern_list", "pattern_lists", "select_pattern"]


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
            html.Summary([html.Button(states, id=ids.pattern(kind, j),
                                      n_clicks=0, className="pattern-btn" +
                                      (" active" if is_active else ""),
                                      title="filter the table to inputs with this pattern"),
                          html.Span(stat, className="pstat")]),
            html.Div(phrases, className="phrases")], className="pattern"))
    return html.Div(rows)


def _lists(ctx, split: str) -> tuple[html.Div, html.Div]:
    pats, classes = ctx.data.abstraction.patterns, ctx.data.classes
    return tuple(pattern_list(pattern_items(pats, kind, split), kind, classes)
                 for kind in ("influential", "buggy"))


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    split = (initial or {}).get("split") or ctx.data.default_split
    infl, buggy = _lists(ctx, split)
    return {"side": [
        dcc.Tab(label="Influential patterns", value=ids.TAB_INFLUENTIAL, children=html.Div(
            id=ids.INFLUENTIAL, className="patterns", children=infl)),
        dcc.Tab(label="Buggy patterns", value=ids.TAB_BUGGY, children=html.Div(
            id=ids.BUGGY, className="patterns", children=buggy))]}


def pattern_lists(ctx, split):
    """Both lists for ``split`` (buggy patterns are per split)."""
    return _lists(ctx, split)


def select_pattern(ctx, trigger: Trigger, _clicks, split, sel):
    """A click on a pattern selects it (a second click unselects it)."""
    if not trigger.is_type(ids.PATTERN_TYPE):
        return no_update, no_update
    sel = sel or {}
    kind, j = trigger.id["kind"], int(trigger.id["index"])
    items = pattern_items(ctx.data.abstraction.patterns, kind, sel.get("split") or split)
    if j >= len(items):
        return no_update, no_update
    new = apply_event(sel, "pattern", {"kind": kind, "index": j,
                                       "states": items[j]["states"]})
    return new, to_query(new)


VIEW = View(
    name="patterns", layout=layout, tabs=(ids.TAB_INFLUENTIAL, ids.TAB_BUGGY),
    callbacks=(
        Callback(pattern_lists, [Output(ids.INFLUENTIAL, "children"),
                                 Output(ids.BUGGY, "children")],
                 [Input(ids.SPLIT, "value")], prevent_initial_call=True),
        Callback(select_pattern, select_outputs(),
                 [Input(ids.pattern(ALL, ALL), "n_clicks"), State(ids.SPLIT, "value"),
                  State(ids.SELECTION, "data")], trigger=True, prevent_initial_call=True),
    ))
