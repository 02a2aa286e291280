"""HTTP routes of the study server (Flask, beside Dash's own).

``GET  /p/SECRET/``    a participant's page (the secret comes from :meth:`StudyLog.link`);
                       answering it sets the participant's cookie
``GET  /?pid=CODE``    redirects to ``/p/CODE/`` (the landing page's form)
``GET  /study/new``    a new participant's link, when the study allows it (a browser that
                       already holds a link gets that one back: no re-rolled condition)
``GET  /study/health`` ``{"ok": true, "study": ID}``
``POST /study/join``   the participant of the request's secret (see
                       :mod:`stateseer.app.study.identity`) joins: ``{"pid", "new", "task"}``
                       (their condition is stored, never told); without a secret, and when
                       the study allows it, a new participant is made and joined, and its
                       ``secret`` and ``link`` are returned too. A ``pid`` in the body is
                       refused (400).
``POST /study/event``  ``{"kind", "payload"?}`` or ``{"events": [{"kind",
                       "payload"?}, ...]}`` -> ``200 {"ok": true, "ids": [...]}`` only after
                       the events are committed to the database; the participant is the
                       one of the request's secret and the task the one the server has them
                       on (a ``pid`` or ``task`` in the body is ignored: what a page says
                       of itself is never believed).
                       400 for a bad request, 403 without a valid secret, 404 for a
                       participant that has not joined, 413 for a body over
                       :data:`MAX_BODY` (refused before it is read, chunked bodies are cut
                       off there), 503 when the database cannot be written or is full.

The JSON endpoints take ``Content-Type: application/json`` only, so a page of another
site cannot post to them with a plain form.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from flask import Flask, Response, jsonify, redirect, request
from werkzeug.exceptions import RequestEntityTooLarge

from stateseer.app.study.context import StudyContext, current
from stateseer.app.study.identity import (
    link_path,
    request_secret,
    secret_from_url,
    set_secret_cookie,
)
from stateseer.app.study.spec import StudyError
from stateseer.app.study.store import MAX_PAYLOAD_BYTES, StudyLimitError, UnknownParticipant

__all__ = ["MAX_BODY", "MAX_EVENTS", "MAX_PAYLOAD", "parse_event_request", "register"]

KIND = re.compile(r"[a-z][a-z0-9_.:-]{0,63}")
MAX_BODY = 256 * 1024
MAX_PAYLOAD = MAX_PAYLOAD_BYTES
MAX_EVENTS = 1000
NO_SECRET = ("this request carries no valid participant link — open the study link the "
             "researcher sent you (it ends in a long code), or send its code as "
             "X-Study-Secret")


def _error(status: int, message: str):
    resp = jsonify({"ok": False, "error": message})
    resp.status_code = status
    return resp


def parse_event_request(doc: Any) -> list[tuple[str, dict[str, Any]]]:
    """``[(kind, payload)]`` of an event request, or StudyError.

    A ``pid`` or ``task`` in the body is ignored: the participant comes from the
    request's secret, the task from the server's record of where they are.

    Examples
    --------
    >>> parse_event_request({"kind": "state_clicked", "payload": {"s": 2}, "task": "t9"})
    [('state_clicked', {'s': 2})]
    """
    if not isinstance(doc, dict):
        raise StudyError("the body is not a JSON object — send {\"kind\": ...}")
    raw = doc.get("events")
    if raw is None:
        raw = [{"kind": doc.get("kind"), "payload": doc.get("payload")}]
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_EVENTS:
        raise StudyError(f"'events' must list 1 to {MAX_EVENTS} events")
    events = []
    for ev in raw:
        if not isinstance(ev, dict):
            raise StudyError("an event is not a JSON object — send {\"kind\": ...}")
        kind, payload = ev.get("kind"), ev.get("payload")
        if not isinstance(kind, str) or not KIND.fullmatch(kind):
            raise StudyError(f"event kind {str(kind)[:40]!r} is not valid — use 1 to 64 "
                             "lower-case letters, digits, '_', '.', ':' or '-'")
        payload = {} if payload is None else payload
        if not isinstance(payload, dict):
            raise StudyError("'payload' must be a JSON object")
        if len(json.dumps(payload)) > MAX_PAYLOAD:
            raise StudyError(f"a payload is larger than {MAX_PAYLOAD // 1024} KiB — send less")
        events.append((kind, payload))
    return events


class BodyTooLarge(StudyError):
    """A request body over :data:`MAX_BODY`."""


def _json_body() -> Any:
    """The request's JSON, read only if its size is within :data:`MAX_BODY`."""
    if not request.is_json:
        raise StudyError("send the body as Content-Type: application/json")
    too_big = BodyTooLarge(f"the body is larger than {MAX_BODY // 1024} KiB — send fewer "
                           "events")
    if (request.content_length or 0) > MAX_BODY:
        raise too_big  # refused on its Content-Length, before a byte is read
    request.max_content_length = MAX_BODY  # a chunked body is cut off at the limit
    try:
        data = request.get_data(cache=True)
    except RequestEntityTooLarge:
        raise too_big from None
    if len(data) >= MAX_BODY:  # a chunked body that reached the limit (and was cut)
        raise too_big
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise StudyError("the body is not valid JSON") from None


def _study_error(exc: StudyError):
    if isinstance(exc, BodyTooLarge):
        return _error(413, str(exc))
    if isinstance(exc, UnknownParticipant):
        return _error(404, str(exc))
    return _error(503 if isinstance(exc, StudyLimitError) else 400, str(exc))


def code_link():
    """``before_request``: ``/?pid=CODE`` (a code typed by hand) goes to its link."""
    if request.path == "/" and "pid" in request.args:
        return redirect(link_path(quote(request.args["pid"], safe="")), code=302)
    return None


def remember_link(resp: Response) -> Response:
    """``after_request``: a valid link's page sets the browser's secret cookie."""
    secret, _, is_link = secret_from_url(request.path)
    if is_link and request.method == "GET" and resp.status_code == 200 and \
            current().log.pid_of(secret):
        set_secret_cookie(resp, secret)
    return resp


def new_participant():
    """``GET /study/new``: a new link (where the study hands them out)."""
    sc = current()
    if sc.participant() is not None:  # this browser holds a link already: that one
        return redirect(link_path(request_secret() or ""), code=302)
    if not sc.study.allow_generated_ids:
        return _error(404, "this study hands out no links — ask the researcher for yours")
    try:
        _, secret = sc.log.link()
    except StudyError as exc:
        return _study_error(exc)
    return set_secret_cookie(redirect(link_path(secret), code=302), secret)


def health():
    """``GET /study/health``."""
    return jsonify({"ok": True, "study": current().study.id})


def join():
    """``POST /study/join`` (see the module notes)."""
    return _join(current())


def event():
    """``POST /study/event``: events of the link's participant."""
    sc = current()
    pid = sc.participant()
    if pid is None:
        return _error(403, NO_SECRET)
    try:
        events = parse_event_request(_json_body())
        ids = sc.log.log_many(pid, events, source="http")  # filed under the current task
    except StudyError as exc:
        return _study_error(exc)
    return jsonify({"ok": True, "ids": ids})


#: (rule, endpoint, view, methods)
ROUTES = (("/study/new", "study_new", new_participant, ("GET",)),
          ("/study/health", "study_health", health, ("GET",)),
          ("/study/join", "study_join", join, ("POST",)),
          ("/study/event", "study_event", event, ("POST",)))


def register(server: Flask) -> None:
    """Add the study's routes and hooks to the Flask ``server``."""
    server.before_request(code_link)
    server.after_request(remember_link)
    for rule, endpoint, view, methods in ROUTES:
        server.add_url_rule(rule, endpoint, view, methods=list(methods))


def _join(sc: StudyContext):
    """``POST /study/join`` (see the module notes)."""
    try:
        doc = _json_body()
        if not isinstance(doc, dict) or "pid" in doc:
            raise StudyError("a participant id is not accepted here — the participant is "
                             "the one of the link's secret (X-Study-Secret, or none to get "
                             "a new link where the study allows it)")
        pid, secret = sc.participant(), None
        if pid is None:
            if request_secret() is not None or not sc.study.allow_generated_ids:
                return _error(403, NO_SECRET)
            pid, secret = sc.log.link()
        joined = sc.join(pid)
    except StudyError as exc:
        return _study_error(exc)
    current = sc.current_task(pid)
    task = current[1].id if current else None
    # no condition: its name is the researcher's, and telling it to a participant (or to
    # a client re-joining without cookies) invites comparing or re-rolling conditions
    body = {"ok": True, "pid": pid, "new": joined["new"], "task": task}
    if secret is None:
        return jsonify(body)
    return set_secret_cookie(jsonify({**body, "secret": secret, "link": link_path(secret)}),
                             secret)
