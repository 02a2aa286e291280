"""Wei et al.'s weighted automaton, vectorised, against the published procedure written
as loops (its transition_filling / context_regularization / evaluation, in numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from stateseer.abstraction.automata.wfa import WeightedAutomaton


def _reference(wfa, proba, tokens, offsets, test_tokens, test_offsets, beta, alpha):
    """The published code's steps, one loop at a time, on the fitted clusters."""
    S, V = len(wfa.weights_), int(max(tokens.max(), test_tokens.max())) + 1
    labels = wfa.weights_[1:]
    states = 1 + ((proba[:, None, :] - labels[None]) ** 2).sum(-1).argmin(1)
    count = np.zeros((V, S, S))
    for i in range(len(offsets) - 1):
        path = [0, *states[offsets[i]:offsets[i + 1]]]
        for j, a in enumerate(tokens[offsets[i]:offsets[i + 1]]):
            count[a, path[j], path[j + 1]] += 1
    dist = np.zeros((S, S))
    for p in range(S):
        for q in range(S):
            d = wfa.weights_[p] - wfa.weights_[q]
            dist[p, q] = 1 / np.exp((d * d).sum())
    mats = []
    for c in count:
        if c.sum() == 0:
            mats.append(np.eye(S))
            continue
        m = np.zeros((S, S))
        for i in range(S):
            if c[i].sum():
                m[i] = c[i] / c[i].sum()
            else:
                m[i] = (c.T * dist[i]).T.sum(0)
                m[i] /= m[i].sum()
                m[i] *= beta
                m[i, i] += 1 - beta
        for i in range(S):
            m[i] *= 1 - alpha
            m[i, i] += alpha
        mats.append(m)
    out = []
    for i in range(len(test_offsets) - 1):
        pi = np.eye(S)[0]
        for a in test_tokens[test_offsets[i]:test_offsets[i + 1]]:
            pi = pi @ mats[a]
        pred = pi @ wfa.weights_
        out.append(-1 if pred.sum() == 0 else int(pred.argmax()))
    return np.array(out), mats


@pytest.mark.parametrize("n_classes", [2, 3])
def test_the_vectorised_automaton_is_the_published_procedure(n_classes):
    rng = np.random.default_rng(n_classes)
    lengths = rng.integers(0, 9, 60)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    proba = rng.dirichlet(np.ones(n_classes), offsets[-1])
    tokens = rng.integers(0, 12, offsets[-1])
    t_len = rng.integers(1, 9, 30)
    t_off = np.concatenate([[0], np.cumsum(t_len)])
    t_tok = rng.integers(0, 15, t_off[-1])  # 12..14 never seen in training
    wfa = WeightedAutomaton(5, beta=0.3, alpha=0.4, random_state=0).fit(proba, tokens,
                                                                        offsets)
    want, mats = _reference(wfa, proba, tokens, offsets, t_tok, t_off, 0.3, 0.4)
    assert (wfa.predict(t_tok, t_off) == want).all()
    for k, a in enumerate(wfa.tokens_):
        np.testing.assert_allclose(wfa.matrices_[k], mats[a], atol=1e-12)
    np.testing.assert_allclose(wfa.matrices_.sum(2), 1.0)  # every row a distribution
    assert (wfa.matrices_[-1] == np.eye(6)).all()  # unseen tokens stay put


def test_an_empty_input_ends_in_the_initial_state():
    proba = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.8, 0.2]])
    wfa = WeightedAutomaton(2, random_state=0).fit(proba, np.array([0, 1, 1, 0]),
                                                   np.array([0, 2, 4]))
    assert wfa.predict(np.array([], int), np.array([0, 0])).tolist() == [0]  # uniform: 0
