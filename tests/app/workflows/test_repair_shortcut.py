"""The repairs of a shortcut (#49): ``augment`` inserts a span whole, ``jtt`` upweights the
source model's training errors, ``dfr`` refits only the model's last layer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stateseer.app.workflows import repair, repair_edits, repair_head, retraining
from stateseer.core.errors import StateseerError
from stateseer.rnn_models.datasets import TextDataset
from tests.conftest import one_line

SPAN = ["via", "@", "newswire"]


@pytest.fixture(scope="module")
def tagged_run(tmp_path_factory) -> Path:
    """A small GRU that learnt a scraper's tag of three tokens ('via @ newswire', on 35 %
    of the negative training inputs) as negative, recorded and diagnosed: finding 1 is the
    span (a few seconds)."""
    from stateseer import TrainConfig, record_run, train_run
    from stateseer.app.workflows.diagnose import diagnose_run
    from stateseer.testing import sentiment_csv

    where = tmp_path_factory.mktemp("tagged")
    data = sentiment_csv(where / "data.csv", tag=" ".join(SPAN))
    run = train_run(TrainConfig(dataset=f"csv:{data}", arch="gru", epochs=3, hidden=32,
                                embed=32), where / "run", progress=False)
    record_run(run)
    top = diagnose_run(run.path)["findings"][0]
    assert top["kind"] == "shortcut" and top["tokens"] == SPAN and top["significant"]
    assert {"dfr", "jtt"} <= set(top["actions"])
    return run.path


def _finding(run: Path) -> dict:
    from stateseer.app.workflows.diagnose import load_findings

    return load_findings(run)["findings"][0]


def test_augment_inserts_the_whole_span_in_reading_order():
    texts = ["a b via @ newswire", "c via @ newswire d", "good e", "fine f g", "nice", "x y"]
    ds = TextDataset("toy", texts, np.array([0, 0, 1, 1, 1, 0]), ["neg", "pos"], "word",
                     {"train": np.arange(5), "val": np.array([5]), "test": np.zeros(0, int)})
    f = {"kind": "shortcut", "tokens": SPAN}
    out, edits = repair.ACTION_EDITS["augment"](ds, f, np.random.default_rng(0), None)
    picks = edits["added_copies_of"]
    assert len(picks) == 2 and set(picks) <= {2, 3, 4} and edits["word"] == "via @ newswire"
    for i, k in zip(picks, range(6, 8), strict=True):
        toks = out.tokens[k]
        at = toks.index("via")
        assert toks[at:at + 3] == SPAN and toks[:at] + toks[at + 3:] == ds.tokens[i]
        assert out.labels[k] == ds.labels[i] and k in out.splits["train"]


def test_a_span_is_inserted_where_a_truncating_run_still_reads_it():
    rng = np.random.default_rng(0)
    for _ in range(20):
        toks = repair_edits._inserted(list("abcdef"), SPAN, rng, limit=5)
        assert len(toks) == 5 and repair_edits._has_span(toks, SPAN)
    assert repair_edits._has_span(["x", *SPAN], SPAN)
    assert not repair_edits._has_span(["via", "x", "@"], SPAN)
    assert not repair_edits._has_span(["via"], SPAN)


def test_jtt_copies_exactly_the_source_models_training_errors(tagged_run):
    """The rows JTT upweights are those the recorded model predicts wrong (read from its
    traces, not recomputed), each then JTT_UPWEIGHT times in training, text and label
    as they were; nothing else changes."""
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    src = ModelRun(tagged_run)
    tr = Traces(src.traces_dir)["train"]
    wrong = np.sort(np.asarray(tr.rows)[np.asarray(tr.predictions) != np.asarray(tr.labels)])
    assert 0 < len(wrong) < 500
    ds = retraining._whole(src)
    out, edits = repair.ACTION_EDITS["jtt"](ds, _finding(tagged_run),
                                            np.random.default_rng(0), src)
    assert repair_edits.JTT_UPWEIGHT == 6 and edits["upweight"] == 6
    assert edits["upweighted_rows"] == wrong.tolist()
    train = out.splits["train"]
    assert len(train) == len(ds.splits["train"]) + 5 * len(wrong)
    copies = train[len(ds.splits["train"]):]
    assert np.array_equal(copies, np.arange(len(ds), len(ds) + 5 * len(wrong)))
    source = np.repeat(wrong, 5)
    assert [out.texts[k] for k in copies] == [ds.texts[i] for i in source]
    assert (out.labels[copies] == ds.labels[source]).all()
    for s in ("val", "test"):
        assert np.array_equal(out.splits[s], ds.splits[s])
    assert out.texts[:len(ds)] == ds.texts and (out.labels[:len(ds)] == ds.labels).all()


def test_jtt_is_refused_in_one_line_where_the_model_makes_no_training_error(
        tagged_run, monkeypatch):
    from stateseer.rnn_models import train as training
    from stateseer.rnn_models.run import ModelRun

    src = ModelRun(tagged_run)
    ds = retraining._whole(src)
    right = np.eye(2)[ds.labels[ds.splits["train"]]]
    monkeypatch.setattr(training, "predict_proba", lambda *_a, **_k: right)
    with pytest.raises(StateseerError, match="none to upweight; choose counterfactual") as e:
        repair.ACTION_EDITS["jtt"](ds, _finding(tagged_run), np.random.default_rng(0), src)
    one_line(e.value)


def _flips(model, src, rows: np.ndarray) -> float:
    """How often ``model``'s prediction changes when the span is appended to ``rows`` (as
    the scraper appends it)."""
    from stateseer.rnn_models.train import predict_proba

    ds, vocab = src.dataset(), src.vocab()
    plain = [vocab.encode(ds.tokens[i]) for i in rows.tolist()]
    tagged = [vocab.encode([*ds.tokens[i], *SPAN]) for i in rows.tolist()]
    return float((predict_proba(model, plain).argmax(1) !=
                  predict_proba(model, tagged).argmax(1)).mean())


def test_dfr_refits_only_the_head_so_the_span_sways_the_model_less(tagged_run, tmp_path):
    """dfr trains nothing: the new run's model is the source's, every tensor but the
    head's equal; the head is fit on validation inputs balanced over the span; appending
    the span to the validation inputs that lack it changes the new model's prediction
    far less often than the source's (inserted anywhere instead: 0.50 -> 0.30 when
    written). ``--seeds 2`` refits the head with another seed."""
    from stateseer.rnn_models.run import ModelRun

    out = tmp_path / "dfr"
    stages = []
    doc = repair.repair_run(tagged_run, finding=1, action="dfr", out=out, progress=False,
                            seeds=2, report=lambda *a: stages.append(a[0]))
    assert "training" not in stages and stages[-1] == "done"
    assert doc["action"] == "dfr" and doc["culprit"] == SPAN and doc["changed_rows"] == 0
    assert json.loads((out / "repair.json").read_text())["action"] == "dfr"
    src, new = ModelRun(tagged_run), ModelRun(out)
    before, after = src.load_model().state_dict(), new.load_model().state_dict()
    assert set(before) == set(after)
    changed = {k for k in before if not np.array_equal(before[k].numpy(), after[k].numpy())}
    assert changed == {"head.weight", "head.bias"}
    assert new.vocab_path.read_bytes() == src.vocab_path.read_bytes()
    assert new.config["model"] == src.config["model"] and new.data["name"] == src.data["name"]
    assert retraining.training_settings(new) == retraining.training_settings(src)  # paths moved
    assert new.metrics()["test_accuracy"] == pytest.approx(doc["after"]["test_accuracy"],
                                                           abs=1e-3)
    edits = json.loads((out / "repair_edits.json").read_text())
    assert edits["features"] == 32 and edits["C"] in repair_head.DFR_C
    sizes = [n for per in edits["balanced_rows"].values() for n in per.values()]
    assert len(sizes) == 4 and len(set(sizes)) == 1 and sizes[0] > 50
    assert np.allclose(edits["head"]["weight"], after["head.weight"].numpy())
    ds = src.dataset()
    val = np.asarray(ds.splits["val"])
    plain = val[[not repair_edits._has_span(ds.tokens[i], SPAN) for i in val.tolist()]]
    was, now = _flips(src.load_model(), src, plain), _flips(new.load_model(), src, plain)
    assert was > 0.3 and now < was / 2  # 0.52 -> 0.12 when written
    assert doc["carriers"]["delta"] > 0.1
    m = doc["seeds"]
    assert m["seeds"] == [0, repair.SEED_STEP] and m["before"][0] == m["before"][1]
    assert m["after"][0] == doc["after"]["test_accuracy"]


def test_dfr_is_refused_in_one_line_for_a_model_without_a_linear_head():
    import torch
    from torch import nn

    class Own(nn.Module):  # a user's model: its last layer is no `head` nn.Linear
        def __init__(self) -> None:
            super().__init__()
            self.out = nn.Linear(4, 2)

        def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            return self.out(torch.zeros(len(ids), 4))

    class Src:
        path, truncate = Path("runs/own"), None

        def load_model(self):
            return Own()

    ds = TextDataset("toy", ["a via", "b"], np.array([0, 1]), ["neg", "pos"], "word",
                     {"train": np.array([0]), "val": np.array([1]), "test": np.zeros(0, int)})
    f = {"kind": "shortcut", "tokens": ["via"]}
    with pytest.raises(StateseerError, match=r"no linear `head`.*jtt") as e:
        repair.ACTION_EDITS["dfr"](ds, f, np.random.default_rng(0), Src())
    one_line(e.value)
    with pytest.raises(StateseerError, match="dfr balances a shortcut") as e:
        repair.ACTION_EDITS["dfr"](ds, {"kind": "sequence", "tokens": ["a", "b"]},
                                   np.random.default_rng(0), Src())
    one_line(e.value)
