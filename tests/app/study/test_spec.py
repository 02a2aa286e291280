"""Study files: valid ones load; every mistake is one line naming the key and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stateseer.app.study.answers import add_selected, check_answer, parse_ids
from stateseer.app.study.spec import (
    PRESETS,
    VIEWS,
    StudyError,
    Task,
    check_pid,
    load_study,
    parse_study,
)
from tests.conftest import one_line

ROOT = Path(__file__).resolve().parents[3]
GOOD = {"study": "s1", "run": "runs/rt",
        "tasks": [{"prompt": "Why?", "open": [3]},
                  {"id": "pick", "prompt": "Which?",
                   "answer": {"type": "choice", "options": ["a", "b"]}}]}


def _with(**changes):
    doc = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def test_the_example_study_file_loads():
    s = load_study(ROOT / "docs" / "study_example.json")
    assert s.run == ROOT / "docs" / ".." / "runs" / "rt"
    assert set(s.conditions) == {"full", "baseline"}
    assert s.conditions["baseline"] == ("table", "trace_text", "attribution")
    assert s.conditions["full"] == VIEWS
    assert [t.answer for t in s.tasks] == ["text", "choice", "instances"]
    assert s.tasks[1].time_limit_s == 300 and s.tasks[0].time_limit_s == 600


def test_listed_and_preassigned_participants_get_links():
    s = parse_study(_with(participants=["P01", "P02", "P01"],
                          assignment={"participants": {"P03": "full", "P01": "full"}}))
    assert s.participant_ids() == ("P01", "P02", "P03")


def test_defaults_and_condition_forms(tmp_path):
    s = parse_study(GOOD, base=tmp_path)
    assert s.run == tmp_path / "runs" / "rt"
    assert list(s.conditions) == ["full", "baseline"] and s.assignment.method == "counterbalanced"
    assert s.tasks[0].id == "t1" and s.tasks[0].open == (3,) and s.tasks[0].answer == "text"
    s = parse_study(_with(conditions=["baseline"]))
    assert s.conditions == {"baseline": PRESETS["baseline"]}
    s = parse_study(_with(conditions={"mine": ["trace_chart", "table"]},
                          assignment={"method": "fixed"}))
    assert s.conditions["mine"] == ("table", "trace_chart")  # in view order
    assert s.assignment.condition == "mine"


def test_run_override_and_digest(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(GOOD))
    s = load_study(path, run=tmp_path / "other")
    assert s.run == (tmp_path / "other").resolve()
    assert s.digest() == parse_study(GOOD).digest()
    assert s.digest() != parse_study(_with(tasks=[{"prompt": "Else?"}])).digest()


@pytest.mark.parametrize("doc,needles", [
    ([1, 2], ["top level is not a mapping"]),
    (_with(study=None), ["no 'study' id", "add e.g."]),
    (_with(study="bad id!"), ["'study'", "letters, digits"]),
    (_with(run=None), ["'run' is missing", "runs/rt"]),
    (_with(taks=[]), ["unknown key 'taks'", "did you mean 'tasks'?"]),
    (_with(tasks=[]), ["'tasks' is missing or empty"]),
    (_with(tasks=[{"prompt": ""}]), ["'tasks[0].prompt' is missing or empty"]),
    (_with(tasks=[{"prompt": "x" * 5000}]), ["5000 characters", "at most 4000"]),
    (_with(tasks=[{"prompt": "a", "promt": 1}]), ["'tasks[0]'", "did you mean 'prompt'?"]),
    (_with(tasks=[{"prompt": "a", "open": ["12"]}]), ["'tasks[0].open'", "instance ids"]),
    (_with(tasks=[{"prompt": "a", "split": "dev"}]), ["'tasks[0].split'", "train, val or test"]),
    (_with(tasks=[{"prompt": "a", "answer": {"type": "essay"}}]),
     ["'tasks[0].answer.type' is 'essay'", "text, choice, instances, states"]),
    (_with(tasks=[{"prompt": "a", "answer": {"type": "choice", "options": ["x"]}}]),
     ["'tasks[0].answer.options'", "at least two"]),
    (_with(tasks=[{"prompt": "a", "answer": {"type": "choice", "options": ["x", "x"]}}]),
     ["repeats an option"]),
    (_with(tasks=[{"prompt": "a", "answer": {"type": "text", "options": ["x", "y"]}}]),
     ["only for choice answers"]),
    (_with(tasks=[{"prompt": "a", "time_limit_s": -5}]),
     ["'tasks[0].time_limit_s' is -5", "positive number of seconds"]),
    (_with(tasks=[{"prompt": "a", "id": "x"}, {"prompt": "b", "id": "x"}]),
     ["id 'x' twice"]),
    (_with(conditions={"c": ["diagram", "stat_card"]}),
     ["unknown view 'stat_card'", "did you mean"]),
    (_with(conditions={"c": "lime"}), ["'conditions.c' is 'lime'", "full, baseline"]),
    (_with(conditions=["full", "mine"]), ["'mine', which is not a preset"]),
    (_with(conditions={}), ["'conditions' is empty"]),
    (_with(assignment={"method": "alternate"}),
     ["'assignment.method' is 'alternate'", "counterbalanced, random, fixed"]),
    (_with(assignment={"method": "fixed"}), ["'fixed' without a 'condition'"]),
    (_with(assignment={"method": "random", "seed": "one"}), ["'assignment.seed'"]),
    (_with(assignment={"participants": {"P 1": "full"}}), ["bad id", "'P 1'"]),
    (_with(assignment={"participants": {"P1": "other"}}),
     ["'assignment.participants.P1' is 'other'", "full, baseline"]),
    (_with(task_time_limit_s="10 min"), ["'task_time_limit_s'"]),
    (_with(allow_generated_ids="yes"), ["true or false"]),
    (_with(participants="P01"), ["'participants' is not a list"]),
    (_with(participants=["P01", "P 2"]), ["'participants' has a bad id", "'P 2'"]),
    (_with(tasks=[{"prompt": "a", "key": "x"}]),
     ["'tasks[0].key' is for choice, instances, states and check", "coding.csv"]),
    (_with(tasks=[{"prompt": "a", "answer": {"type": "choice", "options": ["x", "y"]},
                   "key": "z"}]), ["names 'z', which is not an option", "x, y"]),
    (_with(tasks=[{"prompt": "a", "answer": "instances", "key": ["12"]}]),
     ["'tasks[0].key' is ['12']", "instance ids"]),
    (_with(tasks=[{"prompt": "a", "answer": "states", "key": []}]), ["key' is empty"]),
    (_with(assignment="latin"), ["'task_sets' must list one", "per condition (2)"]),
    (_with(assignment="latin", task_sets=[["t1"]]), ["per condition (2)"]),
    (_with(assignment="latin", task_sets=[["t1"], []]), ["non-empty list"]),
    (_with(assignment="latin", task_sets=[["t1"], ["pik"]]),
     ["names 'pik', which is no task id", "t1, pick"]),
    (_with(assignment="latin", task_sets=[["t1"], ["t1"]]), ["lists 't1' twice"]),
    (_with(task_sets=[["t1"], ["pick"]]),
     ["only for a within-subject design", "\"assignment\": \"latin\""]),
    (_with(assignment={"method": "latin", "participants": {"P1": "full"}},
           task_sets=[["t1"], ["pick"]]), ["a latin design gives by arrival"]),
    (_with(assignment="latin", task_sets=[["t1"], ["c"]],
           tasks=[{"prompt": "a"}, {"prompt": "b"}, {"id": "c", "prompt": "c"}]),
     ["task 't2' is in no task set but between", "before or after"]),
])
def test_study_file_errors_are_one_line(doc, needles):
    with pytest.raises(StudyError) as err:
        parse_study(doc)
    msg = one_line(err.value)
    assert msg.startswith("study file")
    for needle in needles:
        assert needle in msg, msg


def test_unreadable_files(tmp_path):
    with pytest.raises(StudyError) as err:
        load_study(tmp_path / "missing.json")
    assert "not found" in one_line(err.value)
    bad = tmp_path / "bad.json"
    bad.write_text('{"study": "s1",\n "run": }')
    with pytest.raises(StudyError) as err:
        load_study(bad)
    assert "not valid JSON (line 2" in one_line(err.value)


def test_yaml_study_files(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("study: s1\nrun: runs/rt\ntasks:\n  - prompt: Why?\n")
    try:
        import yaml  # noqa: F401
    except ImportError:
        with pytest.raises(StudyError) as err:
            load_study(path)
        assert "PyYAML is not installed" in one_line(err.value)
        assert "write the study as JSON" in str(err.value)
    else:
        assert load_study(path).tasks[0].prompt == "Why?"


@pytest.mark.parametrize("pid", ["", "P 01", "P01/../x", "<script>", "x" * 65, None, 7,
                                 "Pé"])
def test_bad_participant_ids(pid):
    with pytest.raises(StudyError) as err:
        check_pid(pid)
    assert "letters, digits" in one_line(err.value)


def test_good_participant_ids():
    for pid in ("P01", "a", "x" * 64, "anon-1f_3"):
        assert check_pid(pid) == pid


def test_answers_are_checked_by_type():
    text = Task(id="t", prompt="?", max_chars=10)
    assert check_answer(text, text="  ok  ") == {"type": "text", "value": "ok"}
    for bad, needle in ((None, "empty"), ("x" * 11, "limit is 10")):
        with pytest.raises(StudyError) as err:
            check_answer(text, text=bad)
        assert needle in one_line(err.value)
    choice = Task(id="t", prompt="?", answer="choice", options=("a", "b"))
    with pytest.raises(StudyError):
        check_answer(choice, choice="c")
    inst = Task(id="t", prompt="?", answer="instances")
    assert check_answer(inst, ids="4, 5", valid_id=lambda i: i < 10)["value"] == [4, 5]
    with pytest.raises(StudyError) as err:
        check_answer(inst, ids="4, 50", valid_id=lambda i: i < 10)
    assert "instance id 50 does not exist" in one_line(err.value)
    with pytest.raises(StudyError) as err:
        check_answer(inst, ids="4, x")
    assert "'x' is not a whole number" in one_line(err.value)
    states = Task(id="t", prompt="?", answer="states")
    with pytest.raises(StudyError) as err:
        check_answer(states, ids="3 12", n_states=12)
    assert "states are 0 to 11" in one_line(err.value)
    assert parse_ids(" ") == [] and add_selected("1", 2) == "1, 2"


def test_study_command_errors_are_one_line(tmp_path, capsys):
    from stateseer.app.cli.main import main

    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({**GOOD, "tasks": [{"prompt": "?", "answer": "essay"}]}))
    weak = tmp_path / "w.json"
    weak.write_text(json.dumps({**GOOD, "run": str(ROOT / "runs" / "nope")}))
    for argv, needle in (([str(tmp_path / "none.json")], "not found"),
                         ([str(bad)], "'tasks[0].answer.type' is 'essay'"),
                         ([str(weak), "--admin-token", "aaaaaaaaaaaa"], "secrets.token_urlsafe()"),
                         ([str(weak)], "is not a stateseer run")):
        assert main(["study", *argv, "--db", str(tmp_path / "x.sqlite")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("stateseer: error: ") and needle in err


def test_a_latin_study_orders_each_participant_s_blocks():
    doc = _with(assignment="latin", conditions={"full": "full", "baseline": "baseline",
                                                "mine": ["table", "trace_text"]},
                tasks=[{"id": "consent", "prompt": "Agree?"},
                       *({"id": f"t{k}", "prompt": f"task {k}"} for k in range(6)),
                       {"id": "sus", "prompt": "How usable?"}],
                task_sets=[["t0", "t1"], ["t2", "t3"], ["t4", "t5"]])
    s = parse_study(doc)
    assert s.within and len(s.conditions) == 3
    a, b, c = s.conditions
    seq = s.sequence(f"{b}>{c}>{a}")
    assert [(t.id, cond) for t, cond in seq] == [
        ("consent", b), ("t0", b), ("t1", b), ("t2", c), ("t3", c), ("t4", a), ("t5", a),
        ("sus", a)]
    # between-subjects: the file's order, one condition
    flat = parse_study(GOOD).sequence("baseline")
    assert [(t.id, cond) for t, cond in flat] == [("t1", "baseline"), ("pick", "baseline")]
    assert s.digest() != parse_study({**doc, "task_sets": [["t2", "t3"], ["t0", "t1"],
                                                           ["t4", "t5"]]}).digest()
