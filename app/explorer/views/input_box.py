"""The input box: type a text and trace it (optionally compared with the selected row);
the message under it names unknown words or what went wrong. The trace itself is chosen
by the page's core (:func:`stateseer.app.explorer.views.core.choose_trace`)."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from stateseer.app.explorer import ids
from stateseer.app.explorer.view import View

__all__ = ["VIEW"]


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"input": [
        dcc.Textarea(id=ids.NEW_TEXT, placeholder="Type a new input and press “trace”…",
                     style={"width": "100%", "height": 48}),
        html.Button("trace", id=ids.TRACE_BTN, n_clicks=0),
        dcc.Checklist(id=ids.COMPARE_MODE, options=[{"label": " compare with the selected "
                                                             "row", "value": "on"}],
                      value=[], inline=True)],
        "trace": html.Div(id=ids.INPUT_MESSAGE, className="message")}


VIEW = View(name="input", layout=layout,
            ids=(ids.NEW_TEXT, ids.TRACE_BTN, ids.COMPARE_MODE, ids.INPUT_MESSAGE))
