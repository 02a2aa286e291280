"""Per-state n-grams and contexts, collapsed paths, influential and buggy patterns."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import hypergeom

from stateseer.abstraction.analysis.patterns import (
    buggy_patterns,
    collapsed_paths,
    influential_patterns,
    state_contexts,
    state_ngrams,
    window_keys,
)

# ----------------------------------------------------------------------------- n-grams
# input 0: "the good movie"  states 1 2 2
# input 1: "bad movie"       states 1 1
# input 2: "good"            states 2
VOCAB = ["good", "bad", "movie", "the", ","]
NG_TOKENS = np.array([3, 0, 2, 1, 2, 0])
NG_STATES = np.array([1, 2, 2, 1, 1, 2])
NG_OFFSETS = np.array([0, 3, 5, 6])


def _items(rows):
    return {(r["ngram"], r["count"], r["lift"]) for r in rows}


def test_state_ngrams_counts_and_lift():
    out = state_ngrams(NG_STATES, NG_OFFSETS, NG_TOKENS, VOCAB, 3, max_n=2,
                       min_count_for_lift=1, drop_stopwords=False)
    assert len(out) == 3 and out[0] == {"frequent": [], "lift": []}
    # unigrams over 6 steps: the 1, good 2, movie 2, bad 1
    # state 2 (steps good, movie, good): good 2/3 vs 2/6 -> lift 2; movie 1/3 vs 2/6 -> 1
    # bigrams over the 3 steps at position >= 1: "the good" and "good movie" enter state 2
    # (1/2 vs 1/3 -> 1.5), "bad movie" enters state 1 (1/1 vs 1/3 -> 3)
    assert _items(out[2]["frequent"]) == {("good", 2, 2.0), ("movie", 1, 1.0),
                                          ("the good", 1, 1.5), ("good movie", 1, 1.5)}
    assert out[2]["frequent"][0]["ngram"] == "good"  # most frequent first
    assert _items(out[1]["frequent"]) == {("the", 1, 2.0), ("bad", 1, 2.0), ("movie", 1, 1.0),
                                          ("bad movie", 1, 3.0)}
    assert out[1]["lift"][0]["ngram"] == "bad movie"  # highest lift first
    assert all(r["n"] == len(r["ngram"].split()) for r in out[1]["frequent"])


def test_state_ngrams_top_k_and_min_count_for_lift():
    out = state_ngrams(NG_STATES, NG_OFFSETS, NG_TOKENS, VOCAB, 3, max_n=2, top_k=2,
                       drop_stopwords=False)
    assert [len(o["frequent"]) for o in out] == [0, 2, 2]
    assert all(o["lift"] == [] for o in out)  # every count is below the default minimum of 5
    out = state_ngrams(NG_STATES, NG_OFFSETS, NG_TOKENS, VOCAB, 3, max_n=1,
                       min_count_for_lift=2, drop_stopwords=False)
    assert [r["ngram"] for r in out[2]["lift"]] == ["good"]


def test_state_ngrams_drop_stopword_only_ngrams():
    tokens = np.array([3, 0, 2, 1, 4, 0])  # "the good movie", "bad ,", "good"
    out = state_ngrams(NG_STATES, NG_OFFSETS, tokens, VOCAB, 3, max_n=2)
    grams1 = {r["ngram"] for r in out[1]["frequent"]}
    assert "the" not in grams1 and "," not in grams1  # stop word, punctuation
    assert {"bad", "bad ,"} <= grams1  # not only uninformative words: kept
    assert "the good" in {r["ngram"] for r in out[2]["frequent"]}
    kept = state_ngrams(NG_STATES, NG_OFFSETS, tokens, VOCAB, 3, max_n=1,
                        drop_stopwords=False)
    assert {"the", ","} <= {r["ngram"] for r in kept[1]["frequent"]}


# ----------------------------------------------------------------------------- contexts
def test_state_contexts_windows_and_focus():
    out = state_contexts(NG_STATES, NG_OFFSETS, NG_TOKENS, VOCAB, 3, window=1, per_state=10)
    assert out[0] == []
    got = sorted((c["input"], c["position"], tuple(c["tokens"]), c["focus"]) for c in out[2])
    assert got == [(0, 1, ("the", "good", "movie"), 1), (0, 2, ("good", "movie"), 1),
                   (2, 0, ("good",), 0)]
    for s in (1, 2):
        for c in out[s]:
            step = NG_OFFSETS[c["input"]] + c["position"]
            assert NG_STATES[step] == s
            assert c["tokens"][c["focus"]] == VOCAB[NG_TOKENS[step]]


def test_state_contexts_are_limited_and_seeded():
    rng = np.random.default_rng(0)
    states = rng.integers(1, 4, 300)
    offsets = np.arange(0, 301, 10)
    tokens = rng.integers(0, len(VOCAB), 300)
    a = state_contexts(states, offsets, tokens, VOCAB, 4, per_state=3, window=2,
                       random_state=5)
    assert [len(x) for x in a] == [0, 3, 3, 3]
    assert all(len(c["tokens"]) <= 5 for x in a for c in x)
    assert a == state_contexts(states, offsets, tokens, VOCAB, 4, per_state=3, window=2,
                               random_state=5)


# ----------------------------------------------------------------------------- collapsed paths
def test_collapsed_paths_merge_self_loops_and_map_steps():
    # input 0: 1 1 2; input 1: empty; input 2: 2 1
    cs, ci, cstep, step_to_c = collapsed_paths(np.array([1, 1, 2, 2, 1]),
                                               np.array([0, 3, 3, 5]))
    assert cs.tolist() == [0, 1, 2, 0, 0, 2, 1]
    assert ci.tolist() == [0, 0, 0, 1, 2, 2, 2]
    assert cstep.tolist() == [-1, 0, 2, -1, -1, 3, 4]
    assert step_to_c.tolist() == [1, 1, 2, 5, 6]
    # input 2 starts with state 2 just after input 0 ended in 2: not merged across inputs
    cs2, ci2, _, _ = collapsed_paths(np.array([2, 2]), np.array([0, 1, 2]))
    assert cs2.tolist() == [0, 2, 0, 2] and ci2.tolist() == [0, 0, 1, 1]


def _collapsed_by_loop(states, offsets, initial):
    """Reference: the collapsed paths and each step's position, input by input."""
    cs, ci, cstep, step_to_c = [], [], [], np.zeros(len(states), np.int64)
    for i in range(len(offsets) - 1):
        cs.append(initial), ci.append(i), cstep.append(-1)
        for t in range(offsets[i], offsets[i + 1]):
            if states[t] != cs[-1]:
                cs.append(states[t]), ci.append(i), cstep.append(t)
            step_to_c[t] = len(cs) - 1
    return np.array(cs), np.array(ci), np.array(cstep), step_to_c


def _windows_by_loop(cs, ci, w, S):
    out = np.full(len(cs), -1)
    for i in range(w - 1, len(cs)):
        if ci[i - w + 1] == ci[i]:
            out[i] = int(sum(int(cs[j]) * S ** (i - j) for j in range(i - w + 1, i + 1)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_collapsed_paths_and_windows_match_a_loop_over_inputs(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        lengths = rng.integers(0, 6, rng.integers(0, 6))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        S = int(rng.integers(1, 5))
        states, initial = rng.integers(0, S, offsets[-1]), int(rng.integers(0, S))
        got = collapsed_paths(states, offsets, initial)
        want = _collapsed_by_loop(states, offsets, initial)
        for a, b in zip(got, want, strict=True):
            assert a.tolist() == b.tolist()
        for w in (1, 2, 3, 4):
            assert window_keys(got[0], got[1], w, S).tolist() == \
                _windows_by_loop(want[0], want[1], w, S).tolist()


# ----------------------------------------------------------------------------- influential
def _inputs_to_arrays(inputs):
    states = np.concatenate([np.asarray(s, np.int64) for s, _ in inputs])
    preds = np.concatenate([np.asarray(p, np.int64) for _, p in inputs])
    offsets = np.concatenate([[0], np.cumsum([len(s) for s, _ in inputs])])
    proba = np.eye(2)[preds]
    return states, offsets, proba


def test_influential_patterns_find_a_planted_flip():
    rng = np.random.default_rng(0)
    inputs, labels, predictions = [], [], []
    for _ in range(10):  # planted: entering 4 from 3 flips neg -> pos, correctly classified
        inputs.append(([1, 3, 4], [0, 0, 1]))
        labels.append(1)
        predictions.append(1)
    inputs.append(([1, 3, 4], [0, 0, 1]))  # the same flip in a misclassified input: ignored
    labels.append(0)
    predictions.append(1)
    for _ in range(3):  # a flip on the first token (away from head(h0)) does not count
        inputs.append(([5], [1]))
        labels.append(1)
        predictions.append(1)
    for _ in range(20):  # background: no flips
        n = int(rng.integers(2, 6))
        inputs.append((list(rng.integers(1, 3, n)), [0] * n))
        labels.append(0)
        predictions.append(0)
    states, offsets, proba = _inputs_to_arrays(inputs)
    vocab = [f"w{i}" for i in range(6)]
    token_ids = states.copy()  # the token names the state it enters: w3 -> 3, w4 -> 4
    out = influential_patterns(states, offsets, token_ids, vocab, proba, np.array([1.0, 0.0]),
                               np.array(labels), np.array(predictions), 6)
    assert out, "the planted flip was not found"
    top = out[0]
    assert top["states"] == [3, 4] and top["flip"] == [0, 1]
    assert top["support"] == 10
    assert top["lift"] == pytest.approx(round(10 / 11, 4))  # 11 windows 3 -> 4, 10 counted
    assert top["inputs"] == list(range(10))
    assert top["phrases"] == [{"phrase": "w4", "count": 10}]
    windows = [p["states"] for p in out]
    assert [3, 4] in windows and [1, 3, 4] in windows and [0, 1, 3, 4] in windows
    assert next(p for p in out if p["states"] == [1, 3, 4])["phrases"][0]["phrase"] == "w3 w4"
    assert all(p["states"][-2:] != [0, 5] for p in out)
    assert all(p["support"] >= 3 for p in out)


def test_influential_patterns_none_without_flips():
    states = np.array([1, 2, 1, 2])
    offsets = np.array([0, 2, 4])
    proba = np.tile([0.9, 0.1], (4, 1))
    out = influential_patterns(states, offsets, states, ["a", "b", "c"], proba,
                               np.array([0.9, 0.1]), np.array([0, 0]), np.array([0, 0]), 3)
    assert out == []


# ----------------------------------------------------------------------------- buggy
def _buggy_setup(n_wrong=10):
    rng = np.random.default_rng(1)
    inputs, labels, predictions = [], [], []
    for i in range(30):  # correct; two of them also pass 6 -> 7
        path = [1 + i, 6, 7, 2] if i < 2 else list(rng.integers(1, 3, int(rng.integers(2, 6))))
        inputs.append((path, [0] * len(path)))
        labels.append(0)
        predictions.append(0)
    for i in range(n_wrong):  # misclassified, all through 6 -> 7, varied around it
        inputs.append(([1 + i % 5, 6, 7, 1 + (i + 2) % 5], [1, 1, 1, 1]))
        labels.append(0)
        predictions.append(1)
    states, offsets, _ = _inputs_to_arrays(inputs)
    return states, offsets, np.array(labels), np.array(predictions)


def test_buggy_patterns_find_an_over_represented_window():
    states, offsets, labels, predictions = _buggy_setup()
    vocab = [f"w{i}" for i in range(8)]
    out = buggy_patterns(states, offsets, states, vocab, labels, predictions, 8)
    assert out, "the planted window was not found"
    top = out[0]
    assert top["states"] == [6, 7]
    assert top["support"] == 10 and top["n_inputs"] == 12
    # P(window | wrong) / P(window) = (10/10) / (12/40)
    assert top["lift"] == pytest.approx(round(1 / (12 / 40), 4)) and top["lift"] > 1
    # P(X >= 10) for 10 draws from 40 inputs of which 12 hold the window
    assert top["p_value"] == pytest.approx(hypergeom.sf(9, 40, 12, 10))
    assert top["p_value"] < 1e-5
    assert top["p_value"] <= top["q_value"] <= 1.0
    assert top["inputs"] == list(range(30, 40))
    assert top["phrases"][0] == {"phrase": "w7", "count": 10}
    assert [p["p_value"] for p in out] == sorted(p["p_value"] for p in out)
    for p in out:
        assert p["support"] >= 3 and p["lift"] > 1


def test_buggy_patterns_empty_when_nothing_is_wrong():
    states, offsets, labels, _ = _buggy_setup()
    assert buggy_patterns(states, offsets, states, [f"w{i}" for i in range(8)], labels,
                          labels, 8) == []


def test_buggy_patterns_respect_min_support():
    states, offsets, labels, predictions = _buggy_setup(n_wrong=2)
    out = buggy_patterns(states, offsets, states, [f"w{i}" for i in range(8)], labels,
                         predictions, 8)
    assert out == []  # only 2 misclassified inputs: below the minimum support of 3
    out = buggy_patterns(states, offsets, states, [f"w{i}" for i in range(8)], labels,
                         predictions, 8, min_support=2, lengths=(2,))
    assert [6, 7] in [p["states"] for p in out]


@pytest.mark.parametrize("seed", [0, 1])
def test_counts_by_a_table_per_key_equal_counts_by_sorting(seed, monkeypatch):
    """Small key spaces are counted in a table of one slot per key (and the inputs that
    hold a window by one compiled pass): the same counts as sorting the keys."""
    from stateseer.abstraction.analysis import patterns as pat

    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 14, 400)
    offsets = np.r_[0, np.cumsum(lengths)]
    n = int(offsets[-1])
    proba = rng.dirichlet([1, 1, 1], n)

    def counts():
        part = pat.Part(rng_states.copy(), offsets, rng_tokens, proba, labels, predictions)
        return (pat.influential_counts(part, 9, initial_proba=np.array([0.2, 0.5, 0.3])),
                pat.buggy_counts(part, 9),
                pat.ngram_counts(part, 9, vocab_size=30, stop=np.arange(30) % 7 == 0))

    rng_states, rng_tokens = rng.integers(1, 9, n), rng.integers(0, 30, n)
    labels, predictions = rng.integers(0, 3, len(lengths)), rng.integers(0, 3, len(lengths))
    dense = counts()
    monkeypatch.setattr(pat, "DENSE_KEYS", 0)
    monkeypatch.setattr(pat, "_dense", lambda n_keys, n: False)
    sorted_ = counts()
    for a, b in zip(dense, sorted_, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            for x, y in zip(a[name], b[name], strict=True):
                assert x.dtype == y.dtype and np.array_equal(x, y), name
