"""`stateseer create`: a user's own model (own tokeniser, vocabulary and class order) as a run."""

from __future__ import annotations

import json
import re
import textwrap

import numpy as np
import pytest
import torch

from stateseer.app.cli.main import main
from stateseer.core.traces import Traces

# What a user writes in mymodel.py. The regex tokeniser keeps "a/c" and "don't" whole,
# which stateseer's `word` tokeniser would split; the head's order is (rotten, fresh),
# the reverse of the data set's alphabetical (fresh, rotten).
MODULE = '''
import json
import re
from pathlib import Path

import torch
from torch import nn

from stateseer.rnn_models.models import RecurrentAdapter

ITOS = json.loads((Path(__file__).parent / "itos.json").read_text())
TOKEN = re.compile(r"[\\w/']+|[^\\w\\s]")


def tokenize(text):
    return TOKEN.findall(text.lower())


class Adapter(RecurrentAdapter):
    def __init__(self, embedding, rnn, head, *, vocab, tokenize, classes):
        super().__init__(embedding, rnn, head, n_classes=len(classes))
        self.vocab, self.tokenize, self.classes = vocab, tokenize, classes


def build():
    torch.manual_seed(0)
    emb = nn.Embedding(len(ITOS), 16, padding_idx=0)
    return Adapter(emb, nn.GRU(16, 24, batch_first=True), nn.Linear(24, 2),
                   vocab=ITOS, tokenize=tokenize, classes=["rotten", "fresh"])


def wrong_classes():
    m = build()
    m.classes = ["negative", "positive"]
    return m


class Pooled(Adapter):
    """The user's real model averages the GRU's outputs over all tokens before its head."""

    def predict(self, ids, lengths):
        out, _ = self.rnn(self.embedding(ids))
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).float()
        return self.head((out * mask[..., None]).sum(1) / lengths[:, None].float())


class LastState(Adapter):
    """The user's real model classifies from the last state, as stateseer reads it."""

    def predict(self, ids, lengths):
        out, _ = self.rnn(self.embedding(ids))
        return self.head(out[torch.arange(len(ids)), lengths - 1])


def pooled():
    m = build()
    m.__class__ = Pooled
    return m


def last_state():
    m = build()
    m.__class__ = LastState
    return m
'''
TOKEN = re.compile(r"[\w/']+|[^\w\s]")


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory, text_csv):
    """A folder with the user's mymodel.py and its vocabulary (train texts, min count 2)."""
    import csv
    from collections import Counter

    d = tmp_path_factory.mktemp("user")
    with text_csv.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    counts = Counter(t for r in rows for t in TOKEN.findall(r["review"].lower()))
    itos = ["<pad>", "<unk>", *sorted(t for t, c in counts.items() if c >= 2)]
    (d / "itos.json").write_text(json.dumps(itos))
    name = "mymodel_create"
    (d / f"{name}.py").write_text(textwrap.dedent(MODULE))
    return d, name


@pytest.fixture(scope="module")
def created(tmp_path_factory, user_dir, text_csv):
    """The user's model created, recorded and abstracted through the command line."""
    d, name = user_dir
    run = tmp_path_factory.mktemp("runs") / "mine"
    mp = pytest.MonkeyPatch()
    mp.chdir(d)
    try:
        assert main(["create", str(run), "--model", f"{name}:build", "--dataset",
                     f"csv:{text_csv}", "--text-col", "review", "--label-col",
                     "sentiment"]) == 0
    finally:
        mp.undo()
    # later commands run from anywhere: the run remembers where the module is
    assert main(["record", str(run)]) == 0
    assert main(["abstract", str(run), "--states", "8", "--no-index"]) == 0
    return run, d, name


def _user_evaluation(d, name, csv_path, texts):
    """The user's own evaluation: their tokeniser, their ids, their head order."""
    import importlib
    import sys

    sys.path.insert(0, str(d))
    try:
        mod = importlib.import_module(name)
    finally:
        sys.path.remove(str(d))
    model = mod.build().eval()
    stoi = {t: i for i, t in enumerate(mod.ITOS)}
    out = []
    with torch.no_grad():
        for text in texts:
            ids = [stoi.get(t, 1) for t in mod.tokenize(text)]
            if not ids:
                out.append(model.initial()[1].numpy())
                continue
            _, proba = model.trace(torch.tensor([ids]), torch.tensor([len(ids)]))
            out.append(proba[0, -1].numpy())
    return np.array(out)


def test_recording_uses_the_models_tokeniser_vocabulary_and_class_order(created, text_csv):
    import csv

    run, d, name = created
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["model"]["kind"] == "factory" and cfg["model"]["factory"] == f"{name}:build"
    assert cfg["data"]["tokenizer"] == "model" and cfg["data"]["classes"] == ["rotten", "fresh"]
    itos = json.loads((d / "itos.json").read_text())
    assert json.loads((run / "vocab.json").read_text())["tokens"] == itos
    traces = Traces(run / "traces")
    assert traces.classes == ["rotten", "fresh"]
    test = traces["test"]
    # the user's own evaluation of the same test texts, gold labels in the head's order
    with text_csv.open(encoding="utf-8") as fh:
        gold = {r["review"]: r["sentiment"] for r in csv.DictReader(fh)}
    mine = _user_evaluation(d, name, text_csv, test.texts)
    labels = np.array([["rotten", "fresh"].index(gold[t]) for t in test.texts])
    np.testing.assert_allclose(test.final_proba, mine, atol=1e-5)
    assert (test.labels == labels).all()
    own_accuracy = float((mine.argmax(1) == labels).mean())
    assert traces.meta["splits"]["test"]["accuracy"] == own_accuracy  # exactly
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["test_accuracy"] == own_accuracy
    # tokens as the model saw them: "don't" and "a/c"-like tokens stay whole
    i = next(i for i, t in enumerate(test.texts) if "'" in t)
    assert test.tokens(i) == TOKEN.findall(test.texts[i].lower())


def test_forcing_runs_on_the_factory_model(created, capsys):
    run, _, _ = created
    capsys.readouterr()
    assert main(["force", str(run)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 <= out["forcing_agreement"] <= 1


def test_a_class_set_that_differs_from_the_data_is_one_line(user_dir, text_csv, tmp_path,
                                                             capsys, monkeypatch):
    d, name = user_dir
    monkeypatch.chdir(d)
    code = main(["create", str(tmp_path / "r"), "--model", f"{name}:wrong_classes",
                 "--dataset", f"csv:{text_csv}", "--text-col", "review", "--label-col",
                 "sentiment"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "['negative', 'positive']" in err and "['fresh', 'rotten']" in err
    assert not (tmp_path / "r").exists()


def test_unknown_module_and_attribute_are_one_line(user_dir, text_csv, tmp_path, capsys,
                                                   monkeypatch):
    d, name = user_dir
    monkeypatch.chdir(d)
    for spec, words in ((f"{name}:nope", "has no attribute 'nope'"),
                        ("not_a_module_q:build", "not found")):
        assert main(["create", str(tmp_path / "r"), "--model", spec, "--dataset",
                     f"csv:{text_csv}", "--text-col", "review", "--label-col",
                     "sentiment"]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and "\n" not in err


def test_python_api_takes_a_factory_path_or_a_model_object(user_dir, text_csv, tmp_path):
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.run import create_model_run

    d, name = user_dir
    run = create_model_run(tmp_path / "api", f"csv:{text_csv}", f"{d / name}.py:build",
                           text_col="review", label_col="sentiment")
    from stateseer.core.rundir import located_path

    kept = run.config["model"]["module_path"]  # relative to the run
    assert located_path(kept, run.path) == str((d / f"{name}.py").resolve())
    model = run.load_model()
    obj_run = create_model_run(tmp_path / "obj", f"csv:{text_csv}", model,
                               text_col="review", label_col="sentiment")
    assert obj_run.config["model"]["kind"] == "object"
    traces = record_run(obj_run, splits=["test"])  # the object is kept by the run
    assert traces.classes == ["rotten", "fresh"]


def test_create_says_once_whose_code_every_later_command_runs(user_dir, text_csv, tmp_path,
                                                              capsys, monkeypatch):
    d, name = user_dir
    monkeypatch.chdir(d)
    assert main(["create", str(tmp_path / "r"), "--model", f"{name}:build", "--dataset",
                 f"csv:{text_csv}", "--text-col", "review", "--label-col",
                 "sentiment"]) == 0
    err = capsys.readouterr().err
    assert err.count("will import and run") == 1 and f"{name}:build" in err


def test_a_head_that_pools_is_refused_at_create_and_a_wrong_accuracy_warned_at_record(
        user_dir, text_csv, tmp_path, monkeypatch, capsys):
    """#50: a last-state reading of a model that pools is not a warning to miss but one
    line that refuses the run, with its rate and the ClassifierAdapter call to write."""
    from stateseer.rnn_models.record import AccuracyMismatchWarning
    from stateseer.rnn_models.run import ModelRun

    d, name = user_dir
    monkeypatch.chdir(d)
    common = ["--dataset", f"csv:{text_csv}", "--text-col", "review", "--label-col",
              "sentiment"]
    assert main(["create", str(tmp_path / "p"), "--model", f"{name}:pooled", *common]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "of 150 test inputs" in err and "ClassifierAdapter(" in err
    assert not (tmp_path / "p").exists()
    # a model that classifies from the last state agrees everywhere: created
    assert main(["create", str(tmp_path / "l"), "--model", f"{name}:last_state",
                 "--expect-accuracy", "0.99", *common]) == 0
    assert ModelRun(tmp_path / "l").config["model"]["own_agreement"]["agreement"] == 1.0
    # the untrained model's recorded accuracy is not the 0.99 the user claims: said once
    with pytest.warns(AccuracyMismatchWarning, match="where you measured 0.990") as rec:
        assert main(["record", str(tmp_path / "l")]) == 0
    assert len(rec) == 1


def test_a_created_run_names_no_absolute_path_and_moves_with_its_project(tmp_path, user_dir,
                                                                       text_csv, monkeypatch):
    """Model code, data and run in one project folder: config.json keeps every path
    relative to the run, and the folder, moved elsewhere, still records from anywhere."""
    import shutil

    d, _ = user_dir
    project = tmp_path / "project"
    code = project / "code"
    code.mkdir(parents=True)
    shutil.copy(d / "itos.json", code / "itos.json")
    (code / "mymodel_moved.py").write_text(textwrap.dedent(MODULE))
    shutil.copy(text_csv, project / "reviews.csv")
    monkeypatch.chdir(code)
    assert main(["create", str(project / "runs" / "mine"), "--model", "mymodel_moved:build",
                 "--dataset", f"csv:{project / 'reviews.csv'}", "--text-col", "review",
                 "--label-col", "sentiment"]) == 0
    text = (project / "runs" / "mine" / "config.json").read_text()
    assert str(tmp_path) not in text
    moved = tmp_path / "elsewhere" / "p2"
    moved.parent.mkdir()
    shutil.move(project, moved)
    from stateseer.core.rundir import located_path

    model = json.loads(text)["model"]  # where a fresh process looks for the module
    assert located_path(model["search_path"], moved / "runs" / "mine") == str(moved / "code")
    monkeypatch.chdir(tmp_path)
    assert main(["record", str(moved / "runs" / "mine"), "--splits", "test"]) == 0
    assert Traces(moved / "runs" / "mine" / "traces")["test"].n_inputs == 150
