"""Comparing traces: pin a trace (every trace shown next is compared with it), edit the
selected row's text to compare the edit with the original, and, with a second run
(``serve --compare``), a side tab listing the inputs whose path or prediction changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import ALL, Input, Output, State, dcc, html, no_update

from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, Trigger, View, select_outputs
from stateseer.app.explorer.views.core import active_of
from stateseer.app.selection import EMPTY, apply_event, to_query
from stateseer.core.errors import StateseerError

__all__ = ["VIEW", "compare_panel", "comparison", "edit", "open_changed", "pin"]


def compare_panel(cmp_: dict[str, Any], texts: Sequence[str], labels: np.ndarray,
                  pred_a: np.ndarray, classes: Sequence[str], *,
                  row_ids: Sequence[int] | None = None,
                  limit: int = 12) -> html.Div:
    """Summary figures, the changed inputs (buttons that select them) and the matching.

    Parameters
    ----------
    cmp_ : dict
        From :meth:`stateseer.app.workflows.comparison.RunComparison.compare`.
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
        f"{100 * s['step_agreement']:.1f}% of steps in matched states"
        + (f" (chance {100 * s['chance_agreement']:.1f}%: states that match only by their "
           "frequencies)" if "chance_agreement" in s else "") + " · "
        f"{s['path_changed']} paths differ somewhere (median input: "
        f"{100 * float(np.median(share)) if len(share) else 0:.0f}% of its steps)"],
        className="cmp-summary")
    # changed inputs: prediction changes first, then by how many steps differ
    order = np.lexsort((-ch["n_diff"], ~ch["prediction_changed"]))
    changed = [i for i in order if ch["path_changed"][i] or ch["prediction_changed"][i]]
    order = changed[:limit]
    items = []
    for i in order:
        a, b, y = classes[int(pred_a[i])], classes[int(pred_b[i])], classes[int(labels[i])]
        tag = "fixed" if a != y and b == y else "broken" if a == y and b != y else (
            "changed" if a != b else "path")
        items.append(html.Li([
            html.Button(f"#{row_ids[i] if row_ids is not None else i}",
                        id=ids.cmp_row(int(i)), n_clicks=0,
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
    shown = (f" (the first {len(order)} of {len(changed):,}: changed predictions first, "
             "then the most steps that differ)") if len(changed) > len(order) else ""
    return html.Div([head, html.H5("Inputs whose path or prediction changed" + shown),
                     html.Ul(items, className="cmp-list") if items else
                     html.P("No input changed.", className="muted"),
                     html.H5("State matching (by co-occurrence on the same steps)"), table])


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    tools = [html.Button("edit selected row", id=ids.EDIT_BTN, n_clicks=0,
                         title="copy the selected row's text into the box to edit and "
                               "compare"),
             html.Button("pin", id=ids.PIN_BTN, n_clicks=0,
                         title="pin this trace: every trace shown next is compared with it"),
             html.Span(id=ids.PIN_INFO, className="pin-info")]
    out: dict[str, Any] = {"input": tools, "stores": dcc.Store(id=ids.PINNED)}
    if ctx.comparison is not None:
        out["side"] = dcc.Tab(label=f"Compare with {ctx.comparison.name}",
                              value=ids.TAB_COMPARE, children=html.Div(
                                  id=ids.COMPARE_PANEL, className="compare-panel"))
    return out


def edit(ctx, n_clicks, sel):
    """Copy the selected row's text into the input box and tick "compare", whatever trace
    is on display (a typed trace stays on display while the row stays selected, so the
    trace's own text would be the typed one); nothing without a selected row."""
    sel = sel or {}
    if sel.get("row") is None or not sel.get("split"):
        return no_update, no_update
    try:
        tr = ctx.data.trace_instance(sel["split"], int(sel["row"]))
    except (StateseerError, TypeError, ValueError):
        return no_update, no_update  # a stale or forged selection
    return tr.text, ["on"]


def pin(ctx, n_clicks, active, pinned):
    """Pin the trace on display (or unpin)."""
    if pinned:
        return None, "", "pin"
    tr, _ = active_of(active)
    if tr is None:
        return no_update, "Select or type a trace first.", no_update
    return tr.to_store(), f"pinned {tr.name}: traces shown next are compared with it", "unpin"


def comparison(ctx, sel):
    """The comparison tab for the selected split."""
    split = (sel or {}).get("split") or ctx.data.splits[0]
    try:
        cmp_ = ctx.comparison.compare(split)
    except StateseerError as exc:
        return html.P(str(exc), className="message")
    tr = ctx.data.traces[split]
    return compare_panel(cmp_, tr.texts, tr.labels, tr.predictions, ctx.data.classes,
                         row_ids=tr.rows)


def open_changed(ctx, trigger: Trigger, _clicks, sel):
    """A changed input's button shows its trace, compared with the other run's."""
    if not trigger.is_type(ids.CMP_ROW_TYPE):
        return no_update, no_update
    new = apply_event(sel or EMPTY, "row", int(trigger.id["index"]))
    return new, to_query(new)


def _compared(ctx) -> bool:
    return ctx.comparison is not None


VIEW = View(
    name="compare", layout=layout, ids=(ids.EDIT_BTN, ids.PIN_BTN, ids.PIN_INFO, ids.PINNED),
    tabs=(ids.TAB_COMPARE,),
    callbacks=(
        Callback(edit, [Output(ids.NEW_TEXT, "value"), Output(ids.COMPARE_MODE, "value")],
                 [Input(ids.EDIT_BTN, "n_clicks"), State(ids.SELECTION, "data")],
                 prevent_initial_call=True),
        Callback(pin, [Output(ids.PINNED, "data"), Output(ids.PIN_INFO, "children"),
                       Output(ids.PIN_BTN, "children")],
                 [Input(ids.PIN_BTN, "n_clicks"), State(ids.ACTIVE_TRACE, "data"),
                  State(ids.PINNED, "data")], prevent_initial_call=True),
        Callback(comparison, [Output(ids.COMPARE_PANEL, "children")],
                 [Input(ids.SELECTION, "data")], when=_compared),
        Callback(open_changed, select_outputs(),
                 [Input(ids.cmp_row(ALL), "n_clicks"), State(ids.SELECTION, "data")],
                 trigger=True, prevent_initial_call=True, when=_compared),
    ))
