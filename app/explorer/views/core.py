"""The page's core: the stores every view shares, and the trace on display.

Not a view a study condition can leave out. ``selection`` (state, row, pattern, split;
mirrored in the URL) is written by the views that are clicked; ``active-trace`` holds the
trace on display (``{"main": record, "compare": record or None}``), computed here from the
selected row, the typed input, the pinned trace and the compared run. The choice is fused
with the views that draw the trace (``fuse="trace"``): the request that picks a row
answers with the drawn trace, and the slower views that follow the store (diagram path,
attribution, nearest contexts) come after it.
"""

from __future__ import annotations

from typing import Any

from dash import Input, Output, State, dcc, no_update

from stateseer.app.explorer import ids
from stateseer.app.explorer.page import model_message
from stateseer.app.explorer.view import Callback, Trigger, View
from stateseer.app.selection import EMPTY
from stateseer.app.workflows.records import TraceRecord, record_of
from stateseer.core.errors import StateseerError

__all__ = ["VIEW", "active_of", "active_store", "choose_trace"]


SHOWN_TOKEN_CHARS = 24
"""A token longer than this is cut (with an ellipsis) where the page names it in a strip
or a message; a tooltip names it whole."""


def shown_token(token: str, limit: int = SHOWN_TOKEN_CHARS) -> str:
    """``token`` as a strip or a message shows it: cut to ``limit`` characters with "…".

    >>> shown_token("short"), shown_token("x" * 30, 8)
    ('short', 'xxxxxxx…')
    """
    return token if len(token) <= limit else token[: limit - 1] + "…"


def visible_token(token: str) -> str:
    """A token as a chip shows it: blanks as "␣", one a character and at least one (a
    space token, or an empty one, would show as nothing).

    >>> visible_token(","), visible_token(" "), visible_token("")
    (',', '␣', '␣')
    """
    return token if token.strip() else "␣" * max(len(token), 1)


def active_of(active: dict[str, Any] | None
              ) -> tuple[TraceRecord | None, TraceRecord | None]:
    """``(main, compare)`` records of the ``active-trace`` store."""
    active = active or {}
    return record_of(active.get("main")), record_of(active.get("compare"))


def active_store(main: TraceRecord | None, compare: TraceRecord | dict | None = None,
                 pattern: dict[str, Any] | None = None,
                 pick: int | None = None) -> dict[str, Any] | None:
    """The ``active-trace`` store of a trace on display (and the one compared with);
    ``pattern``, the selected pattern, is kept so that selecting another one shows its
    steps on the trace; ``pick``, the selection's row-pick count when a typed trace was
    made (it stays on display until a row is picked)."""
    if main is None:
        return None
    if isinstance(compare, TraceRecord):
        compare = compare.to_store()
    out = {"main": main.to_store(), "compare": compare,
           "pattern": list(pattern["states"]) if pattern else None}
    if pick is not None:
        out["pick"] = pick
    return out


def _changed(new: Any, current: Any, message: Any = "") -> tuple[Any, Any]:
    """``(new, message)``, or ``no_update`` for the store when it already holds ``new``
    (rewriting it would re-run every view that follows the trace)."""
    return (no_update if new == current else new), message


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"stores": [dcc.Location(id=ids.URL, refresh=False),
                       dcc.Store(id=ids.SELECTION, data=initial),
                       dcc.Store(id=ids.ACTIVE_TRACE), dcc.Store(id=ids.STEP),
                       dcc.Download(id=ids.DOWNLOAD)]}


def _row_trace(ctx, sel: dict[str, Any]) -> TraceRecord | None:
    if sel.get("row") is None or not sel.get("split"):
        return None
    try:
        return ctx.data.trace_instance(sel["split"], int(sel["row"]))
    except (StateseerError, TypeError, ValueError):
        return None  # a stale or forged selection: nothing to show


def _other(ctx, tr: TraceRecord, pinned: dict | None) -> dict | TraceRecord | None:
    """What ``tr`` is compared with: the pinned trace, else the compared run's."""
    if pinned and record_of(pinned).key != tr.key:
        return pinned
    if ctx.comparison is not None and tr.recorded:
        try:
            return ctx.comparison.other_trace(tr.split, int(tr.index))
        except StateseerError:
            return None
    return None


def choose_trace(ctx, trigger: Trigger, sel, _n, pinned, text, compare_mode, current):
    """The trace on display and the input box's message.

    A click on "trace" traces the typed text (compared with the selected row when
    "compare" is ticked, else with the pinned trace); a picked row shows that row; a
    typed trace stays while no row is picked (a click on a state or a pattern keeps it).
    """
    sel = sel or EMPTY
    row = _row_trace(ctx, sel)
    if trigger.id == ids.TRACE_BTN:
        if not text or not text.strip():
            return no_update, "Type some text first."
        try:
            typed = ctx.models.trace_text(text)
        except StateseerError as exc:
            return no_update, model_message(exc)
        unknown = [t for t, k in zip(typed.tokens, typed.known, strict=True) if not k]
        msg = (f"{len(unknown)} unknown word(s): {', '.join(map(shown_token, unknown[:8]))}"
               if unknown else "")
        pin = pinned if pinned and record_of(pinned).key != typed.key else None
        return active_store(typed, (row if compare_mode else None) or pin,
                            sel.get("pattern"), pick=int(sel.get("pick") or 0)), msg
    main, _ = active_of(current)
    if trigger.id == ids.PINNED:
        if main is None:
            return no_update, no_update
        return _changed(active_store(main, _other(ctx, main, pinned), sel.get("pattern")),
                        current, no_update)
    if main is not None and not main.recorded and trigger.id == ids.SELECTION and (
            row is None or int(sel.get("pick") or 0) == (current or {}).get("pick")):
        # a typed trace stays until a row is picked; a new pattern still shows on it
        pattern = sel.get("pattern")
        return _changed(active_store(main, active_of(current)[1], pattern,
                                     pick=(current or {}).get("pick")), current, no_update)
    if row is None:
        return _changed(None, current)
    return _changed(active_store(row, _other(ctx, row, pinned), sel.get("pattern")), current)


VIEW = View(
    name="core", layout=layout, optional=False,
    ids=(ids.URL, ids.SELECTION, ids.ACTIVE_TRACE, ids.STEP, ids.DOWNLOAD),
    callbacks=(
        Callback(choose_trace, [Output(ids.ACTIVE_TRACE, "data"),
                                Output(ids.INPUT_MESSAGE, "children")],
                 [Input(ids.SELECTION, "data"), Input(ids.TRACE_BTN, "n_clicks"),
                  Input(ids.PINNED, "data"), State(ids.NEW_TEXT, "value"),
                  State(ids.COMPARE_MODE, "value"), State(ids.ACTIVE_TRACE, "data")],
                 trigger=True, fuse="trace"),
    ))
