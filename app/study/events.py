"""Interaction events: what a change in the explorer means (pure) and the extra callbacks
that store it.

The callbacks listen to the explorer's own inputs (Dash lets many callbacks share an
Input), write the events through the study log, and only then return an acknowledgement
into the ``study-ack`` store: the page learns that an event is stored after it is. The
participant is the one of the request's link secret (``participant()``), never the id in
the page's ``study-info`` store; an event over the log's payload limit is refused and
acknowledged as not saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, no_update

from ..explorer.ids import DIAGRAM_CONTROLS, EXPORTS, FILTERS, SELECTION
from .spec import StudyError

__all__ = ["DIAGRAM_CONTROLS", "EXPORTS", "FILTERS", "page_turned_by_app",
           "register_event_callbacks", "selection_events"]

Event = tuple[str, dict[str, Any]]


def page_turned_by_app(page: int | None, shown: dict | None) -> bool:
    """Whether the instance table's new page is one the explorer turned to itself (a
    selected input off the page: the table's key, sent in the same response, already
    names that page) rather than the participant's paging (the key still names the old
    page when the participant's click arrives)."""
    return isinstance(shown, dict) and page is not None and shown.get("page") == page


def selection_events(prev: dict[str, Any] | None, new: dict[str, Any] | None,
                     row_id: Callable[[str, int], int | None] = lambda s, r: None
                     ) -> list[Event]:
    """The events that turn selection ``prev`` into ``new``.

    ``row_id(split, row)`` gives the instance id shown in the table for a row.

    Examples
    --------
    >>> selection_events({"split": "test", "state": None}, {"split": "test", "state": 4})
    [('state_clicked', {'state': 4, 'selected': True})]
    """
    prev = prev if isinstance(prev, dict) else {}
    new = new if isinstance(new, dict) else {}
    out: list[Event] = []
    if new.get("split") != prev.get("split") and prev.get("split") is not None:
        out.append(("split_changed", {"split": new.get("split")}))
    if new.get("state") != prev.get("state"):
        state = new.get("state") if new.get("state") is not None else prev.get("state")
        out.append(("state_clicked", {"state": state,
                                      "selected": new.get("state") is not None}))
    if new.get("row") != prev.get("row") and new.get("row") is not None:
        split = new.get("split") or prev.get("split") or ""
        row = new["row"]
        out.append(("instance_selected", {"split": split, "row": row, "id": row_id(
            split, row) if isinstance(row, int) and not isinstance(row, bool) else None}))
    if (new.get("pattern") or {}) != (prev.get("pattern") or {}):
        pat = new.get("pattern") or prev.get("pattern") or {}
        out.append(("pattern_expanded", {"kind": pat.get("kind"), "index": pat.get("index"),
                                         "states": pat.get("states"),
                                         "selected": bool(new.get("pattern"))}))
    return out


def filter_event(trigger: str, values: dict[str, Any]) -> Event:
    """A change of a table filter (with every filter's current value)."""
    return "filter_changed", {"filter": trigger, "value": values.get(trigger),
                              "filters": values}


class Logger:
    """Writes a participant's events and returns the acknowledgement for the page.

    ``participant()`` names the participant of the current request (None: nothing is
    written); the page's ``info`` only says that it is a study page.
    """

    def __init__(self, write: Callable[..., list[int]],
                 participant: Callable[[], str | None]) -> None:
        self.write = write
        self.participant = participant

    def __call__(self, info: dict[str, Any] | None, events: list[Event]) -> Any:
        pid = self.participant() if info and events else None
        if not pid:
            return no_update
        try:
            ids = self.write(pid, events)
        except StudyError as exc:  # e.g. the database is gone: say so, never crash the page
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "ids": ids, "kinds": [k for k, _ in events]}


def register_event_callbacks(app: Dash, write: Callable[..., list[int]],
                             row_id: Callable[[str, int], int | None],
                             participant: Callable[[], str | None]) -> None:
    """Attach the logging callbacks; ``write(pid, events)`` stores and returns ids,
    ``participant()`` is the participant of the current request."""
    log = Logger(write, participant)
    ack = Output("study-ack", "data", allow_duplicate=True)
    info = State("study-info", "data")

    @app.callback(ack, Output("study-prev-sel", "data"), Input(SELECTION, "data"),
                  State("study-prev-sel", "data"), info, prevent_initial_call=True)
    def on_selection(sel, prev, participant):
        return log(participant, selection_events(prev, sel, row_id)), sel

    @app.callback(ack, *[Input(i, "value") for i in FILTERS], info,
                  prevent_initial_call=True)
    def on_filter(*args):
        values = dict(zip(FILTERS, args[:-1], strict=True))
        trig = ctx.triggered_id
        return log(args[-1], [filter_event(trig, values)]) if trig in FILTERS else no_update

    @app.callback(ack, *[Input(i, "value") for i in DIAGRAM_CONTROLS], info,
                  prevent_initial_call=True)
    def on_control(*args):
        trig = ctx.triggered_id
        if trig not in DIAGRAM_CONTROLS:
            return no_update
        value = dict(zip(DIAGRAM_CONTROLS, args[:-1], strict=True))[trig]
        return log(args[-1], [("control_changed", {"control": trig, "value": value})])

    @app.callback(ack, Input("table", "page_current"), Input("table", "sort_by"),
                  State("table-key", "data"), info, prevent_initial_call=True)
    def on_table(page, sort_by, shown, participant):
        if ctx.triggered_id != "table":
            return no_update
        prop = ctx.triggered[0]["prop_id"].split(".")[-1]
        if prop == "page_current" and page_turned_by_app(page, shown):
            return no_update  # the table turned to a selected input's page, not the user
        event = ("table_paged", {"page": page}) if prop == "page_current" else \
            ("table_sorted", {"sort_by": sort_by})
        return log(participant, [event])

    @app.callback(ack, Input("side-tabs", "value"), info, prevent_initial_call=True)
    def on_tab(tab, participant):
        return log(participant, [("view_opened", {"view": tab})])

    @app.callback(ack, Input("trace-btn", "n_clicks"), State("new-text", "value"), info,
                  prevent_initial_call=True)
    def on_trace(n, text, participant):
        if not n:
            return no_update
        return log(participant, [("input_traced", {"text": text or ""})])

    @app.callback(ack, Input("new-text", "n_blur"), State("new-text", "value"), info,
                  prevent_initial_call=True)
    def on_typed(n, text, participant):
        if not n:
            return no_update
        return log(participant, [("input_typed", {"text": text or "",
                                                  "chars": len(text or "")})])

    _register_click_callbacks(app, log, ack, info)


def _register_click_callbacks(app: Dash, log: Logger, ack: Output, info: State) -> None:
    """Exports, token clicks and the answer widgets (see :func:`register_event_callbacks`)."""

    @app.callback(ack, *[Input(i, "n_clicks") for i in EXPORTS], info,
                  prevent_initial_call=True)
    def on_export(*args):
        trig = ctx.triggered_id
        if trig not in EXPORTS or not ctx.triggered[0]["value"]:
            return no_update
        return log(args[-1], [("export", {"what": EXPORTS[trig]})])

    @app.callback(ack, Input({"type": "token", "index": ALL}, "n_clicks"), info,
                  prevent_initial_call=True)
    def on_token(_clicks, participant):
        trig = ctx.triggered_id
        if not isinstance(trig, dict) or not ctx.triggered[0]["value"]:
            return no_update
        return log(participant, [("token_clicked", {"step": trig["index"]})])

    @app.callback(ack, Input("study-answer-text", "n_blur"), Input("study-answer-ids", "n_blur"),
                  Input("study-answer-choice", "value"), State("study-answer-text", "value"),
                  State("study-answer-ids", "value"), info, prevent_initial_call=True)
    def on_answer(_b1, _b2, choice, text, ids, participant):
        trig = ctx.triggered_id
        if trig == "study-answer-choice":
            if choice is None:
                return no_update
            return log(participant, [("answer_changed", {"value": choice})])
        value = text if trig == "study-answer-text" else ids
        return log(participant, [("answer_edited", {"value": value or "",
                                                    "chars": len(value or "")})])
