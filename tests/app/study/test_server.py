"""The study app without a browser: views per condition, pages, tasks, routes, admin."""

from __future__ import annotations

import csv
import io
import json

import pytest

from stateseer.app.study.spec import StudyError, parse_study
from tests.conftest import one_line

TOKEN = "admin-token-for-tests"


def _study(run, **extra):
    from stateseer.app.workflows.runview import RunView

    ids = [int(i) for i in RunView(run).traces["test"].rows[:3]]
    doc = {"study": "s1", "run": str(run), "conditions": {"full": "full",
                                                           "baseline": "baseline"},
           "tasks": [{"id": "why", "prompt": "Why is <b>this</b> wrong?", "open": ids[:2]},
                     {"id": "which", "prompt": "Which?", "time_limit_s": 1,
                      "answer": {"type": "choice", "options": ["yes", "no"]}},
                     {"id": "find", "prompt": "Find some.", "answer": "instances"}]}
    doc.update(extra)
    return parse_study(doc), ids


@pytest.fixture(scope="module")
def study_app(explored_run, tmp_path_factory):
    from stateseer.app.study.server import create_study_app

    study, ids = _study(explored_run)
    app = create_study_app(study, db=tmp_path_factory.mktemp("db") / "log.sqlite",
                           admin_token=TOKEN)
    app.test_ids = ids
    yield app
    app.study_context.log.close()


def link(app, pid):
    """The secret of ``pid``'s study link (made once)."""
    return app.study_context.log.link(pid)[1]


def _layout(client, pid, app=None):
    """The page of participant ``pid`` (through their link) as JSON."""
    secret = link(app, pid) if app is not None else pid
    r = client.get("/_dash-layout", headers={"Referer": f"http://localhost/p/{secret}/"})
    assert r.status_code == 200
    return json.loads(r.data)


def _find(node, cid):
    if isinstance(node, dict):
        if node.get("props", {}).get("id") == cid:
            return node
        for v in node.get("props", {}).values():
            hit = _find(v, cid)
            if hit:
                return hit
    elif isinstance(node, list):
        for v in node:
            hit = _find(v, cid)
            if hit:
                return hit
    return None


def _hidden(layout, cid=None, cls=None):
    """Whether the component (or an ancestor) has display: none."""
    def walk(node, hidden):
        if isinstance(node, list):
            for v in node:
                r = walk(v, hidden)
                if r is not None:
                    return r
            return None
        if not isinstance(node, dict):
            return None
        props = node.get("props", {})
        hidden = hidden or (props.get("style") or {}).get("display") == "none"
        if (cid and props.get("id") == cid) or \
                (cls and cls in str(props.get("className", "")).split()):
            return hidden
        for v in props.values():
            r = walk(v, hidden)
            if r is not None:
                return r
        return None

    return walk(layout, False)


def test_restrict_views_on_the_real_explorer(explored_run):
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.registry import REGISTRY
    from stateseer.app.study.views import restrict_views

    layout = REGISTRY.layout(ExplorerContext.load(explored_run))
    full = json.loads(json.dumps(restrict_views(layout, ["diagram", "card", "patterns",
                                                         "table", "trace_text",
                                                         "trace_chart", "input"]).to_plotly_json(),
                                 default=lambda o: o.to_plotly_json()))
    for cls in ("diagram-panel", "side-panel", "table-panel", "trace-panel", "input-box"):
        assert _hidden(full, cls=cls) is False, cls
    base = json.loads(json.dumps(restrict_views(layout, ["table", "trace_text", "attribution"]),
                                 default=lambda o: o.to_plotly_json()))
    for cls in ("diagram-panel", "side-panel", "input-box"):
        assert _hidden(base, cls=cls) is True, cls
    for cid in ("diagram", "state-card", "trace-chart-box", "dl-figure"):
        assert _hidden(base, cid=cid) is True, cid
    for cid in ("table", "trace-tokens", "trace-title"):
        assert _hidden(base, cid=cid) is False, cid
    only_patterns = json.loads(json.dumps(restrict_views(layout, ["patterns", "table"]),
                                          default=lambda o: o.to_plotly_json()))
    tabs = _find(only_patterns, "side-tabs")
    assert tabs["props"]["value"] == "influential"  # the card tab is hidden
    assert getattr(layout.children[0], "style", None) is None  # the input is not changed
    with pytest.raises(ValueError):
        restrict_views(layout, ["diagramm"])


def test_participants_get_a_stored_condition_and_their_views(study_app):
    client = study_app.server.test_client()
    first = _layout(client, "P01", study_app)
    second = _layout(client, "P02", study_app)
    info1 = _find(first, "study-info")["props"]["data"]
    info2 = _find(second, "study-info")["props"]["data"]
    log = study_app.study_context.log
    assert (log.condition_of("P01"), log.condition_of("P02")) == ("full", "baseline")
    assert "condition" not in info1 and "condition" not in info2  # never sent to the page
    assert _hidden(first, cls="diagram-panel") is False
    assert _hidden(second, cls="diagram-panel") is None  # not rendered at all
    assert "no-states" in _find(second, "study-page")["props"]["className"]
    # the prompt is a text child (escaped by React), never HTML
    assert _find(first, "study-prompt")["props"]["children"] == "Why is <b>this</b> wrong?"
    # the task's first instance is opened
    sel = _find(first, "selection")["props"]["data"]
    rows = study_app.study_context.rows_by_id("test")
    assert sel["row"] == rows[study_app.test_ids[0]]
    # a reload keeps the condition, the task and its start
    again = _find(_layout(client, "P01", study_app), "study-info")["props"]["data"]
    assert log.condition_of("P01") == "full" and again["task"] == "why"
    assert again["elapsed"] >= info1["elapsed"]
    kinds = [r[0] for r in study_app.study_context.log.read(
        "SELECT kind FROM events WHERE pid = 'P01' ORDER BY id")]
    assert kinds == ["participant_joined", "task_started", "page_opened", "page_opened"]


def test_bad_links_and_landing(study_app):
    client = study_app.server.test_client()
    for bad_link in ("%3Cscript%3E", "P01", "x" * 22):  # not a secret, a bare id, a guess
        bad = _layout(client, bad_link)
        assert "researcher" in _find(bad, "study-error")["props"]["children"]
        assert _find(bad, "study-info") is None
    landing = json.loads(client.get("/_dash-layout",
                                    headers={"Referer": "http://localhost/"}).data)
    assert _find(landing, "study-pid-input") is not None
    r = client.get("/?pid=P%2F..%2Fx")
    assert r.status_code == 302 and r.headers["Location"].endswith("/p/P%2F..%2Fx/")
    r = client.get("/study/new")
    secret = r.headers["Location"].split("/p/")[1].strip("/")
    assert r.status_code == 302 and study_app.study_context.log.pid_of(secret).startswith("anon-")


def _submit(sc, info, **widgets):
    """Submit as the page of ``info`` would (the participant as the server knows them)."""
    from stateseer.app.study.server import submit_answer

    kw = {"text": None, "choice": None, "ids": None, "timed_out": False, **widgets}
    return submit_answer(sc, info["pid"], info["task"], **kw)


def test_tasks_advance_on_valid_answers_only(study_app):
    sc = study_app.study_context
    client = study_app.server.test_client()
    info = _find(_layout(client, "P03", study_app), "study-info")["props"]["data"]
    msg, href = _submit(sc, info, text="  ", choice=None, ids=None, timed_out=False)
    assert "empty" in msg
    msg, href = _submit(sc, info, text="<img src=x onerror=alert(1)>", choice=None,
                              ids=None, timed_out=False)
    assert href == f"/p/{link(study_app, 'P03')}/?done=why"
    info = _find(_layout(client, "P03", study_app), "study-info")["props"]["data"]
    assert info["task"] == "which" and info["limit"] == 1
    # time is up: whatever is there is stored, flagged
    import time

    time.sleep(1.1)
    _, href = _submit(sc, info, text=None, choice=None, ids=None, timed_out=True)
    assert href.endswith("/?done=which")
    info = _find(_layout(client, "P03", study_app), "study-info")["props"]["data"]
    msg, _ = _submit(sc, info, text=None, choice=None, ids="999999", timed_out=False)
    assert "does not exist" in msg
    _, href = _submit(sc, info, text=None, choice=None,
                            ids=f"{study_app.test_ids[2]}, {study_app.test_ids[0]}",
                            timed_out=False)
    done = _layout(client, "P03", study_app)
    assert _find(done, "study-done") is not None and _find(done, "study-info") is None
    rows = {r["task"]: r for r in sc.log.progress("P03")}
    assert json.loads(rows["why"]["answer"])["value"] == "<img src=x onerror=alert(1)>"
    assert rows["which"]["timed_out"] == 1
    assert json.loads(rows["which"]["answer"])["invalid"].startswith("no option")
    assert json.loads(rows["find"]["answer"])["value"] == [study_app.test_ids[2],
                                                           study_app.test_ids[0]]


def test_an_early_time_out_claim_is_ignored(study_app):
    from dash import no_update

    sc = study_app.study_context
    client = study_app.server.test_client()
    info = _find(_layout(client, "P04", study_app), "study-info")["props"]["data"]
    assert _submit(sc, info, text="x", choice=None, ids=None, timed_out=True) == \
        (no_update, no_update)


def test_event_endpoint(study_app):
    client = study_app.server.test_client()
    r = client.post("/study/join", json={})  # no link: a new participant, with its link
    assert r.status_code == 200 and "condition" not in r.json
    pid, secret = r.json["pid"], r.json["secret"]
    assert r.json["link"] == f"/p/{secret}/"
    hdr = {"X-Study-Secret": secret}
    r = client.post("/study/event", json={"kind": "state_clicked", "payload": {"state": 2}},
                    headers=hdr)
    assert r.status_code == 200 and r.json["ok"] and len(r.json["ids"]) == 1
    study_app.study_context.log.start_task(pid, "which", 0)  # the server's current task
    for named in ("why", "nope", None):  # a task the page names is never believed
        body = {"events": [{"kind": "a"}, {"kind": "b"}], **({"task": named} if named else {})}
        r = client.post("/study/event", json=body, headers=hdr)
        assert r.status_code == 200 and len(r.json["ids"]) == 2
        rows = study_app.study_context.log.read(
            "SELECT pid, kind, task, source FROM events WHERE id IN (?, ?)", r.json["ids"])
        assert [tuple(x) for x in rows] == [(pid, k, "which", "http") for k in "ab"]
    unjoined = link(study_app, "never-opened")
    bare = study_app.server.test_client(use_cookies=False)  # only the headers below count
    for body, headers, status, needle in [
        ({"kind": "x"}, {}, 403, "no valid participant link"),
        ({"kind": "x"}, {"X-Study-Secret": "x" * 22}, 403, "no valid participant link"),
        ({"kind": "x"}, {"X-Study-Secret": unjoined}, 404, "has not joined"),
        ({"kind": "Bad Kind"}, hdr, 400, "event kind"),
        ({"kind": "x", "payload": [1]}, hdr, 400, "must be a JSON object"),
        ({"kind": "x", "payload": {"a": "x" * 70000}}, hdr, 400, "larger than"),
    ]:
        r = bare.post("/study/event", json=body, headers=headers)
        assert r.status_code == status and needle in one_line(StudyError(r.json["error"]))
    r = client.post("/study/event", data="kind=x", headers=hdr,
                    content_type="application/x-www-form-urlencoded")
    assert r.status_code == 400 and "application/json" in r.json["error"]


def test_admin_page_needs_the_token(study_app):
    client = study_app.server.test_client()
    secret = client.post("/study/join", json={}).json["secret"]
    sc = study_app.study_context
    pid = sc.log.pid_of(secret)
    sc.log.start_task(pid, "why", 0)
    sc.log.submit(pid, "why", {"type": "text", "value": "<script>alert(1)</script>"})
    for url in ("/study/admin", "/study/admin/events.csv", "/study/admin/answers.csv",
                "/study/admin/summary.csv", f"/study/admin/participants/{pid}/answers.csv",
                "/study/admin/links.csv"):
        assert client.get(url).status_code == 403, url
        assert client.get(url, headers={"X-Study-Token": "wrong" + TOKEN}).status_code == 403
        assert client.get(url + "?token=" + TOKEN).status_code == 403  # never in the URL
        assert client.get(url, headers={"X-Study-Token": TOKEN}).status_code == 200, url
    r = client.get("/study/admin", headers={"Authorization": f"Bearer {TOKEN}"})
    page = r.data.decode()
    assert r.headers["Cache-Control"] == "no-store"
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert pid in page and "in progress" in page and "token=" not in page
    hdr = {"X-Study-Token": TOKEN}
    r = client.get(f"/study/admin/participants/{pid}/answers.csv", headers=hdr)
    rows = list(csv.DictReader(io.StringIO(r.data.decode())))
    assert rows[0]["answer"] == "<script>alert(1)</script>" and rows[0]["task"] == "why"
    assert "attachment" in r.headers["Content-Disposition"]
    r = client.get("/study/admin/summary.csv", headers=hdr)
    summary = list(csv.DictReader(io.StringIO(r.data.decode())))
    assert {"pid", "task", "seconds", "n_events", "answer"} <= set(summary[0])
    links = list(csv.DictReader(io.StringIO(
        client.get("/study/admin/links.csv", headers=hdr).data.decode())))
    assert {r["pid"]: r["link"] for r in links}[pid] == f"http://localhost/p/{secret}/"
    r = client.post("/study/admin/links", json={"pids": ["L01"]}, headers=hdr)
    assert r.status_code == 200 and r.json["links"][0]["pid"] == "L01"
    assert r.json["links"][0]["link"].endswith(f"/p/{sc.log.secret_of('L01')}/")
    assert client.post("/study/admin/links", json={"n": 10**6}, headers=hdr).status_code == 400


def test_admin_login_sets_a_cookie_not_the_token(study_app):
    client = study_app.server.test_client()
    r = client.get("/study/admin", headers={"Accept": "text/html"})
    assert r.status_code == 403 and b'name="token"' in r.data  # the login form
    r = client.post("/study/admin/login", data={"token": TOKEN[:-1]})
    assert r.status_code == 403
    r = client.post("/study/admin/login", data={"token": TOKEN})
    assert r.status_code == 303
    cookie = r.headers["Set-Cookie"]
    assert TOKEN not in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/study/admin").status_code == 200
    assert client.get("/study/admin/events.csv").status_code == 200


@pytest.mark.parametrize("token", ["short", "aaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababab",
                                   "0123456789012345 "])
def test_weak_admin_tokens_are_refused(explored_run, tmp_path, token):
    from stateseer.app.study.server import create_study_app

    study, _ = _study(explored_run)
    with pytest.raises(StudyError) as err:
        create_study_app(study, db=tmp_path / "a.sqlite", admin_token=token)
    assert "secrets.token_urlsafe()" in one_line(err.value)


def test_admin_is_off_without_a_token(explored_run, tmp_path):
    from stateseer.app.study.server import create_study_app

    study, _ = _study(explored_run)
    app = create_study_app(study, db=tmp_path / "b.sqlite")
    try:
        r = app.server.test_client().get("/study/admin", headers={"X-Study-Token": ""})
        assert r.status_code == 404 and b"--admin-token" in r.data
    finally:
        app.study_context.log.close()


def test_study_checked_against_the_run(explored_run, tmp_path):
    from stateseer.app.study.server import create_study_app

    study, _ = _study(explored_run, tasks=[{"prompt": "?", "open": [10**9]}])
    with pytest.raises(StudyError) as err:
        create_study_app(study, db=tmp_path / "c.sqlite")
    assert "opens instance id 1000000000" in one_line(err.value)
    study = parse_study({"study": "s1", "run": str(tmp_path / "nope"),
                         "tasks": [{"prompt": "?"}]})
    with pytest.raises(StudyError) as err:
        create_study_app(study, db=tmp_path / "d.sqlite")
    assert "is not a stateseer run" in one_line(err.value)


def test_study_command_binds_to_localhost_by_default():
    from stateseer.app.cli.main import build_parser

    args = build_parser().parse_args(["study", "s.json"])
    assert args.host == "127.0.0.1" and args.admin_token is None and args.db is None


def test_keyed_answers_are_graded_on_submission_and_exported(explored_run, tmp_path):
    from stateseer.app.study.export import answer_rows
    from stateseer.app.study.server import create_study_app
    from stateseer.app.study.store import connect_log
    from stateseer.app.workflows.runview import RunView

    ids = [int(i) for i in RunView(explored_run).traces["test"].rows[:3]]
    study = parse_study({"study": "k", "run": str(explored_run), "tasks": [
        {"id": "which", "prompt": "Which?", "key": "yes",
         "answer": {"type": "choice", "options": ["yes", "no"]}},
        {"id": "find", "prompt": "Find some.", "answer": "instances", "key": ids[:2]},
        {"id": "state", "prompt": "Which states?", "answer": "states", "key": [1, 2]}]})
    app = create_study_app(study, db=tmp_path / "k.sqlite")
    try:
        sc, client = app.study_context, app.server.test_client()
        for widgets in ({"choice": "no"}, {"ids": f"{ids[0]}, {ids[2]}"}, {"ids": "1 2"}):
            info = _find(_layout(client, "P01", app), "study-info")["props"]["data"]
            assert "key" not in info
            msg, href = _submit(sc, info, **widgets)
            assert href.endswith(f"?done={info['task']}"), msg
        conn = connect_log(tmp_path / "k.sqlite")
        got = {a["task"]: (a["correct"], a["precision"], a["recall"])
               for a in answer_rows(conn)}
        conn.close()
        assert got == {"which": (False, None, None), "find": (False, 0.5, 0.5),
                       "state": (True, 1.0, 1.0)}
    finally:
        sc.log.close()
    bad = parse_study({"study": "k", "run": str(explored_run), "tasks": [
        {"prompt": "?", "answer": "states", "key": [999]}]})
    with pytest.raises(StudyError) as err:
        create_study_app(bad, db=tmp_path / "bad.sqlite")
    assert "the key of task 't1' names state 999" in one_line(err.value)
