"""The edits of ``stateseer repair``'s actions, checked on the data they produce (the
retraining itself is tested in ``test_diagnose.py``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stateseer.app.workflows import repair
from stateseer.rnn_models.datasets import TextDataset
from stateseer.rnn_models.formats.errors import StateseerError
from tests.conftest import one_line


def _ds() -> TextDataset:
    texts = (["a fine film"] * 6 + ["not funny at all"] * 4 + ["dull"] * 4 +
             ["not funny really"] * 6 + ["great"] * 4)
    labels = np.array([1] * 6 + [1] * 4 + [0] * 4 + [0] * 6 + [1] * 4)
    splits = {"train": np.arange(14), "val": np.arange(14, 20), "test": np.arange(20, 24)}
    return TextDataset("toy", texts, labels, ["neg", "pos"], "word", splits)


SEQ = {"kind": "sequence", "tokens": ["not", "funny"]}
CONF = {"kind": "confusion", "tokens": [], "classes": ["neg", "pos"]}


class _Src:
    def __init__(self, config=None):
        self.config = {"config": config or {}}


def test_relabel_gives_a_sequence_the_label_of_its_validation_carriers():
    ds = _ds()
    out, edits = repair.ACTION_EDITS["relabel"](ds, SEQ, np.random.default_rng(0), _Src())
    assert edits == {"relabelled_rows": [6, 7, 8, 9], "to": "neg"}
    assert (out.labels[6:10] == 0).all() and (out.labels[:6] == 1).all()
    assert (out.labels[14:] == ds.labels[14:]).all() and out.texts == ds.texts


def test_reweight_reads_the_labels_through_the_noise_the_split_priors_measure():
    """neg is 4 of 14 training labels and 6 of 6 validation labels: neg was labelled pos
    at the rate 1 - (4/14) / 1; the data are left alone, the loss gets the matrix."""
    ds = _ds()
    out, edits = repair.ACTION_EDITS["reweight"](ds, CONF, np.random.default_rng(0), _Src())
    assert out is ds
    rho = 1 - 4 / 14
    assert edits["flip_rate"] == round(rho, 4) and (edits["from"], edits["to"]) == ("neg", "pos")
    old, noise = edits["settings"]["label_noise"]
    assert old is None and np.allclose(noise, [[1 - rho, rho], [0, 1]], atol=1e-6)
    from stateseer.rnn_models.train import TrainConfig

    TrainConfig(dataset="x", label_noise=noise).check()  # a matrix training takes
    same = dataclasses.replace(ds, labels=np.r_[ds.labels[:14], [1] * 6, ds.labels[20:]])
    with pytest.raises(StateseerError, match="no label noise to correct") as e:
        repair.ACTION_EDITS["reweight"](same, CONF, np.random.default_rng(0), _Src())
    one_line(e.value)


def test_confident_relabel_takes_as_many_as_the_noise_rate_says(monkeypatch):
    """Training labels: neg 4 of 14; validation: neg 3 of 6. The rate at which neg was
    labelled pos is 1 - (4/14) / (3/6) = 3/7, so 3/7 / (4/7) * 4 = 3 of the 10 pos-labelled
    rows were neg's: the three that held-out models, trained through that noise, find
    most likely neg."""
    ds = _ds()  # train rows 0-13
    ds = dataclasses.replace(ds, labels=np.r_[ds.labels[:14], [0, 0, 0, 1, 1, 1],
                                              ds.labels[20:]])
    seen = []

    def held_out(ds_, src, parts, settings=None):
        seen.append(([p.tolist() for p in parts], settings))
        rows = np.concatenate(parts)
        proba = np.tile([0.1, 0.9], (len(rows), 1))
        for r, p in ((5, 0.3), (3, 0.8), (7, 0.45), (9, 0.6), (11, 0.99)):
            proba[rows == r] = [p, 1 - p]  # row 11 is labelled neg: not a candidate
        return proba, np.zeros((6, 2))

    monkeypatch.setattr(repair, "_held_out", held_out)
    labels = ds.labels.copy()
    out, edits = repair._confident_relabel(ds, None, labels, 0, 1, np.random.default_rng(0))
    assert out.tolist() == [3, 7, 9]  # most likely neg first; 5 (0.3) is the fourth
    assert edits == {"flip_rate": round(3 / 7, 4), "expected": 3}
    # cross-fitted: the folds cover the training split once, and only it; each model
    # reads the labels through the measured noise
    ((folds, settings),) = seen
    assert len(folds) == repair.FOLDS and sorted(x for f in folds for x in f) == list(range(14))
    old, noise = settings["label_noise"]
    assert old is None and np.allclose(noise, [[4 / 7, 3 / 7], [0, 1]], atol=1e-6)
    # through the action: the rows take neg, the edits say how many and why
    new, edits = repair.ACTION_EDITS["relabel"](ds, CONF, np.random.default_rng(0), _Src())
    assert edits["relabelled_rows"] == [3, 7, 9] and edits["to"] == "neg"
    assert new.labels[[3, 7, 9]].tolist() == [0, 0, 0] and edits["expected"] == 3
    # drop leaves the same rows out instead (no label is guessed)
    new, edits = repair.ACTION_EDITS["drop"](ds, CONF, np.random.default_rng(0), _Src())
    assert edits == {"dropped_rows": [3, 7, 9], "flip_rate": round(3 / 7, 4), "expected": 3}
    assert len(new.splits["train"]) == 11 and (new.labels == np.delete(ds.labels, [3, 7, 9])).all()


def test_confident_relabel_is_refused_without_noise_to_correct(monkeypatch):
    ds = _ds()
    same = dataclasses.replace(ds, labels=np.r_[ds.labels[:14], [1] * 6, ds.labels[20:]])
    monkeypatch.setattr(repair, "_held_out", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(StateseerError, match="no label noise to correct") as e:
        repair.ACTION_EDITS["relabel"](same, CONF, np.random.default_rng(0), _Src())
    one_line(e.value)
    bare = dataclasses.replace(ds, splits={**ds.splits, "val": np.zeros(0, np.int64)})
    with pytest.raises(StateseerError, match="no validation inputs") as e:
        repair.ACTION_EDITS["relabel"](bare, CONF, np.random.default_rng(0), _Src())
    one_line(e.value)


def test_relabel_of_a_topic_scores_its_carriers_with_a_model_that_never_saw_them(
        monkeypatch):
    texts = ["the plot was fine"] * 4 + ["a plot twist"] * 4 + ["nice"] * 4 + ["bad"] * 4
    labels = np.array([0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 0])
    splits = {"train": np.arange(12), "val": np.arange(12, 16), "test": np.arange(0)}
    ds = TextDataset("toy", texts, labels, ["neg", "pos"], "word", splits)
    topic = {"kind": "subpopulation", "tokens": ["plot"], "label": "neg"}

    def held_out(ds_, src, parts):
        (carriers,) = parts
        assert carriers.tolist() == list(range(8))  # the topic's training inputs only
        assert not set(carriers.tolist()) - set(ds_.splits["train"].tolist())
        proba = np.tile([0.2, 0.8], (8, 1))
        proba[[0, 4]] = [0.9, 0.1]  # two neg-labelled carriers the model calls neg
        proba[[1, 2]] = [0.3, 0.7]
        proba[5] = [0.25, 0.75]
        return proba, np.zeros((4, 2))

    monkeypatch.setattr(repair, "_held_out", held_out)
    out, edits = repair.ACTION_EDITS["relabel"](ds, topic, np.random.default_rng(0), _Src())
    # 5 carriers are labelled neg where the model expects 3.25 (the sum of its P(neg)):
    # 2 labels too many; of the three it calls pos, the two least neg (5, then 1) go to pos
    assert edits["excess"] == 2 and edits["scored_rows"] == 8 and edits["relabelled"] == 2
    assert edits["relabelled_rows"] == [1, 5] and edits["to"] == {"pos": 2}
    assert out.labels[[1, 5]].tolist() == [1, 1]
    assert (out.labels[8:] == labels[8:]).all() and out.labels[[0, 2, 4]].tolist() == [0, 0, 0]
    # drop leaves the same suspects out instead, and keeps the rest of the topic
    out, edits = repair.ACTION_EDITS["drop"](ds, topic, np.random.default_rng(0), _Src())
    assert edits == {"dropped_rows": [1, 5], "scored_rows": 8, "excess": 2}
    assert len(out.texts) == 14 and len(out.splits["train"]) == 10
    assert sum("plot" in t.split() for t in out.texts) == 6


def test_relabel_of_a_topic_changes_nothing_where_the_labels_match_the_model(monkeypatch):
    """No excess of the leaning label (the model expects as many as there are): a topic
    labelled as its content says is refused in one line, before any retraining."""
    texts = ["the plot was fine"] * 6 + ["nice"] * 2 + ["bad"] * 2
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 0, 1, 0])
    splits = {"train": np.arange(8), "val": np.arange(8, 10), "test": np.arange(0)}
    ds = TextDataset("toy", texts, labels, ["neg", "pos"], "word", splits)
    topic = {"kind": "subpopulation", "tokens": ["plot"], "label": "neg"}
    proba = np.array([[0.6, 0.4], [0.45, 0.55], [0.5, 0.5], [0.4, 0.6], [0.55, 0.45],
                      [0.3, 0.7]])  # P(neg) sums to 2.8 over 3 neg labels: no excess
    monkeypatch.setattr(repair, "_held_out", lambda *_a: (proba, np.zeros((2, 2))))
    for action in ("relabel", "drop"):  # both act on the suspects: there are none
        with pytest.raises(StateseerError, match=f"nothing to {action}; choose "
                                                 "counterfactual") as e:
            repair.ACTION_EDITS[action](ds, topic, np.random.default_rng(0), _Src())
        one_line(e.value)
        assert "expects as many of them labelled neg as are" in str(e.value)


def test_reconfigure_names_the_setting_and_refuses_where_there_is_none():
    ds = _ds()
    length = {"kind": "length", "tokens": [], "length_above": 3}
    unknown = {"kind": "unknown", "tokens": [], "unknown_words": ["9"]}
    rng = np.random.default_rng(0)
    out, edits = repair.ACTION_EDITS["reconfigure"](ds, length, rng, _Src({"truncate": 3}))
    assert out is ds and edits == {"settings": {"truncate": [3, None]}}
    _, edits = repair.ACTION_EDITS["reconfigure"](ds, unknown, rng,
                                                  _Src({"vocab_exclude": r"\d+"}))
    assert edits == {"settings": {"vocab_exclude": [r"\d+", None]}}
    _, edits = repair.ACTION_EDITS["reconfigure"](ds, unknown, rng, _Src({"min_freq": 3}))
    assert edits["settings"]["min_freq"] == [3, 1]
    for f, src, needle in ((length, _Src(), "whole inputs"), (SEQ, _Src(), "length or an"),
                           (SEQ, _Src(), "reweight fits")):
        action = "reweight" if "reweight" in needle else "reconfigure"
        with pytest.raises(StateseerError, match=needle) as e:
            repair.ACTION_EDITS[action](ds, f, rng, src)
        one_line(e.value)


def test_repair_retrains_with_the_prefix_loss_the_run_was_trained_with(tmp_path):
    """A Mamba text run from before the every-prefix loss took ``auto`` when ``auto``
    meant the last step alone: its repair trains the same way (``off``), not with today's
    ``auto`` (``label``); a run trained with it keeps it; an LSTM keeps ``auto``."""
    from stateseer.rnn_models.train import reproducing_prefix_loss

    old = {"data": {"tokenizer": "word"}, "config": {"arch": "mamba", "prefix_loss": "auto"},
           "training": {"prefix_loss": False}}
    assert reproducing_prefix_loss(old) == "off"
    new = {**old, "training": {"prefix_loss": False, "label_prefix_loss": True}}
    assert reproducing_prefix_loss(new) == "label"
    assert reproducing_prefix_loss({**old, "config": {"arch": "lstm"}}) == "auto"
    assert reproducing_prefix_loss({**old, "data": {"tokenizer": "char"}}) == "auto"
    assert reproducing_prefix_loss({**old, "config": {"arch": "mamba",
                                                      "prefix_loss": "on"}}) == "on"

    src = _Src({"arch": "mamba", "prefix_loss": "auto", "dataset": "rotten_tomatoes"})
    src.config.update(data=old["data"], training=old["training"])
    src.path = tmp_path
    cfg = repair._train_config(src, tmp_path / "data.jsonl")
    assert cfg.prefix_loss == "off" and cfg.arch == "mamba"


def test_the_fittest_repair_comes_first_and_depends_on_the_classes():
    """A mislabelled topic of two classes is relabelled first (the right label is the
    other class); of three or more its suspects are left out first (the class would be a
    guess); every action offered is one repair knows."""
    from stateseer.app.workflows.diagnose import ACTIONS, actions_for

    assert actions_for("subpopulation", 2)[0] == "relabel"
    assert actions_for("subpopulation", 3) == ["drop", "relabel", "counterfactual"]
    assert actions_for("confusion", 3) == ["relabel", "drop", "reweight"]
    assert ACTIONS["subpopulation"][0] == "relabel"  # the table itself is left alone
    assert {a for acts in ACTIONS.values() for a in acts} <= set(repair.ACTION_EDITS)
