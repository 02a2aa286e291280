"""The study app without a browser: views per condition, pages, tasks, routes, admin."""

from __future__ import annotations

import csv
import io
import json

import pytest

from app.study.spec import StudyError, parse_study
from tests.conftest import one_line

TOKEN = "admin-token-for-tests"


def _study(run, **extra):
    from app.data import RunData

    ids = [int(i) for i in RunData(run).traces["test"].rows[:3]]
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
    from app.study.server import create_study_app

    study, ids = _study(explored_run)
    app = create_study_app(study, db=tmp_path_factory.mktemp("db") / "log.sqlite",
                           admin_token=TOKEN)
    app.test_ids = ids
    yield app
    app.study_context.log.close()


def _layout(client, pid):
    r = client.get("/_dash-layout", headers={"Referer": f"http://localhost/p/{pid}/"})
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
    from app.data import RunData
    from app.layout import build_layout
    from app.study.views import restrict_views

    layout = build_layout(RunData(explored_run))
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
    first = _layout(client, "P01")
    second = _layout(client, "P02")
    info1 = _find(first, "study-info")["props"]["data"]
    info2 = _find(second, "study-info")["props"]["data"]
    assert (info1["condition"], info2["condition"]) == ("full", "baseline")
    assert _hidden(first, cls="diagram-panel") is False
    assert _hidden(second, cls="diagram-panel") is True
    assert "no-states" in _find(second, "study-page")["props"]["className"]
    # the prompt is a text child (escaped by React), never HTML
    assert _find(first, "study-prompt")["props"]["children"] == "Why is <b>this</b> wrong?"
    # the task's first instance is opened
    sel = _find(first, "selection")["props"]["data"]
    rows = study_app.study_context.rows_by_id("test")
    assert sel["row"] == rows[study_app.test_ids[0]]
    # a reload keeps the condition, the task and its start
    again = _find(_layout(client, "P01"), "study-info")["props"]["data"]
    assert again["condition"] == "full" and again["task"] == "why"
    assert again["elapsed"] >= info1["elapsed"]
    kinds = [r[0] for r in study_app.study_context.log.read(
        "SELECT kind FROM events WHERE pid = 'P01' ORDER BY id")]
    assert kinds == ["participant_joined", "task_started", "page_opened", "page_opened"]


def test_bad_links_and_landing(study_app):
    client = study_app.server.test_client()
    bad = _layout(client, "%3Cscript%3E")
    assert "not valid" in _find(bad, "study-error")["props"]["children"]
    assert _find(bad, "study-info") is None
    landing = json.loads(client.get("/_dash-layout",
                                    headers={"Referer": "http://localhost/"}).data)
    assert _find(landing, "study-pid-input") is not None
    r = client.get("/?pid=P%2F..%2Fx")
    assert r.status_code == 302 and r.headers["Location"].endswith("/p/P%2F..%2Fx/")
    r = client.get("/study/new")
    assert r.status_code == 302 and "/p/anon-" in r.headers["Location"]


def test_tasks_advance_on_valid_answers_only(study_app):
    from app.study.server import submit_answer

    sc = study_app.study_context
    client = study_app.server.test_client()
    info = _find(_layout(client, "P03"), "study-info")["props"]["data"]
    msg, href = submit_answer(sc, info, text="  ", choice=None, ids=None, timed_out=False)
    assert "empty" in msg
    msg, href = submit_answer(sc, info, text="<img src=x onerror=alert(1)>", choice=None,
                              ids=None, timed_out=False)
    assert href == "/p/P03/?done=why"
    info = _find(_layout(client, "P03"), "study-info")["props"]["data"]
    assert info["task"] == "which" and info["limit"] == 1
    # time is up: whatever is there is stored, flagged
    import time

    time.sleep(1.1)
    _, href = submit_answer(sc, info, text=None, choice=None, ids=None, timed_out=True)
    assert href == "/p/P03/?done=which"
    info = _find(_layout(client, "P03"), "study-info")["props"]["data"]
    msg, _ = submit_answer(sc, info, text=None, choice=None, ids="999999", timed_out=False)
    assert "does not exist" in msg
    _, href = submit_answer(sc, info, text=None, choice=None,
                            ids=f"{study_app.test_ids[2]}, {study_app.test_ids[0]}",
                            timed_out=False)
    done = _layout(client, "P03")
    assert _find(done, "study-done") is not None and _find(done, "study-info") is None
    rows = {r["task"]: r for r in sc.log.progress("P03")}
    assert json.loads(rows["why"]["answer"])["value"] == "<img src=x onerror=alert(1)>"
    assert rows["which"]["timed_out"] == 1
    assert json.loads(rows["which"]["answer"])["invalid"].startswith("no option")
    assert json.loads(rows["find"]["answer"])["value"] == [study_app.test_ids[2],
                                                           study_app.test_ids[0]]


def test_an_early_time_out_claim_is_ignored(study_app):
    from dash import no_update

    from app.study.server import submit_answer

    sc = study_app.study_context
    client = study_app.server.test_client()
    info = _find(_layout(client, "P04"), "study-info")["props"]["data"]
    assert submit_answer(sc, info, text="x", choice=None, ids=None, timed_out=True) == \
        (no_update, no_update)


def test_event_endpoint(study_app):
    client = study_app.server.test_client()
    r = client.post("/study/join", json={"pid": "H01"})
    assert r.status_code == 200 and r.json["condition"] in ("full", "baseline")
    r = client.post("/study/event", json={"pid": "H01", "kind": "state_clicked",
                                          "payload": {"state": 2}})
    assert r.status_code == 200 and r.json["ok"] and len(r.json["ids"]) == 1
    r = client.post("/study/event", json={"pid": "H01", "task": "which",
                                          "events": [{"kind": "a"}, {"kind": "b"}]})
    assert r.status_code == 200 and len(r.json["ids"]) == 2
    rows = study_app.study_context.log.read(
        "SELECT kind, task, source FROM events WHERE id IN (?, ?)", r.json["ids"])
    assert [tuple(x) for x in rows] == [("a", "which", "http"), ("b", "which", "http")]
    for body, status, needle in [
        ({"pid": "nobody", "kind": "x"}, 404, "has not joined"),
        ({"pid": "bad id", "kind": "x"}, 400, "not valid"),
        ({"pid": "H01", "kind": "Bad Kind"}, 400, "event kind"),
        ({"pid": "H01", "kind": "x", "payload": [1]}, 400, "must be a JSON object"),
        ({"pid": "H01", "kind": "x", "task": "nope"}, 400, "not in this study"),
        ({"pid": "H01", "kind": "x", "payload": {"a": "x" * 70000}}, 400, "larger than"),
    ]:
        r = client.post("/study/event", json=body)
        assert r.status_code == status and needle in one_line(StudyError(r.json["error"]))
    r = client.post("/study/event", data="pid=H01&kind=x",
                    content_type="application/x-www-form-urlencoded")
    assert r.status_code == 400 and "application/json" in r.json["error"]


def test_admin_page_needs_the_token(study_app):
    client = study_app.server.test_client()
    client.post("/study/join", json={"pid": "A01"})
    sc = study_app.study_context
    sc.log.start_task("A01", "why", 0)
    sc.log.submit("A01", "why", {"type": "text", "value": "<script>alert(1)</script>"})
    for url in ("/study/admin", "/study/admin/events.csv", "/study/admin/answers.csv",
                "/study/admin/summary.csv", "/study/admin/participants/A01/answers.csv"):
        assert client.get(url).status_code == 403, url
        assert client.get(url, headers={"X-Study-Token": "wrong" + TOKEN}).status_code == 403
        assert client.get(url + "?token=" + TOKEN[:-1]).status_code == 403
        assert client.get(url, headers={"X-Study-Token": TOKEN}).status_code == 200, url
    r = client.get("/study/admin", headers={"Authorization": f"Bearer {TOKEN}"})
    page = r.data.decode()
    assert r.headers["Cache-Control"] == "no-store"
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "A01" in page and "in progress" in page
    r = client.get(f"/study/admin/participants/A01/answers.csv?token={TOKEN}")
    rows = list(csv.DictReader(io.StringIO(r.data.decode())))
    assert rows[0]["answer"] == "<script>alert(1)</script>" and rows[0]["task"] == "why"
    assert "attachment" in r.headers["Content-Disposition"]
    r = client.get(f"/study/admin/summary.csv?token={TOKEN}")
    summary = list(csv.DictReader(io.StringIO(r.data.decode())))
    assert {"pid", "task", "seconds", "n_events", "answer"} <= set(summary[0])


def test_admin_is_off_without_a_token_and_refuses_weak_ones(explored_run, tmp_path):
    from app.study.server import create_study_app

    study, _ = _study(explored_run)
    with pytest.raises(StudyError) as err:
        create_study_app(study, db=tmp_path / "a.sqlite", admin_token="short")
    assert "at least 12" in one_line(err.value)
    app = create_study_app(study, db=tmp_path / "b.sqlite")
    try:
        r = app.server.test_client().get("/study/admin", headers={"X-Study-Token": ""})
        assert r.status_code == 404 and b"--admin-token" in r.data
    finally:
        app.study_context.log.close()


def test_study_checked_against_the_run(explored_run, tmp_path):
    from app.study.server import create_study_app

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
    from app.cli import build_parser

    args = build_parser().parse_args(["study", "s.json"])
    assert args.host == "127.0.0.1" and args.admin_token is None and args.db is None
