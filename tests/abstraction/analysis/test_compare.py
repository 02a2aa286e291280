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
