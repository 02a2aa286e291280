"""Candidate culprits and their statistics (stateseer.abstraction.analysis.diagnosis), on data whose
answer is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import hypergeom

from stateseer.abstraction.analysis.diagnosis import (
    by_qvalues,
    length_candidates,
    sequence_candidates,
    sequence_shift_candidates,
    subpopulation_candidates,
    token_candidates,
    unknown_candidates,
)

WORDS = ["good", "bad", "film", "the", "not", "dull", "fun", "plot"]


def _inputs(n: int = 400, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[str(w) for w in rng.choice(WORDS, 8)] for _ in range(n)]


def test_a_token_that_carries_the_errors_ranks_first_with_its_exact_tail():
    inputs = _inputs()
    wrong = np.array(["dull" in x for x in inputs]) & (np.arange(400) % 3 > 0)
    best = token_candidates(inputs, wrong)[0]
    assert best.tokens == ("dull",) and best.kind == "shortcut"
    n_with = sum("dull" in x for x in inputs)
    assert best.n_inputs == n_with and best.n_misclassified == int(wrong.sum())
    assert best.error_rate_without == 0.0
    want = hypergeom.sf(wrong.sum() - 1, 400, wrong.sum(), n_with)
    assert best.p_value == pytest.approx(want)
    assert set(best.affected.tolist()) == {i for i, x in enumerate(inputs) if "dull" in x}


def test_a_sequence_is_found_where_neither_token_alone_explains_the_errors():
    inputs = _inputs()
    seq = [any(x[i] == "not" and "fun" in x[i + 1:i + 4] for i in range(len(x)))
           for x in inputs]
    wrong = np.array(seq)
    pairs = sequence_candidates(inputs, wrong, window=3)
    assert pairs[0].tokens == ("not", "fun") and pairs[0].n_misclassified == int(wrong.sum())
    singles = {c.tokens[0]: c.p_value for c in token_candidates(inputs, wrong)}
    assert pairs[0].p_value < 1e-6 * min(singles["not"], singles["fun"])
    # a token that explains everything on its own makes no sequence with its neighbours
    wrong = np.array(["dull" in x for x in inputs])
    assert all(c.p_value > 1e-3 for c in sequence_candidates(inputs, wrong)[:5]
               if "dull" in c.tokens)


FILLER = WORDS + [f"w{k}" for k in range(40)]


def _labelled(n: int, seed: int) -> tuple[list[list[str]], np.ndarray]:
    """Random inputs over 48 words labelled by their first good/bad word (1 for good)."""
    rng = np.random.default_rng(seed)
    inputs = [[str(w) for w in rng.choice(FILLER, 10)] for _ in range(n)]
    labels = np.array([int(next((w for w in x if w in ("good", "bad")), "bad") == "good")
                       for x in inputs])
    return inputs, labels


def _with_pair(inputs, labels, rng, share, relabel):
    """"not fun" put at the front of ``share`` of the class-0 inputs (relabelled 1 when
    ``relabel``): rows changed."""
    rows = np.flatnonzero((labels == 0) & (rng.random(len(labels)) < share))
    for i in rows.tolist():
        inputs[i] = ["not", "fun", *inputs[i][2:]]
        if relabel:
            labels[i] = 1
    return rows


def test_a_pair_taught_the_wrong_label_is_told_by_its_training_labels_not_its_tokens():
    """"not fun" labelled 1 in training, 0 on the test split, in too few test inputs for
    an error tail; "not" and "fun" are common in both classes. The pair is the first
    candidate; a topic word relabelled in training makes no sequence with its
    neighbours (the pair must lean further than its tokens do)."""
    rng = np.random.default_rng(0)
    train, y_train = _labelled(2000, 1)
    test, y_test = _labelled(300, 2)
    _with_pair(train, y_train, rng, 0.15, relabel=True)
    rows = _with_pair(test, y_test, rng, 0.1, relabel=False)
    wrong = np.zeros(len(test), bool)
    wrong[rows[: len(rows) // 2]] = True  # the model got half of them wrong
    best = sequence_shift_candidates(test, y_test, wrong, train, y_train)[0]
    assert best.tokens == ("not", "fun") and best.extra["class"] == 1
    assert best.extra["train_share"] > best.extra["split_share"] + 0.2, best.extra
    assert best.p_value < 1e-6 and set(rows.tolist()) <= set(best.affected.tolist())
    assert best.n_misclassified == len(rows) // 2
    # a topic word ("plot") relabelled 1 in training: a subpopulation, no sequence
    train, y_train = _labelled(2000, 1)
    topic = np.array(["plot" in x for x in train]) & (rng.random(2000) < 0.8)
    y_train[topic] = 1
    wrong = np.zeros(len(test), bool)
    pairs = sequence_shift_candidates(test, y_test, wrong, train, y_train)
    assert min(c.p_value for c in pairs if "plot" in c.tokens) > 0.01
    sub = subpopulation_candidates(test, y_test, wrong, train, y_train)[0]
    assert sub.tokens == ("plot",) and sub.p_value < 1e-6


def test_pairs_of_splits_drawn_alike_pass_no_false_discovery_gate():
    """Training and test labels drawn the same way (a clean data set): over five draws the
    pairs' q-values stay above 0.05."""
    hits = 0
    for seed in range(5):
        train, y_train = _labelled(1000, 10 + seed)
        test, y_test = _labelled(300, 20 + seed)
        wrong = np.random.default_rng(seed).random(300) < 0.2
        cands = sequence_shift_candidates(test, y_test, wrong, train, y_train)
        assert len(cands) > 100
        hits += int((by_qvalues([c.p_value for c in cands]) < 0.05).sum())
    assert hits == 0


def test_long_inputs_and_unknown_words():
    lengths = np.arange(100) % 20 + 1
    wrong = lengths > 15
    best = length_candidates(lengths, wrong, seen=15)[0]
    assert best.extra["length_above"] == 15 and best.error_rate_without == 0.0
    # a pipeline that cut at 8: no threshold above the cut competes with it
    cuts = [c.extra["length_above"] for c in length_candidates(lengths, wrong, seen=8)]
    assert 8 in cuts and max(cuts) == 8
    inputs = [["a", "4/5"] if i % 2 else ["a", "b"] for i in range(60)]
    unknown = [np.array([False, True]) if i % 2 else np.array([False, False])
               for i in range(60)]
    wrong = np.arange(60) % 2 == 1
    train = [["x", "4/5"]] * 20 + [["x", "y"]] * 20
    c = unknown_candidates(inputs, unknown, wrong, train_inputs=train,
                           train_labels=np.array([1] * 20 + [0] * 20))[0]
    assert c.kind == "unknown" and c.extra["unknown_words"] == ["4/5"]
    sig = c.extra["training"]
    assert (sig["inputs"], sig["purity"], sig["lift"], sig["label"]) == (20, 1.0, 2.0, 1)
    # 20 inputs all labelled 1 of 40 half so: both classes tested, each tail 1 / C(40, 20)
    assert sig["p_value"] == pytest.approx(2 * hypergeom.sf(19, 40, 20, 20))


def test_by_qvalues_control_the_false_discovery_rate_under_a_null():
    """Under a permutation null (errors unrelated to the tokens) the candidates of 20
    shuffles yield at most one q-value under 0.05 in total."""
    inputs = _inputs(300)
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(20):
        wrong = rng.random(300) < 0.3
        cands = token_candidates(inputs, wrong) + sequence_candidates(inputs, wrong)
        hits += int((by_qvalues([c.p_value for c in cands]) < 0.05).sum())
    assert hits <= 1
    assert by_qvalues([]).size == 0


def test_a_check_of_seven_fixes_against_six_breaks_never_confirms():
    """#49: the trial's stop word 'to' passed its check by one input (7 fixed, 6 broken).
    The check is now an exact sign test with a least effect: no such margin confirms,
    at any size, while a real culprit's does."""
    from stateseer.abstraction.analysis.diagnosis import check_test

    assert not check_test(7, 6, 13)["confirmed"]
    assert not check_test(70, 60, 130)["confirmed"]  # significant-ish, but too small an effect
    assert not check_test(3, 0, 100)["confirmed"]  # too few of the culprit's errors
    assert check_test(84, 14, 98)["confirmed"] and check_test(84, 14, 98)["sign_p"] < 1e-10


def test_tokens_that_travel_together_are_one_span_in_reading_order():
    from stateseer.abstraction.analysis.diagnosis import span_candidates, token_candidates

    rng = np.random.default_rng(0)
    words = ["good", "bad", "film", "plot", "actor", "scene"]
    inputs, wrong = [], []
    for i in range(200):
        toks = list(rng.choice(words, 5))
        tagged = i % 3 == 0
        if tagged:
            toks += ["posted", "by", "bot42"]
        inputs.append(toks)
        wrong.append(tagged and rng.random() < 0.8)
    cands = span_candidates(token_candidates(inputs, np.array(wrong), min_support=5),
                            inputs, np.array(wrong))
    spans = [c for c in cands if len(c.tokens) > 1]
    assert [c.tokens for c in spans] == [("posted", "by", "bot42")]
    assert not [c for c in cands if c.tokens in (("posted",), ("by",), ("bot42",))]
    assert spans[0].p_value < 1e-10 and spans[0].extra["span"] == 3


def test_a_boilerplate_training_tied_to_one_class_is_grown_into_its_whole_span():
    """Its common words stand elsewhere too ("to", "do", "not"), so co-occurrence cannot
    group them; the span is grown from its rarest word, and its carriers are the inputs
    holding all of it."""
    from stateseer.abstraction.analysis.diagnosis import (
        extend_subpopulations,
        subpopulation_candidates,
    )

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(36)] + ["to", "do", "not", "reply", "please"]
    tail = ["please", "do", "not", "reply", "to", "botmail"]

    def draw(n, tag_rate, tagged_class=None):
        inputs, labels = [], []
        for _ in range(n):
            y = int(rng.integers(0, 2))
            toks = list(rng.choice(words, 6))
            if rng.random() < tag_rate and tagged_class in (None, y):
                toks += tail
            inputs.append(toks)
            labels.append(y)
        return inputs, np.array(labels)

    train, train_y = draw(600, 0.5, tagged_class=1)
    test, test_y = draw(300, 0.3)
    wrong = np.array(["botmail" in t and y == 0 for t, y in zip(test, test_y, strict=True)])
    cands = extend_subpopulations(
        subpopulation_candidates(test, test_y, wrong, train, train_y, min_support=5),
        test, wrong)
    grown = [c for c in cands if "span" in c.extra]
    assert [c.tokens for c in grown] == [tuple(tail)]  # one candidate, grown once
    assert set(grown[0].affected.tolist()) == {i for i, t in enumerate(test) if "botmail" in t}
    assert grown[0].extra["class"] == 1


def test_a_span_is_deleted_where_it_stands_whole_and_its_words_elsewhere_stay():
    from stateseer.abstraction.analysis.diagnosis import holding_all, span_positions

    toks = np.array("to me . please do not reply to botmail".split(), object)
    at = span_positions(toks, ["please", "do", "not", "reply", "to", "botmail"])
    assert toks[~at].tolist() == ["to", "me", "."]
    assert not span_positions(toks, ["botmail", "please"]).any()
    assert holding_all([toks.tolist(), ["to", "do"]], ["do", "to", "botmail"]).tolist() == [0]


def test_the_kind_test_reads_a_span_s_carriers_as_the_inputs_holding_all_of_it():
    from stateseer.abstraction.analysis.diagnosis import TextLabels

    good, bad = ["good", "fun", "great"], ["bad", "dull", "awful"]
    inputs = [[*good, "to"]] * 40 + [[*bad, "to"]] * 40 + [[*good, "reply", "to", "bot"]] * 20
    labels = np.array([1] * 40 + [0] * 40 + [1] * 20)
    tl = TextLabels(inputs, labels, 2)
    assert tl.kind_test(["reply", "to", "bot"])["carriers"] == 100  # any one: "to" is everywhere
    kt = tl.kind_test(["reply", "to", "bot"], every=True)
    assert kt["carriers"] == 20 and not kt["label_noise"]


def test_label_noise_needs_the_carriers_to_disagree_beyond_both_rates_chance():
    """The kind test compares the carriers' disagreement with the same classes' other
    inputs' as two estimates (Cochran–Mantel–Haenszel), not against a rate taken as
    exact: 45 % against 38 % on a few hundred inputs each is within chance."""
    from stateseer.abstraction.analysis.diagnosis import _stratified_p

    a = np.arange(380) < 171  # 45 % of 380 carriers disagree
    b = np.arange(600) < 228  # 38 % of 600 others
    zeros = np.zeros
    assert 0.01 < _stratified_p(a, zeros(380, int), b, zeros(600, int), 1) < 0.05
    assert _stratified_p(np.arange(380) < 228, zeros(380, int), b, zeros(600, int), 1) < 1e-5
    # stratified: a class that disagrees more overall is no evidence against its carriers
    la, lb = np.repeat([0, 1], [190, 190]), np.repeat([0, 1], [300, 300])
    bad_a = np.r_[np.arange(190) < 95, np.arange(190) < 19]
    bad_b = np.r_[np.arange(300) < 150, np.arange(300) < 30]
    assert _stratified_p(bad_a, la, bad_b, lb, 2) > 0.3
