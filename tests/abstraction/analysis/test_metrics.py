"""Fidelity and quality figures on a hand-made FSM with answers worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stateseer.abstraction.analysis.metrics import fidelity, quality, state_entropy
from stateseer.abstraction.errors import AbstractionError
from tests.abstraction.automata.test_fsm import OFFSETS_A, P_POS_A, STATES_A, TOKENS_A, example_a


def test_fidelity_counts_final_state_labels_that_match_the_prediction():
    fsm = example_a()  # labels: state 0 neg, 1 neg, 2 pos
    finals = fsm.final_states(STATES_A + 1, OFFSETS_A)
    assert finals.tolist() == [2, 1, 2, 0, 2]  # input 3 is empty: the initial state
    # predictions pos, neg, neg, neg, pos: only input 2 (ends in pos state 2) disagrees
    assert fidelity(fsm, finals, np.array([1, 0, 0, 0, 1])) == pytest.approx(0.8)
    assert fidelity(fsm, finals, np.array([0, 1, 0, 1, 0])) == pytest.approx(0.0)
    assert math.isnan(fidelity(fsm, np.zeros(0, np.int64), np.zeros(0, np.int64)))


def test_state_entropy_in_bits():
    fsm = example_a()
    ent = state_entropy(fsm)
    h = lambda p: -(p * math.log2(p) + (1 - p) * math.log2(1 - p))  # noqa: E731
    np.testing.assert_allclose(ent, [h(0.4), h((0.2 + 0.4 + 0.55) / 3), h(0.75)])
    certain = example_a()
    certain.prediction = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    np.testing.assert_allclose(state_entropy(certain), [0.0, 1.0, 0.0], atol=1e-9)


def test_quality_on_the_training_paths():
    fsm = example_a()
    proba = np.stack([1 - P_POS_A, P_POS_A], axis=1)
    q = quality(fsm, STATES_A + 1, OFFSETS_A, TOKENS_A, proba)
    # step predictions neg pos neg POS pos pos pos vs state labels neg pos neg neg pos pos pos
    assert q["state_purity"] == pytest.approx(6 / 7)
    assert q["state_coverage"] == 1.0
    assert q["transition_coverage"] == 1.0 and q["edge_coverage"] == 1.0
    # edges 0-1 0-2 1-1 1-2 2-2 over 3 states
    assert q["n_edges"] == 5 and q["succinctness"] == pytest.approx(5 / 3)
    # (state, token) pairs: (0,a) has two targets; (0,b) (1,a) (1,b) (2,c) one each
    assert q["determinism"] == pytest.approx(4 / 5)
    assert q["n_transitions"] == 6
    ent = state_entropy(fsm)
    assert q["mean_prediction_entropy"] == pytest.approx((5 * ent[0] + 3 * ent[1]
                                                          + 4 * ent[2]) / 12)
    assert q["prediction_entropy"] == [round(float(e), 4) for e in ent]


def test_quality_coverage_on_a_split_that_sees_part_of_the_machine():
    fsm = example_a()
    # one input "a a" through state 1 twice, and an empty input
    states = np.array([1, 1])
    offsets = np.array([0, 2, 2])
    proba = np.array([[0.6, 0.4], [0.45, 0.55]])
    q = quality(fsm, states, offsets, np.array([0, 0]), proba)
    assert q["state_purity"] == pytest.approx(0.5)  # state 1 is neg; the 2nd step says pos
    assert q["state_coverage"] == pytest.approx(2 / 3)  # initial + 1, not 2
    assert q["transition_coverage"] == pytest.approx(2 / 6)  # (0,a,1) and (1,a,1)
    assert q["edge_coverage"] == pytest.approx(2 / 5)  # 0-1 and 1-1


def test_quality_of_an_empty_split():
    fsm = example_a()
    q = quality(fsm, np.zeros(0, np.int64), np.array([0]), np.zeros(0, np.int64),
                np.zeros((0, 2)))
    assert math.isnan(q["state_purity"])
    assert q["state_coverage"] == 0.0 and q["transition_coverage"] == 0.0


# ----------------------------------------------------------------------------- intervals, knee
def test_bootstrap_interval_covers_a_known_agreement_rate():
    from stateseer.abstraction.analysis.metrics import bootstrap_ci

    rng = np.random.default_rng(0)
    p, n, reps = 0.85, 400, 300
    hits = 0
    for r in range(reps):
        lo, hi = bootstrap_ci(rng.random(n) < p, seed=r)
        hits += lo <= p <= hi
    assert 0.90 <= hits / reps <= 0.99  # nominal 95 %
    assert all(np.isnan(bootstrap_ci(np.zeros(0, bool))))


def test_choose_knee_never_exceeds_its_cap():
    from stateseer.abstraction.analysis.metrics import choose_knee

    pts = [{"n_states": k, "simulation_fidelity": 1 - 1 / k} for k in (4, 8, 16, 40, 100)]
    for cap in (4, 10, 40, 1000):
        k, why = choose_knee(pts, cap=cap)
        assert k <= cap and f"cap {cap}" in why
    flat = [{"n_states": k, "simulation_fidelity": 0.9} for k in (8, 16)]
    assert choose_knee(flat)[0] == 8
    with pytest.raises(AbstractionError, match="cap"):
        choose_knee(pts, cap=2)


def test_fidelity_is_shown_beside_its_chance_agreement_and_kappa():
    from sklearn.metrics import cohen_kappa_score

    from stateseer.abstraction.analysis.metrics import agreement_baseline

    rng = np.random.default_rng(0)
    rnn = rng.choice(3, 500, p=[0.6, 0.3, 0.1])
    # an FSM that mostly answers the majority class agrees often, and says little
    lazy = np.where(rng.random(500) < 0.9, 0, rnn)
    out = agreement_baseline(lazy, rnn, 3)
    assert out["chance"] == round(float((rnn == 0).mean()), 4)
    assert (lazy == rnn).mean() > out["chance"] and out["kappa"] < 0.3
    assert out["kappa"] == round(float(cohen_kappa_score(rnn, lazy)), 4)
    assert agreement_baseline(rnn, rnn, 3)["kappa"] == 1.0
    assert agreement_baseline(np.zeros(5, int), np.zeros(5, int), 3)["kappa"] is None
