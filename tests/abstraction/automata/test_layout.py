"""Stable FSM positions (stateseer.abstraction.automata.layout)."""

from __future__ import annotations

import numpy as np

from stateseer.abstraction.automata import layout


def test_many_states_get_a_larger_frame_and_still_do_not_overlap():
    """300 states with equal visits, started in one clump: the frame grows with their
    area and the push loop parts every pair (7.9 of the 8 units asked for at worst)."""
    from types import SimpleNamespace

    rng = np.random.default_rng(0)
    n = 300
    fsm = SimpleNamespace(visits=np.full(n, 100), prediction=rng.dirichlet([1, 1], n))
    xy = layout.fill_frame(rng.normal(size=(n, 2)) * 1e-3, fsm)
    r = layout.node_size(fsm.visits) / 2
    gap = np.sqrt(((xy[:, None] - xy[None]) ** 2).sum(-1)) - r[:, None] - r[None]
    np.fill_diagonal(gap, np.inf)
    assert gap.min() >= 7.0
    assert (np.abs(xy).max(0) > np.array(layout.FRAME)).all()  # the frame grew
