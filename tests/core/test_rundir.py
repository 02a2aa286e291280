"""A run directory names no absolute path of its maker's machine: data files (and a created
run's model code) are kept relative to the run, so a project folder moves whole."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from stateseer.core.rundir import located, located_path, portable, portable_path


@pytest.mark.parametrize("name", ["csv:/a/b/data.csv", "jsonl:/a/x.jsonl", "csv:/elsewhere/d.csv"])
def test_portable_and_located_are_inverse(name):
    rel = portable(name, "/a/b/runs/gru")
    assert not rel.partition(":")[2].startswith("/")
    assert located(rel, "/a/b/runs/gru") == name


def test_names_that_are_no_files_and_old_absolute_paths_stay_as_they_are(tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert portable("rotten_tomatoes", "/x") == "rotten_tomatoes"
    # a relative path is the caller's (from its directory), made relative to the run
    assert portable("csv:data/d.csv", tmp_path / "runs" / "r") == "csv:../../data/d.csv"
    assert located("csv:/abs/d.csv", "/x") == "csv:/abs/d.csv"  # a run made before
    assert portable_path("/a/m.py", "/a/runs/r") == "../../m.py"
    assert located_path("/abs/m.py", "/a") == "/abs/m.py"


def test_a_trained_run_keeps_its_csv_relative_and_moves_with_its_project(tmp_path, text_csv):
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.train import TrainConfig, train_run

    project = tmp_path / "ana-private-project"
    (project / "data").mkdir(parents=True)
    with text_csv.open(encoding="utf-8") as fh, \
            (project / "data" / "reviews.csv").open("w", newline="", encoding="utf-8") as out:
        rows = list(csv.reader(fh))[:301]
        csv.writer(out).writerows(rows)
    cfg = TrainConfig(dataset=f"csv:{project / 'data' / 'reviews.csv'}", arch="gru",
                      text_col="review", label_col="sentiment", epochs=1, hidden=8, embed=8)
    train_run(cfg, project / "runs" / "gru", progress=False)
    text = (project / "runs" / "gru" / "config.json").read_text()
    assert str(tmp_path) not in text  # neither the data path nor its "source"
    conf = json.loads(text)
    assert conf["data"]["name"] == "csv:../../data/reviews.csv"
    assert conf["config"]["dataset"] == "csv:../../data/reviews.csv"
    moved = tmp_path / "moved"
    shutil.move(project, moved)
    run = ModelRun(moved / "runs" / "gru")
    assert run.data["name"] == f"csv:{moved / 'data' / 'reviews.csv'}"
    assert len(run.dataset().texts) == 300  # read from the moved folder


def test_a_run_made_before_keeps_reading_its_path_as_it_was_written(tmp_path, text_csv,
                                                                    monkeypatch):
    """A config.json without ``data.paths`` (earlier runs) names its file absolute or from
    the directory the command ran in: that is how it is read still."""
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.train import TrainConfig, train_run

    monkeypatch.chdir(tmp_path)
    shutil.copy(text_csv, tmp_path / "d.csv")
    cfg = TrainConfig(dataset="csv:d.csv", arch="gru", text_col="review",
                      label_col="sentiment", epochs=1, hidden=8, embed=8)
    train_run(cfg, tmp_path / "runs" / "r", progress=False)
    conf = json.loads((tmp_path / "runs" / "r" / "config.json").read_text())
    assert conf["data"]["name"] == "csv:../../d.csv" and conf["data"]["paths"]
    conf["data"].update(name="csv:d.csv")  # as an earlier version wrote it
    del conf["data"]["paths"]
    (tmp_path / "runs" / "r" / "config.json").write_text(json.dumps(conf))
    run = ModelRun(tmp_path / "runs" / "r")
    assert run.data["name"] == "csv:d.csv" and len(run.dataset().texts) == 1500


def test_metrics_json_writes_nan_as_null(tmp_path):
    """JSON has no NaN: a test accuracy without a test split is written as null."""
    import json

    from stateseer.core.rundir import RunDir

    run = RunDir(tmp_path)
    run.update_metrics(test_accuracy=float("nan"), a={"b": [1.0, float("inf")]}, c=0.5)
    doc = json.loads(run.metrics_path.read_text(), parse_constant=lambda x: 1 / 0)
    assert doc == {"test_accuracy": None, "a": {"b": [1.0, None]}, "c": 0.5}


def test_a_damaged_config_is_refused_in_one_line_by_abstract_too(tmp_path):
    """``abstract`` refuses a run whose config.json is not JSON, as every command does,
    with one cause and one fix (not the reader's message nested in the run's)."""
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.core.errors import StateseerError
    from tests.conftest import one_line

    (tmp_path / "config.json").write_text('{"format": ')
    with pytest.raises(StateseerError) as e:
        abstract_run(tmp_path, n_states=4)
    msg = one_line(e.value)
    assert "config.json is not valid UTF-8 JSON" in msg
    assert msg.count("JSON") == 1 and msg.endswith("restore it or retrain the run")
