"""The page: a header and fixed regions that the views fill, in registry order.

::

    stores   (hidden)             header (run figures)
    diagram  | side (tabs)
    table    | input (the input box), trace (the trace panel below it)
    below    (a third row of panels)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dash import dcc, html

from . import ids
from .context import ExplorerContext

__all__ = ["REGIONS", "header", "page"]

REGIONS = ("stores", "diagram", "side", "table", "input", "trace", "below")


def header(ctx: ExplorerContext) -> html.Div:
    """The run's name, model, data and fidelity figures."""
    d = ctx.data
    m = d.metrics
    a = m.get("abstraction", {})
    return html.Div([
        html.H2("stateseer"),
        html.Span(f"{d.name} · {d.config['model']['arch'].upper()} on "
                  f"{d.config['data']['name']} · test acc {m.get('test_accuracy', 0):.3f}"
                  f" · {a.get('n_states', '?')} states · label fidelity "
                  f"{a.get('label_fidelity', 0):.3f} · simulation fidelity "
                  f"{a.get('simulation_fidelity', 0):.3f}", className="runinfo"),
    ], className="header")


def page(ctx: ExplorerContext, regions: Mapping[str, Sequence[Any]]) -> html.Div:
    """The page from the views' components per region."""
    side = list(regions.get("side", ()))
    tabs = dcc.Tabs(id=ids.SIDE_TABS, value=side[0].value if side else None, children=side)
    top = html.Div([*regions.get("diagram", ()),
                    html.Div([tabs], className="panel side-panel")], className="row top-row")
    trace = html.Div([html.Div(list(regions.get("input", ())), className="input-box",
                               id=ids.INPUT_BOX), *regions.get("trace", ())],
                     className="panel trace-panel", id=ids.TRACE_PANEL)
    bottom = html.Div([*regions.get("table", ()), trace], className="row bottom-row")
    third = html.Div(list(regions.get("below", ())), className="row third-row")
    return html.Div([*regions.get("stores", ()), header(ctx), top, bottom, third],
                    className="page")
