"""Matching the states of two abstractions of the same steps."""

from __future__ import annotations

import numpy as np
import pytest

from stateseer.abstraction.analysis.compare import changed_inputs, match_states
from stateseer.abstraction.errors import AbstractionError
from tests.conftest import one_line


def test_a_relabelled_abstraction_is_matched_exactly():
    rng = np.random.default_rng(0)
    a = rng.integers(1, 9, 500)
    perm = np.array([0, *rng.permutation(np.arange(1, 9))])
    m = match_states(a, perm[a], 9, 9)
    assert m.a_to_b.tolist() == perm.tolist()
    assert m.agreement == 1.0 and (m.jaccard[1:] == 1.0).all()
    assert m.b_to_a[perm].tolist() == list(range(9))


def test_agreement_is_read_beside_the_chance_of_the_states_frequencies():
    """Two unrelated abstractions of the same steps still agree on some steps once
    matched (a few large states overlap by their sizes alone); ``chance`` is that
    figure, and a relabelled copy's agreement of 1 stands far above it."""
    rng = np.random.default_rng(1)
    p = np.array([0.5, 0.3, 0.1, 0.05, 0.05])
    a, b = 1 + rng.choice(5, 20_000, p=p), 1 + rng.choice(5, 20_000, p=p)
    unrelated = match_states(a, b, 6, 6)
    assert unrelated.chance == pytest.approx(float(p @ p), abs=0.02)  # 0.365
    assert abs(unrelated.agreement - unrelated.chance) < 0.02
    same = match_states(a, a, 6, 6)
    assert same.agreement == 1.0 and same.chance == pytest.approx(unrelated.chance, abs=0.02)


def test_changed_inputs_locate_the_first_difference():
    a = np.array([1, 2, 2, 3, 1, 1])
    b = np.array([1, 2, 3, 3, 1, 2])  # input 0: steps 0-2, input 1: steps 3-5
    offsets = np.array([0, 3, 6])
    m = match_states(a, a, 4, 4)  # identity matching
    ch = changed_inputs(m, a, b, offsets, np.array([0, 1]), np.array([0, 0]))
    assert ch["n_diff"].tolist() == [1, 1]
    assert ch["first_diff"].tolist() == [2, 2]
    assert ch["prediction_changed"].tolist() == [False, True]
    assert ch["n_steps"].tolist() == [3, 3]


def test_unequal_steps_are_refused():
    with pytest.raises(AbstractionError) as e:
        match_states(np.array([1, 2]), np.array([1]), 3, 3)
    assert "same inputs" in one_line(e.value)
