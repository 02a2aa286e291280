"""The explorer's page: header, diagram with controls, side panels, table, trace."""

from __future__ import annotations

import dash_cytoscape as cyto
from dash import dash_table, dcc, html

from .data import RunData
from .selection import pattern_items
from .views.cards import pattern_list
from .views.diagram import LAYOUTS, stylesheet

__all__ = ["build_layout"]


def _controls() -> html.Div:
    return html.Div([
        html.Label(["top-k edges ", dcc.Input(id="topk", type="number", min=1, max=20,
                                              value=3, debounce=True, style={"width": 48})]),
        html.Label(["min count ", dcc.Input(id="mincount", type="number", min=1, value=5,
                                            debounce=True, style={"width": 60})]),
        dcc.Checklist(id="loops", options=[{"label": " self-loops", "value": "on"}],
                      value=[], inline=True),
        html.Label(["layout ", dcc.Dropdown(id="layout", options=list(LAYOUTS),
                                            value="preset", clearable=False,
                                            style={"width": 130})], className="inline"),
        html.Label(["colour ", dcc.Dropdown(id="color-by", value="prediction", clearable=False,
                                            style={"width": 150},
                                            options=[{"label": "by prediction",
                                                      "value": "prediction"},
                                                     {"label": "by forcing agreement",
                                                      "value": "forcing"}])],
                   className="inline",
                   title="colour states by their prediction mix, or by how often "
                         "predictions survive forcing them to their centroid"),
        html.Button("clear", id="clear", n_clicks=0, title="clear every selection"),
        html.Span([
            html.Button("SVG", id="dl-svg", n_clicks=0), html.Button("PNG", id="dl-png",
                                                                     n_clicks=0),
            html.Button("DOT", id="dl-dot", n_clicks=0), html.Button("JSON", id="dl-json",
                                                                     n_clicks=0)],
            className="exports", title="download the FSM"),
    ], className="controls")


def _legend(data: RunData) -> html.Div:
    c = data.classes
    if len(c) == 2:
        return html.Div([html.Span(c[0], className="lg lg-neg"),
                         html.Span("mixed", className="lg lg-mid"),
                         html.Span(c[1], className="lg lg-pos"),
                         html.Span("size = visits · ◆ start · orange = selected path",
                                   className="muted"),
                         html.Span(id="color-note", className="color-note")],
                        className="legend")
    return html.Div([*[html.Span(x, className="lg") for x in c],
                     html.Span(id="color-note", className="color-note")], className="legend")


def build_layout(data: RunData, initial: dict | None = None) -> html.Div:
    m = data.metrics
    a = m.get("abstraction", {})
    pats = data.abstraction.patterns
    split = (initial or {}).get("split") or ("test" if "test" in data.splits
                                             else data.splits[0])
    header = html.Div([
        html.H2("stateseer"),
        html.Span(f"{data.name} · {data.config['model']['arch'].upper()} on "
                  f"{data.config['data']['name']} · test acc {m.get('test_accuracy', 0):.3f}"
                  f" · {a.get('n_states', '?')} states · label fidelity "
                  f"{a.get('label_fidelity', 0):.3f} · simulation fidelity "
                  f"{a.get('simulation_fidelity', 0):.3f}", className="runinfo"),
    ], className="header")
    diagram = html.Div([
        _controls(), _legend(data),
        cyto.Cytoscape(id="diagram", elements=[],
                       stylesheet=stylesheet((initial or {}).get("state")),
                       layout={"name": "preset", "fit": True, "padding": 20},
                       style={"width": "100%", "height": "520px"}, minZoom=0.2, maxZoom=3,
                       autoRefreshLayout=True),
        html.Div(id="edge-info", className="edge-info",
                 children="Hover an edge to see its tokens; click a state to filter."),
    ], className="panel diagram-panel")
    side = html.Div([
        dcc.Tabs(id="side-tabs", value="card", children=[
            dcc.Tab(label="State", value="card", children=html.Div(
                id="state-card", className="card",
                children=html.P("Click a state in the diagram.", className="muted"))),
            dcc.Tab(label="Influential patterns", value="influential",
                    children=html.Div(id="influential", className="patterns", children=(
                        pattern_list(pattern_items(pats, "influential", split),
                                     "influential", data.classes)))),
            dcc.Tab(label="Buggy patterns", value="buggy",
                    children=html.Div(id="buggy", className="patterns", children=(
                        pattern_list(pattern_items(pats, "buggy", split), "buggy",
                                     data.classes)))),
            *([dcc.Tab(label=f"Compare with {data.other.name}", value="compare",
                       children=html.Div(id="compare-panel", className="compare-panel"))]
              if data.other is not None else []),
        ]),
    ], className="panel side-panel")
    table = html.Div([
        html.Div([
            dcc.RadioItems(id="split", options=[{"label": f" {s}", "value": s}
                                                for s in data.splits],
                           value=split, inline=True),
            dcc.Input(id="search", type="text", placeholder="search text…", debounce=True),
            dcc.Checklist(id="regex", options=[{"label": " regex", "value": "on"}], value=[],
                          inline=True),
            dcc.Dropdown(id="f-label", options=data.classes, placeholder="label",
                         style={"width": 110}),
            dcc.Dropdown(id="f-pred", options=data.classes, placeholder="prediction",
                         style={"width": 120}),
            dcc.Dropdown(id="f-correct", options=["correct", "wrong"], placeholder="correct?",
                         style={"width": 110}),
            html.Span(id="filter-chips", className="chips"),
            html.Button("CSV", id="dl-table", n_clicks=0, title="download the filtered table"),
        ], className="table-controls"),
        html.Div(id="table-message", className="message"),
        dash_table.DataTable(
            id="table", page_current=0, page_size=12, page_action="custom",
            sort_action="custom", sort_mode="single", sort_by=[],
            columns=[{"name": n, "id": n} for n in (
                "id", "text", "label", "prediction", "correct", "confidence", "length")],
            style_cell={"textAlign": "left", "fontFamily": "Helvetica", "fontSize": 13,
                        "padding": "4px", "maxWidth": 0, "overflow": "hidden",
                        "textOverflow": "ellipsis", "whiteSpace": "nowrap"},
            style_cell_conditional=[{"if": {"column_id": "text"}, "width": "62%"}],
            style_data_conditional=[{"if": {"filter_query": '{correct} = "✗"'},
                                     "backgroundColor": "#fdecea"}],
            tooltip_duration=None, css=[{"selector": ".dash-spreadsheet td div",
                                         "rule": "overflow: hidden"}]),
    ], className="panel table-panel")
    trace = html.Div([
        html.Div([
            dcc.Textarea(id="new-text", placeholder="Type a new input and press “trace”…",
                         style={"width": "100%", "height": 48}),
            html.Button("trace", id="trace-btn", n_clicks=0),
            dcc.Checklist(id="compare-mode", options=[{"label": " compare with the selected "
                                                                "row", "value": "on"}],
                          value=[], inline=True),
            html.Button("edit selected row", id="edit-btn", n_clicks=0,
                        title="copy the selected row's text into the box to edit and compare"),
            html.Button("pin", id="pin-btn", n_clicks=0,
                        title="pin this trace: every trace shown next is compared with it"),
            html.Span(id="pin-info", className="pin-info"),
        ], className="input-box"),
        html.Div(id="input-message", className="message"),
        html.Div(id="trace-title", className="trace-title"),
        html.Div(id="trace-tokens"),
        _attribution_controls(),
        _forcing_controls(),
        html.Div(id="trace-chart-box"),
        html.Button("figure as HTML", id="dl-figure", n_clicks=0),
    ], className="panel trace-panel")
    nearest = html.Div([
        html.Div([html.B("Nearest training contexts"),
                  html.Span(" of the clicked token (default: the last one) ", className="muted"),
                  html.Label([" k ", dcc.Dropdown(id="nn-k", options=[5, 8, 12, 20], value=8,
                                                  clearable=False, style={"width": 70})],
                             className="inline"),
                  html.Label([" context ± ", dcc.Dropdown(id="nn-window", options=[2, 5, 10],
                                                          value=5, clearable=False,
                                                          style={"width": 70})],
                             className="inline", title="tokens shown on each side")],
                 className="nn-controls"),
        html.Div(id="nn-list", children=html.P("Select a row or type an input.",
                                               className="muted")),
    ], className="panel nearest-panel", id="nearest-panel")
    projection = html.Div([
        html.B("Hidden states on two principal axes"),
        html.Span(" (a sample of training steps, coloured by their state's prediction; the "
                  "clicked step's state outlined; the selected input's path on top)",
                  className="muted"),
        html.Div(id="proj-box"),
    ], className="panel projection-panel", id="projection-panel")
    stores = [dcc.Location(id="url", refresh=False), dcc.Store(id="selection", data=initial),
              dcc.Store(id="active-trace"), dcc.Store(id="hover-state"),
              dcc.Store(id="step"), dcc.Store(id="forced"), dcc.Store(id="pinned"),
              dcc.Download(id="download")]
    return html.Div([*stores, header,
                     html.Div([diagram, side], className="row top-row"),
                     html.Div([table, trace], className="row bottom-row"),
                     html.Div([nearest, projection], className="row third-row")],
                    className="page")


def _attribution_controls() -> html.Div:
    return html.Div([
        html.Div([
            html.B("Attribution "),
            dcc.Dropdown(id="attr-method", clearable=False, value="ig", style={"width": 190},
                         options=[{"label": "integrated gradients", "value": "ig"},
                                  {"label": "gradient × input", "value": "gxi"},
                                  {"label": "occlusion", "value": "occlusion"},
                                  {"label": "off", "value": "off"}]),
            dcc.RadioItems(id="attr-target", inline=True, value="predicted",
                           options=[{"label": " predicted class ", "value": "predicted"},
                                    {"label": " vs runner-up", "value": "contrastive"}]),
            dcc.Dropdown(id="attr-level", clearable=False, value="token", style={"width": 110},
                         options=["token", "word", "sentence", "regex"]),
            dcc.Dropdown(id="attr-baseline", clearable=False, value="pad", style={"width": 150},
                         options=[{"label": "baseline <pad>", "value": "pad"},
                                  {"label": "baseline <unk>", "value": "unk"}]),
            dcc.Input(id="attr-regex", type="text", placeholder="delimiter regex, e.g. [,;.]",
                      debounce=True, style={"width": 150}),
            html.Label(["intensity", dcc.Slider(id="attr-intensity", min=0.25, max=3,
                                                step=0.25, value=1, marks=None,
                                                tooltip={"placement": "bottom"})],
                       className="intensity"),
        ], className="attr-controls"),
        html.Div(id="attr-strip"),
        html.Div(id="attr-note", className="attr-note"),
    ], id="attribution-panel", className="attribution-panel")


def _forcing_controls() -> html.Div:
    return html.Div([
        html.B("State forcing "),
        html.Button("force every step", id="force-all", n_clicks=0,
                    title="replace the hidden state after every token by its abstract "
                          "state's centroid and run on"),
        html.Button("force clicked step", id="force-step", n_clicks=0,
                    title="replace only the hidden state after the clicked token"),
        html.Button("clear", id="force-clear", n_clicks=0),
        html.Span(id="force-note", className="force-note"),
    ], id="forcing-panel", className="forcing-panel")
