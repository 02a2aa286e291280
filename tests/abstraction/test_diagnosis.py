"""Candidate culprits and their statistics (stateseer.abstraction.diagnosis), on data whose
answer is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import hypergeom

from stateseer.abstraction.diagnosis import (
    by_qvalues,
    length_candidates,
    sequence_candidates,
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
    assert c.extra["training"] == {"inputs": 20, "purity": 1.0, "label": 1}


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
