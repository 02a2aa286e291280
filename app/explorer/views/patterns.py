"""Influential and buggy patterns: state sequences that flip predictions or gather the
model's errors, as two tabs of the side panel; a click filters the table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import ALL, Input, Output, State, dcc, html, no_update

from stateseer.abstraction.analysis.patterns import confusion_pair
from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, Trigger, View, select_outputs
from stateseer.app.selection import apply_event, pattern_items, to_query

__all__ = ["VIEW", "pattern_list", "pattern_lists", "select_pattern"]


SIGNIFICANT_Q = 0.05


def _row(p: dict[str, Any], j: int, kind: str, classes: Sequence[str],
         active: Sequence[int] | None) -> html.Details:
    states = " → ".join(str(s) for s in p["states"])
    if kind == "influential":
        a, b = p["flip"]
        stat = f"{classes[a]}→{classes[b]} · {p['support']} flips · P(flip) {p['lift']:.2f}"
    else:
        q = p["q_value"]
        stat = (f"{p['support']}/{p['n_inputs']} wrong · lift {p['lift']:.1f} · q {q:.1e}"
                + ("" if q < SIGNIFICANT_Q else " (not significant)"))
    phrases = "; ".join(f"“{x['phrase']}” ({x['count']})" for x in p["phrases"])
    is_active = active is not None and list(active) == list(p["states"])
    return html.Details([
        html.Summary([html.Button(states, id=ids.pattern(kind, j),
                                  n_clicks=0, className="pattern-btn" +
                                  (" active" if is_active else ""),
                                  title="filter the table to inputs with this pattern"),
                      html.Span(stat, className="pstat")]),
        html.Div(phrases, className="phrases")], className="pattern")


def pattern_list(items: list[dict[str, Any]], kind: str, classes: Sequence[str],
                 active: Sequence[int] | None = None,
                 pairs: Sequence[tuple[int, int] | None] | None = None) -> html.Div:
    """Influential or buggy patterns as clickable rows with their example phrases.

    Buggy patterns with ``pairs`` (each one's ``(gold, predicted)``,
    :func:`confusion_pair`) are grouped by confusion, the group of the most significant
    pattern first, and a line says so when none is significant at q < 0.05.
    """
    if not items:
        return html.P("No patterns with enough support.", className="muted")
    shown = list(enumerate(items[:25]))
    if kind != "buggy" or pairs is None:
        return html.Div([_row(p, j, kind, classes, active) for j, p in shown])
    out: list[Any] = []
    if all(p["q_value"] >= SIGNIFICANT_Q for _, p in shown):
        out.append(html.P(f"None significant at q < {SIGNIFICANT_Q}: these windows are only "
                          "more frequent in errors by chance-level margins.",
                          className="muted none-significant"))
    groups: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    for j, p in shown:  # items come sorted by p-value: groups in order of their best
        groups.setdefault(pairs[j] if j < len(pairs) else None, []).append((j, p))
    for pair, members in groups.items():
        head = (f"gold {classes[pair[0]]} → predicted {classes[pair[1]]}" if pair
                else "mixed errors")
        out.append(html.Div([html.Div(f"{head} · {len(members)} pattern"
                                      f"{'s' if len(members) > 1 else ''}",
                                      className="confusion-head"),
                             *[_row(p, j, kind, classes, active) for j, p in members]],
                            className="confusion-group"))
    return html.Div(out)


def _lists(ctx, split: str) -> tuple[html.Div, html.Div]:
    pats, classes = ctx.data.abstraction.patterns, ctx.data.classes
    infl = pattern_list(pattern_items(pats, "influential", split), "influential", classes)
    buggy = pattern_items(pats, "buggy", split)
    pairs = None
    if split in ctx.data.traces.split_names:
        tr = ctx.data.traces[split]
        labels, pred = np.asarray(tr.labels), np.asarray(tr.predictions)
        pairs = [confusion_pair(p, labels, pred) for p in buggy]
    return infl, pattern_list(buggy, "buggy", classes, pairs=pairs)


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
    name="patterns", shows_states=True, layout=layout, tabs=(ids.TAB_INFLUENTIAL, ids.TAB_BUGGY),
    callbacks=(
        Callback(pattern_lists, [Output(ids.INFLUENTIAL, "children"),
                                 Output(ids.BUGGY, "children")],
                 [Input(ids.SPLIT, "value")], prevent_initial_call=True),
        Callback(select_pattern, select_outputs(),
                 [Input(ids.pattern(ALL, ALL), "n_clicks"), State(ids.SPLIT, "value"),
                  State(ids.SELECTION, "data")], trigger=True, prevent_initial_call=True),
    ))
