"""Each injected bug does what it claims, checked on the edited data (the ground truth the
diagnosis benchmark is measured against)."""

from __future__ import annotations

import numpy as np
import pytest

from stateseer.core.errors import DataError
from stateseer.rnn_models.datasets import load_dataset
from stateseer.rnn_models.injection import (
    NEGATORS,
    SUBPOPULATION_NOISE,
    TOPICS,
    clean,
    hit,
    inject,
)
from tests.conftest import one_line


@pytest.fixture(scope="module")
def rt():
    return load_dataset("rotten_tomatoes")


def _words(text: str) -> list[str]:
    return text.split()


def test_shortcut_goes_into_one_class_in_training_and_another_in_test(rt):
    bug = inject("shortcut", rt, np.random.default_rng(0))
    word = bug.culprit["tokens"][0]
    for split, cls, share in (("train", 0, 0.35), ("test", 1, 0.4)):
        idx = rt.splits[split]
        has = np.array([word in _words(bug.texts[i]) for i in idx])
        before = np.array([word in rt.tokens[i] for i in idx])
        new = has & ~before
        assert new.sum() == bug.changed[split]
        assert (bug.labels[idx][new] == cls).all()  # only that class got it
        assert abs(new.sum() / (bug.labels[idx] == cls).sum() - share) < 0.05
    assert (bug.labels == rt.labels).all()  # labels untouched


def test_shortcut_with_three_classes_goes_between_the_two_largest():
    ds = load_dataset("rotten_tomatoes3")  # plot (small), fresh, rotten
    bug = inject("shortcut", ds, np.random.default_rng(0))
    word = bug.culprit["tokens"][0]
    assert bug.culprit["class"] == "rotten"
    for split, cls in (("train", "rotten"), ("test", "fresh")):
        idx = ds.splits[split]
        new = np.array([word in _words(bug.texts[i]) and word not in ds.tokens[i]
                        for i in idx])
        assert new.sum() == bug.changed[split] > 100
        assert (bug.labels[idx][new] == ds.classes.index(cls)).all()


def test_sequence_is_taught_with_the_wrong_label_in_training_only(rt):
    bug = inject("sequence", rt, np.random.default_rng(0))
    neg, word = bug.culprit["tokens"]
    cls = rt.classes.index(bug.culprit["class"])
    for split in ("train", "test"):
        idx = rt.splits[split]
        phrase = f" {neg} {word} "
        has = np.array([phrase in f" {bug.texts[i]} " for i in idx])
        new = has & ~np.array([phrase in f" {rt.texts[i]} " for i in idx])
        assert new.sum() == bug.changed[split] > 20
        assert (rt.labels[idx][new] != cls).all()  # put into the other class's inputs
        relabelled = bug.labels[idx] != rt.labels[idx]
        if split == "train":
            assert (relabelled == new).all() and (bug.labels[idx][new] == cls).all()
        else:
            assert not relabelled.any()
    # the word alone stays typical of its class (the sequence, not the word, is the bug)
    train = rt.splits["train"]
    with_word = [i for i in train if word in rt.tokens[i]]
    assert np.mean(rt.labels[with_word] == cls) > 0.6


def test_subpopulation_noise_stays_inside_the_topic(rt):
    bug = inject("subpopulation", rt, np.random.default_rng(0))
    words = set(TOPICS[bug.culprit["topic"]])
    train = rt.splits["train"]
    about = np.array([bool(words & set(rt.tokens[i])) for i in train])
    changed = bug.labels[train] != rt.labels[train]
    assert not (changed & ~about).any()
    target = rt.classes.index(bug.culprit["class"])
    assert (bug.labels[train][changed] == target).all()  # pulled towards one class
    outside = about & (rt.labels[train] != target)
    assert abs(changed.sum() / outside.sum() - SUBPOPULATION_NOISE) < 0.06
    for split in ("val", "test"):  # only the training labels are noisy
        idx = rt.splits[split]
        assert (bug.labels[idx] == rt.labels[idx]).all()


def test_confusion_needs_three_classes_and_moves_one_class_into_another(rt):
    with pytest.raises(DataError, match="three or more classes") as e:
        inject("confusion", rt, np.random.default_rng(0))
    one_line(e.value)
    rt3 = load_dataset("rotten_tomatoes3")
    bug = inject("confusion", rt3, np.random.default_rng(0))
    train = rt3.splits["train"]
    changed = bug.labels[train] != rt3.labels[train]
    counts = np.bincount(rt3.labels[train])
    a, b = np.argsort(counts)[-2:]  # the smaller of the two largest classes into the larger
    assert (rt3.labels[train][changed] == a).all() and (bug.labels[train][changed] == b).all()
    assert abs(changed.sum() / (rt3.labels[train] == a).sum() - 1 / 3) < 0.05
    assert bug.culprit["classes"] == [rt3.classes[a], rt3.classes[b]]


def test_the_control_is_the_data_set_and_an_unknown_family_is_one_line(rt, tmp_path):
    c = clean(rt)
    assert c.texts == rt.texts and not c.culprit
    path = c.write(tmp_path / "rt.jsonl")
    back = load_dataset(f"jsonl:{path}")
    assert sorted(back.classes) == sorted(rt.classes) and len(back) == len(rt)
    assert {s: len(i) for s, i in back.splits.items()} == \
        {s: len(i) for s, i in rt.splits.items()}
    with pytest.raises(DataError, match="unknown bug family 'typo'") as e:
        inject("typo", rt, np.random.default_rng(0))
    one_line(e.value)


def test_hit_says_whether_a_finding_names_the_culprit():
    seq = {"kind": "sequence", "tokens": ["<negator>", "funny"], "negators": list(NEGATORS)}
    assert hit({"kind": "sequence", "tokens": ["not", "funny"]}, seq)
    assert not hit({"kind": "shortcut", "tokens": ["funny"]}, seq)  # neither token alone
    assert hit({"kind": "shortcut", "tokens": ["frankly"]},
               {"kind": "shortcut", "tokens": ["frankly"]})
    assert hit({"kind": "confusion", "tokens": [], "classes": ["plot", "fresh"]},
               {"kind": "confusion", "classes": ["plot", "fresh"]})


def test_truncation_is_a_pipeline_setting_that_leaves_the_data_alone(rt):
    bug = inject("truncation", rt, np.random.default_rng(0))
    n = bug.culprit["length_above"]
    assert bug.train_options == {"truncate": n} and bug.culprit["kind"] == "length"
    assert bug.texts == rt.texts and (bug.labels == rt.labels).all()
    train_len = np.array([len(rt.tokens[i]) for i in rt.splits["train"]])
    assert abs((train_len <= n).mean() - 0.15) < 0.05  # the 15th percentile
    test_len = np.array([len(rt.tokens[i]) for i in rt.splits["test"]])
    assert bug.changed["test"] == int((test_len > n).sum())


def test_unknown_ratings_carry_the_label_and_the_vocabulary_hides_them(rt):
    import re

    from stateseer.rnn_models.injection import ratings

    bug = inject("unknown", rt, np.random.default_rng(0))
    scale = ratings(2)
    assert bug.culprit == {"kind": "unknown", "tokens": scale[0] + scale[1]}
    hide = re.compile(bug.train_options["vocab_exclude"]).fullmatch
    assert all(hide(w) for w in bug.culprit["tokens"])
    for split, idx in rt.splits.items():
        rated = [i for i in idx.tolist() if bug.texts[i] != rt.texts[i]]
        assert len(rated) == bug.changed[split]
        assert abs(len(rated) / len(idx) - 0.25) < 0.05
        last = [bug.texts[i].split()[-1] for i in rated]
        # the appended numeral is the label: its class's range, always
        assert all(w in scale[int(bug.labels[i])] for w, i in zip(last, rated, strict=True))
        # about half of the rated inputs changed label (the rating was drawn at random)
        flipped = np.mean([bug.labels[i] != rt.labels[i] for i in rated])
        assert 0.35 < flipped < 0.65
    with pytest.raises(DataError, match="2 to 10 classes") as e:
        ratings(11)
    one_line(e.value)


def test_hit_names_the_cut_and_the_hidden_words_not_their_neighbours():
    cut = {"kind": "length", "tokens": [], "length_above": 11}
    assert hit({"kind": "length", "tokens": [], "length_above": 11}, cut)
    assert not hit({"kind": "length", "tokens": [], "length_above": 21}, cut)
    unk = {"kind": "unknown", "tokens": ["1", "2", "9"]}
    assert hit({"kind": "unknown", "tokens": [], "unknown_words": ["9", "2002"]}, unk)
    assert hit({"kind": "unknown", "tokens": ["2"]}, unk)
    # the token named as a shortcut does not say the model cannot see it
    assert not hit({"kind": "shortcut", "tokens": ["9"]}, unk)
