"""The DeepSeer replication study: inputs whose prediction turns once, keys that are facts
about the model, a file the server runs, and refused on another model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stateseer.app.study.replication import deepseer_study, flip_inputs
from stateseer.app.study.spec import StudyError, load_study, parse_study
from tests.conftest import one_line

ROOT = Path(__file__).resolve().parents[3]


def test_each_chosen_input_turns_once_at_its_word(shortcut_run, explored_run):
    from stateseer.app.workflows.runview import RunView

    tr = RunView(shortcut_run).traces["test"]
    items = flip_inputs(tr)
    assert len(items) >= 10
    # ground truth: the mistakes chosen are the planted shortcut's, and the model most
    # often turns at the planted word itself (else at a word before it, then stays)
    assert np.mean(["frankly" in it["tokens"] for it in items]) > 0.8
    assert np.mean([it["tokens"][it["at"]] == "frankly" for it in items]) > 0.5
    for it in items:
        i = it["row"]
        running = np.asarray(tr.proba[tr.steps(i)]).argmax(1)
        final = int(tr.predictions[i])
        assert final != int(tr.labels[i])
        assert (running[it["at"]:] == final).all() and (running[:it["at"]] != final).all()
        assert it["tokens"][it["at"]].isalpha() and len(it["tokens"][it["at"]]) >= 4
    conf = [it["confidence"] for it in items]
    assert conf == sorted(conf, reverse=True)
    # a model that never turns (the undertrained small run calls everything one class
    # from the first token) offers no such input
    assert flip_inputs(RunView(explored_run).traces["test"]) == []


def test_the_study_runs_on_its_model_and_is_refused_on_another(shortcut_run, tmp_path):
    from stateseer.app.study.server import create_study_app

    doc = deepseer_study(shortcut_run, per_block=1)
    study = parse_study(doc)
    assert study.within and study.after_each_block == ("sus", "tlx")
    assert [list(ts) for ts in study.task_sets] == [["understand-1", "cause-1"],
                                                    ["understand-2", "cause-2"]]
    assert study.n_tasks == 2 + 4 + 4 + 1
    understand = study.task("understand-1")
    assert understand.key[0] in understand.options and len(understand.options) == 4
    app = create_study_app(study, db=tmp_path / "d.sqlite")
    app.study_context.log.close()
    other = {**doc, "model_sha256": "0" * 64}
    with pytest.raises(StudyError) as err:
        create_study_app(parse_study(other), db=tmp_path / "e.sqlite")
    assert "its keys were made for model 000000000000" in one_line(err.value)
    with pytest.raises(StudyError) as err:
        deepseer_study(shortcut_run, per_block=10_000)
    assert "pass a smaller --per-block" in one_line(err.value)


def test_the_template_command_writes_a_study_the_server_reads(shortcut_run, tmp_path,
                                                              capsys):
    from stateseer.app.cli.main import main

    out = tmp_path / "sub" / "study.json"
    out.parent.mkdir()
    assert main(["study-template", str(shortcut_run), "--out", str(out),
                 "--per-block", "1"]) == 0
    assert "run it with `stateseer study" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert not Path(doc["run"]).is_absolute()  # relative to the file: the folder can move
    assert load_study(out).run.resolve() == Path(shortcut_run).resolve()
    assert main(["study-template", str(shortcut_run), "--out", str(out)]) != 0  # no --force


def test_the_shipped_replication_file_is_a_valid_within_subject_study():
    s = load_study(ROOT / "docs" / "study_deepseer.json")
    assert s.within and list(s.conditions) == ["full", "baseline"]
    assert s.model_sha256 and s.after_each_block == ("sus", "tlx")
    kinds = [t.answer for t in s.tasks]
    assert kinds[:2] == ["consent", "attention_check"] and kinds[-1] == "debrief"
    for t in s.tasks:
        if t.id.startswith("understand-"):
            assert t.key[0] in t.options and t.open
