"""The instance table: every input of a split with its label, prediction and confidence,
filtered by the selection (state, pattern) and the search box, sorted and paged on the
server; a click on a row shows its trace. The split switch lives here too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from dash import Input, Output, State, dash_table, dcc, html, no_update

from stateseer.app.explorer import ids
from stateseer.app.explorer.page import box
from stateseer.app.explorer.view import Callback, Trigger, View, select_outputs
from stateseer.app.selection import EMPTY, apply_event, to_query
from stateseer.app.workflows.query import MAX_SEARCH_CHARS, InstanceQuery, page_of, query_instances
from stateseer.core.csvsafe import rows_to_csv

__all__ = ["COLUMNS", "VIEW", "instance_query", "marked_row", "select_row", "select_split",
           "sync_split", "table_csv", "update_table"]

COLUMNS = ("id", "text", "label", "prediction", "correct", "confidence", "length")
#: the columns read from the model's predictions (none for traces imported without them)
PREDICTED = ("prediction", "correct", "confidence")


def columns_of(d: Any) -> tuple[str, ...]:
    """The table's columns for run view ``d``: without the predicted ones where the run's
    traces were imported without probabilities."""
    return COLUMNS if getattr(d, "has_predictions", True) else \
        tuple(c for c in COLUMNS if c not in PREDICTED)
PAGE_SIZE = 12
WRONG_ROW = {"if": {"filter_query": '{correct} = "✗"'}, "backgroundColor": "#fdecea"}


def instance_query(sel: dict[str, Any] | None, split: str, search: str | None, regex,
                   label: str | None, pred: str | None, correct: str | None, page: int = 0,
                   sort_by: list | None = None, page_size: int = PAGE_SIZE) -> InstanceQuery:
    """The table's query from the selection and the filter widgets' values."""
    sort = (sort_by or [{}])[0]
    sel = sel or EMPTY
    pattern = (sel.get("pattern") or {}).get("states")
    return InstanceQuery(
        split=split, search=search or "", regex=bool(regex), label=label, prediction=pred,
        correct=correct, state=sel.get("state"), pattern=tuple(pattern) if pattern else None,
        sort_by=sort.get("column_id"), descending=sort.get("direction") == "desc",
        page=page or 0, page_size=page_size)


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    d = ctx.data
    split = (initial or {}).get("split") or d.default_split
    # the first page comes with the page (no callback between the page and its rows)
    rows, pages, msg, chips, key, turn = update_table(
        ctx, {**EMPTY, **(initial or {}), "split": split}, None, [], None, None, None, 0, [])
    controls = html.Div([
        dcc.RadioItems(id=ids.SPLIT, options=[{"label": f" {s}", "value": s}
                                              for s in d.splits], value=split, inline=True),
        dcc.Input(id=ids.SEARCH, type="text", placeholder="search text…", debounce=True,
                  maxLength=MAX_SEARCH_CHARS),
        dcc.Checklist(id=ids.REGEX, options=[{"label": " regex", "value": "on"}], value=[],
                      inline=True),
        box(dcc.Dropdown(id=ids.F_LABEL, options=d.classes, placeholder="label",
                     style={"width": 110}), 110),
        *_predicted_filters(d),
        html.Span(chips, id=ids.FILTER_CHIPS, className="chips"),
        html.Button("CSV", id=ids.DL_TABLE, n_clicks=0, title="download the filtered table"),
    ], className="table-controls")
    table = dash_table.DataTable(
        id=ids.TABLE, data=rows, page_count=pages,
        page_current=turn if isinstance(turn, int) else 0, page_size=PAGE_SIZE,
        page_action="custom",
        sort_action="custom", sort_mode="single", sort_by=[],
        columns=[{"name": n, "id": n} for n in columns_of(d)],
        style_cell={"textAlign": "left", "fontFamily": "Helvetica", "fontSize": 13,
                    "padding": "4px", "maxWidth": 0, "overflow": "hidden",
                    "textOverflow": "ellipsis", "whiteSpace": "nowrap"},
        style_cell_conditional=column_widths(d.classes),
        style_data_conditional=[WRONG_ROW] if d.has_predictions else [],
        tooltip_duration=None,
        css=[{"selector": ".dash-spreadsheet td div", "rule": "overflow: hidden"}])
    return {"table": html.Div([controls, html.Div(msg, id=ids.TABLE_MESSAGE,
                                                  className="message"),
                               table, dcc.Store(id=ids.TABLE_KEY, data=key),
                               dcc.Store(id=ids.TABLE_MARK)],
                              className="panel table-panel", id=ids.TABLE_PANEL)}


def _predicted_filters(d: Any) -> list[Any]:
    """The prediction and correctness filters; hidden (their callbacks still read them)
    for a run without predictions."""
    hide = {} if d.has_predictions else {"display": "none"}
    return [html.Div(box(dcc.Dropdown(id=ids.F_PRED, options=d.classes,
                                      placeholder="prediction", style={"width": 120}), 120),
                     style=hide),
            html.Div(box(dcc.Dropdown(id=ids.F_CORRECT, options=["correct", "wrong"],
                                      placeholder="correct?", style={"width": 110}), 110),
                     style=hide)]


#: the narrow columns' widths (characters, their headers and sort arrows included)
NARROW = {"id": 7, "correct": 9, "confidence": 12, "length": 9}


def column_widths(classes: Sequence[str]) -> list[dict[str, Any]]:
    """Every column but the text as wide as what it holds: the label and prediction
    columns as the longest class name (never cut), the rest as their headers; the text
    column takes what is left and is the one cut short (its row shows it whole)."""
    wide = max(max(map(len, classes), default=5), len("prediction")) + 3
    fixed = {**NARROW, "label": wide, "prediction": wide}
    return [{"if": {"column_id": c}, "width": f"{n}ch", "minWidth": f"{n}ch",
             "maxWidth": f"{n}ch", "textOverflow": "clip"} for c, n in fixed.items()] + [
        {"if": {"column_id": "text"}, "width": "auto"}]


def _chips(sel: dict[str, Any], total: int, n_inputs: int) -> list[html.Span]:
    chips = []
    if sel.get("state") is not None:
        chips.append(html.Span(f"through state {sel['state']}", className="chip-f"))
    if sel.get("pattern"):
        chips.append(html.Span("pattern " + "→".join(map(str, sel["pattern"]["states"])),
                               className="chip-f"))
    chips.append(html.Span(f"{total:,} of {n_inputs:,} inputs", className="count"))
    return chips


def update_table(ctx, sel, search, regex, label, pred, correct, page, sort_by, shown=None):
    """One page of rows, the page count, a message, the filter chips, the key of what is
    shown (``table-key``) and the page number.

    Only what changed is sent: a row click (the selection's row, nothing else) leaves the
    table alone (the page marks the row: :func:`marked_row`); a selection that changes
    nothing the table shows (e.g. a pattern outside it) changes nothing. A newly selected
    input that is not on the page shown (from the URL, the nearest contexts, a compared
    row) turns the table to its page; paging by hand never jumps back."""
    sel = sel or EMPTY
    split = sel.get("split") or ctx.data.splits[0]
    q = instance_query(sel, split, search, regex, label, pred, correct, page, sort_by)
    rows, total, msg = query_instances(ctx.data, q)
    turn = no_update
    if not rows and q.page:  # filters shrank the table below the current page
        q = q.first_page()
        rows, total, msg = query_instances(ctx.data, q)
        turn = 0  # the pager follows
    row = None if sel.get("row") is None else int(sel["row"])
    shown = shown if isinstance(shown, dict) else {}
    if row is not None and row != shown.get("row") and \
            all(r["index"] != row for r in rows):
        at = page_of(ctx.data, q, row)
        if at is not None and at != q.page:
            q = replace(q, page=at)
            rows, total, msg = query_instances(ctx.data, q)
            turn = at
    key = {"query": repr(q), "row": row, "page": q.page}
    if key == shown:
        return (no_update,) * 6
    if key["query"] == shown.get("query"):
        return no_update, no_update, no_update, no_update, key, turn
    chips = _chips(sel, total, ctx.data.traces[split].n_inputs)
    return rows, max(1, -(-total // q.page_size)), msg, chips, key, turn


def marked_row(ctx, sel, rows):
    """The position on the page shown of the selected input's row (marked in the page,
    class ``selected-row``, by :data:`MARK_ROW_JS`: no server request and no re-render of
    the table), or None."""
    row = (sel or {}).get("row")
    return next((k for k, r in enumerate(rows or []) if r.get("index") == row), None) \
        if row is not None else None


def select_row(ctx, cell, sel, rows):
    """A click on a row selects that input."""
    r = (cell or {}).get("row")
    if r is None or not rows or r >= len(rows):
        return no_update, no_update
    new = apply_event(sel or EMPTY, "row", int(rows[r]["index"]))
    return new, to_query(new)


def select_split(ctx, split, sel):
    """Another split drops the row and the pattern."""
    sel = sel or EMPTY
    if split == sel.get("split"):
        return no_update, no_update
    new = apply_event(sel, "split", split)
    return new, to_query(new)


def sync_split(ctx, sel, current):
    """The split switch follows a selection that changed split (e.g. from the URL)."""
    return sel["split"] if sel and sel.get("split") and sel["split"] != current \
        else no_update


def table_csv(ctx, trigger: Trigger, _n, sel, search, regex, label, pred, correct):
    """The filtered table (every page) as CSV (cells a spreadsheet would run as formulas
    escaped, see :mod:`stateseer.core.csvsafe`)."""
    if trigger.id != ids.DL_TABLE:
        return no_update
    sel = sel or EMPTY
    split = sel.get("split") or ctx.data.splits[0]
    q = instance_query(sel, split, search, regex, label, pred, correct, page_size=10**9)
    rows, _, _ = query_instances(ctx.data, q)
    return {"content": rows_to_csv(rows, columns_of(ctx.data)),
            "filename": f"{ctx.data.name}-{split}-instances.csv"}


# the selection rules run in the page (app/assets/explorer.js mirrors stateseer.app.selection)
SELECT_ROW_JS = """
function (cell, sel, rows) {
    const nu = window.dash_clientside.no_update;
    const r = cell ? cell.row : null;
    if (r === null || r === undefined || !rows || r >= rows.length) { return [nu, nu]; }
    // the table keeps its active cell when its rows change (a state click, a filter): a
    // click at the same place on the new rows would then change nothing and fire nothing,
    // and the input shown would stay the one clicked before. Clearing it makes every
    // click a change (the selected row is marked by MARK_ROW_JS, not by the active cell).
    window.dash_clientside.set_props("__TABLE__", {active_cell: null});
    return window.stateseer.select(sel || window.stateseer.EMPTY, "row",
                                   parseInt(rows[r].index, 10));
}
""".replace("__TABLE__", ids.TABLE)
""":func:`select_row` in the page (which then clears the table's active cell, so that a
click at the same place on other rows is a new click)."""

SELECT_SPLIT_JS = """
function (split, sel) {
    const nu = window.dash_clientside.no_update;
    sel = sel || window.stateseer.EMPTY;
    if (split === sel.split) { return [nu, nu]; }
    return window.stateseer.select(sel, "split", split);
}
"""
""":func:`select_split` in the page."""

SYNC_SPLIT_JS = """
function (sel, current) {
    return sel && sel.split && sel.split !== current ? sel.split
        : window.dash_clientside.no_update;
}
"""
""":func:`sync_split` in the page."""

MARK_ROW_JS = """
function (sel, rows) {
    const row = sel ? sel.row : null;
    const at = row === null || row === undefined ? -1
        : (rows || []).findIndex(r => r.index === row);
    let frames = 0;
    const mark = () => {  // once the table has drawn the page of rows (its code may
        const trs = [...document.querySelectorAll('#table tbody tr')]  // still be loading)
            .filter(tr => tr.querySelector('td'));
        if (trs.length < (rows || []).length && frames++ < 600) {
            requestAnimationFrame(mark);
            return;
        }
        trs.forEach((tr, k) => tr.classList.toggle('selected-row', k === at));
    };
    requestAnimationFrame(mark);
    return at < 0 ? null : at;
}
"""
""":func:`marked_row` in the page, which also marks the row."""

_FILTERS = (State(ids.SEARCH, "value"), State(ids.REGEX, "value"), State(ids.F_LABEL, "value"),
            State(ids.F_PRED, "value"), State(ids.F_CORRECT, "value"))

VIEW = View(
    name="table", presets=("baseline",), layout=layout, ids=(ids.TABLE_PANEL,),
    callbacks=(
        Callback(update_table, [Output(ids.TABLE, "data"), Output(ids.TABLE, "page_count"),
                                Output(ids.TABLE_MESSAGE, "children"),
                                Output(ids.FILTER_CHIPS, "children"),
                                Output(ids.TABLE_KEY, "data"),
                                Output(ids.TABLE, "page_current")],
                 [Input(ids.SELECTION, "data"), Input(ids.SEARCH, "value"),
                  Input(ids.REGEX, "value"), Input(ids.F_LABEL, "value"),
                  Input(ids.F_PRED, "value"), Input(ids.F_CORRECT, "value"),
                  Input(ids.TABLE, "page_current"), Input(ids.TABLE, "sort_by"),
                  State(ids.TABLE_KEY, "data")], prevent_initial_call=True),  # in the layout
        Callback(marked_row, [Output(ids.TABLE_MARK, "data")],
                 [Input(ids.SELECTION, "data"), Input(ids.TABLE, "data")],
                 clientside=MARK_ROW_JS),
        Callback(select_row, select_outputs(),
                 [Input(ids.TABLE, "active_cell"), State(ids.SELECTION, "data"),
                  State(ids.TABLE, "data")], prevent_initial_call=True,
                 clientside=SELECT_ROW_JS),
        Callback(select_split, select_outputs(),
                 [Input(ids.SPLIT, "value"), State(ids.SELECTION, "data")],
                 prevent_initial_call=True, clientside=SELECT_SPLIT_JS),
        Callback(sync_split, [Output(ids.SPLIT, "value")],
                 [Input(ids.SELECTION, "data"), State(ids.SPLIT, "value")],
                 prevent_initial_call=True, clientside=SYNC_SPLIT_JS),
        Callback(table_csv, [Output(ids.DOWNLOAD, "data", allow_duplicate=True)],
                 [Input(ids.DL_TABLE, "n_clicks"), State(ids.SELECTION, "data"), *_FILTERS],
                 trigger=True, prevent_initial_call=True),
    ))
