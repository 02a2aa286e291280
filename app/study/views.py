"""What a participant sees: the explorer restricted to a condition's views, plus the study's
chrome (banner, task panel with timer and submit, landing and error pages).

Every text that comes from the study file or from a participant is passed to Dash as a
string child, which React renders as text (escaped); nothing here renders raw HTML.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from dash import dcc, html

from stateseer.app.explorer.registry import REGISTRY, Registry
from stateseer.app.explorer.tree import children, walk
from stateseer.app.study.instruments import CHECKS, items_of
from stateseer.app.study.spec import VIEWS, Study, Task

__all__ = ["component_ids", "done_page", "hidden_views", "landing_page",
           "message_page", "restrict_views", "study_frame", "task_panel", "view_targets"]

HIDDEN = {"display": "none"}


def view_targets(registry: Registry = REGISTRY) -> dict[str, tuple[tuple[str, str], ...]]:
    """View -> what it places on the page: ``("id", X)`` or ``("tab", X)`` (the ``dcc.Tab``
    whose value is X), read from the explorer's view registry."""
    return registry.targets()


def component_ids(view: str, registry: Registry = REGISTRY) -> frozenset[str]:
    """The ids of the components that belong to ``view`` (pattern-matching ids: their
    ``type``): what it places and what its callbacks update or listen to, read from the
    explorer's view registry (:meth:`stateseer.app.explorer.registry.Registry.component_ids`).

    Examples
    --------
    >>> "diagram" in component_ids("diagram"), "table" in component_ids("diagram")
    (True, False)
    """
    return registry.component_ids(view)


def hidden_views(views: Iterable[str]) -> list[str]:
    """The views a condition does not show."""
    shown = set(views)
    return [v for v in VIEWS if v not in shown]


def _view_of(c: Any, targets: dict[str, tuple[tuple[str, str], ...]]) -> str | None:
    cid = getattr(c, "id", None)
    is_tab = type(c).__name__ == "Tab"
    for view, items in targets.items():
        for kind, name in items:
            if (kind == "id" and cid == name) or \
                    (kind == "tab" and is_tab and getattr(c, "value", None) == name):
                return view
    return None


def _hide(c: Any) -> None:
    c.style = {**(getattr(c, "style", None) or {}), **HIDDEN}


def _is_hidden(c: Any) -> bool:
    return (getattr(c, "style", None) or {}).get("display") == "none"


def _is_empty(c: Any) -> bool:
    """Whether ``c`` is a container with nothing to show: side tabs without a visible tab,
    or a ``Div`` without an id (no callback fills it) whose children are all hidden or
    empty, as a panel or a row is when the views that fill it were left out of the page.

    >>> from dash import dcc, html
    >>> _is_empty(html.Div([html.Div(dcc.Tabs(children=[]))])), _is_empty(html.Div("text"))
    (True, False)
    >>> _is_empty(html.Div(id="filled-later")), _is_empty(html.Div([html.Span("x")]))
    (False, False)
    """
    kind = type(c).__name__
    if kind == "Tabs":
        return not any(type(t).__name__ == "Tab" and not _is_hidden(t) for t in children(c))
    if kind != "Div" or getattr(c, "id", None) is not None:
        return False
    kids = getattr(c, "children", None)
    kids = kids if isinstance(kids, (list, tuple)) else [] if kids is None else [kids]
    return all(_is_hidden(k) or _is_empty(k) for k in kids)


def _hide_empty_containers(layout: Any, nodes: list[Any], owner: dict[int, str]) -> None:
    """Hide every container (not a view's own component, not the page) whose view
    components are all hidden: a panel, the input box, a row, the side tabs; and every
    container with nothing in it (:func:`_is_empty`: a panel whose views are not in the
    page at all, which would show as an empty white bar)."""
    for c in reversed(nodes):  # innermost containers first
        if c is layout or id(c) in owner or _is_hidden(c):
            continue
        inner = [k for k in walk(c) if k is not c and id(k) in owner]
        if inner and all(_is_hidden(k) or any(_is_hidden(a) for a in _ancestors(c, k))
                         for k in inner):
            _hide(c)
        elif not inner and _is_empty(c):
            _hide(c)


def restrict_views(layout: Any, views: Iterable[str], registry: Registry = REGISTRY) -> Any:
    """A copy of the explorer's layout that shows only ``views``.

    Components of the other views (what each view places, as its entry in the explorer's
    registry declares) get ``style={"display": "none"}`` (they stay in the page so the
    explorer's callbacks keep working). A container (a panel, the input box, the side
    tabs) whose view components are all hidden is hidden too, and a ``dcc.Tabs`` whose
    selected tab is hidden opens its first visible tab.

    Parameters
    ----------
    layout : dash component
        The explorer's layout (:meth:`stateseer.app.explorer.registry.Registry.layout`).
    views : iterable of str
        The views to show (names from :data:`stateseer.app.study.spec.VIEWS`).
    registry : Registry
        The explorer's views (default: :data:`stateseer.app.explorer.registry.REGISTRY`).

    Examples
    --------
    >>> from dash import html
    >>> page = html.Div([html.Div(id="trace-title"), html.Div(id="diagram-panel")])
    >>> out = restrict_views(page, ["trace_text"])
    >>> out.children[1].style, getattr(out.children[0], "style", None)
    ({'display': 'none'}, None)
    """
    shown = set(views)
    unknown = shown - set(VIEWS)
    if unknown:
        raise ValueError(f"unknown views {sorted(unknown)}; views are {VIEWS}")
    targets = registry.targets()
    layout = copy.deepcopy(layout)
    nodes = list(walk(layout))
    owner = {id(c): v for c in nodes if (v := _view_of(c, targets)) is not None}
    for c in nodes:
        if id(c) in owner and owner[id(c)] not in shown:
            _hide(c)
    _hide_empty_containers(layout, nodes, owner)
    for c in nodes:
        if type(c).__name__ == "Tabs":
            tabs = [t for t in children(c) if type(t).__name__ == "Tab"]
            visible = [t for t in tabs if not _is_hidden(t)]
            if visible and getattr(c, "value", None) not in [t.value for t in visible]:
                c.value = visible[0].value
    return layout


def _ancestors(root: Any, target: Any) -> list[Any]:
    """Components between ``root`` (exclusive) and ``target`` (exclusive)."""
    def path(c: Any) -> list[Any] | None:
        for k in children(c):
            if k is target:
                return []
            p = path(k)
            if p is not None:
                return [k, *p]
        return None

    return path(root) or []


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = round(seconds)
    return f"{s // 60:02d}:{s % 60:02d}"


def task_panel(study: Study, task: Task, position: int, *, split: str,
               instance_rows: dict[int, int]) -> html.Div:
    """The current task: prompt, instances to open, answer widget, timer and submit.

    ``instance_rows`` maps the task's instance ids to their rows in ``split``.
    """
    n = study.n_tasks
    show = {k: (None if task.answer in kinds else HIDDEN) for k, kinds in (
        ("text", ("text", "debrief")), ("choice", ("choice", "consent", *CHECKS)),
        ("ids", ("instances", "states")))}
    submit = {"consent": "Continue", "debrief": "Finish"}.get(task.answer, "Submit answer")
    what = "instance ids" if task.answer == "instances" else "state numbers"
    opens = [html.Button(f"open #{i}", id={"type": "study-open", "index": k},
                         n_clicks=0, className="study-open",
                         title=f"show instance {i} of the {split} split")
             for k, i in enumerate(task.open) if i in instance_rows]
    limit = f" / {_clock(task.time_limit_s)}" if task.time_limit_s else ""
    return html.Div([
        html.Div([html.B(f"Task {position + 1} of {n}"),
                  html.Span([html.Span("time ", className="study-clock-label"),
                             html.Span("00:00", id="study-timer"),
                             html.Span(limit, className="study-limit")],
                            className="study-clock", id="study-clock",
                            title="time on this task")],
                 className="study-task-head"),
        html.P(task.prompt, id="study-prompt", className="study-prompt"),
        html.Div(["Instances for this task: ", *opens], className="study-opens")
        if opens else None,
        html.Div([
            dcc.Textarea(id="study-answer-text", value="", maxLength=task.max_chars,
                         placeholder="Comments (optional)…" if task.answer == "debrief"
                         else "Your answer…", className="study-answer-text",
                         style=show["text"]),
            questionnaire(task),
            dcc.RadioItems(id="study-answer-choice", value=None,
                           options=[{"label": f" {o}", "value": o} for o in task.options],
                           className="study-choice", style=show["choice"]),
            html.Div([
                dcc.Input(id="study-answer-ids", type="text", value="", debounce=False,
                          placeholder=f"{what}, e.g. 12, 40", className="study-ids"),
                html.Button(f"add the selected {'row' if task.answer == 'instances' else 'state'}",
                            id="study-add-selected", n_clicks=0),
            ], className="study-ids-box", style=show["ids"]),
            html.Button(submit, id="study-submit", n_clicks=0, className="study-submit"),
        ], className="study-answer"),
        html.Div(id="study-message", className="message", role="status"),
    ], className="study-task panel", id="study-task")


def questionnaire(task: Task) -> html.Div | None:
    """A questionnaire's items, each a row of points between its two end labels (NASA-TLX:
    21 points, 0 to 100 in fives, as on the paper form); None for other tasks."""
    items = items_of(task)
    if not items:
        return None
    rows = []
    for k, it in enumerate(items):
        points = list(range(it["min"], it["max"] + 1, it["step"]))
        rows.append(html.Div([
            html.Div(f"{k + 1}. {it['text']}", className="study-item-text"),
            html.Div([html.Span(it["low"], className="study-item-end"),
                      dcc.RadioItems(id={"type": "study-item", "index": k}, value=None,
                                     options=[{"label": "", "value": v,
                                               "title": str(v)} for v in points],
                                     inline=True, className="study-item-points"),
                      html.Span(it["high"], className="study-item-end")],
                     className="study-item-scale")], className="study-item"))
    return html.Div(rows, className="study-questionnaire", id="study-questionnaire")


def study_frame(study: Study, participant: dict[str, Any], explorer: Any | None,
                panel: Any, stores: list[Any]) -> html.Div:
    """The page of a participant: banner, task panel, then the (restricted) explorer."""
    title = study.title or f"Study {study.id}"
    banner = html.Div([html.Span(title, className="study-title"),
                       html.Span([html.Span(id="study-saved", className="study-saved",
                                            title="interactions stored on the server"),
                                  html.Span(f"participant {participant['pid']}",
                                            id="study-pid", className="study-pid")])],
                      className="study-banner")
    return html.Div([*stores, banner, panel, *([explorer] if explorer is not None else [])],
                    className="study-page", id="study-page")


def done_page(study: Study, pid: str, *, declined: bool = False) -> html.Div:
    """Shown once every task is submitted (or consent was declined: nothing more is
    asked)."""
    head, text = ("All tasks are done — thank you!", "Your answers are saved. You may close "
                  "this page.")
    if declined:
        head, text = ("You chose not to take part — thank you.", "Nothing more is asked "
                      "and nothing more is recorded. You may close this page.")
    return html.Div([
        html.Div([html.Span(study.title or f"Study {study.id}", className="study-title"),
                  html.Span(f"participant {pid}", className="study-pid")],
                 className="study-banner"),
        html.Div([html.H3(head), html.P(text)],
                 className="study-task panel study-done", id="study-done"),
    ], className="study-page")


def landing_page(study: Study) -> html.Div:
    """Asks for a participant code (or hands one out when the study allows it)."""
    parts: list[Any] = [
        html.H2(study.title or f"Study {study.id}"),
        html.P(study.intro) if study.intro else None,
        html.Form([
            html.Label(["Participant code (the end of your study link) ",
                        dcc.Input(id="study-pid-input", name="pid", type="text",
                                  required=True, pattern="[A-Za-z0-9_-]{1,64}",
                                  autoComplete="off")]),
            html.Button("Start", type="submit", className="study-submit"),
        ], action="/", method="GET", className="study-landing-form"),
    ]
    if study.allow_generated_ids:
        parts.append(html.P(["No id? ", html.A("Start with a new one", href="/study/new",
                                               id="study-new")]))
    return html.Div(html.Div(parts, className="study-task panel study-landing"),
                    className="study-page")


def message_page(title: str, text: str) -> html.Div:
    """A page with one message (e.g. an invalid participant id)."""
    return html.Div(html.Div([html.H3(title), html.P(text, id="study-error")],
                             className="study-task panel"), className="study-page")
