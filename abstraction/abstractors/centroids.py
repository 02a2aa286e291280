"""Hidden-space centroids of abstract states (what state forcing replaces states with).

The abstractor clusters in a projected space (PCA or margin features); forcing needs the
mean *hidden state* of every abstract state instead. It is one sparse product over the
recorded states, read in chunks so memory maps stay cheap.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from stateseer.abstraction.abstractors.features import iter_rows
from stateseer.abstraction.errors import AbstractionError

__all__ = ["state_centroids"]


def state_centroids(hidden, states: np.ndarray, n_states: int, *,
                    initial: np.ndarray | None = None,
                    chunk_size: int = 262_144) -> tuple[np.ndarray, np.ndarray]:
    """Mean hidden state of every FSM state.

    Parameters
    ----------
    hidden : array-like of shape (n_steps, state_size)
        Recorded hidden states (a memory map is read in chunks).
    states : ndarray of shape (n_steps,)
        FSM state of every step, in ``[0, n_states)``.
    n_states : int
        FSM states, the initial state 0 included.
    initial : ndarray of shape (state_size,), optional
        The initial hidden state; it is the centroid of state 0 when no step maps there.

    Returns
    -------
    centroids : ndarray of shape (n_states, state_size), float32
    counts : ndarray of shape (n_states,), int64
        Steps averaged per state; a state with none keeps a zero (or initial) row.

    Examples
    --------
    >>> h = np.array([[0., 2.], [2., 0.], [5., 5.]])
    >>> c, n = state_centroids(h, np.array([1, 1, 2]), 3)
    >>> c.tolist(), n.tolist()
    ([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]], [0, 2, 1])
    """
    states = np.asarray(states)
    if len(states) != len(hidden):
        raise AbstractionError(f"{len(states)} state ids for {len(hidden)} hidden states; "
                               "re-run `stateseer abstract`")
    if len(states) and (states.min() < 0 or states.max() >= n_states):
        raise AbstractionError(f"state ids must lie in [0, {n_states}); re-run "
                               "`stateseer abstract`")
    d = hidden.shape[1]
    sums = np.zeros((n_states, d), np.float64)
    for start, block in iter_rows(hidden, chunk_size):
        s = states[start : start + len(block)]
        onehot = sparse.csr_matrix((np.ones(len(s)), (s, np.arange(len(s)))),
                                   shape=(n_states, len(s)))
        sums += onehot @ np.asarray(block, np.float64)
    counts = np.bincount(states, minlength=n_states).astype(np.int64)
    cent = sums / np.maximum(counts, 1)[:, None]
    if initial is not None and counts[0] == 0:
        cent[0] = np.asarray(initial, np.float64)
    return cent.astype(np.float32), counts
