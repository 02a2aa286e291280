"""Study mode in a real browser: two participants, two conditions, two tasks, the log."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.browser.conftest import study_app_for

pytestmark = pytest.mark.browser

EVIL = "<img src=x onerror=\"window.__pwned=1\"> it flips at 'but'"


def _wait(pred, timeout: float = 20, what: str = "condition") -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _idle(driver, timeout: float = 40) -> None:
    _wait(lambda: not driver.execute_script(
        "return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length"),
        timeout, "callbacks to settle")


def _saved(dash_duo) -> int:
    text = dash_duo.find_element("#study-saved").text
    return int(text.split()[1]) if text.startswith("✓") else 0


def _saved_more(dash_duo, before: int) -> int:
    """Wait until the page shows more acknowledged interactions than ``before``."""
    _wait(lambda: _saved(dash_duo) > before, 15, "the server's acknowledgement")
    return _saved(dash_duo)


def _open(dash_duo, app, pid: str) -> str:
    """Open ``pid``'s study link (typed as a code on the landing page); its secret."""
    secret = app.study_context.log.link(pid)[1]
    dash_duo.driver.get(f"{dash_duo.server_url}/?pid={secret}")  # redirects to /p/SECRET/
    assert dash_duo.driver.current_url.endswith(f"/p/{secret}/")
    dash_duo.wait_for_element("#study-prompt", timeout=20)
    dash_duo.wait_for_element("#table td", timeout=20)
    _idle(dash_duo.driver)
    return secret


def _submit_and_wait(dash_duo, next_prompt: str | None) -> None:
    dash_duo.find_element("#study-submit").click()
    if next_prompt is None:
        dash_duo.wait_for_element("#study-done", timeout=20)
    else:
        dash_duo.wait_for_text_to_equal("#study-prompt", next_prompt, timeout=20)
        _idle(dash_duo.driver)


def _tap_state(driver, state: int) -> None:
    """Tap a node the way cytoscape does for a click (the explorer's own tests click)."""
    _wait(lambda: driver.execute_script(
        "const r = document.querySelector('#diagram');"
        "const el = r && [r, ...r.querySelectorAll('*')].find(d => d._cyreg);"
        f"if (!el || el._cyreg.cy.$('#s{state}').empty()) return false;"
        f"el._cyreg.cy.$('#s{state}').emit('tap'); return true;"), 15, f"state {state}")


@pytest.fixture
def study_app(explored_run, tmp_path):
    app = study_app_for(explored_run, tmp_path / "log.sqlite", 2, lambda ids: {
        "study": "browser", "title": "Browser study", "run": str(explored_run),
        "conditions": {"full": "full", "baseline": "baseline"},
        "assignment": {"method": "counterbalanced"},
        "tasks": [{"id": "why", "prompt": "Why is the first review classified as it is?",
                   "open": ids},
                  {"id": "which", "prompt": "Is the model right more often than not?",
                   "answer": {"type": "choice", "options": ["yes", "no"]},
                   "time_limit_s": 600}]})
    yield app
    app.study_context.log.close()


def test_two_participants_two_conditions_two_tasks(dash_duo, study_app):
    dash_duo.start_server(study_app)
    d = dash_duo.driver
    db = study_app.study_context.log.path

    # -- P01: first arrival, counterbalanced into "full": every view -------------------------
    _open(dash_duo, study_app, "P01")
    assert dash_duo.find_element("#diagram").is_displayed()
    assert dash_duo.find_element("#trace-tokens .chip").is_displayed()  # the task's instance
    _wait(lambda: dash_duo.find_element("#study-timer").text not in ("", "00:00"), 5, "timer")
    n = _saved(dash_duo)
    search = dash_duo.find_element("#search")
    search.send_keys("the", Keys.ENTER)
    n = _saved_more(dash_duo, n)
    _tap_state(d, 1)
    dash_duo.wait_for_text_to_equal("#state-card h4", "State 1", timeout=15)
    n = _saved_more(dash_duo, n)
    d.find_elements(By.CSS_SELECTOR, ".study-open")[1].click()  # open the second instance
    n = _saved_more(dash_duo, n)
    # a view without its own logging callback (here a stand-in attribution panel): its
    # clicks are posted to /study/event and counted once acknowledged
    d.execute_script("const p = document.createElement('div'); p.id = 'attribution-panel';"
                     "p.innerHTML = '<button id=\"attr-more\">more</button>';"
                     "document.querySelector('.trace-panel').appendChild(p);")
    dash_duo.find_element("#attr-more").click()
    n = _saved_more(dash_duo, n)
    dash_duo.find_element("#study-answer-text").send_keys(EVIL)
    _submit_and_wait(dash_duo, "Is the model right more often than not?")
    assert dash_duo.find_element("#diagram").is_displayed()
    d.find_elements(By.CSS_SELECTOR, "#study-answer-choice input")[0].click()  # "yes"
    _submit_and_wait(dash_duo, None)
    assert d.execute_script("return window.__pwned === undefined")

    # -- P02: counterbalanced into "baseline": table, trace text, attribution only -----------
    _open(dash_duo, study_app, "P02")
    # excluded views are not rendered at all (or only as empty, hidden holders)
    for cid in ("diagram", "state-card", "new-text"):
        assert all(not e.is_displayed() for e in d.find_elements(By.ID, cid)), cid
    assert d.find_elements(By.ID, "diagram") == []
    assert dash_duo.find_element("#table").is_displayed()
    assert dash_duo.find_element("#trace-tokens .chip").is_displayed()
    # no state strip at all: a condition without state views gets no states
    assert dash_duo.find_elements("#trace-tokens .st") == []
    # hidden views hold no data in the page either (not only display: none)
    assert d.execute_script("return ['state-card', 'nn-list', 'influential'].every(i => {"
                            "const e = document.getElementById(i);"
                            "return !e || e.textContent.trim() === ''; })")
    n = _saved(dash_duo)
    d.find_elements(By.CSS_SELECTOR, '#table td[data-dash-column="text"]')[2].click()
    n = _saved_more(dash_duo, n)
    dash_duo.find_element("#study-answer-text").send_keys("the word 'but'")
    _submit_and_wait(dash_duo, "Is the model right more often than not?")
    dash_duo.find_element("#study-submit").click()  # nothing chosen: refused, stays
    dash_duo.wait_for_contains_text("#study-message", "no option is chosen", timeout=15)
    d.find_elements(By.CSS_SELECTOR, "#study-answer-choice input")[1].click()  # "no"
    _submit_and_wait(dash_duo, None)

    # -- a reload keeps P01 done, and the log holds everything ---------------------------------
    _wait(lambda: d.find_elements(By.CSS_SELECTOR, "#study-done"), 5, "done page")
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    people = {r["pid"]: r["condition"] for r in conn.execute("SELECT * FROM participants")}
    assert people == {"P01": "full", "P02": "baseline"}
    events = [dict(r) for r in conn.execute("SELECT * FROM events ORDER BY id")]
    by = {p: [e for e in events if e["pid"] == p] for p in people}
    kinds = {p: [e["kind"] for e in evs] for p, evs in by.items()}
    for p in people:
        assert kinds[p][:2] == ["participant_joined", "task_started"]
        assert kinds[p].count("task_started") == 2 and kinds[p].count("task_submitted") == 2
        assert all(e["condition"] == people[p] for e in by[p])
        assert all(e["ts"].endswith("Z") for e in by[p])
    for kind in ("filter_changed", "state_clicked", "task_instance_opened",
                 "instance_selected", "answer_edited", "view_clicked"):
        assert kind in kinds["P01"], kind
    assert "state_clicked" not in kinds["P02"] and "instance_selected" in kinds["P02"]
    # nobody paged the table by hand: pages the explorer turned to are not their doing
    assert "table_paged" not in kinds["P01"] + kinds["P02"]
    assert "answer_rejected" in kinds["P02"]
    click = next(e for e in by["P01"] if e["kind"] == "state_clicked")
    assert json.loads(click["payload"]) == {"state": 1, "selected": True}
    assert click["task"] == "why"
    opened = next(e for e in by["P01"] if e["kind"] == "task_instance_opened")
    assert json.loads(opened["payload"])["id"] == study_app.test_ids[1]
    clicked = next(e for e in by["P01"] if e["kind"] == "view_clicked")
    assert json.loads(clicked["payload"]) == {"view": "attribution", "target": "attr-more",
                                              "text": "more"}
    assert clicked["source"] == "http" and clicked["task"] == "why"
    answers = {(r["pid"], r["task"]): json.loads(r["answer"])["value"]
               for r in conn.execute("SELECT * FROM tasks")}
    assert answers == {("P01", "why"): EVIL, ("P01", "which"): "yes",
                       ("P02", "why"): "the word 'but'", ("P02", "which"): "no"}
    conn.close()
    assert dash_duo.get_logs() == []


def test_time_limit_submits_what_is_there(dash_duo, explored_run, tmp_path):
    from stateseer.app.study.server import create_study_app
    from stateseer.app.study.spec import parse_study

    study = parse_study({"study": "timed", "run": str(explored_run),
                         "conditions": ["baseline"],
                         "tasks": [{"id": "quick", "prompt": "Quick!", "time_limit_s": 8}]})
    app = create_study_app(study, db=tmp_path / "timed.sqlite")
    try:
        dash_duo.start_server(app)
        _open(dash_duo, app, "T01")
        # 8 s leave a loaded machine time to draw the page and type before the limit
        assert dash_duo.find_element("#study-clock .study-limit").text == "/ 00:08"
        dash_duo.find_element("#study-answer-text").send_keys("half an answer")
        dash_duo.wait_for_element("#study-done", timeout=40)
        row = app.study_context.log.progress("T01")[0]
        assert row["timed_out"] == 1 and row["seconds"] >= 8 - 2
        assert json.loads(row["answer"]) == {"type": "text", "value": "half an answer"}
    finally:
        app.study_context.log.close()


def test_one_participant_s_within_subject_path(dash_duo, explored_run, tmp_path):
    """consent -> attention check -> block 1 (a task, then SUS) -> block 2 (a task, then
    SUS) -> debriefing -> done, every page checked: no explorer around the questions,
    the full explorer in the first block and the baseline in the second."""
    from stateseer.app.study.server import create_study_app
    from stateseer.app.study.spec import parse_study
    from stateseer.app.workflows.runview import RunView

    ids = [int(i) for i in RunView(explored_run).traces["test"].rows[:2]]
    study = parse_study({
        "study": "path", "run": str(explored_run), "assignment": "latin",
        "tasks": [{"id": "consent", "prompt": "Your answers are kept anonymous.",
                   "answer": "consent"},
                  {"id": "attn", "prompt": "To show you read this, choose 'blue'.",
                   "answer": {"type": "attention_check", "options": ["red", "blue"]},
                   "key": "blue"},
                  {"id": "why", "prompt": "Why is this review classified so?",
                   "open": ids[:1]},
                  {"id": "why2", "prompt": "And this one?", "open": ids[1:]},
                  {"id": "sus", "prompt": "About the tool you just used", "answer": "sus"},
                  {"id": "bye", "prompt": "The study compared two explorers.",
                   "answer": "debrief"}],
        "task_sets": [["why"], ["why2"]], "after_each_block": ["sus"]})
    app = create_study_app(study, db=tmp_path / "path.sqlite")
    d = dash_duo.driver
    try:
        dash_duo.start_server(app)
        secret = app.study_context.log.link("P01")[1]
        d.get(f"{dash_duo.server_url}/p/{secret}/")

        def page(prompt, button, explorer):
            dash_duo.wait_for_text_to_equal("#study-prompt", prompt, timeout=20)
            _idle(d)
            assert dash_duo.find_element("#study-submit").text == button
            shown = [e for e in d.find_elements(By.ID, "diagram") if e.is_displayed()]
            table = [e for e in d.find_elements(By.ID, "table") if e.is_displayed()]
            assert (bool(shown), bool(table)) == explorer, prompt

        def rate(points):
            rows = d.find_elements(By.CSS_SELECTOR, "#study-questionnaire .study-item")
            assert len(rows) == 10
            for row, k in zip(rows, points, strict=True):
                row.find_elements(By.CSS_SELECTOR, "input")[k - 1].click()

        page("Your answers are kept anonymous.", "Continue", (False, False))
        assert [e.get_attribute("value") for e in d.find_elements(
            By.CSS_SELECTOR, "#study-answer-choice input")] == ["I agree", "I do not agree"]
        d.find_elements(By.CSS_SELECTOR, "#study-answer-choice input")[0].click()
        dash_duo.find_element("#study-submit").click()
        page("To show you read this, choose 'blue'.", "Submit answer", (False, False))
        d.find_elements(By.CSS_SELECTOR, "#study-answer-choice input")[1].click()
        dash_duo.find_element("#study-submit").click()
        page("Why is this review classified so?", "Submit answer", (True, True))  # full
        assert dash_duo.find_element("#study-task b").text == "Task 3 of 7"
        dash_duo.find_element("#study-answer-text").send_keys("the ending")
        dash_duo.find_element("#study-submit").click()
        page("About the tool you just used", "Submit answer", (False, False))
        rate([4] * 9 + [3])
        d.find_elements(By.CSS_SELECTOR, "#study-questionnaire .study-item")[9].find_elements(
            By.CSS_SELECTOR, "input")[2].click()
        dash_duo.find_element("#study-submit").click()
        page("And this one?", "Submit answer", (False, True))  # baseline: no diagram
        dash_duo.find_element("#study-answer-text").send_keys("no idea")
        dash_duo.find_element("#study-submit").click()
        page("About the tool you just used", "Submit answer", (False, False))
        rate([4, 2] * 5)
        dash_duo.find_element("#study-submit").click()
        page("The study compared two explorers.", "Finish", (False, False))
        dash_duo.find_element("#study-submit").click()
        dash_duo.wait_for_element("#study-done", timeout=20)
        rows = {r["task"]: (r["condition"], json.loads(r["answer"]))
                for r in app.study_context.log.progress("P01")}
        assert list(rows) == ["consent", "attn", "why", "sus.1", "why2", "sus.2", "bye"]
        assert rows["attn"][1]["grade"] == {"correct": True}
        assert rows["sus.1"] == ("full", {"type": "sus", "value": [4] * 9 + [3],
                                          "score": 52.5})
        assert rows["sus.2"][0] == "baseline" and rows["sus.2"][1]["score"] == 75.0
        assert dash_duo.get_logs() == []
    finally:
        app.study_context.log.close()
