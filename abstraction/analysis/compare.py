"""Compare two abstractions of the same inputs: match their states, find changed paths.

Two runs (say a model before and after a fix) see the same inputs token by token, but their
hidden spaces have nothing in common, so states are matched by *co-occurrence*: how often
state ``a`` of run A and state ``b`` of run B hold at the same step of the same input.
The matching maximises the total Jaccard overlap (Hungarian algorithm); every input whose
path, read through the matching, differs, or whose prediction changed, is listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from stateseer.abstraction.errors import AbstractionError

__all__ = ["StateMatching", "changed_inputs", "match_states"]


@dataclass
class StateMatching:
    """A one-to-one matching between the FSM states of run A and run B.

    Attributes
    ----------
    a_to_b : ndarray of shape (n_a,)
        Matched B state of every A state, ``-1`` when unmatched (B has fewer states).
    b_to_a : ndarray of shape (n_b,)
    jaccard : ndarray of shape (n_a,)
        Overlap of every matched pair (0 when unmatched).
    cooccurrence : ndarray of shape (n_a, n_b)
        Steps in state ``a`` under A and ``b`` under B.
    agreement : float
        Share of steps whose A state maps to their B state.
    chance : float
        The agreement the same matching would show were the two runs' states drawn
        independently with their frequencies (``sum_a p_A(a) p_B(match(a))``): the
        figure to read ``agreement`` beside.
    """

    a_to_b: np.ndarray
    b_to_a: np.ndarray
    jaccard: np.ndarray
    cooccurrence: np.ndarray
    agreement: float
    info: dict[str, Any] = field(default_factory=dict)
    chance: float = 0.0

    def pairs(self) -> list[dict[str, Any]]:
        """One row per A state: ``a``, ``b``, ``jaccard``, ``steps_a``, ``steps_b``."""
        ca, cb = self.cooccurrence.sum(1), self.cooccurrence.sum(0)
        return [{"a": int(a), "b": int(b), "jaccard": round(float(self.jaccard[a]), 4),
                 "steps_a": int(ca[a]), "steps_b": int(cb[b]) if b >= 0 else 0}
                for a, b in enumerate(self.a_to_b)]


def match_states(states_a: np.ndarray, states_b: np.ndarray, n_a: int,
                 n_b: int) -> StateMatching:
    """Match states of two abstractions of the same steps by co-occurrence.

    Parameters
    ----------
    states_a, states_b : ndarray of shape (n_steps,)
        FSM state of every step under run A and run B (same inputs, same tokens).
    n_a, n_b : int
        FSM states of each run (initial state 0 included; 0 is matched to 0).

    Returns
    -------
    StateMatching

    Examples
    --------
    >>> m = match_states(np.array([1, 1, 2, 2]), np.array([2, 2, 1, 1]), 3, 3)
    >>> m.a_to_b.tolist(), m.agreement, m.chance
    ([0, 2, 1], 1.0, 0.5)
    """
    states_a, states_b = np.asarray(states_a, np.int64), np.asarray(states_b, np.int64)
    if states_a.shape != states_b.shape:
        raise AbstractionError(f"the runs have {len(states_a):,} and {len(states_b):,} steps; "
                               "compare runs recorded on the same inputs with the same "
                               "tokenizer")
    co = np.bincount(states_a * n_b + states_b, minlength=n_a * n_b).reshape(n_a, n_b)
    ca, cb = co.sum(1), co.sum(0)
    union = ca[:, None] + cb[None, :] - co
    jac = np.where(union > 0, co / np.maximum(union, 1), 0.0)
    jac[0, :] = jac[:, 0] = 0.0
    rows, cols = linear_sum_assignment(-jac[1:, 1:])
    a_to_b = np.full(n_a, -1, np.int64)
    b_to_a = np.full(n_b, -1, np.int64)
    a_to_b[0], b_to_a[0] = 0, 0
    a_to_b[rows + 1], b_to_a[cols + 1] = cols + 1, rows + 1
    jm = np.zeros(n_a)
    jm[rows + 1] = jac[rows + 1, cols + 1]
    mapped = a_to_b[states_a]
    agree = float((mapped == states_b).mean()) if len(states_a) else 1.0
    n = max(len(states_a), 1)
    matched = np.flatnonzero(a_to_b >= 0)
    chance = float((ca[matched] / n) @ (cb[a_to_b[matched]] / n))
    return StateMatching(a_to_b=a_to_b, b_to_a=b_to_a, jaccard=jm, cooccurrence=co,
                         agreement=agree, chance=chance)


def changed_inputs(matching: StateMatching, states_a: np.ndarray, states_b: np.ndarray,
                   offsets: np.ndarray, pred_a: np.ndarray,
                   pred_b: np.ndarray) -> dict[str, np.ndarray]:
    """Per input: steps whose matched state differs, and whether the prediction changed.

    Parameters
    ----------
    matching : StateMatching
    states_a, states_b : ndarray of shape (n_steps,)
    offsets : ndarray of shape (n_inputs + 1,)
        Step ranges of the inputs.
    pred_a, pred_b : ndarray of shape (n_inputs,)

    Returns
    -------
    dict
        ``n_diff`` (steps that differ per input), ``n_steps``, ``first_diff`` (first
        differing step or -1), ``prediction_changed`` (bool), ``path_changed`` (bool).
    """
    offsets = np.asarray(offsets)
    n = len(offsets) - 1
    diff = matching.a_to_b[np.asarray(states_a, np.int64)] != np.asarray(states_b, np.int64)
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(n), lengths)
    n_diff = np.bincount(owner, weights=diff, minlength=n).astype(np.int64)
    first = np.full(n, -1, np.int64)
    where = np.flatnonzero(diff)
    if len(where):
        own = owner[where]
        uniq, pos = np.unique(own, return_index=True)
        first[uniq] = where[pos] - offsets[uniq]
    changed = np.asarray(pred_a) != np.asarray(pred_b)
    return {"n_diff": n_diff, "n_steps": lengths.astype(np.int64), "first_diff": first,
            "prediction_changed": changed, "path_changed": n_diff > 0}
