"""The admin page: participants in progress and done, per-task times, downloads.

Off unless the server was started with an admin token (``--admin-token`` or
``$STATESEER_ADMIN_TOKEN``); then every ``/study/admin...`` request must carry it, as the
``X-Study-Token`` header, ``Authorization: Bearer TOKEN`` or ``?token=TOKEN``, and is
refused with 403 otherwise. Tokens are compared in constant time (``hmac.compare_digest``).

``GET /study/admin``                                  the overview (HTML, escaped)
``GET /study/admin/events.csv``                       the whole interaction log
``GET /study/admin/answers.csv``                      every answer
``GET /study/admin/summary.csv``                      one row per participant and task
``GET /study/admin/participants/PID/answers.csv``     one participant's answers
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING
from urllib.parse import quote

from flask import Flask, Response, abort, render_template_string, request

from .export import (
    ANSWER_COLUMNS,
    EVENT_COLUMNS,
    SUMMARY_COLUMNS,
    answer_rows,
    event_rows,
    participant_rows,
    summary_rows,
    to_csv,
)
from .spec import StudyError, check_pid

if TYPE_CHECKING:
    from .server import StudyContext

__all__ = ["MIN_TOKEN_CHARS", "check_token_strength", "given_token", "register", "token_ok"]

MIN_TOKEN_CHARS = 12

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
in progress · {{ study.tasks|length }} tasks · conditions:
{% for c, n in counts %}{{ c }} ({{ n }}){% if not loop.last %}, {% endif %}{% endfor %}</p>
<p>Downloads: <a href="admin/events.csv{{ q }}">events.csv</a> ·
<a href="admin/answers.csv{{ q }}">answers.csv</a> ·
<a href="admin/summary.csv{{ q }}">summary.csv</a></p>
<h3>Participants</h3>
<table id="participants"><tr><th>participant</th><th>condition</th><th>assigned by</th>
<th>joined (UTC)</th><th>status</th><th>tasks done</th><th>last event (UTC)</th>
<th>answers</th></tr>
{% for p in participants %}<tr><td>{{ p.pid }}</td><td>{{ p.condition }}</td>
<td>{{ p.method }}</td><td>{{ p.joined_at }}</td>
<td class="{{ 'done' if p.tasks_done == study.tasks|length else 'progress' }}">
{{ 'done' if p.tasks_done == study.tasks|length else 'in progress' }}</td>
<td>{{ p.tasks_done }} / {{ study.tasks|length }}</td><td>{{ p.last_event or '' }}</td>
<td><a href="admin/participants/{{ p.pid_url }}/answers.csv{{ q }}">CSV</a></td></tr>
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
    """Refuse an admin token too short to guess (None turns the page off)."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise StudyError(f"the admin token has {len(token)} characters; use at least "
                         f"{MIN_TOKEN_CHARS} (e.g. python -c 'import secrets; "
                         "print(secrets.token_urlsafe())')")


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
    """The token a request carries (header, bearer or ``?token=``)."""
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[7:].strip()
    return request.headers.get("X-Study-Token") or request.args.get("token")


def _guard(sc: StudyContext) -> None:
    if not sc.admin_token:
        abort(Response("the admin page is off — start `stateseer study` with --admin-token "
                       "(or $STATESEER_ADMIN_TOKEN)\n", status=404, mimetype="text/plain"))
    if not token_ok(sc.admin_token, given_token()):
        abort(Response("forbidden: this page needs the admin token (X-Study-Token header, "
                       "Authorization: Bearer, or ?token=)\n", status=403,
                       mimetype="text/plain"))


def _private(resp: Response) -> Response:
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def _csv(text: str, name: str) -> Response:
    return _private(Response(text, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{name}"'}))


def register(server: Flask, sc: StudyContext) -> None:
    """Add the admin routes to the Flask ``server``."""
    sid = sc.study.id

    @server.route("/study/admin")
    def admin_page():
        _guard(sc)
        conn = sc.log.reader()
        people = participant_rows(conn)
        for p in people:
            p["pid_url"] = quote(p["pid"], safe="")
        counts = [(c, sum(p["condition"] == c for p in people)) for c in sc.study.conditions]
        token = request.args.get("token")
        html = render_template_string(  # autoescaped: every value is shown as text
            PAGE, study=sc.study, participants=people, summary=summary_rows(conn),
            counts=counts, n_done=sum(p["tasks_done"] == len(sc.study.tasks) for p in people),
            q=f"?token={quote(token, safe='')}" if token else "")
        return _private(Response(html, mimetype="text/html"))

    @server.route("/study/admin/events.csv")
    def admin_events():
        _guard(sc)
        return _csv(to_csv(event_rows(sc.log.reader()), EVENT_COLUMNS), f"{sid}-events.csv")

    @server.route("/study/admin/answers.csv")
    def admin_answers():
        _guard(sc)
        return _csv(to_csv(answer_rows(sc.log.reader()), ANSWER_COLUMNS), f"{sid}-answers.csv")

    @server.route("/study/admin/summary.csv")
    def admin_summary():
        _guard(sc)
        return _csv(to_csv(summary_rows(sc.log.reader()), SUMMARY_COLUMNS),
                    f"{sid}-summary.csv")

    @server.route("/study/admin/participants/<pid>/answers.csv")
    def admin_participant(pid: str):
        _guard(sc)
        try:
            check_pid(pid)
        except StudyError as exc:
            abort(Response(str(exc) + "\n", status=400, mimetype="text/plain"))
        return _csv(to_csv(answer_rows(sc.log.reader(), pid), ANSWER_COLUMNS),
                    f"{sid}-{pid}-answers.csv")
