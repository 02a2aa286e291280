"""The Findings tab: why the model errs (``stateseer diagnose``), first of the side tabs.

Each finding shows its culprit in the words a developer reads, its evidence (inputs,
error rate with and without, q-value), what intervening with the model did (deleting the
culprit fixed F misclassifications and broke B), the training inputs that carry the
same culprit with their labels, the repairs that fit it, and example inputs: a click
opens the input's trace. A run not yet diagnosed says how to diagnose it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from dash import ALL, Input, State, dcc, html, no_update

from ...selection import EMPTY, apply_event, to_query
from ...workflows.diagnose import load_findings
from .. import ids
from ..view import Callback, Trigger, View, select_outputs

__all__ = ["VIEW", "finding_card", "findings_panel", "open_example"]


def _culprit(f: dict[str, Any]) -> str:
    if f["tokens"]:
        return " … ".join(f["tokens"]) if f["kind"] == "sequence" else ", ".join(f["tokens"])
    if f["kind"] == "length":
        return f"longer than {f.get('length_above')} tokens"
    if f["kind"] == "confusion":
        return " → ".join(f.get("classes", ()))
    return ", ".join(f.get("unknown_words", ())[:5]) or "—"


def _intervention(iv: dict[str, Any] | None, kind: str = "") -> str:
    if not iv:
        return ("no intervention on the inputs can test a confusion" if kind == "confusion"
                else "not checked with the model (not among the most significant)")
    if iv["kind"] == "delete_tokens":
        return (f"deleting it fixes {iv['fixed']} misclassification(s) and breaks "
                f"{iv['broken']} of {iv['inputs']} inputs")
    if iv["kind"] == "cut":
        return (f"cutting the inputs after {iv['after_tokens']} tokens leaves "
                f"{iv['unchanged']:.0%} of the predictions unchanged")
    if iv["kind"] == "unread_tail":
        return (f"of {iv['inputs']} errors, the words after token {iv['after_tokens']} that "
                f"the model never read favour the true class in {iv['for_truth']} and the "
                f"prediction in {iv['for_prediction']}")
    return (f"in training, {iv['inputs']} inputs hold these words, "
            f"{iv['purity']:.0%} of them with the word's usual label")


def finding_card(f: dict[str, Any], classes: list[str], rows_of: dict[int, int]) -> html.Div:
    """One finding as a card (plain data in, components out; text only, so every string
    the run brings is escaped by React)."""
    badge = html.Span("significant" if f["significant"] else "not significant",
                      className="badge " + ("sig" if f["significant"] else "muted"))
    tr = f.get("training") or {}
    labels = tr.get("labels") or []
    training = (f"training inputs carrying it: {tr['n_inputs']} ("
                + ", ".join(f"{classes[k]} {n}" for k, n in enumerate(labels) if n) + ")"
                ) if tr.get("n_inputs") else ""
    examples = [html.Button(f"#{iid}", id=ids.finding_example(f["rank"], rows_of[iid]), n_clicks=0,
                            title="open this input's trace")
                for iid in f.get("examples", ()) if iid in rows_of]
    return html.Div([
        html.Div([html.B(f"{f['rank']}. {f['kind']}: "), html.Code(_culprit(f)), " ", badge]),
        html.P(f["description"]),
        html.P(f"q = {f['q_value']:.1e}; error rate {f['error_rate_with']:.0%} with, "
               f"{f['error_rate_without']:.0%} without; "
               f"{_intervention(f.get('intervention'), f['kind'])}", className="muted"),
        html.P(training, className="muted") if training else None,
        html.Div(["examples: ", *examples] if examples else [], className="examples"),
        html.P("repairs that fit: " + ", ".join(f.get("actions", ())), className="muted"),
    ], className="finding")


@lru_cache(maxsize=8)
def _rows_of(ctx: Any, split: str) -> dict[int, int]:
    rows = np.asarray(ctx.data.traces[split].rows)
    return {int(i): r for r, i in enumerate(rows.tolist())}


def findings_panel(ctx: Any) -> list[Any]:
    """The tab's content for the context's run."""
    doc = load_findings(ctx.data.run.path)
    if doc is None:
        return [html.P(["Not diagnosed yet: ", html.Code(f"stateseer diagnose "
                                                         f"{ctx.data.run.path}"),
                        " names the culprits of the model's errors, each checked by "
                        "intervening with the model."], className="muted")]
    split = doc["split"]
    if split not in ctx.data.splits:
        return [html.P(f"The findings are on split {split!r}, which this run no longer has; "
                       "diagnose it again.", className="muted")]
    head = html.P(f"{doc['n_significant']} significant finding(s) on the {split} split "
                  f"({doc['n_misclassified']} of {doc['n_inputs']} inputs misclassified; "
                  f"{doc['n_candidates']} candidates tested, q < {doc['q_level']}, each "
                  "checked with the model).")
    if not doc["n_significant"]:
        head.children += (" None survives: on this split the errors have no single culprit "
                          "these checks can name; the list below is what came closest.")
    rows = _rows_of(ctx, split)
    return [head, *(finding_card(f, list(ctx.data.classes), rows) for f in doc["findings"])]


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"side": dcc.Tab(label="Findings", value=ids.TAB_FINDINGS, children=html.Div(
        findings_panel(ctx), id=ids.FINDINGS, className="findings"))}


def open_example(ctx, trigger: Trigger, _clicks, sel):
    """A click on an example input selects it (in the findings' split): its trace opens."""
    if not trigger.is_type(ids.FINDING_EXAMPLE_TYPE):
        return no_update, no_update
    doc = load_findings(ctx.data.run.path)
    if doc is None or doc["split"] not in ctx.data.splits:
        return no_update, no_update
    sel = sel or EMPTY
    if sel.get("split") != doc["split"]:
        sel = apply_event(sel, "split", doc["split"])
    new = apply_event(sel, "row", int(trigger.id["index"]))
    return new, to_query(new)


VIEW = View(
    name="findings", layout=layout, tabs=(ids.TAB_FINDINGS,),
    callbacks=(
        Callback(open_example, select_outputs(),
                 [Input(ids.finding_example(ALL, ALL), "n_clicks"), State(ids.SELECTION, "data")],
                 trigger=True, prevent_initial_call=True),
    ))
