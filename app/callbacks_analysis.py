"""Callbacks of the analysis views: attribution, state forcing, nearest contexts, pinning
and editing inputs, and the comparison with a second run.

Thin wrappers, like :mod:`app.callbacks`: each reads the stores, calls one method of
:class:`app.data.RunData` and renders with :mod:`app.views`.
"""

from __future__ import annotations

from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update

from rnn_models.errors import StateseerError

from .data import RunData
from .views.attribution import attribution_note, attribution_strip
from .views.compare import compare_panel
from .views.nearest import nearest_list, projection_figure

__all__ = ["register_analysis_callbacks"]


def _main(active: dict | None) -> dict | None:
    return (active or {}).get("main")


def register_analysis_callbacks(app: Dash, data: RunData) -> None:
    """Attach the analysis callbacks to ``app``."""
    joiner = "" if data.config["data"].get("tokenizer", "word") == "char" else " "

    # -- the selected step: a clicked token; a new trace resets it -------------------------
    @app.callback(Output("step", "data"),
                  Input({"type": "token", "index": ALL}, "n_clicks"),
                  Input("active-trace", "data"), prevent_initial_call=True)
    def step(_clicks, _active):
        trig = ctx.triggered_id
        if isinstance(trig, dict) and trig.get("type") == "token":
            return int(trig["index"]) if ctx.triggered[0]["value"] else no_update
        return None

    # -- attribution -------------------------------------------------------------------------
    @app.callback(Output("attr-strip", "children"), Output("attr-note", "children"),
                  Input("active-trace", "data"), Input("attr-method", "value"),
                  Input("attr-target", "value"), Input("attr-level", "value"),
                  Input("attr-regex", "value"), Input("attr-intensity", "value"),
                  Input("attr-baseline", "value"))
    def attribution(active, method, target, level, regex, intensity, baseline):
        from rnn_models.attribution import aggregate, segments

        tr = _main(active)
        if not tr or method == "off":
            return None, ""
        if not tr["tokens"]:
            return None, "The input is empty: nothing to attribute."
        try:
            att = data.attribution(tr, method, target, baseline or "pad")
            groups = segments(tr["tokens"], level or "token", joiner=joiner, pattern=regex)
        except StateseerError as exc:
            return None, str(exc)
        scores = aggregate(att.scores, groups)
        strip = attribution_strip(tr["tokens"], scores, groups, data.classes,
                                  target_class=att.target_class,
                                  contrast_class=att.contrast_class,
                                  intensity=float(intensity or 1), joiner=joiner)
        return strip, attribution_note(att, data.classes)

    # -- state forcing -----------------------------------------------------------------------
    @app.callback(Output("forced", "data"), Output("force-note", "children"),
                  Input("force-all", "n_clicks"), Input("force-step", "n_clicks"),
                  Input("force-clear", "n_clicks"), Input("active-trace", "data"),
                  State("step", "data"), prevent_initial_call=True)
    def forcing(_all, _step, _clear, active, step):
        trig = ctx.triggered_id
        tr = _main(active)
        if trig in ("force-clear", "active-trace") or not tr:
            return None, ""
        if not tr["tokens"]:
            return None, "An empty input has no hidden state to force."
        at = None
        if trig == "force-step":
            at = len(tr["tokens"]) - 1 if step is None else int(step)
        try:
            res = data.force(tr, at)
        except StateseerError as exc:
            return None, str(exc)
        before, after = data.classes[tr["prediction"]], data.classes[res["prediction"]]
        where = "every step" if at is None else f"step {at + 1} (“{tr['tokens'][at]}”)"
        kept = res["prediction"] == tr["prediction"]
        note = [f"Forced {where} to its state's centroid: prediction {before} → {after} ",
                html.Span("(survives)" if kept else "(flips)",
                          className="ok" if kept else "wrong")]
        return {**res, "key": data.trace_key(tr)}, note

    # -- nearest training contexts and the projection ----------------------------------------
    @app.callback(Output("nn-list", "children"), Output("proj-box", "children"),
                  Input("active-trace", "data"), Input("step", "data"),
                  Input("nn-k", "value"), Input("nn-window", "value"))
    def nearest(active, step, k, window):
        tr = _main(active)
        if not tr:
            return html.P("Select a row or type an input.", className="muted"), None
        if not tr["tokens"]:
            return html.P("The input is empty.", className="muted"), None
        t = len(tr["tokens"]) - 1 if step is None else int(step)
        t = min(max(t, 0), len(tr["tokens"]) - 1)
        try:
            # clamped here too: the dropdowns bound them only in the browser
            res = data.nearest(tr, t, k=min(max(int(k or 8), 1), 50),
                               window=min(max(int(window or 5), 0), 20))
            xy = data.project_trace(tr)
        except (StateseerError, TypeError, ValueError) as exc:
            return html.P(str(exc), className="message"), None
        query = {"token": tr["tokens"][t], "step": t, "state": int(tr["states"][t + 1])}
        cmp_ = (active or {}).get("compare")
        cxy = None
        if cmp_ and cmp_.get("run") is None:  # a trace of this run: same hidden space
            try:
                cxy = data.project_trace(cmp_)
            except StateseerError:
                cxy = None
        fig = projection_figure(data.projection, data.fsm.prediction, xy, tr["states"],
                                tr["tokens"], step=t, compare_xy=cxy,
                                highlight_state=query["state"])
        graph = dcc.Graph(id="proj-chart", figure=fig,
                          config={"displaylogo": False, "displayModeBar": "hover"})
        return nearest_list(res, query, data.classes), graph

    @app.callback(Output("color-note", "children"), Input("color-by", "value"),
                  prevent_initial_call=True)
    def color_note(color_by):
        if color_by != "forcing":
            return ""
        if not data.metrics.get("abstraction", {}).get("forcing", {}).get("per_state"):
            return f"no forcing figures yet: run `stateseer force {data.name}`"
        return "node colour = forcing agreement: orange ≤ 80% … green 100% of inputs survive"

    # -- edit the selected row; pin a trace to compare with ----------------------------------
    @app.callback(Output("new-text", "value"), Output("compare-mode", "value"),
                  Input("edit-btn", "n_clicks"), State("active-trace", "data"),
                  prevent_initial_call=True)
    def edit(_n, active):
        tr = _main(active)
        if not tr:
            return no_update, no_update
        return tr["text"], ["on"] if tr.get("index") is not None else no_update

    @app.callback(Output("pinned", "data"), Output("pin-info", "children"),
                  Output("pin-btn", "children"),
                  Input("pin-btn", "n_clicks"), State("active-trace", "data"),
                  State("pinned", "data"), prevent_initial_call=True)
    def pin(_n, active, pinned):
        if pinned:
            return None, "", "pin"
        tr = _main(active)
        if not tr:
            return no_update, "Select or type a trace first.", no_update
        name = f"#{tr['id']}" if tr.get("id") is not None else "the typed input"
        return tr, f"pinned {name}: traces shown next are compared with it", "unpin"

    # -- comparison with a second run ---------------------------------------------------------
    if data.other is not None:
        @app.callback(Output("compare-panel", "children"), Input("selection", "data"))
        def comparison(sel):
            split = (sel or {}).get("split") or data.splits[0]
            try:
                cmp_ = data.comparison(split)
            except StateseerError as exc:
                return html.P(str(exc), className="message")
            tr = data.traces[split]
            return compare_panel(cmp_, tr.texts, tr.labels, tr.predictions, data.classes,
                                 ids=tr.rows)


def forced_for(active: dict | None, forced: dict | None, data: RunData) -> dict[str, Any] | None:
    """The forced run if it belongs to the trace on display."""
    tr = _main(active)
    if not tr or not forced or forced.get("key") != data.trace_key(tr):
        return None
    return forced
