"""HTTP routes of the study server (Flask, beside Dash's own).

``GET  /?pid=PID``     redirects to the participant's page ``/p/PID/``
``GET  /study/new``    a fresh participant id (when the study allows it)
``GET  /study/health`` ``{"ok": true, "study": ID}``
``POST /study/join``   ``{"pid"}`` -> ``{"pid", "condition", "task"}`` (assigns once)
``POST /study/event``  ``{"pid", "kind", "payload"?, "task"?}`` or ``{"pid", "events":
[{"kind", "payload"?}, ...]}`` -> ``200 {"ok": true, "ids": [...]}`` only after the
events are committed to the database; 400 for a bad request, 404 for a participant that
has not joined, 503 when the database cannot be written.

The JSON endpoints take ``Content-Type: application/json`` only, so a page of another
site cannot post to them with a plain form.
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from flask import Flask, jsonify, redirect, request

from .spec import StudyError, check_pid
from .store import UnknownParticipant

if TYPE_CHECKING:
    from .server import StudyContext

__all__ = ["parse_event_request", "register"]

KIND = re.compile(r"[a-z][a-z0-9_.:-]{0,63}")
MAX_BODY = 256 * 1024
MAX_PAYLOAD = 64 * 1024
MAX_EVENTS = 1000


def _error(status: int, message: str):
    resp = jsonify({"ok": False, "error": message})
    resp.status_code = status
    return resp


def parse_event_request(doc: Any, task_ids: set[str]
                        ) -> tuple[str, list[tuple[str, dict[str, Any]]], str | None]:
    """``(pid, [(kind, payload)], task)`` of an event request, or StudyError.

    Examples
    --------
    >>> parse_event_request({"pid": "P01", "kind": "state_clicked", "payload": {"s": 2}},
    ...                     {"t1"})
    ('P01', [('state_clicked', {'s': 2})], None)
    """
    import json

    if not isinstance(doc, dict):
        raise StudyError("the body is not a JSON object — send {\"pid\": ..., \"kind\": ...}")
    pid = check_pid(doc.get("pid"))
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
    task = doc.get("task")
    if task is not None and task not in task_ids:
        raise StudyError(f"task {str(task)[:40]!r} is not in this study — use one of "
                         f"{', '.join(sorted(task_ids))}")
    return pid, events, task


def _json_body() -> Any:
    if not request.is_json:
        raise StudyError("send the body as Content-Type: application/json")
    if (request.content_length or 0) > MAX_BODY:
        raise StudyError(f"the body is larger than {MAX_BODY // 1024} KiB — send fewer events")
    doc = request.get_json(silent=True)
    if doc is None:
        raise StudyError("the body is not valid JSON")
    return doc


def register(server: Flask, sc: StudyContext) -> None:
    """Add the study's routes to the Flask ``server``."""
    task_ids = {t.id for t in sc.study.tasks}

    @server.before_request
    def pid_link():
        if request.path == "/" and "pid" in request.args:
            return redirect(f"/p/{quote(request.args['pid'], safe='')}/", code=302)
        return None

    @server.route("/study/new")
    def new_participant():
        if not sc.study.allow_generated_ids:
            return _error(404, "this study hands out no ids — ask the researcher for yours")
        return redirect(f"/p/anon-{secrets.token_hex(4)}/", code=302)

    @server.route("/study/health")
    def health():
        return jsonify({"ok": True, "study": sc.study.id})

    @server.route("/study/join", methods=["POST"])
    def join():
        try:
            doc = _json_body()
            pid = check_pid(doc.get("pid") if isinstance(doc, dict) else None)
            joined = sc.join(pid)
        except StudyError as exc:
            return _error(400, str(exc))
        done = {r["task"] for r in sc.log.progress(pid) if r["submitted_at"]}
        task = next((t.id for t in sc.study.tasks if t.id not in done), None)
        return jsonify({"ok": True, "pid": pid, "condition": joined["condition"],
                        "new": joined["new"], "task": task})

    @server.route("/study/event", methods=["POST"])
    def event():
        try:
            pid, events, task = parse_event_request(_json_body(), task_ids)
        except StudyError as exc:
            return _error(400, str(exc))
        try:
            ids = sc.log.log_many(pid, events, task=task, source="http")
        except UnknownParticipant as exc:
            return _error(404, str(exc))
        except StudyError as exc:
            return _error(503, str(exc))
        return jsonify({"ok": True, "ids": ids})
