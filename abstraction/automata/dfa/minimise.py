"""Step 5 of the extraction: the minimal automaton with the same class on every string.

For two classes one Moore minimisation (:func:`stateseer.core.automaton.minimize`)
of the class indicator suffices; for more, the common refinement of one minimisation per
class indicator. States are renumbered in breadth-first order from the initial state 0.
"""

from __future__ import annotations

import numpy as np

from stateseer.core.automaton import DFA, minimize


def _state_map(big: np.ndarray, big_initial: int, small: np.ndarray) -> np.ndarray:
    """Map every state of ``big`` reachable from its initial state to the state of ``small``
    reached by the same strings (BFS over the product; -1 for unreachable states)."""
    out = np.full(len(big), -1, dtype=np.int64)
    out[big_initial] = 0
    frontier = [big_initial]
    while frontier:
        nxt = []
        for q in frontier:
            for a in range(big.shape[1]):
                r = int(big[q, a])
                if out[r] < 0:
                    out[r] = small[out[q], a]
                    nxt.append(r)
        frontier = nxt
    return out


def _minimise(alphabet: tuple[str, ...], trans: np.ndarray, state_class: np.ndarray,
              initial: int, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Minimal automaton with the same class on every string.

    Returns
    -------
    transitions : ndarray of shape (n_min, n_symbols)
        BFS-numbered from the initial state 0.
    state_class : ndarray of shape (n_min,)
    block : ndarray of shape (n_states,)
        Minimal state of every input state (-1 if unreachable).
    """
    present = np.unique(state_class)
    if len(present) <= 2:  # one indicator determines the class
        c = present[-1]
        m = minimize(DFA(alphabet, trans, state_class == c, initial))
        block = _state_map(trans, initial, m.transitions)
        cls = np.empty(m.n_states, dtype=np.int64)
        cls[block[block >= 0]] = state_class[block >= 0]
        return np.array(m.transitions), cls, block
    # Equal class on every suffix <=> equal indicator of every class on every suffix: the
    # minimal partition is the common refinement of the per-class minimal partitions.
    maps = [_state_map(trans, initial,
                       minimize(DFA(alphabet, trans, state_class == c, initial)).transitions)
            for c in present]
    sig = np.stack(maps, axis=1)
    reach = sig[:, 0] >= 0
    _, joint = np.unique(sig[reach], axis=0, return_inverse=True)
    block_r = np.full(len(trans), -1, dtype=np.int64)
    block_r[reach] = joint.reshape(-1)
    n_b = int(joint.max()) + 1
    rep = np.zeros(n_b, dtype=np.int64)
    rep[block_r[reach]] = np.flatnonzero(reach)
    q_trans = block_r[trans[rep]]
    q_cls = state_class[rep]
    # Canonical BFS numbering from the initial block.
    order = [int(block_r[initial])]
    seen = {order[0]}
    for q in order:
        for r in q_trans[q].tolist():
            if r not in seen:
                seen.add(r)
                order.append(r)
    rank = np.empty(n_b, dtype=np.int64)
    rank[order] = np.arange(n_b)
    block = np.where(block_r >= 0, rank[np.maximum(block_r, 0)], -1)
    return rank[q_trans[order]], q_cls[order], block


