"""Callbacks: thin wrappers that route events to the pure functions of the app.

Per-user state lives in ``dcc.Store`` components (the selection, the active trace); the
run's data is loaded once and only read.
"""

from __future__ import annotations

import io
import json
from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update

from abstraction.export import fsm_to_dot, render
from rnn_models.errors import StateseerError

from .callbacks_analysis import forced_for, register_analysis_callbacks
from .data import InstanceQuery, RunData, query_instances
from .selection import EMPTY, apply_event, pattern_items, to_query
from .views.cards import pattern_list, state_card
from .views.diagram import diagram_elements, forcing_colors, stylesheet
from .views.trace import probability_figure, token_strip

__all__ = ["register_callbacks"]


def _query_from(sel: dict[str, Any], split: str, search: str, regex: list,
                label: str | None, pred: str | None, correct: str | None, page: int = 0,
                sort_by: list | None = None, page_size: int = 12) -> InstanceQuery:
    sort = (sort_by or [{}])[0]
    sel = sel or EMPTY
    pattern = (sel.get("pattern") or {}).get("states")
    return InstanceQuery(
        split=split, search=search or "", regex=bool(regex), label=label, prediction=pred,
        correct=correct, state=sel.get("state"), pattern=tuple(pattern) if pattern else None,
        sort_by=sort.get("column_id"), descending=sort.get("direction") == "desc",
        page=page or 0, page_size=page_size)


def register_callbacks(app: Dash, data: RunData) -> None:
    """Attach every callback of the explorer to ``app``."""
    n_inputs = {s: data.traces[s].n_inputs for s in data.splits}
    patterns = data.abstraction.patterns
    register_analysis_callbacks(app, data)

    # -- selection: URL on load, diagram taps, table clicks, patterns, split, clear --------
    # The page is served with the selection of its URL (see app.main), so this callback
    # has no initial call and nothing at start-up waits for it.
    @app.callback(
        Output("selection", "data"), Output("url", "search"),
        Input("diagram", "tapNodeData"),
        Input("table", "active_cell"),
        Input({"type": "pattern", "kind": ALL, "index": ALL}, "n_clicks"),
        Input("split", "value"),
        Input("clear", "n_clicks"),
        Input({"type": "cmp-row", "index": ALL}, "n_clicks"),
        Input({"type": "nn-row", "index": ALL, "input": ALL}, "n_clicks"),
        State("selection", "data"),
        State("table", "data"),
        prevent_initial_call=True,
    )
    def select(tap, cell, _pclicks, split, _clear, _cmp, _nn, sel, rows):
        """One place owns the selection and writes it into the URL."""
        new = _next_selection(tap, cell, split, sel or EMPTY, rows)
        if new is no_update:
            return no_update, no_update
        return new, to_query(new)

    def _next_selection(tap, cell, split, sel, rows):
        trig = ctx.triggered_id
        if trig == "diagram" and tap:
            return apply_event(sel, "state", int(tap["state"]))
        if trig == "table" and cell and rows:
            r = cell.get("row")
            if r is None or r >= len(rows):
                return no_update
            return apply_event(sel, "row", int(rows[r]["index"]))
        if isinstance(trig, dict) and trig.get("type") == "pattern":
            if not ctx.triggered[0]["value"]:
                return no_update
            items = pattern_items(patterns, trig["kind"], sel.get("split") or split)
            if trig["index"] >= len(items):
                return no_update
            return apply_event(sel, "pattern", {"kind": trig["kind"], "index": trig["index"],
                                                "states": items[trig["index"]]["states"]})
        if trig == "split":
            return apply_event(sel, "split", split) if split != sel.get("split") else no_update
        if trig == "clear":
            return apply_event(sel, "clear")
        if isinstance(trig, dict) and trig.get("type") == "cmp-row":
            if not ctx.triggered[0]["value"]:
                return no_update
            return apply_event(sel, "row", int(trig["index"]))
        if isinstance(trig, dict) and trig.get("type") == "nn-row":
            # a nearest training context: open that training input
            if not ctx.triggered[0]["value"] or "train" not in data.splits:
                return no_update
            return apply_event(apply_event(sel, "split", "train"), "row", int(trig["input"]))
        return no_update

    @app.callback(Output("split", "value"), Input("selection", "data"), State("split", "value"),
                  prevent_initial_call=True)
    def sync_split(sel, current):
        return sel["split"] if sel and sel.get("split") and sel["split"] != current \
            else no_update

    # -- instance table ----------------------------------------------------------------------
    @app.callback(
        Output("table", "data"), Output("table", "page_count"),
        Output("table-message", "children"), Output("filter-chips", "children"),
        Output("table", "style_data_conditional"),
        Input("selection", "data"), Input("search", "value"), Input("regex", "value"),
        Input("f-label", "value"), Input("f-pred", "value"), Input("f-correct", "value"),
        Input("table", "page_current"), Input("table", "sort_by"),
    )
    def table(sel, search, regex, label, pred, correct, page, sort_by):
        sel = sel or EMPTY
        split = sel.get("split") or data.splits[0]
        q = _query_from(sel, split, search, regex, label, pred, correct, page, sort_by)
        rows, total, msg = query_instances(data, q)
        if not rows and q.page:  # filters shrank the table below the current page
            rows, total, msg = query_instances(data, InstanceQuery(**{**q.__dict__, "page": 0}))
        chips = []
        if sel.get("state") is not None:
            chips.append(html.Span(f"through state {sel['state']}", className="chip-f"))
        if sel.get("pattern"):
            chips.append(html.Span("pattern " + "→".join(map(str, sel["pattern"]["states"])),
                                   className="chip-f"))
        chips.append(html.Span(f"{total:,} of {n_inputs[split]:,} inputs", className="count"))
        style = [{"if": {"filter_query": '{correct} = "✗"'}, "backgroundColor": "#fdecea"}]
        if sel.get("row") is not None:
            style.append({"if": {"filter_query": f"{{index}} = {int(sel['row'])}"},
                          "backgroundColor": "#fff1d6", "fontWeight": "bold"})
        return rows, max(1, -(-total // q.page_size)), msg, chips, style

    # -- active trace: the selected row, or a typed input (optionally compared) ------------
    @app.callback(
        Output("active-trace", "data"), Output("input-message", "children"),
        Input("selection", "data"), Input("trace-btn", "n_clicks"), Input("pinned", "data"),
        State("new-text", "value"), State("compare-mode", "value"),
        State("active-trace", "data"),
    )
    def active_trace(sel, _n, pinned, text, compare, current):
        sel = sel or EMPTY
        row_trace = None
        if sel.get("row") is not None and sel.get("split"):
            row_trace = data.trace_instance(sel["split"], int(sel["row"]))
        trig = ctx.triggered_id
        if trig == "trace-btn":
            if not text or not text.strip():
                return no_update, "Type some text first."
            try:
                typed = data.trace_text(text)
            except StateseerError as exc:
                return no_update, str(exc)
            unknown = [t for t, k in zip(typed["tokens"], typed["known"], strict=True) if not k]
            msg = (f"{len(unknown)} unknown word(s): {', '.join(unknown[:8])}" if unknown
                   else "")
            other = row_trace if compare else None
            return {"main": typed, "compare": other or _pinned(pinned, typed)}, msg
        main = (current or {}).get("main")
        if trig == "pinned":
            if not main:
                return no_update, no_update
            other = _pinned(pinned, main)
            if other is None and data.other is not None and main.get("index") is not None:
                other = _other_run(main["split"], int(main["index"]))
            return {"main": main, "compare": other}, no_update
        if main and main.get("index") is None and trig == "selection" and row_trace is None:
            return no_update, no_update  # keep a typed trace when the selection changes
        if row_trace is None:
            return None, ""
        other = _pinned(pinned, row_trace)
        if other is None and data.other is not None:
            other = _other_run(sel["split"], int(sel["row"]))
        return {"main": row_trace, "compare": other}, ""

    def _other_run(split, i):
        try:
            return data.other_trace(split, i)
        except StateseerError:
            return None

    def _pinned(pinned, main):
        if not pinned or data.trace_key(pinned) == data.trace_key(main):
            return None
        return pinned

    @app.callback(
        Output("trace-title", "children"), Output("trace-tokens", "children"),
        Output("trace-chart-box", "children"),
        Input("active-trace", "data"), Input("forced", "data"), State("selection", "data"),
    )
    def trace_view(active, forced, sel):
        if not active or not active.get("main"):
            # no chart yet: the page does not load plotly.js until a trace is shown
            return (html.P("Select a row or type an input to see its trace.", className="muted"),
                    None, None)
        tr, cmp_ = active["main"], active.get("compare")
        classes = data.classes
        pat_steps: list[int] = []
        pattern = (sel or {}).get("pattern")
        if pattern:
            ps = pattern["states"]
            st = tr["states"]
            for t in range(len(st)):  # mark the states of every occurrence (collapsed)
                seq, j = [], t
                while j < len(st) and len(seq) < len(ps):
                    if not seq or st[j] != seq[-1]:
                        seq.append(st[j])
                    if seq != ps[: len(seq)]:
                        break
                    j += 1
                if seq == ps:
                    pat_steps.extend(range(t, j))
        head = [html.B(f"#{tr['id']} " if "id" in tr else "typed input "),
                f"predicted {classes[tr['prediction']]}"]
        if tr.get("label") is not None:
            ok = tr["label"] == tr["prediction"]
            head += [f" · label {classes[tr['label']]} ",
                     html.Span("✓" if ok else "✗ misclassified",
                               className="ok" if ok else "wrong")]
        sim_final = tr["simulated"][-1]
        head.append(html.Span(f" · FSM alone ends in state {sim_final} "
                              f"({classes[int(data.fsm.labels[sim_final])]})",
                              className="fsm-final"))
        diff: list[int] = []
        if cmp_:
            # token positions (0-based) after which the abstract states differ
            diff = [t - 1 for t, (a, b) in enumerate(zip(tr["states"], cmp_["states"],
                                                         strict=False)) if a != b and t > 0]
        parts = [token_strip(tr, classes, pattern_steps=pat_steps, highlight=diff)]
        if cmp_:
            who = (f"run {cmp_['run']} (its states renamed to the matched states here)"
                   if cmp_.get("run") else
                   f"#{cmp_['id']}" if cmp_.get("id") is not None else "the typed input")
            where = ", ".join(str(t + 1) for t in diff[:12]) + ("…" if len(diff) > 12 else "")
            parts += [html.Div(["compared with ", html.B(who),
                                f": abstract states differ after {len(diff)} token(s)"
                                + (f" (at {where})" if diff else ""),
                                *([html.Span(f" · predicts {classes[cmp_['prediction']]}")]
                                  if cmp_.get("prediction") is not None else [])],
                               className="compare-note"),
                      token_strip(cmp_, classes, highlight=diff, id_type="cmp-token")]
        chart = dcc.Graph(id="trace-chart", figure=probability_figure(
                              tr, classes, compare=cmp_,
                              forced=forced_for(active, forced, data)),
                          config={"displaylogo": False, "displayModeBar": "hover",
                                  "toImageButtonOptions": {"format": "png",
                                                           "filename": "trace"}})
        return head, parts, chart

    # -- hover: a chart point or a clicked token marks its state on the diagram -------------
    @app.callback(
        Output("hover-state", "data"),
        Input("trace-chart", "hoverData"),
        Input({"type": "token", "index": ALL}, "n_clicks"),
        State("active-trace", "data"),
        prevent_initial_call=True,
    )
    def hover(hover_data, _clicks, active):
        if ctx.triggered_id == "trace-chart":
            try:
                return int(hover_data["points"][0]["customdata"][1])
            except (TypeError, KeyError, IndexError, ValueError):
                return None
        trig = ctx.triggered_id
        if isinstance(trig, dict) and active and active.get("main") and \
                ctx.triggered[0]["value"]:
            return int(active["main"]["states"][trig["index"] + 1])
        return no_update

    # -- diagram -------------------------------------------------------------------------------
    @app.callback(
        Output("diagram", "elements"), Output("diagram", "layout"),
        Input("topk", "value"), Input("mincount", "value"), Input("loops", "value"),
        Input("layout", "value"), Input("active-trace", "data"), Input("color-by", "value"),
    )
    def diagram(topk, mincount, loops, layout, active, color_by):
        main = (active or {}).get("main") or {}
        cmp_ = (active or {}).get("compare") or {}
        els = diagram_elements(
            data.fsm, top_k=int(topk or 3), min_count=int(mincount or 1),
            self_loops=bool(loops), path=main.get("states"), compare_path=cmp_.get("states"),
            positions=data.positions, colors=_forcing_colors() if color_by == "forcing" else None)
        lay = {"name": layout or "preset", "fit": True, "padding": 20, "animate": False}
        if layout == "breadthfirst":
            lay.update(directed=True, roots="#s0")
        return els, (no_update if ctx.triggered_id not in (None, "layout") else lay)

    def _forcing_colors():
        per = data.metrics.get("abstraction", {}).get("forcing", {}).get("per_state", {})
        return forcing_colors(per)

    @app.callback(Output("diagram", "stylesheet"), Input("selection", "data"),
                  Input("hover-state", "data"))
    def diagram_style(sel, hover_state):
        return stylesheet((sel or {}).get("state"), hover_state)

    @app.callback(Output("edge-info", "children"), Input("diagram", "mouseoverEdgeData"),
                  prevent_initial_call=True)
    def edge_info(edge):
        if not edge:
            return no_update
        return [html.B(f"{edge['source'][1:]} → {edge['target'][1:]}"),
                f" · {edge['count']:,} transitions (p={edge['probability']:.2f}) · "
                f"{edge['n_tokens']} distinct tokens: ", html.Span(edge["tokens"])]

    # -- side panel ----------------------------------------------------------------------------
    @app.callback(Output("state-card", "children"), Output("side-tabs", "value"),
                  Input("selection", "data"), State("side-tabs", "value"))
    def card(sel, tab):
        state = (sel or {}).get("state")
        if state is None:
            return html.P("Click a state in the diagram.", className="muted"), no_update
        switch = "card" if ctx.triggered_id == "selection" and tab != "card" and \
            not (sel or {}).get("pattern") else no_update
        per = data.metrics.get("abstraction", {}).get("forcing", {}).get("per_state", {})
        f = per.get(str(int(state)))
        forcing = {"agreement": f["agreement"], "n": f["n_inputs"]} if f else None
        return state_card(data.fsm, int(state), patterns, forcing=forcing), switch

    @app.callback(Output("influential", "children"), Output("buggy", "children"),
                  Input("split", "value"), prevent_initial_call=True)
    def pattern_lists(split):
        return (pattern_list(pattern_items(patterns, "influential", split), "influential",
                             data.classes),
                pattern_list(pattern_items(patterns, "buggy", split), "buggy", data.classes))

    # -- downloads -----------------------------------------------------------------------------
    @app.callback(
        Output("download", "data"),
        Input("dl-svg", "n_clicks"), Input("dl-png", "n_clicks"), Input("dl-dot", "n_clicks"),
        Input("dl-json", "n_clicks"), Input("dl-table", "n_clicks"),
        Input("dl-figure", "n_clicks"),
        State("topk", "value"), State("mincount", "value"), State("loops", "value"),
        State("selection", "data"), State("search", "value"), State("regex", "value"),
        State("f-label", "value"), State("f-pred", "value"), State("f-correct", "value"),
        State("active-trace", "data"),
        prevent_initial_call=True,
    )
    def download(*args):
        trig = ctx.triggered_id
        topk, mincount, loops, sel, search, regex, label, pred, correct, active = args[6:]
        name = data.name
        if trig in ("dl-svg", "dl-png", "dl-dot"):
            dot = fsm_to_dot(data.fsm, top_k=int(topk or 3), min_count=int(mincount or 1),
                             self_loops=bool(loops))
            if trig == "dl-dot":
                return {"content": dot, "filename": f"{name}-fsm.dot"}
            fmt = trig[3:]
            try:
                blob = render(dot, fmt)
            except StateseerError as exc:
                return {"content": str(exc), "filename": f"{name}-fsm-error.txt"}
            return dcc.send_bytes(blob, f"{name}-fsm.{fmt}")
        if trig == "dl-json":
            return {"content": json.dumps(data.fsm.to_dict(), ensure_ascii=False),
                    "filename": f"{name}-fsm.json"}
        if trig == "dl-table":
            sel = sel or EMPTY
            split = sel.get("split") or data.splits[0]
            q = _query_from(sel, split, search, regex, label, pred, correct,
                            page_size=10**9)
            rows, _, _ = query_instances(data, q)
            buf = io.StringIO()
            import csv

            w = csv.DictWriter(buf, fieldnames=["id", "text", "label", "prediction",
                                                "correct", "confidence", "length"],
                               extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
            return {"content": buf.getvalue(), "filename": f"{name}-{split}-instances.csv"}
        if trig == "dl-figure" and active and active.get("main"):
            fig = probability_figure(active["main"], data.classes, compare=active.get("compare"))
            return {"content": fig.to_html(include_plotlyjs=True),
                    "filename": f"{name}-trace.html"}
        return no_update
