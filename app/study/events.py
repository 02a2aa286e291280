"""Interaction events: what a change in the explorer means (pure) and the extra callbacks
that store it.

The callbacks listen to the explorer's own inputs (Dash lets many callbacks share an
Input), write the events through the study log, and only then return an acknowledgement
into the ``study-ack`` store: the page learns that an event is stored after it is. Each is
a module-level function ``fn(sc, ...)`` of the study's context. The
participant is the one of the request's link secret (``sc.participant()``), never the id in
the page's ``study-info`` store; an event over the log's payload limit is refused and
acknowledged as not saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dash import ALL, Input, Output, State, no_update

from stateseer.app.explorer.ids import DIAGRAM_CONTROLS, EXPORTS, FILTERS, SELECTION
from stateseer.app.explorer.view import Callback, Trigger
from stateseer.app.study.spec import StudyError

__all__ = ["DIAGRAM_CONTROLS", "EVENT_CALLBACKS", "EXPORTS", "FILTERS", "page_turned_by_app",
           "selection_events"]

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


def _log(sc: Any, info: dict[str, Any] | None, events: list[Event]) -> Any:
    """Write the participant's ``events`` and return the acknowledgement for the page.

    The participant is the one of the request's link secret (``sc.participant()``; None:
    nothing is written); the page's ``info`` only says that it is a study page.
    """
    pid = sc.participant() if info and events else None
    if not pid:
        return no_update
    try:
        ids = sc.write(pid, events)
    except StudyError as exc:  # e.g. the database is gone: say so, never crash the page
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "ids": ids, "kinds": [k for k, _ in events]}


def on_selection(sc: Any, sel, prev, info):
    return _log(sc, info, selection_events(prev, sel, sc.row_id)), sel


def on_filter(sc: Any, trigger: Trigger, *args):
    values = dict(zip(FILTERS, args[:-1], strict=True))
    if trigger.id not in FILTERS:
        return no_update
    return _log(sc, args[-1], [filter_event(trigger.id, values)])


def on_control(sc: Any, trigger: Trigger, *args):
    if trigger.id not in DIAGRAM_CONTROLS:
        return no_update
    value = dict(zip(DIAGRAM_CONTROLS, args[:-1], strict=True))[trigger.id]
    return _log(sc, args[-1], [("control_changed", {"control": trigger.id, "value": value})])


def on_table(sc: Any, trigger: Trigger, page, sort_by, shown, info):
    if trigger.id != "table":
        return no_update
    fired = Trigger.fired_props()
    if "table.page_current" in fired and page_turned_by_app(page, shown):
        return no_update  # the table turned to a selected input's page, not the user
    event = ("table_paged", {"page": page}) if "table.page_current" in fired else \
        ("table_sorted", {"sort_by": sort_by})
    return _log(sc, info, [event])


def on_tab(sc: Any, tab, info):
    return _log(sc, info, [("view_opened", {"view": tab})])


def on_trace(sc: Any, n, text, info):
    return _log(sc, info, [("input_traced", {"text": text or ""})]) if n else no_update


def on_typed(sc: Any, n, text, info):
    if not n:
        return no_update
    return _log(sc, info, [("input_typed", {"text": text or "", "chars": len(text or "")})])


def on_export(sc: Any, trigger: Trigger, *args):
    if trigger.id not in EXPORTS or not trigger.value:
        return no_update
    return _log(sc, args[-1], [("export", {"what": EXPORTS[trigger.id]})])


def on_token(sc: Any, trigger: Trigger, _clicks, info):
    if not trigger.is_type("token"):
        return no_update
    return _log(sc, info, [("token_clicked", {"step": trigger.id["index"]})])


def on_answer(sc: Any, trigger: Trigger, _b1, _b2, choice, text, ids, info):
    if trigger.id == "study-answer-choice":
        if choice is None:
            return no_update
        return _log(sc, info, [("answer_changed", {"value": choice})])
    value = text if trigger.id == "study-answer-text" else ids
    return _log(sc, info, [("answer_edited", {"value": value or "",
                                              "chars": len(value or "")})])


_ACK = Output("study-ack", "data", allow_duplicate=True)
_INFO = State("study-info", "data")

#: the logging callbacks: each listens to explorer inputs and acknowledges into study-ack
EVENT_CALLBACKS = (
    Callback(on_selection, [_ACK, Output("study-prev-sel", "data")],
             [Input(SELECTION, "data"), State("study-prev-sel", "data"), _INFO],
             prevent_initial_call=True),
    Callback(on_filter, [_ACK], [*(Input(i, "value") for i in FILTERS), _INFO],
             trigger=True, prevent_initial_call=True),
    Callback(on_control, [_ACK], [*(Input(i, "value") for i in DIAGRAM_CONTROLS), _INFO],
             trigger=True, prevent_initial_call=True),
    Callback(on_table, [_ACK], [Input("table", "page_current"), Input("table", "sort_by"),
                                State("table-key", "data"), _INFO],
             trigger=True, prevent_initial_call=True),
    Callback(on_tab, [_ACK], [Input("side-tabs", "value"), _INFO], prevent_initial_call=True),
    Callback(on_trace, [_ACK], [Input("trace-btn", "n_clicks"), State("new-text", "value"),
                                _INFO], prevent_initial_call=True),
    Callback(on_typed, [_ACK], [Input("new-text", "n_blur"), State("new-text", "value"),
                                _INFO], prevent_initial_call=True),
    Callback(on_export, [_ACK], [*(Input(i, "n_clicks") for i in EXPORTS), _INFO],
             trigger=True, prevent_initial_call=True),
    Callback(on_token, [_ACK], [Input({"type": "token", "index": ALL}, "n_clicks"), _INFO],
             trigger=True, prevent_initial_call=True),
    Callback(on_answer, [_ACK], [Input("study-answer-text", "n_blur"),
                                 Input("study-answer-ids", "n_blur"),
                                 Input("study-answer-choice", "value"),
                                 State("study-answer-text", "value"),
                                 State("study-answer-ids", "value"), _INFO],
             trigger=True, prevent_initial_call=True),
)
