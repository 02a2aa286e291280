"""The state diagram: the FSM drawn with dash-cytoscape, its controls and FSM exports.

Nodes are states (size by visits, colour by prediction mix), edges are state-to-state
transitions (width by count, top tokens in the data for hover). Positions are computed
once per FSM (a seeded spring layout over the transition graph) so the diagram does not
move between interactions; other layouts (breadthfirst, cose, circle) can be chosen.
Clicking a state selects it (the table filters, the card opens); the path of the trace
on display is drawn in orange, a compared trace's dashed in purple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dash_cytoscape as cyto
import numpy as np
from dash import Input, Output, State, dcc, html, no_update

from stateseer.abstraction.automata.export import EXPORT_FORMATS, export_data
from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.automata.layout import fixed_positions, node_size
from stateseer.abstraction.colors import ClassColors, text_color_on
from stateseer.app.explorer import ids
from stateseer.app.explorer.page import box
from stateseer.app.explorer.view import Callback, Trigger, View, select_outputs
from stateseer.app.explorer.views.core import active_of
from stateseer.app.selection import apply_event, to_query
from stateseer.core.errors import StateseerError

__all__ = ["LAYOUTS", "VIEW", "diagram_elements", "forcing_colors", "stylesheet"]


#: cytoscape.js's own layouts only: the extra ones (dagre ...) come in a 1.4 MB bundle that
#: every page would parse at its first render, instead of the 0.5 MB core
LAYOUTS = ("preset", "breadthfirst", "cose", "circle")
TOP_K, MIN_COUNT = 3, 5  # the controls' first values: edges kept per state, fewest passes
#: the download buttons: button id → export format
DOWNLOADS = {ids.download_id(n): EXPORT_FORMATS[n] for n in ids.FSM_DOWNLOADS}


def forcing_colors(per_state: dict[str, dict[str, float]], lo: float = 0.8
                   ) -> dict[int, str]:
    """Node colours by state-forcing agreement: orange (``lo`` or less) to green (1.0);
    states without a figure stay grey.

    >>> forcing_colors({"1": {"agreement": 1.0}, "2": {"agreement": 0.8}})
    {1: '#1b9e77', 2: '#d95f02'}
    """
    low, high = np.array([217, 95, 2]), np.array([27, 158, 119])
    out = {}
    for key, v in per_state.items():
        t = float(np.clip((v["agreement"] - lo) / (1.0 - lo), 0.0, 1.0))
        rgb = low + (high - low) * t
        out[int(key)] = "#" + "".join(f"{round(float(c)):02x}" for c in rgb)
    return out


def diagram_elements(
    fsm: FSM,
    *,
    top_k: int = 3,
    min_count: int = 1,
    self_loops: bool = False,
    path: Sequence[int] | None = None,
    compare_path: Sequence[int] | None = None,
    selected_state: int | None = None,
    hover_state: int | None = None,
    positions: dict[int, tuple[float, float]] | None = None,
    colors: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """Cytoscape elements for ``fsm``.

    Parameters
    ----------
    top_k, min_count, self_loops
        Edge pruning for display (per source state).
    path : sequence of int, optional
        A trace's states (initial first): its nodes and edges get the class ``path``
        (edges on the path are drawn even when pruned).
    selected_state, hover_state : int, optional
        Nodes marked ``selected-state`` / ``hover-state``.
    positions : dict, optional
        Node positions (default: :func:`fixed_positions`, computed now).
    colors : dict of int to str, optional
        Node colours overriding the prediction mix (e.g. :func:`forcing_colors`).
    """
    pos = positions if positions is not None else fixed_positions(fsm)
    pal = fsm.palette or ClassColors(len(fsm.classes))
    visits = fsm.visits.astype(float)
    sizes = node_size(visits)
    on_path = set(path or [])
    path_edges = {(a, b) for a, b in zip(path or [], (path or [])[1:], strict=False) if a != b}
    # a path from a compared run may hold states with no match here (ids ≥ n_states)
    cmp_edges = {(a, b) for a, b in zip(compare_path or [], (compare_path or [])[1:],
                                        strict=False)
                 if a != b and 0 <= a < fsm.n_states and 0 <= b < fsm.n_states}
    els: list[dict[str, Any]] = []
    for s in range(fsm.n_states):
        color = (colors or {}).get(s) or pal.mix(fsm.prediction[s])
        label = fsm.classes[int(fsm.labels[s])]
        classes = ["state"]
        if s == fsm.initial:
            classes.append("initial")
        if s in on_path:
            classes.append("path")
        if compare_path and s in set(compare_path):
            classes.append("compare")
        if s == selected_state:
            classes.append("selected-state")
        if s == hover_state:
            classes.append("hover-state")
        els.append({
            "data": {"id": f"s{s}", "state": s, "label": "start" if s == fsm.initial else str(s),
                     "visits": int(visits[s]), "class_label": label, "color": color,
                     "text_color": text_color_on(color),
                     "size": float(sizes[s]),
                     "prediction": [round(float(p), 3) for p in fsm.prediction[s]]},
            "position": {"x": pos[s][0], "y": pos[s][1]},
            "classes": " ".join(classes),
        })
    edges = fsm.pruned_edges(top_k=top_k, min_count=min_count, self_loops=self_loops)
    return els + _edge_elements(fsm, edges, path_edges, cmp_edges)


def _edge_elements(fsm: FSM, edges: list[dict[str, Any]], path_edges: set[tuple[int, int]],
                   cmp_edges: set[tuple[int, int]]) -> list[dict[str, Any]]:
    """Edge elements: the pruned edges plus the path's (drawn even when pruned)."""
    shown = {(e["source"], e["target"]) for e in edges}
    extra = [(a, b) for a, b in sorted(path_edges | cmp_edges) if (a, b) not in shown]
    if extra:
        lookup = {(e["source"], e["target"]): e for e in fsm.state_edges()}
        edges = edges + [lookup[k] if k in lookup else
                         {"source": k[0], "target": k[1], "count": 0, "probability": 0.0,
                          "top_tokens": [], "n_tokens": 0} for k in extra]
    cmax = max((e["count"] for e in edges), default=1) or 1
    els = []
    for e in edges:
        key = (e["source"], e["target"])
        classes = ["transition"]
        if key in path_edges:
            classes.append("path")
        if key in cmp_edges:
            classes.append("compare")
        if e["source"] == e["target"]:
            classes.append("loop")
        tokens = ", ".join(f"{t} ({c})" for t, c in e["top_tokens"][:8])
        els.append({
            "data": {"id": f"e{e['source']}-{e['target']}", "source": f"s{e['source']}",
                     "target": f"s{e['target']}", "count": int(e["count"]),
                     "probability": round(float(e["probability"]), 3),
                     "width": round(1 + 7 * e["count"] / cmax, 2), "tokens": tokens,
                     "n_tokens": int(e["n_tokens"])},
            "classes": " ".join(classes),
        })
    return els


def stylesheet(selected: int | None = None, hover: int | None = None) -> list[dict[str, Any]]:
    """Cytoscape stylesheet: sizes, colours, path highlights, and the ``selected`` and
    ``hover`` states (styled by id, so a selection restyles the diagram without
    rebuilding its elements)."""
    extra = []
    if selected is not None:
        extra.append({"selector": f"#s{int(selected)}",
                      "style": {"border-width": 6, "border-color": "#111"}})
    if hover is not None:
        extra.append({"selector": f"#s{int(hover)}",
                      "style": {"overlay-color": "#ff9f1c", "overlay-opacity": 0.35,
                                "overlay-padding": 6}})
    return _BASE_STYLE + extra


_BASE_STYLE: list[dict[str, Any]] = [
        {"selector": "node", "style": {
            "background-color": "data(color)", "width": "data(size)", "height": "data(size)",
            "label": "data(label)", "color": "data(text_color)", "font-size": 11,
            "text-valign": "center", "text-halign": "center", "border-width": 1,
            "border-color": "#666"}},
        {"selector": "node.initial", "style": {"shape": "diamond", "border-width": 2,
                                               "border-color": "#222"}},
        {"selector": "edge", "style": {
            "width": "data(width)", "line-color": "#b5b5b5", "target-arrow-color": "#b5b5b5",
            "target-arrow-shape": "triangle", "curve-style": "bezier", "opacity": 0.75,
            "arrow-scale": 0.8}},
        {"selector": "edge.loop", "style": {"loop-direction": "0deg", "loop-sweep": "40deg"}},
        {"selector": "node.path", "style": {"border-width": 4, "border-color": "#ff9f1c"}},
        {"selector": "edge.path", "style": {"line-color": "#ff9f1c",
                                            "target-arrow-color": "#ff9f1c", "opacity": 1,
                                            "z-index": 9, "width": 4}},
        {"selector": "node.compare", "style": {"border-style": "dashed",
                                               "border-color": "#7b2cbf", "border-width": 4}},
        {"selector": "edge.compare", "style": {"line-color": "#7b2cbf", "line-style": "dashed",
                                               "target-arrow-color": "#7b2cbf", "opacity": 1,
                                               "width": 3}},
        {"selector": "node.selected-state", "style": {"border-width": 6,
                                                      "border-color": "#111"}},
        {"selector": "node.hover-state", "style": {"overlay-color": "#ff9f1c",
                                                   "overlay-opacity": 0.35,
                                                   "overlay-padding": 6}},
        {"selector": "edge:selected", "style": {"line-color": "#333",
                                                "target-arrow-color": "#333",
                                                "label": "data(tokens)", "font-size": 9,
                                                "text-wrap": "wrap", "text-max-width": 160,
                                                "text-background-color": "#fff",
                                                "text-background-opacity": 0.9}},
]


# -- layout -------------------------------------------------------------------------------
def _controls() -> html.Div:
    return html.Div([
        html.Label(["top-k edges ", dcc.Input(id=ids.TOPK, type="number", min=1, max=20,
                                              value=TOP_K, debounce=True,
                                              style={"width": 48})]),
        html.Label(["min count ", dcc.Input(id=ids.MINCOUNT, type="number", min=1,
                                            value=MIN_COUNT, debounce=True,
                                            style={"width": 60})]),
        dcc.Checklist(id=ids.LOOPS, options=[{"label": " self-loops", "value": "on"}],
                      value=[], inline=True),
        html.Label(["layout ", box(dcc.Dropdown(id=ids.LAYOUT, options=list(LAYOUTS),
                                            value="preset", clearable=False,
                                            style={"width": 130}), 130)], className="inline"),
        html.Label(["colour ", box(dcc.Dropdown(id=ids.COLOR_BY, value="prediction",
                                            clearable=False, style={"width": 150},
                                            options=[{"label": "by prediction",
                                                      "value": "prediction"},
                                                     {"label": "by forcing agreement",
                                                      "value": "forcing"}]), 150)],
                   className="inline",
                   title="colour states by their prediction mix, or by how often "
                         "predictions survive forcing them to their centroid"),
        html.Button("clear", id=ids.CLEAR, n_clicks=0, title="clear every selection"),
        html.Span([html.Button(f.label, id=ids.download_id(f.name), n_clicks=0)
                   for f in DOWNLOADS.values()]
                  + [html.Button("HTML", id=ids.DL_FSM_HTML, n_clicks=0,
                                 title="one page that opens offline: the diagram, the "
                                 "headline figures, a card per state"),
                     dcc.Download(id=ids.FSM_DOWNLOAD)],
                  className="exports",
                  title="download the FSM (drawings as shown, JSON complete)"),
    ], className="controls")


def _legend(classes: Sequence[str], palette: ClassColors | None = None) -> html.Div:
    note = html.Span(id=ids.COLOR_NOTE, className="color-note")
    pal = palette or ClassColors(len(classes))
    if len(classes) == 2:
        ends = [{"background": pal.solid(k), "color": text_color_on(pal.solid(k))}
                for k in (0, 1)]
        return html.Div([html.Span(classes[0], className="lg lg-neg", style=ends[0]),
                         html.Span("mixed", className="lg lg-mid"),
                         html.Span(classes[1], className="lg lg-pos", style=ends[1]),
                         html.Span("size = visits · ◆ start · orange = selected path",
                                   className="muted"), note], className="legend")
    swatches = [html.Span([html.Span(className="sw", style={"background": pal.solid(k)}),
                           str(x)], className="lg lg-class", title=f"class {x}")
                for k, x in enumerate(classes)]
    return html.Div([*swatches,
                     html.Span("state colour = its mean prediction (paler: less sure) · "
                               "size = visits · ◆ start · orange = selected path",
                               className="muted"), note], className="legend legend-classes")


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    """The diagram panel (controls, legend, graph, edge info) and the hover store."""
    panel = html.Div([
        _controls(), _legend(ctx.data.classes, ctx.data.palette),
        # drawn with the page (no callback between the page and its diagram)
        cyto.Cytoscape(id=ids.DIAGRAM, elements=_elements(ctx, TOP_K, MIN_COUNT, [], None,
                                                          "prediction"),
                       stylesheet=stylesheet((initial or {}).get("state")),
                       layout={"name": "preset", "fit": True, "padding": 20},
                       style={"width": "100%", "height": "520px"}, minZoom=0.2, maxZoom=3,
                       autoRefreshLayout=True),
        html.Div(id=ids.EDGE_INFO, className="edge-info",
                 children="Hover an edge to see its tokens; click a state to filter."),
    ], className="panel diagram-panel", id=ids.DIAGRAM_PANEL)
    return {"diagram": panel, "stores": dcc.Store(id=ids.HOVER_STATE)}


# -- callbacks ----------------------------------------------------------------------------
def elements(ctx, trigger: Trigger, topk, mincount, loops, layout_name, active, color_by):
    """The graph's elements (pruned edges, the trace's path) and, when the layout
    control changed, the layout."""
    els = _elements(ctx, topk, mincount, loops, active, color_by)
    lay = {"name": layout_name or "preset", "fit": True, "padding": 20, "animate": False}
    if layout_name == "breadthfirst":
        lay.update(directed=True, roots="#s0")
    return els, (no_update if trigger.id not in (None, ids.LAYOUT) else lay)


def _elements(ctx, topk, mincount, loops, active, color_by) -> list[dict[str, Any]]:
    main, cmp_ = active_of(active)
    return diagram_elements(
        ctx.data.fsm, top_k=int(topk or TOP_K), min_count=int(mincount or 1),
        self_loops=bool(loops), path=main.states if main else None,
        compare_path=cmp_.states if cmp_ else None, positions=ctx.data.positions,
        colors=forcing_colors(ctx.data.forcing_per_state()) if color_by == "forcing"
        else None)


def style(ctx, sel, hover_state, _current=None):
    """The stylesheet marking the selected and the hovered state (runs in the page:
    :data:`STYLE_JS`)."""
    return stylesheet((sel or {}).get("state"), hover_state)


def edge_info(ctx, edge):
    """One line on the hovered edge: count, probability, its tokens."""
    if not edge:
        return no_update
    return [html.B(f"{edge['source'][1:]} → {edge['target'][1:]}"),
            f" · {edge['count']:,} transitions (p={edge['probability']:.2f}) · "
            f"{edge['n_tokens']} distinct tokens: ", html.Span(edge["tokens"])]


def color_note(ctx, color_by):
    """What the node colours mean when coloured by forcing agreement."""
    if color_by != "forcing":
        return ""
    if not ctx.data.forcing_per_state():
        return f"no forcing figures yet: run `stateseer force {ctx.data.name}`"
    return "node colour = forcing agreement: orange ≤ 80% … green 100% of inputs survive"


def tap(ctx, node, sel):
    """A click on a state selects it (a second click unselects it)."""
    if not node:
        return no_update, no_update
    new = apply_event(sel or {}, "state", int(node["state"]))
    return new, to_query(new)


def clear(ctx, n_clicks, sel):
    """The clear button drops state, row and pattern (the split stays)."""
    new = apply_event(sel or {}, "clear")
    return new, to_query(new)


def download(ctx, trigger: Trigger, *values):
    """The FSM in the format of the button clicked (:data:`DOWNLOADS`): drawings (DOT,
    SVG, PNG) as drawn, i.e. pruned; JSON complete; HTML the self-contained page
    (:func:`~stateseer.app.workflows.html_export.fsm_html`)."""
    *_, topk, mincount, loops = values
    if trigger.id == ids.DL_FSM_HTML:
        from stateseer.app.workflows.html_export import fsm_html

        return {"content": fsm_html(ctx.data, top_k=int(topk or 3)),
                "filename": f"{ctx.data.name}-fsm.html"}
    fmt = DOWNLOADS.get(trigger.id)
    if fmt is None:
        return no_update
    try:
        data = export_data(ctx.data.fsm, fmt.name, top_k=int(topk or 3),
                           min_count=int(mincount or 1), self_loops=bool(loops))
    except StateseerError as exc:
        return {"content": str(exc), "filename": f"{ctx.data.name}-fsm-error.txt"}
    name = f"{ctx.data.name}-fsm{fmt.suffix}"
    return dcc.send_bytes(data, name) if isinstance(data, bytes) else \
        {"content": data, "filename": name}


# the selection rules run in the page (app/assets/explorer.js mirrors stateseer.app.selection)
TAP_JS = """
function (node, sel) {
    const nu = window.dash_clientside.no_update;
    if (!node) { return [nu, nu]; }
    return window.stateseer.select(sel || {}, "state", parseInt(node.state, 10));
}
"""
""":func:`tap` in the page."""

CLEAR_JS = """
function (_n, sel) { return window.stateseer.select(sel || {}, "clear"); }
"""
""":func:`clear` in the page."""

STYLE_JS = """
function (sel, hover, current) {
    const out = (current || []).filter(r => !String(r.selector).startsWith("#s"));
    const state = sel ? sel.state : null;
    if (state !== null && state !== undefined) {
        out.push({selector: "#s" + parseInt(state, 10),
                  style: {"border-width": 6, "border-color": "#111"}});
    }
    if (hover !== null && hover !== undefined) {
        out.push({selector: "#s" + parseInt(hover, 10),
                  style: {"overlay-color": "#ff9f1c", "overlay-opacity": 0.35,
                          "overlay-padding": 6}});
    }
    return out;
}
"""
""":func:`style` in the page (the base stylesheet is the one the layout sets)."""

VIEW = View(
    name="diagram", shows_states=True, layout=layout, ids=(ids.DIAGRAM_PANEL, ids.HOVER_STATE),
    callbacks=(
        Callback(elements, [Output(ids.DIAGRAM, "elements"), Output(ids.DIAGRAM, "layout")],
                 [Input(ids.TOPK, "value"), Input(ids.MINCOUNT, "value"),
                  Input(ids.LOOPS, "value"), Input(ids.LAYOUT, "value"),
                  Input(ids.ACTIVE_TRACE, "data"), Input(ids.COLOR_BY, "value")],
                 trigger=True, prevent_initial_call=True),  # the layout drew them
        Callback(style, [Output(ids.DIAGRAM, "stylesheet")],
                 [Input(ids.SELECTION, "data"), Input(ids.HOVER_STATE, "data"),
                  State(ids.DIAGRAM, "stylesheet")], clientside=STYLE_JS),
        Callback(edge_info, [Output(ids.EDGE_INFO, "children")],
                 [Input(ids.DIAGRAM, "mouseoverEdgeData")], prevent_initial_call=True),
        Callback(color_note, [Output(ids.COLOR_NOTE, "children")],
                 [Input(ids.COLOR_BY, "value")], prevent_initial_call=True),
        Callback(tap, select_outputs(), [Input(ids.DIAGRAM, "tapNodeData"),
                                         State(ids.SELECTION, "data")],
                 prevent_initial_call=True, clientside=TAP_JS),
        Callback(clear, select_outputs(), [Input(ids.CLEAR, "n_clicks"),
                                           State(ids.SELECTION, "data")],
                 prevent_initial_call=True, clientside=CLEAR_JS),
        Callback(download, [Output(ids.FSM_DOWNLOAD, "data")],
                 [*(Input(i, "n_clicks") for i in (*DOWNLOADS, ids.DL_FSM_HTML)),
                  State(ids.TOPK, "value"), State(ids.MINCOUNT, "value"),
                  State(ids.LOOPS, "value")], trigger=True, prevent_initial_call=True),
    ))
