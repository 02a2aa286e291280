"""The edits of ``stateseer repair``'s actions, checked on the data they produce (the
retraining itself is tested in ``test_diagnose.py``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stateseer.app.workflows import repair, repair_edits, retraining, suspects
from stateseer.core.errors import StateseerError
from stateseer.rnn_models.datasets import TextDataset
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


def test_confusion_suspects_take_as_many_as_the_noise_rate_says(monkeypatch):
    """Training labels: neg 4 of 14; validation: neg 3 of 6. The rate at which neg was
    labelled pos is 1 - (4/14) / (3/6) = 3/7, so 3/7 / (4/7) * 4 = 3 of the 10 pos-labelled
    rows were neg's: relabel takes the three a cross-fitted model finds most likely neg;
    drop takes 1.5 times as many (round(4.5) = 4), the fourth most likely too."""
    ds = _ds()  # train rows 0-13
    ds = dataclasses.replace(ds, labels=np.r_[ds.labels[:14], [0, 0, 0, 1, 1, 1],
                                              ds.labels[20:]])
    seen = []

    def scorer(tokens, labels, n_classes, *, seed):
        seen.append((list(tokens), labels.tolist(), n_classes))
        proba = np.tile([0.1, 0.9], (len(labels), 1))
        for r, p in ((5, 0.3), (3, 0.8), (7, 0.45), (9, 0.6), (11, 0.99)):
            proba[r] = [p, 1 - p]  # row 11 is labelled neg: not a candidate
        return proba

    monkeypatch.setattr(suspects, "held_out_bag_proba", scorer)
    out, edits = repair_edits._confusion_suspects(ds, 0, 1, np.random.default_rng(0), "relabel")
    assert out.tolist() == [3, 7, 9]  # most likely neg first; 5 (0.3) is the fourth
    assert edits == {"flip_rate": round(3 / 7, 4), "expected": 3}
    # scored: the training split only, its tokens and labels as given
    ((tokens, labels, n_classes),) = seen
    assert tokens == [ds.tokens[i] for i in range(14)] and labels == ds.labels[:14].tolist()
    assert n_classes == 2
    # through the action: the rows take neg, the edits say how many and why
    new, edits = repair.ACTION_EDITS["relabel"](ds, CONF, np.random.default_rng(0), _Src())
    assert edits["relabelled_rows"] == [3, 7, 9] and edits["to"] == "neg"
    assert new.labels[[3, 7, 9]].tolist() == [0, 0, 0] and edits["expected"] == 3
    # drop leaves out more of the likely wrong ones instead (no label is guessed)
    assert repair_edits.DROP_SHARE == 1.5
    new, edits = repair.ACTION_EDITS["drop"](ds, CONF, np.random.default_rng(0), _Src())
    assert edits == {"dropped_rows": [3, 5, 7, 9], "flip_rate": round(3 / 7, 4),
                     "expected": 3}
    assert len(new.splits["train"]) == 10
    assert (new.labels == np.delete(ds.labels, [3, 5, 7, 9])).all()


def test_confusion_drop_keeps_at_least_half_of_the_rows_it_believes():
    """Train: neg 4 of 14. Validation neg 7 of 14: 3 of the 10 pos-labelled rows are
    expected to be neg's, and drop leaves out round(1.5 * 3) = 4 (the cap, 3 + 7 // 2,
    does not bind). Validation neg 10 of 14: 6 expected, 1.5 times is 9, but half of the
    4 others stay: 6 + 2 = 8."""
    labels = np.r_[[0] * 4, [1] * 10]
    texts = [f"w{i} x" for i in range(14)]
    for val_neg, take in ((7, 4), (10, 8)):
        vlabels = np.r_[[0] * val_neg, [1] * (14 - val_neg)]
        ds = TextDataset("toy", texts * 2, np.r_[labels, vlabels], ["neg", "pos"], "word",
                         {"train": np.arange(14), "val": np.arange(14, 28)})
        rows, edits = repair_edits._confusion_suspects(ds, 0, 1, np.random.default_rng(0), "drop")
        rho = 1 - (4 / 14) / (val_neg / 14)
        assert edits["expected"] == round(rho / (1 - rho) * 4)
        assert len(rows) == take and set(rows.tolist()) <= set(range(4, 14))


def test_held_out_scores_find_the_labels_a_word_contradicts():
    """Ground truth: 'awful' inputs are neg, 'lovely' ones pos; 15 neg inputs were
    labelled pos. Scored by models that never saw them, the 15 are the pos-labelled
    inputs most likely neg."""
    rng = np.random.default_rng(1)
    filler = [f"f{i}" for i in range(40)]
    tokens, truth = [], []
    for i in range(200):
        cls = i % 2
        words = [*rng.choice(filler, 6), "lovely" if cls else "awful"]
        tokens.append([str(w) for w in rng.permutation(words)])
        truth.append(cls)
    truth = np.array(truth)
    given = truth.copy()
    flipped = np.flatnonzero(truth == 0)[:15]
    given[flipped] = 1
    proba = suspects.held_out_bag_proba(tokens, given, 2, seed=0)
    assert proba.shape == (200, 2) and np.allclose(proba.sum(1), 1)
    pos = np.flatnonzero(given == 1)
    top = pos[np.argsort(-proba[pos, 0])[:15]]
    assert set(top.tolist()) == set(flipped.tolist())
    # a class of one input is scored too (no fold without it has seen it: 0 for it)
    odd = given.copy()
    odd[0] = 2
    proba3 = suspects.held_out_bag_proba(tokens, odd, 3, seed=0)
    assert proba3.shape == (200, 3) and proba3[0, 2] == 0 and np.allclose(proba3.sum(1), 1)
    # one class: nothing to score against, one line
    with pytest.raises(StateseerError, match="two classes") as e:
        suspects.held_out_bag_proba(tokens, np.zeros(200, np.int64), 2)
    one_line(e.value)


def test_confident_relabel_is_refused_without_noise_to_correct(monkeypatch):
    ds = _ds()
    same = dataclasses.replace(ds, labels=np.r_[ds.labels[:14], [1] * 6, ds.labels[20:]])
    monkeypatch.setattr(suspects, "held_out_bag_proba", lambda *a, **k: pytest.fail("fit"))
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

    monkeypatch.setattr(repair_edits, "_held_out", held_out)
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
    monkeypatch.setattr(repair_edits, "_held_out", lambda *_a: (proba, np.zeros((2, 2))))
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
    cfg = retraining._train_config(src, tmp_path / "data.jsonl")
    assert cfg.prefix_loss == "off" and cfg.arch == "mamba"


def test_the_fittest_repair_comes_first_and_depends_on_the_classes():
    """A mislabelled topic of two classes is relabelled first (the right label is the
    other class); of three or more its suspects are left out first (the class would be a
    guess); a confusion's suspects take the class it names first; every action offered
    is one repair knows."""
    from stateseer.app.workflows.diagnose import ACTIONS, actions_for

    assert actions_for("subpopulation", 2)[0] == "relabel"
    assert actions_for("subpopulation", 3) == ["drop", "relabel", "counterfactual"]
    assert actions_for("confusion", 3) == ["relabel", "drop", "reweight"]
    assert ACTIONS["subpopulation"][0] == "relabel"  # the table itself is left alone
    assert {a for acts in ACTIONS.values() for a in acts} <= set(repair.ACTION_EDITS)


def test_a_shortcut_is_offered_no_action_that_changes_or_drops_labels():
    """#49: a shortcut's training labels are right (its kind test says so), so relabel and
    drop, which act on labels, are never offered for it, and repair refuses them."""
    from stateseer.app.workflows.diagnose import actions_for, check_findings

    for n in (2, 3, 5):
        assert not {"relabel", "drop"} & set(actions_for("shortcut", n))
    doc = {"format": "stateseer.findings", "version": 1, "findings": [
        {"rank": 1, "kind": "shortcut", "tokens": ["via", "@", "source"], "significant": True,
         "actions": ["relabel", "drop", "counterfactual"]}]}
    assert check_findings(doc, "f.json", n_classes=2)["findings"][0]["actions"] == \
        ["counterfactual"]


def test_rebalance_copies_the_thinned_class_up_to_the_split_share_and_refuses_when_there():
    """neg holds 4 of the 14 training labels (29 %); a prior-shift finding that measured
    50 % on the split adds 6 copies of neg inputs (10 of 20), edits no label or text,
    and a finding whose share the training labels already hold is refused in one line."""
    ds = _ds()
    prior = {"kind": "prior", "tokens": [], "class": "neg", "split_share": 0.5}
    out, edits = repair.ACTION_EDITS["rebalance"](ds, prior, np.random.default_rng(0),
                                                 _Src())
    train = np.asarray(out.splits["train"])
    assert len(edits["added_copies_of"]) == 6 and edits["share_after"] == 0.5
    assert (out.labels[train] == 0).sum() == 10 and len(train) == 20
    assert all(ds.labels[i] == 0 for i in edits["added_copies_of"])
    assert out.texts[:len(ds)] == ds.texts and (out.labels[:len(ds)] == ds.labels).all()
    assert [out.texts[i] for i in range(len(ds), len(out.texts))] == \
        [ds.texts[i] for i in edits["added_copies_of"]]
    with pytest.raises(StateseerError, match="nothing to rebalance") as e:
        repair.ACTION_EDITS["rebalance"](ds, {**prior, "split_share": 0.2},
                                         np.random.default_rng(0), _Src())
    one_line(e.value)
    with pytest.raises(StateseerError, match="fits a prior-shift finding"):
        repair.ACTION_EDITS["rebalance"](ds, CONF, np.random.default_rng(0), _Src())
