"""The selection shared by all views, as plain data, and its URL form.

A selection is a dict ``{"split", "state", "row", "pattern"}``:

``state``    an FSM state id (filters the table, opens the state card) or None
``row``      index of the selected instance in ``split`` or None
``pattern``  ``{"kind": "influential"|"buggy", "index": j, "states": [...]}`` or None
``pick``     (optional) how many rows were picked so far: a row event counts it up, even
             for the row already selected, so the trace view can tell a row picked again
             from a selection that changed something else (not in the URL)

It travels in the page URL (``?split=test&state=5&row=12&pattern=buggy:3``) so a view can
be shared and reloaded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode

__all__ = ["EMPTY", "apply_event", "from_query", "to_query"]

EMPTY: dict[str, Any] = {"split": None, "state": None, "row": None, "pattern": None}


def _int(values: list[str] | None) -> int | None:
    try:
        return int(values[0]) if values else None
    except ValueError:
        return None


def from_query(search: str | None, splits: list[str], n_states: int,
               n_inputs: dict[str, int], patterns: dict[str, Any]) -> dict[str, Any]:
    """Parse a URL query string into a valid selection (invalid parts are dropped)."""
    q = parse_qs((search or "").lstrip("?"))
    split = q.get("split", [None])[0]
    if split not in splits:
        split = "test" if "test" in splits else splits[0]
    state = _int(q.get("state"))
    if state is not None and not 0 <= state < n_states:
        state = None
    row = _int(q.get("row"))
    if row is not None and not 0 <= row < n_inputs.get(split, 0):
        row = None
    pattern = None
    raw = q.get("pattern", [None])[0]
    if raw and ":" in raw:
        kind, _, j = raw.partition(":")
        items = pattern_items(patterns, kind, split)
        if j.isdigit() and int(j) < len(items):
            pattern = {"kind": kind, "index": int(j), "states": items[int(j)]["states"]}
    return {"split": split, "state": state, "row": row, "pattern": pattern}


def to_query(sel: dict[str, Any]) -> str:
    """The URL query string of a selection."""
    parts: dict[str, Any] = {}
    if sel.get("split"):
        parts["split"] = sel["split"]
    if sel.get("state") is not None:
        parts["state"] = sel["state"]
    if sel.get("row") is not None:
        parts["row"] = sel["row"]
    if sel.get("pattern"):
        parts["pattern"] = f"{sel['pattern']['kind']}:{sel['pattern']['index']}"
    return "?" + urlencode(parts) if parts else ""


def pattern_items(patterns: dict[str, Any], kind: str, split: str) -> list[dict[str, Any]]:
    """The pattern list shown for ``kind`` on ``split``."""
    if kind == "influential":
        return patterns.get("influential", [])
    if kind == "buggy":
        buggy = patterns.get("buggy", {})
        return buggy.get(split) or buggy.get("train", [])
    return []


def apply_event(sel: dict[str, Any], event: str, payload: Any = None) -> dict[str, Any]:
    """The selection after a user event.

    Events: ``state`` (payload: state id; clicking the selected state again unselects
    it), ``row`` (payload: instance index), ``pattern`` (payload: pattern dict; clicking it
    again unselects), ``split`` (payload: split name; drops row and pattern), ``clear``.
    """
    new = dict(sel)
    if event == "clear":
        return {**EMPTY, "split": sel.get("split")}
    if event == "state":
        new["state"] = None if payload == sel.get("state") else payload
    elif event == "row":
        new["row"] = payload
        new["pick"] = int(sel.get("pick") or 0) + 1
    elif event == "pattern":
        same = sel.get("pattern") and sel["pattern"]["kind"] == payload["kind"] and \
            sel["pattern"]["index"] == payload["index"]
        new["pattern"] = None if same else payload
    elif event == "split":
        new.update(split=payload, row=None, pattern=None)
    return new
