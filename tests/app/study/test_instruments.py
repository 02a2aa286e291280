"""Questionnaires, checks, consent and debriefing: items, scores and a participant's path."""

from __future__ import annotations

import csv
import json

import pytest

from stateseer.app.study.instruments import (
    SUS_ITEMS,
    TLX_SCALES,
    check_items,
    items_of,
    score,
)
from stateseer.app.study.spec import AGREE, DECLINE, StudyError, Task, parse_study
from tests.conftest import one_line


def test_sus_is_scored_as_brooke_defines_it():
    sus = Task(id="s", prompt="?", answer="sus")
    assert len(items_of(sus)) == len(SUS_ITEMS) == 10
    assert score(sus, {"value": [5, 1] * 5}) == 100.0  # agrees with every positive item
    assert score(sus, {"value": [1, 5] * 5}) == 0.0
    assert score(sus, {"value": [3] * 10}) == 50.0
    # a worked example: contributions 3,3,2,2,3,4,3,3,2,1 -> 26 * 2.5
    assert score(sus, {"value": [4, 2, 3, 3, 4, 1, 4, 2, 3, 4]}) == 65.0


def test_raw_tlx_is_the_mean_of_six_scales_on_21_points():
    tlx = Task(id="t", prompt="?", answer="nasa_tlx")
    items = items_of(tlx)
    assert [it["text"].split(":")[0] for it in items] == [s[0] for s in TLX_SCALES]
    assert all((it["min"], it["max"], it["step"]) == (0, 100, 5) for it in items)
    assert items[3]["low"] == "perfect" and items[3]["high"] == "failure"
    assert score(tlx, {"value": [0, 0, 0, 0, 0, 30]}) == 5.0


@pytest.mark.parametrize("values, needle", [
    ([3] * 9, "item 10 of 10 is not rated"),
    ([3, None] + [3] * 8, "item 2 of 10 is not rated"),
    ([6] + [3] * 9, "item 1 has '6', not a point of its scale (1 to 5)"),
    (["3"] + [3] * 9, "item 1 has '3'"),
    ([True] + [3] * 9, "item 1 has 'True'"),
])
def test_ratings_off_the_scale_are_refused(values, needle):
    with pytest.raises(StudyError) as err:
        check_items(Task(id="s", prompt="?", answer="sus"), values)
    assert needle in one_line(err.value)
    with pytest.raises(StudyError, match="not a point"):
        check_items(Task(id="t", prompt="?", answer="nasa_tlx"), [7, 0, 0, 0, 0, 0])


def test_likert_items_scales_labels_and_reversed_items_from_the_file():
    s = parse_study({"study": "l", "run": "r", "tasks": [
        {"id": "trust", "prompt": "About the explorer",
         "answer": {"type": "likert", "items": ["I trusted it.", "It confused me."],
                    "scale": 7, "labels": ["disagree", "agree"], "reverse": [2]}}]})
    t = s.tasks[0]
    assert [it["text"] for it in items_of(t)] == ["I trusted it.", "It confused me."]
    assert items_of(t)[0]["max"] == 7 and items_of(t)[0]["low"] == "disagree"
    assert score(t, {"value": [7, 1]}) == 7.0 and score(t, {"value": [4, 4]}) == 4.0


@pytest.mark.parametrize("answer, needle", [
    ({"type": "likert"}, "'tasks[0].answer.items' must list the statements"),
    ({"type": "likert", "items": ["a"], "scale": 1}, "points, 2 to 11"),
    ({"type": "likert", "items": ["a"], "labels": ["x"]}, "two ends of the scale"),
    ({"type": "likert", "items": ["a"], "reverse": [2]}, "item numbers from 1 to 1"),
    ({"type": "sus", "items": ["a"]}, "'tasks[0].answer.items' is only for likert"),
    ({"type": "attention_check", "options": ["red", "blue"]}, "without a 'key'"),
    ({"type": "consent", "options": ["yes", "no"]}, "only for choice answers"),
])
def test_instrument_mistakes_are_one_line(answer, needle):
    with pytest.raises(StudyError) as err:
        parse_study({"study": "x", "run": "r", "tasks": [{"prompt": "?", "answer": answer}]})
    assert needle in one_line(err.value)


def test_questionnaires_after_each_block_are_asked_once_per_block():
    s = parse_study({"study": "w", "run": "r", "assignment": "latin",
                     "tasks": [{"id": "consent", "prompt": "Agree?", "answer": "consent"},
                               {"id": "a", "prompt": "A"}, {"id": "b", "prompt": "B"},
                               {"id": "sus", "prompt": "Rate it", "answer": "sus"},
                               {"id": "bye", "prompt": "Thanks", "answer": "debrief"}],
                     "task_sets": [["a"], ["b"]], "after_each_block": ["sus"]})
    assert [(t.id, c) for t, c in s.sequence("full>baseline")] == [
        ("consent", "full"), ("a", "full"), ("sus.1", "full"), ("b", "baseline"),
        ("sus.2", "baseline"), ("bye", "baseline")]
    assert s.n_tasks == 6 and s.task("sus.2").answer == "sus"
    with pytest.raises(KeyError):
        s.task("sus.3")
    with pytest.raises(StudyError, match="between-subjects study has one block"):
        parse_study({"study": "w", "run": "r", "tasks": [{"id": "s", "prompt": "?"}],
                     "after_each_block": ["s"]})


def _path_study(run):
    from stateseer.app.workflows.runview import RunView

    ids = [int(i) for i in RunView(run).traces["test"].rows[:2]]
    return parse_study({
        "study": "path", "run": str(run), "assignment": "latin",
        "tasks": [{"id": "consent", "prompt": "You may stop at any time.",
                   "answer": "consent"},
                  {"id": "attn", "prompt": "To show you read this, choose 'blue'.",
                   "answer": {"type": "attention_check", "options": ["red", "blue"]},
                   "key": "blue"},
                  {"id": "why", "prompt": "Why?", "open": ids[:1]},
                  {"id": "why2", "prompt": "And this one?", "open": ids[1:]},
                  {"id": "sus", "prompt": "The tool you just used", "answer": "sus"},
                  {"id": "tlx", "prompt": "The task you just did", "answer": "nasa_tlx"},
                  {"id": "bye", "prompt": "The study compared two explorers.",
                   "answer": "debrief"}],
        "task_sets": [["why"], ["why2"]], "after_each_block": ["sus", "tlx"]})


def test_a_participant_s_whole_path_and_its_scores(explored_run, tmp_path):
    """consent -> a check -> block 1 (task, SUS, TLX) -> block 2 (task, SUS, TLX) ->
    debriefing; questionnaires hide the explorer and the guard serves it nothing."""
    from stateseer.app.study.export import export_study
    from stateseer.app.study.server import create_study_app, submit_answer
    from tests.app.study.test_guard import _body, _post
    from tests.app.study.test_server import _find, _layout, link

    token = "admin-token-for-the-path-test"
    app = create_study_app(_path_study(explored_run), db=tmp_path / "p.sqlite",
                           admin_token=token)
    sc, client = app.study_context, app.server.test_client()
    sel = {"split": "test", "state": None, "row": 0, "pattern": None}
    try:
        seen = []
        answers = {"consent": {"choice": AGREE}, "attn": {"choice": "red"},
                   "why": {"text": "a reason"}, "why2": {"text": "another"},
                   "sus": {"items": [4, 2, 3, 3, 4, 1, 4, 2, 3, 4]},
                   "tlx": {"items": [50, 0, 25, 10, 60, 5]}, "bye": {"text": ""}}
        while True:
            page = _layout(client, "P01", app)
            info = _find(page, "study-info")
            if info is None:
                assert "All tasks are done" in json.dumps(page)
                break
            info = info["props"]["data"]
            base = info["task"].split(".")[0]
            body = _body(app, [("table", "data")], "selection",
                         {("selection", "data"): sel}, changed=["selection.data"])
            status = _post(client, body, link(app, "P01")).status_code
            n_items = json.dumps(page).count('"type": "study-item"')
            seen.append((info["task"], _find(page, "diagram") is not None, status, n_items))
            kw = {"text": None, "choice": None, "ids": None, "timed_out": False,
                  "items": None, **answers[base]}
            if base == "sus":
                msg, _ = submit_answer(sc, "P01", info["task"], **{**kw, "items": [3] * 9})
                assert "item 10 of 10 is not rated" in msg
            msg, href = submit_answer(sc, "P01", info["task"], **kw)
            assert href.endswith(f"?done={info['task']}"), msg
        assert seen == [("consent", False, 204, 0), ("attn", False, 204, 0),
                        ("why", True, 200, 0), ("sus.1", False, 204, 10),
                        ("tlx.1", False, 204, 6), ("why2", False, 200, 0),
                        ("sus.2", False, 204, 10), ("tlx.2", False, 204, 6),
                        ("bye", False, 204, 0)]  # P01: full, then baseline
        written = export_study(tmp_path / "p.sqlite", tmp_path / "out", long=True)
        with open(written["long"], newline="", encoding="utf-8") as fh:
            rows = {r["task"]: r for r in csv.DictReader(fh)}
        assert float(rows["sus.1"]["score"]) == 65.0 and rows["sus.1"]["block"] == "0"
        assert float(rows["tlx.2"]["score"]) == 25.0 and rows["tlx.2"]["condition"] == "baseline"
        assert rows["tlx.2"]["block"] == "1" and rows["why"]["order"] == "full>baseline"
        assert rows["attn"]["correct"] == "False"
        assert {r["failed_checks"] for r in rows.values()} == {"1"}
        # declining consent ends the study: nothing more is asked or started
        page = _layout(client, "P02", app)
        info = _find(page, "study-info")["props"]["data"]
        assert info["task"] == "consent"
        msg, _ = submit_answer(sc, "P02", "consent", text=None, choice=None, ids=None,
                               timed_out=False)
        assert AGREE in msg
        submit_answer(sc, "P02", "consent", text=None, choice=DECLINE, ids=None,
                      timed_out=False)
        done = _layout(client, "P02", app)
        assert "chose not to take part" in json.dumps(done) and \
            _find(done, "study-info") is None
        assert [r["task"] for r in sc.log.progress("P02")] == ["consent"]
        admin = client.get("/study/admin", headers={"X-Study-Token": token}).data.decode()
        assert "9 tasks each · orders:" in admin and "full&gt;baseline (1)" in admin
        assert "2 participants: 2 done, 0" in admin
        assert "declined consent" in admin and "9 / 9" in admin
    finally:
        sc.log.close()
