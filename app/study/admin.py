"""The admin page: participants in progress and done, per-task times, downloads.

Off unless the server was started with an admin token (``--admin-token`` or
``$STATESEER_ADMIN_TOKEN``), which must be strong (:func:`check_token_strength`: at least
16 characters, 8 of them different). Then every ``/study/admin...`` request must carry
it as the ``X-Study-Token`` header or ``Authorization: Bearer TOKEN`` — never in the URL,
where it would land in logs and browser history — or carry the admin cookie that the
login form (``POST /study/admin/login``) sets: an HMAC of the token, ``HttpOnly``,
``SameSite=Strict``. Everything else gets 403 (the login form, for a browser). Tokens are
compared in constant time (``hmac.compare_digest``).

``GET  /study/admin``                                 the overview (HTML, escaped)
``POST /study/admin/login``                           form field ``token`` -> cookie
``GET  /study/admin/events.csv``                      the whole interaction log
``GET  /study/admin/answers.csv``                     every answer
``GET  /study/admin/summary.csv``                     one row per participant and task
``GET  /study/admin/participants/PID/answers.csv``    one participant's answers
``GET  /study/admin/links.csv``                       every participant's link (secret!)
``POST /study/admin/links``                           ``{"pids": [...]}`` or ``{"n": 5}``
                                                      -> new links (JSON)

CSV cells are escaped against formula injection (:mod:`stateseer.core.csvsafe`).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any
from urllib.parse import quote

from flask import Flask, Response, abort, jsonify, redirect, render_template_string, request

from stateseer.app.study.context import StudyContext, current
from stateseer.app.study.export import (
    ANSWER_COLUMNS,
    EVENT_COLUMNS,
    SUMMARY_COLUMNS,
    answer_rows,
    event_rows,
    links_csv,
    participant_rows,
    summary_rows,
    to_csv,
)
from stateseer.app.study.spec import StudyError, check_pid

__all__ = ["MIN_TOKEN_CHARS", "MIN_TOKEN_DISTINCT", "check_token_strength", "given_token",
           "register", "session_value", "token_ok"]

MIN_TOKEN_CHARS = 16
MIN_TOKEN_DISTINCT = 8
COOKIE = "stateseer-admin"
MAX_NEW_LINKS = 1000
GENERATE = "python -c 'import secrets; print(secrets.token_urlsafe())'"
LOGIN = """<!doctype html>
<html><head><meta charset="utf-8"><title>stateseer study · admin</title>
<meta name="referrer" content="no-referrer"></head>
<body style="font-family: Helvetica, Arial, sans-serif; margin: 16px">
<p>This page needs the admin token.</p>
<form method="post" action="/study/admin/login">
<label>Admin token <input type="password" name="token" autocomplete="current-password">
</label> <button type="submit">Open</button></form></body></html>
"""

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>stateseer study {{ study.id }} · admin</title>
<meta name="referrer" content="no-referrer">
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 16px; color: #222; }
table { border-collapse: collapse; margin: 6px 0 18px; font-size: 13px; }
td, th { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f4f6; } .done { color: #2a7; } .progress { color: #b60; }
.answer { max-width: 520px; overflow-wrap: anywhere; } .muted { color: #888; }
</style></head><body>
<h2>Study {{ study.id }}{% if study.title %} · {{ study.title }}{% endif %}</h2>
<p>{{ participants|length }} participants: {{ n_done }} done, {{ participants|length - n_done }}
in progress · {{ study.n_tasks }} tasks each · {{ 'orders' if study.within else 'conditions' }}:
{% for c, n in counts %}{{ c }} ({{ n }}){% if not loop.last %}, {% endif %}{% endfor %}</p>
<p>Downloads: <a href="admin/events.csv">events.csv</a> ·
<a href="admin/answers.csv">answers.csv</a> ·
<a href="admin/summary.csv">summary.csv</a> ·
<a href="admin/links.csv">links.csv</a> ({{ n_links }} participant links: keep them
private, each one lets its holder answer as that participant)</p>
<h3>Participants</h3>
<table id="participants"><tr><th>participant</th><th>condition</th><th>assigned by</th>
<th>joined (UTC)</th><th>status</th><th>tasks done</th><th>last event (UTC)</th>
<th>answers</th></tr>
{% for p in participants %}<tr><td>{{ p.pid }}</td><td>{{ p.condition }}</td>
<td>{{ p.method }}</td><td>{{ p.joined_at }}</td>
<td class="{{ 'done' if p.status != 'in progress' else 'progress' }}">{{ p.status }}</td>
<td>{{ p.tasks_done }} / {{ study.n_tasks }}</td><td>{{ p.last_event or '' }}</td>
<td><a href="admin/participants/{{ p.pid_url }}/answers.csv">CSV</a></td></tr>
{% else %}<tr><td colspan="8" class="muted">nobody yet</td></tr>{% endfor %}
</table>
<h3>Tasks</h3>
<table id="tasks"><tr><th>participant</th><th>condition</th><th>#</th><th>task</th>
<th>status</th><th>seconds</th><th>events</th><th>timed out</th><th>answer</th></tr>
{% for r in summary %}<tr><td>{{ r.pid }}</td><td>{{ r.condition }}</td>
<td>{{ r.position + 1 }}</td><td>{{ r.task }}</td><td>{{ r.status }}</td>
<td>{{ '%.1f'|format(r.seconds) if r.seconds is not none else '' }}</td>
<td>{{ r.n_events }}</td><td>{{ 'yes' if r.timed_out else '' }}</td>
<td class="answer">{{ r.answer }}</td></tr>
{% else %}<tr><td colspan="9" class="muted">no task started yet</td></tr>{% endfor %}
</table></body></html>
"""


def check_token_strength(token: str | None) -> None:
    """Refuse an admin token that is short or of few different characters (None turns
    the page off).

    Examples
    --------
    >>> try:
    ...     check_token_strength("aaaaaaaaaaaaaaaaaaaa")
    ... except StudyError as exc:
    ...     print(str(exc)[:57])
    the admin token is weak (20 characters, 1 different); use
    """
    if token is None:
        return
    distinct = len(set(token))
    if len(token) < MIN_TOKEN_CHARS or distinct < MIN_TOKEN_DISTINCT or token != token.strip():
        raise StudyError(f"the admin token is weak ({len(token)} characters, {distinct} "
                         f"different); use at least {MIN_TOKEN_CHARS} characters with "
                         f"{MIN_TOKEN_DISTINCT} or more different ones — generate one: "
                         f"{GENERATE}")


def session_value(token: str) -> str:
    """The admin cookie's value for ``token`` (an HMAC: the token itself never leaves)."""
    return hmac.new(token.encode("utf-8"), b"stateseer-admin-session",
                    hashlib.sha256).hexdigest()


def token_ok(configured: str | None, given: str | None) -> bool:
    """Whether ``given`` is the configured token (constant-time; False when off).

    Examples
    --------
    >>> token_ok("s3cret-token-1", "s3cret-token-1"), token_ok("s3cret-token-1", "guess")
    (True, False)
    >>> token_ok(None, "")
    False
    """
    if not configured or not given:
        return False
    return hmac.compare_digest(configured.encode("utf-8"), given.encode("utf-8"))


def given_token() -> str | None:
    """The token a request carries (``X-Study-Token`` or ``Authorization: Bearer``); a
    token in the URL is not read."""
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[7:].strip()
    return request.headers.get("X-Study-Token")


def _authorised(sc: StudyContext) -> bool:
    if token_ok(sc.admin_token, given_token()):
        return True
    cookie = request.cookies.get(COOKIE)
    return bool(sc.admin_token and cookie) and hmac.compare_digest(
        session_value(sc.admin_token).encode(), cookie.encode("utf-8", "replace"))


def _guard(sc: StudyContext) -> None:
    if not sc.admin_token:
        abort(Response("the admin page is off — start `stateseer study` with --admin-token "
                       "(or $STATESEER_ADMIN_TOKEN)\n", status=404, mimetype="text/plain"))
    if not _authorised(sc):
        if "text/html" in request.headers.get("Accept", ""):
            abort(_private(Response(LOGIN, status=403, mimetype="text/html")))
        abort(Response("forbidden: this page needs the admin token (X-Study-Token header "
                       "or Authorization: Bearer; a token in the URL is not accepted)\n",
                       status=403, mimetype="text/plain"))


def _private(resp: Response) -> Response:
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def _csv(text: str, name: str) -> Response:
    return _private(Response(text, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{name}"'}))


def _admin() -> StudyContext:
    """The context, once the request carries the admin token (else the request ends)."""
    sc = current()
    _guard(sc)
    return sc


def admin_page():
    sc = _admin()
    conn = sc.log.reader()
    people = participant_rows(conn)
    for p in people:
        p["pid_url"] = quote(p["pid"], safe="")
        p["status"] = ("declined consent" if sc.declined(p["pid"]) else "done"
                       if p["tasks_done"] == sc.study.n_tasks else "in progress")
    groups = sorted({p["condition"] for p in people}) if sc.study.within \
        else list(sc.study.conditions)  # within subject: the orders of conditions
    counts = [(c, sum(p["condition"] == c for p in people)) for c in groups]
    html = render_template_string(  # autoescaped: every value is shown as text
        PAGE, study=sc.study, participants=people, summary=summary_rows(conn),
        counts=counts, n_done=sum(p["status"] != "in progress" for p in people),
        n_links=len(sc.log.links()))
    return _private(Response(html, mimetype="text/html"))


def admin_login():
    sc = current()
    if not sc.admin_token:
        _guard(sc)
    if not token_ok(sc.admin_token, request.form.get("token", "")):
        return _private(Response(LOGIN, status=403, mimetype="text/html"))
    resp = _private(redirect("/study/admin", code=303))
    resp.set_cookie(COOKIE, session_value(sc.admin_token), httponly=True,
                    samesite="Strict", secure=request.is_secure, path="/study/admin")
    return resp


def admin_links():
    sc = _admin()
    return _csv(links_csv(sc.log.links(), request.host_url), f"{sc.study.id}-links.csv")


def admin_new_links():
    sc = _admin()
    try:
        made = _new_links(sc, request.get_json(silent=True))
    except StudyError as exc:
        return _private(Response(str(exc) + "\n", status=400, mimetype="text/plain"))
    return _private(jsonify({"ok": True, "links": [
        {"pid": pid, "link": request.host_url.rstrip("/") + f"/p/{secret}/"}
        for pid, secret in made]}))


def admin_events():
    sc = _admin()
    return _csv(to_csv(event_rows(sc.log.reader()), EVENT_COLUMNS),
                f"{sc.study.id}-events.csv")


def admin_answers():
    sc = _admin()
    return _csv(to_csv(answer_rows(sc.log.reader()), ANSWER_COLUMNS),
                f"{sc.study.id}-answers.csv")


def admin_summary():
    sc = _admin()
    return _csv(to_csv(summary_rows(sc.log.reader()), SUMMARY_COLUMNS),
                f"{sc.study.id}-summary.csv")


def admin_participant(pid: str):
    sc = _admin()
    try:
        check_pid(pid)
    except StudyError as exc:
        abort(Response(str(exc) + "\n", status=400, mimetype="text/plain"))
    return _csv(to_csv(answer_rows(sc.log.reader(), pid), ANSWER_COLUMNS),
                f"{sc.study.id}-{pid}-answers.csv")


#: (rule, view, methods)
ROUTES = (("/study/admin", admin_page, ("GET",)),
          ("/study/admin/login", admin_login, ("POST",)),
          ("/study/admin/links.csv", admin_links, ("GET",)),
          ("/study/admin/links", admin_new_links, ("POST",)),
          ("/study/admin/events.csv", admin_events, ("GET",)),
          ("/study/admin/answers.csv", admin_answers, ("GET",)),
          ("/study/admin/summary.csv", admin_summary, ("GET",)),
          ("/study/admin/participants/<pid>/answers.csv", admin_participant, ("GET",)))


def register(server: Flask) -> None:
    """Add the admin routes to the Flask ``server``."""
    for rule, view, methods in ROUTES:
        server.add_url_rule(rule, view.__name__, view, methods=list(methods))


def _new_links(sc: StudyContext, doc: Any) -> list[tuple[str, str]]:
    """Links for ``{"pids": [...]}`` (existing ones kept) or ``{"n": N}`` fresh ids."""
    if isinstance(doc, dict) and isinstance(doc.get("pids"), list):
        pids = [check_pid(p) for p in doc["pids"]]
    elif isinstance(doc, dict) and isinstance(doc.get("n"), int) and \
            not isinstance(doc["n"], bool):
        pids = [None] * doc["n"]
    else:
        raise StudyError("send JSON {\"pids\": [\"P01\", ...]} or {\"n\": 5}")
    if not 1 <= len(pids) <= MAX_NEW_LINKS:
        raise StudyError(f"ask for 1 to {MAX_NEW_LINKS} links at a time")
    return [sc.log.link(p, prefix="p") for p in pids]
