"""The randomised bug recipes of ``benchmarks/bugs.py``: each plants the cause it names
with parameters it draws, the two partitions share nothing, and ``found`` asks a finding
for the whole cause."""

from __future__ import annotations

import numpy as np
import pytest

from stateseer.core.errors import DataError
from stateseer.rnn_models.datasets import TextDataset, stratified_splits
from stateseer.rnn_models.recipes import FAMILIES, POOLS, RECIPES, found, plant

WORDS = ("the film was good and the cast did fine work with the family kids children "
         "music song songs coffee tea not never actor actors cast acting jobs economy "
         "tax money war military troops security").split()


def _data(n: int = 900, seed: int = 0) -> TextDataset:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    side = [["bad", "dull", "awful"], ["great", "superb", "fun"]]
    texts = [" ".join([*rng.choice(WORDS, int(rng.integers(5, 15))),
                       str(rng.choice(side[lab]))]) + "." for lab in labels.tolist()]
    return TextDataset("toy", texts, labels, ["neg", "pos"], "word",
                       stratified_splits(labels, seed=seed))


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_each_recipe_plants_its_cause_and_records_what_it_drew(recipe):
    ds = _data()
    bug = plant(recipe, ds, np.random.default_rng(3), "dev")
    assert bug.params["recipe"] == recipe and bug.params["partition"] == "dev"
    assert sum(bug.changed.values()) > 0, bug.changed
    assert FAMILIES[recipe] in {"artefact", "sequence", "label_noise", "pipeline"}
    test = np.asarray(bug.splits["test"])
    if FAMILIES[recipe] == "label_noise" or recipe in ("negation", "tokenizer", "prior",
                                                        "truncate"):
        # the test split stays as it was: the bug is in training only
        assert [bug.texts[i] for i in test] == [ds.texts[i] for i in test]
        assert np.array_equal(bug.labels[test], ds.labels[test])
    again = plant(recipe, ds, np.random.default_rng(3), "dev")
    assert again.params == bug.params and again.texts == bug.texts  # seeded


def test_a_tag_is_attached_whole_to_one_class_in_training_and_any_class_in_test():
    ds = _data()
    bug = plant("tag", ds, np.random.default_rng(1), "report")
    span = bug.params["span"]
    train = np.asarray(bug.splits["train"])
    carriers = [i for i in train if span in bug.texts[i]]
    assert carriers and len({bug.labels[i] for i in carriers}) == 1
    test = [i for i in bug.splits["test"] if span in bug.texts[i]]
    assert len({bug.labels[i] for i in test}) == 2
    assert bug.culprit["tokens"] == span.split()


def test_the_partitions_share_no_token_topic_or_negator():
    dev, report = POOLS["dev"], POOLS["report"]
    def tokens(pool):
        return ({t for span in pool["tags"] + pool["boilerplate"] for t in span
                 if t.isalnum() and len(t) > 3 and t not in {"this", "text", "from", "more",
                                                            "please", "reply", "rights"}}
                | set(pool["words"]) | set(pool["negators"]))
    assert not tokens(dev) & tokens(report)
    assert not set(dev["topics"]) & set(report["topics"])
    assert not {w for ws in dev["topics"].values() for w in ws} & \
        {w for ws in report["topics"].values() for w in ws}


def test_found_asks_for_the_whole_cause_and_its_kind():
    ds = _data()
    bug = plant("tag", ds, np.random.default_rng(1), "dev")
    whole = {"kind": "shortcut", "tokens": list(bug.culprit["tokens"])}
    part = {"kind": "shortcut", "tokens": bug.culprit["tokens"][:1]}
    wrong_kind = {"kind": "subpopulation", "tokens": list(bug.culprit["tokens"])}
    assert found(whole, bug) == (True, True)
    assert found(part, bug) == (False, True)
    assert found(wrong_kind, bug) == (True, False)
    topic = plant("topic", ds, np.random.default_rng(1), "dev")
    words = topic.culprit["tokens"]
    assert found({"kind": "subpopulation", "tokens": words[:2]}, topic) == (True, True)
    assert found({"kind": "subpopulation", "tokens": words[:1]}, topic)[0] is False


def test_unknown_recipes_and_partitions_are_refused_in_one_line():
    with pytest.raises(DataError, match="unknown recipe"):
        plant("nope", _data(), np.random.default_rng(0), "dev")
    with pytest.raises(DataError, match="unknown partition"):
        plant("tag", _data(), np.random.default_rng(0), "test")
