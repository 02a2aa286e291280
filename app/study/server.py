"""The study app: the explorer restricted per condition, with tasks, a timer and a log.

``create_study_app(study, db=...)`` builds a Dash app on the explorer's layout and
callbacks (:meth:`stateseer.app.explorer.registry.Registry.layout`, ``Registry.register``),
adds the study's callbacks and the HTTP routes of :mod:`stateseer.app.study.routes` and
:mod:`stateseer.app.study.admin`, and returns it (``server = app.server``).

A participant's page is their link ``/p/SECRET/`` (see :mod:`stateseer.app.study.identity`: the
server knows the participant from the secret only, never from an id the page sends).
Each page load registers the participant (their condition, or for a within-subject
design their order of conditions, is chosen once and stored), starts their first
unsubmitted task (a reload keeps its start time) and shows it with the views of the
condition it belongs to. Submitting stores the answer to the participant's current
task (time limits checked on the server's clock) and reloads the page on the next task.
Every explorer callback is checked against the participant's condition
(:mod:`stateseer.app.study.guard`), request bodies and stored payloads are bounded, and every
response carries the headers of :func:`stateseer.app.security.secure_headers`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
from flask import g, has_request_context, request

from stateseer.app.explorer.context import ExplorerContext
from stateseer.app.explorer.ids import SELECTION
from stateseer.app.explorer.registry import REGISTRY
from stateseer.app.explorer.view import Callback, Trigger
from stateseer.app.main import ASSETS, initial_selection
from stateseer.app.security import (
    MAX_REQUEST_BYTES,
    bind_warning,
    limit_request_bodies,
    secure_headers,
)
from stateseer.app.selection import to_query
from stateseer.app.study import admin, guard, routes
from stateseer.app.study.answers import add_selected, check_answer, grade
from stateseer.app.study.context import EXTENSION, StudyContext
from stateseer.app.study.events import EVENT_CALLBACKS
from stateseer.app.study.identity import link_path, secret_from_url
from stateseer.app.study.instruments import items_of, score
from stateseer.app.study.spec import Study, StudyError, Task, load_study
from stateseer.app.study.store import StudyLog, seconds_between, utc_now
from stateseer.app.study.views import (
    done_page,
    landing_page,
    message_page,
    restrict_views,
    study_frame,
    task_panel,
)
from stateseer.core import layout

__all__ = ["STUDY_CALLBACKS", "StudyApp", "StudyContext", "create_study_app", "serve_study"]

CSS = Path(__file__).with_name("study.css").read_text(encoding="utf-8")
JS = Path(__file__).with_name("study.js").read_text(encoding="utf-8")
_SELECTION_KEYS = {"split", "state", "row", "pattern"}
TIMEOUT_GRACE_S = 2.0  # a page may say "time is up" this early (clock skew)
LATE_GRACE_S = 1.0  # an answer this late after the limit is still on time (in flight)
MAX_QUERY_CHARS = 2000


def _task_selection(sc: StudyContext, task: Task, query: str,
                    views: tuple[str, ...]) -> dict[str, Any]:
    """The page's first selection: its URL's, else the task's first instance (a condition
    without state views cannot select a state or a pattern through the URL)."""
    if _SELECTION_KEYS & set(parse_qs(query)):
        sel = initial_selection(sc.ctx, query)
        if not guard.STATE_VIEWS & set(views):
            sel = {**sel, "state": None, "pattern": None}
        return sel
    split = sc.split_of(task)
    rows = sc.rows_by_id(split)
    row = rows.get(task.open[0]) if task.open else None
    return {"split": split, "state": None, "row": row, "pattern": None}


def participant_page(sc: StudyContext, pid: str, query: str) -> html.Div:
    """The page of ``pid`` now: their current task, or the thank-you page."""
    study = sc.study
    sc.join(pid)
    now = sc.now(pid)
    views = now.views
    if now.task is None:
        sc.log.log(pid, "page_opened", {"done": True}, source="server")
        return done_page(study, pid, declined=now.declined)
    position, task = now.position, now.task
    started = sc.log.start_task(pid, task.id, position, {"views": list(views)},
                                condition=now.condition)
    elapsed = seconds_between(started["started_at"], utc_now())
    sc.log.log(pid, "page_opened", {"views": list(views), "query": query[:MAX_QUERY_CHARS],
                                    "reload": not started["new"]}, task=task.id,
               source="server")
    initial = _task_selection(sc, task, query, views)
    explorer = guard.blank_excluded(
        restrict_views(REGISTRY.layout(sc.ctx, initial, views=views), views), views)
    if not views:  # a questionnaire, a check, consent or debriefing: the explorer is off
        explorer = html.Div(explorer, className="study-explorer-off")
    info = {"pid": pid, "task": task.id,  # the condition's name is never sent
            "position": position, "elapsed": elapsed, "limit": task.time_limit_s,
            "split": sc.split_of(task), "answer": task.answer}
    stores = [dcc.Store(id="study-info", data=info), dcc.Store(id="study-ack"),
              dcc.Store(id="study-prev-sel", data=initial), dcc.Store(id="study-timeout"),
              dcc.Interval(id="study-tick", interval=1000),
              dcc.Location(id="study-loc", refresh=True)]
    panel = task_panel(study, task, position, split=sc.split_of(task),
                       instance_rows=sc.rows_by_id(sc.split_of(task)))
    page = study_frame(study, {"pid": pid}, explorer, panel, stores)
    if not guard.STATE_VIEWS & set(views):
        page.className += " no-states"  # the trace's state strip is a state view too
    return page


def serve_layout(sc: StudyContext) -> Any:
    """The layout for the current request (see the module notes)."""
    if not has_request_context():
        return landing_page(sc.study)
    is_layout = request.path.endswith("_dash-layout")
    secret, query, is_link = secret_from_url(request.referrer if is_layout else request.url)
    if not is_link:
        return landing_page(sc.study)
    pid = sc.log.pid_of(secret)
    if pid is None:
        return message_page("This participant link is not valid",
                            "open the study link the researcher sent you, as it is (it "
                            "ends in a long code) — or ask them for a new one")
    if not is_layout:
        return landing_page(sc.study)
    # Dash may build the layout twice in one request (its first-request check): the page
    # is made, and its events logged, once per request
    if "study_page" not in g:
        g.study_page = participant_page(sc, pid, query)
    return g.study_page


TIMER_JS = """
function(n, info) {
    const nu = window.dash_clientside.no_update;
    if (!info) { return [nu, nu, nu]; }
    const key = info.pid + "/" + info.task;
    const t0s = window.__studyT0 = window.__studyT0 || {};
    if (!(key in t0s)) { t0s[key] = Date.now() - 1000 * info.elapsed; }
    const s = Math.max(0, Math.floor((Date.now() - t0s[key]) / 1000));
    const fmt = x => String(Math.floor(x / 60)).padStart(2, "0") + ":" +
                     String(x % 60).padStart(2, "0");
    let cls = "study-clock", timeout = nu;
    if (info.limit) {
        if (info.limit - s <= 60) { cls += " late"; }
        window.__studyFired = window.__studyFired || {};
        if (s >= info.limit && !window.__studyFired[key]) {
            window.__studyFired[key] = true;
            timeout = {task: info.task, at: s};
        }
    }
    return [fmt(s), timeout, cls];
}
"""


SAVED_JS = """
function(ack) {
    if (!ack) { return window.dash_clientside.no_update; }
    if (ack.ok === false) { return "not saved: " + ack.error; }
    window.__studySaved = (window.__studySaved || 0) + ack.ids.length;
    return "✓ " + window.__studySaved + " interactions saved";
}
"""


def open_instance(sc: StudyContext, trigger: Trigger, _clicks, sel, info):
    """A click on one of the task's instances: select it and log the opening."""
    pid = sc.participant()
    current = sc.current_task(pid) if pid else None
    if not trigger.is_type("study-open") or not info or current is None:
        return no_update, no_update, no_update
    task = current[1]
    if not isinstance(trigger.id.get("index"), int) or \
            not 0 <= trigger.id["index"] < len(task.open):
        return no_update, no_update, no_update
    iid = task.open[trigger.id["index"]]
    split = sc.split_of(task)
    new = {**(sel or {}), "split": split, "row": sc.rows_by_id(split)[iid]}
    try:
        ids = sc.write(pid, [("task_instance_opened", {"id": iid, "split": split})])
    except StudyError as exc:
        return new, to_query(new), {"ok": False, "error": str(exc)}
    return new, to_query(new), {"ok": True, "ids": ids}


def add_selection(sc: StudyContext, n, text, sel, info):
    """"add selected": the selected state or instance id appended to the ids box."""
    pid = sc.participant() if n and info else None
    current = sc.current_task(pid) if pid else None
    if current is None:
        return no_update
    sel, task = sel if isinstance(sel, dict) else {}, current[1]
    if task.answer == "states":
        state = sel.get("state")
        return add_selected(_text(text), state if isinstance(state, int) else None)
    row, split = sel.get("row"), sel.get("split") or sc.split_of(task)
    iid = sc.row_id(split, row) if isinstance(row, int) else None
    return add_selected(_text(text), iid)


def submit(sc: StudyContext, trigger: Trigger, n, timeout, info, text, choice, ids, items):
    """Submit (or the timer's time-out): :func:`submit_answer`."""
    if not isinstance(info, dict) or (trigger.id == "study-submit" and not n):
        return no_update, no_update
    pid = sc.participant()
    if pid is None:
        return "this page's participant link is not valid — reload the page", no_update
    return submit_answer(sc, pid, info.get("task"), text=_text(text), choice=_text(choice),
                         ids=_text(ids), items=items if isinstance(items, list) else None,
                         timed_out=trigger.id == "study-timeout" and bool(timeout))


#: the task panel's callbacks (timer and the saved note run in the page)
STUDY_CALLBACKS = (
    Callback(lambda sc, *_: no_update, [Output("study-timer", "children"),
                                        Output("study-timeout", "data"),
                                        Output("study-clock", "className")],
             [Input("study-tick", "n_intervals"), State("study-info", "data")],
             clientside=TIMER_JS),
    # the page shows an interaction as saved only once the server acknowledged it
    Callback(lambda sc, *_: no_update, [Output("study-saved", "children")],
             [Input("study-ack", "data")], prevent_initial_call=True, clientside=SAVED_JS),
    Callback(open_instance, [Output(SELECTION, "data", allow_duplicate=True),
                             Output("url", "search", allow_duplicate=True),
                             Output("study-ack", "data", allow_duplicate=True)],
             [Input({"type": "study-open", "index": ALL}, "n_clicks"),
              State(SELECTION, "data"), State("study-info", "data")],
             trigger=True, prevent_initial_call=True),
    Callback(add_selection, [Output("study-answer-ids", "value")],
             [Input("study-add-selected", "n_clicks"), State("study-answer-ids", "value"),
              State(SELECTION, "data"), State("study-info", "data")],
             prevent_initial_call=True),
    Callback(submit, [Output("study-message", "children"), Output("study-loc", "href")],
             [Input("study-submit", "n_clicks"), Input("study-timeout", "data"),
              State("study-info", "data"), State("study-answer-text", "value"),
              State("study-answer-choice", "value"), State("study-answer-ids", "value"),
              State({"type": "study-item", "index": ALL}, "value")],
             trigger=True, prevent_initial_call=True),
)


def register_callbacks(app: Dash, callbacks: Sequence[Callback], sc: StudyContext) -> None:
    """Register study callbacks (module-level functions ``fn(sc, ...)``) on ``app``."""
    for cb in callbacks:
        if cb.clientside:
            app.clientside_callback(cb.clientside, *cb.outputs, *cb.inputs,
                                    prevent_initial_call=cb.prevent_initial_call)
        else:
            app.callback(*cb.outputs, *cb.inputs,
                         prevent_initial_call=cb.prevent_initial_call)(cb.bind(sc))


def _text(value: Any) -> str | None:
    """A widget's value as text (None for anything else a forged request may send)."""
    return value if isinstance(value, str) else None


def submit_answer(sc: StudyContext, pid: str, page_task: str | None, *, text: str | None,
                  choice: str | None, ids: str | None, timed_out: bool,
                  items: list[Any] | None = None) -> tuple[Any, Any]:
    """Check and store ``pid``'s answer: ``(message, next page URL)`` (one is no_update).

    The answer goes to the participant's current task on the server; ``page_task``, the
    task the page shows, must be that task (else the page is out of date). A time-out
    submits whatever the widgets hold, valid or not; the page's claim that time is up is
    checked against the task's stored start, and an answer later than the task's limit
    is stored with ``timed_out = 1`` whatever the page says.
    """
    current = sc.current_task(pid)
    if current is None or current[1].id != page_task:
        return ("this page is out of date (that task is done) — reload the page",
                no_update)
    task = current[1]
    if timed_out:
        started = next((r["started_at"] for r in sc.log.progress(pid)
                        if r["task"] == task.id), None)
        limit = task.time_limit_s or 0
        if not (started and limit and seconds_between(started, utc_now())
                >= limit - TIMEOUT_GRACE_S):
            return no_update, no_update
    rows = sc.rows_by_id(sc.split_of(task))
    try:
        answer = check_answer(task, text=text, choice=choice, ids=ids, items=items,
                              valid_id=rows.__contains__, n_states=sc.data.fsm.n_states)
    except StudyError as exc:
        if not timed_out:
            sc.write(pid, [("answer_rejected", {"reason": str(exc)})])
            return str(exc), no_update
        if items_of(task):  # the ratings given so far (numbers only: a forged value is not kept)
            raw: Any = [v if isinstance(v, int) and not isinstance(v, bool) else None
                        for v in (items or [])[:100]]
        else:
            raw = (choice if task.options else text if task.answer in ("text", "debrief")
                   else ids) or ""
            raw = raw[:task.max_chars]
        answer = {"type": task.answer, "value": None, "raw": raw, "invalid": str(exc)}
    graded, scored = grade(task, answer), score(task, answer)
    if graded is not None:
        answer = {**answer, "grade": graded}
    if scored is not None:
        answer = {**answer, "score": scored}
    sc.log.submit(pid, task.id, answer, timed_out=timed_out, limit_s=task.time_limit_s,
                  grace_s=LATE_GRACE_S)
    return "", f"{link_path(sc.log.secret_of(pid) or '')}?done={task.id}"


class StudyApp(Dash):
    """A study's Dash app, given its :class:`StudyContext` at construction
    (``study_context``; its routes read it from ``server.extensions``)."""

    def __init__(self, sc: StudyContext, **kwargs: Any) -> None:
        super().__init__(__name__, **kwargs)
        self.study_context = sc
        self.server.extensions[EXTENSION] = sc
        self.index_string = self.index_string.replace(
            "{%css%}", "{%css%}\n<style>" + CSS + "</style>").replace(
            "{%renderer%}", "{%renderer%}\n<script>" + JS + "</script>")
        self.layout = lambda: serve_layout(sc)


def create_study_app(study: Study | str | Path, *, db: str | Path,
                     admin_token: str | None = None, context: ExplorerContext | None = None,
                     synchronous: str = "FULL", allowed_hosts: list[str] | None = None,
                     bind_host: str | None = None,
                     max_request_bytes: int = MAX_REQUEST_BYTES) -> StudyApp:
    """The Dash app of ``study`` logging into the SQLite file ``db``.

    Parameters
    ----------
    study : Study or path
        A validated study, or a study file to load.
    db : str or Path
        The interaction log (created if missing; a log of another study is refused).
    admin_token : str, optional
        Turns the admin page on (``/study/admin``); requests need this token.
    context : ExplorerContext, optional
        The run, if already loaded (tests): ``ExplorerContext.load(study.run)``.
    synchronous : {"FULL", "NORMAL"}
        The log's durability (see :mod:`stateseer.app.study.store`).
    allowed_hosts : list of str, optional
        Host names clients may use besides loopback and ``bind_host``
        (:func:`stateseer.app.security.secure_headers`).
    bind_host : str, optional
        The interface the server will bind.
    max_request_bytes : int
        The largest request body any route accepts (``/study/event`` takes less).
    """
    if not isinstance(study, Study):
        study = load_study(study)
    admin.check_token_strength(admin_token)
    if context is None:
        if not (study.run / layout.CONFIG).exists():
            raise StudyError(f"study file: run {str(study.run)!r} is not a stateseer run — "
                             "fix 'run' (relative paths start at the study file's folder) "
                             "or pass --run")
        context = ExplorerContext.load(study.run)
    context = dataclasses.replace(context, relay=guard.relay)  # chained values, guarded
    log = StudyLog(db, study=study.id, digest=study.digest(), synchronous=synchronous)
    sc = StudyContext(study=study, ctx=context, log=log, admin_token=admin_token)
    sc.check_run()
    for pid in study.participant_ids():
        log.link(pid)
    app = StudyApp(sc, assets_folder=str(ASSETS), title=f"stateseer study · {study.id}",
                   update_title=None, suppress_callback_exceptions=True)
    limit_request_bodies(app.server, max_request_bytes)
    secure_headers(app.server, allowed_hosts, bind_host=bind_host)
    guard.register(app.server, app)
    REGISTRY.register(app, context)
    register_callbacks(app, (*EVENT_CALLBACKS, *STUDY_CALLBACKS), sc)
    routes.register(app.server)
    admin.register(app.server)
    _ = context.data.positions
    for split in {sc.split_of(t) for t in study.tasks}:
        context.data.index(split)
    return app


def serve_study(study_file: str | Path, *, db: str | Path | None = None,
                run: str | Path | None = None, host: str = "127.0.0.1", port: int = 8050,
                admin_token: str | None = None, access_log: bool = False,
                allowed_hosts: list[str] | None = None, bind_warned: bool = False) -> int:
    """``stateseer study``: load, check and serve a study until interrupted.

    ``allowed_hosts`` defaults to ``$STATESEER_ALLOWED_HOSTS`` (comma-separated). A bind
    beyond loopback is warned about once: here, unless the caller did (``bind_warned``,
    as the command line does before loading the study).
    """
    import logging
    import signal
    import socket
    import time

    t0 = time.perf_counter()
    study = load_study(study_file, run=run)
    db = Path(db) if db else Path(f"study-{study.id}.sqlite")
    if allowed_hosts is None:
        allowed_hosts = os.environ.get("STATESEER_ALLOWED_HOSTS", "").split(",")
    app = create_study_app(study, db=db, admin_token=admin_token,
                           allowed_hosts=allowed_hosts, bind_host=host)
    sc = app.study_context
    warnings = [None if bind_warned else bind_warning(
        host, "the study server" + (" (and its admin token)" if admin_token else ""))]
    if sc.log.digest_changed:
        warnings.append(f"stateseer: warning: the conditions or tasks of study {study.id!r} "
                        f"changed since {db} was created; answers before and after may not "
                        "compare")
    for line in filter(None, warnings):
        print(line, file=sys.stderr)
    if not access_log:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    url = f"http://{host}:{port}"
    public = host if host.strip("[]") not in ("0.0.0.0", "::", "") else socket.getfqdn()
    links = write_links(sc, db.with_name(db.stem + ".links.csv"), f"http://{public}:{port}")
    print(f"stateseer: study {study.id!r} ({len(study.tasks)} tasks, conditions "
          f"{', '.join(study.conditions)}) on {url} · participant links in {links} "
          f"{'and ' + url + '/study/new ' if study.allow_generated_ids else ''}· log {db} · "
          f"admin {url + '/study/admin' if admin_token else 'off'} · ready in "
          f"{time.perf_counter() - t0:.1f} s (Ctrl+C to stop)", file=sys.stderr, flush=True)
    # SIGTERM stops the server like Ctrl+C, so the log is closed cleanly; SIGKILL loses
    # nothing acknowledged either (see stateseer.app.study.store)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        app.run(host=host, port=port, debug=False, threaded=True)
    finally:
        sc.log.close()
    return 0


def write_links(sc: StudyContext, path: Path, base_url: str) -> Path:
    """Write every participant link to ``path`` (CSV, mode 0600: links are secrets)."""
    from stateseer.app.study.export import links_csv

    text = links_csv(sc.log.links(), base_url)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path
