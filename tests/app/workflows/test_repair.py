"""The edits of ``stateseer repair``'s actions, checked on the data they produce (the
retraining itself is tested in ``test_diagnose.py``)."""

from __future__ import annotations

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


def test_reweight_counts_the_confused_class_twice_in_training_only():
    ds = _ds()
    out, edits = repair.ACTION_EDITS["reweight"](ds, CONF, np.random.default_rng(0), _Src())
    neg_train = [i for i in range(14) if ds.labels[i] == 0]
    assert edits["added_copies_of"] == neg_train and edits["weight"] == 2
    assert len(out) == len(ds) + len(neg_train)
    assert (np.bincount(out.labels[out.splits["train"]]) == [8, 10]).all()
    assert all((out.splits[s] == ds.splits[s]).all() for s in ("val", "test"))


def test_confident_relabel_takes_the_rows_the_model_gives_the_other_class(monkeypatch):
    from stateseer.abstraction import pipeline

    class Tr:
        rows = np.arange(6)
        final_proba = np.array([[0.9, 0.1], [0.7, 0.3], [0.8, 0.2],   # labelled neg
                                [0.85, 0.15], [0.2, 0.8], [0.6, 0.4]])  # labelled pos
    monkeypatch.setattr(pipeline, "fresh_traces", lambda src: {"train": Tr})
    labels = np.array([0, 0, 0, 1, 1, 1])
    # mean P(neg) on neg rows is 0.8: row 3 (0.85) is relabelled, rows 4 and 5 are not
    assert repair._confident_relabel(None, labels, 0, 1).tolist() == [3]


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
