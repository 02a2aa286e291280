"""Steps 2-4 of the extraction: initial partition, refinement by conflicts, completion.

A transition ``(state, symbol)`` is *in conflict* when the children of the state's points on
that symbol lie in more than one state; each conflicting state is split along its worst
symbol until no conflict is left or the budget of states is reached, then every
``(state, symbol)`` takes its majority target (unseen pairs: the target of the nearest
state that has seen the symbol).
"""

from __future__ import annotations

import numpy as np

from stateseer.abstraction.abstractors.features import nearest_center
from stateseer.abstraction.automata.dfa.prefix_tree import _Tree


def _conflicts(
    tree: _Tree, state: np.ndarray, n_states: int, n_symbols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Transition statistics of the current partition.

    Returns
    -------
    pair : ndarray of shape (n_pairs,)
        ``source * n_symbols + symbol`` of every (state, symbol) seen, sorted.
    n_targets, total, top_target, top_weight : ndarrays of shape (n_pairs,)
        Distinct targets, traffic (occurrences), majority target and its traffic.
    """
    ch = np.arange(1, len(state))
    src = state[tree.parent[1:]]
    tgt = state[ch]
    w = tree.occ[ch]
    trip = (src * n_symbols + tree.symbol[1:]) * n_states + tgt
    utrip, inv = np.unique(trip, return_inverse=True)
    tw = np.bincount(inv.reshape(-1), weights=w)
    upair = utrip // n_states
    utgt = utrip % n_states
    # Sort by pair, then descending weight: the first entry of each pair is its majority.
    order = np.lexsort((utgt, -tw, upair))
    upair, utgt, tw = upair[order], utgt[order], tw[order]
    pair, start, n_targets = np.unique(upair, return_index=True, return_counts=True)
    total = np.add.reduceat(tw, start)
    return pair, n_targets, total, utgt[start], tw[start]


def _nearest_point(Z: np.ndarray, ref: np.ndarray, chunk: int = 2048,
                   max_ref: int = 4096) -> np.ndarray:
    """Index into ``ref`` of the nearest reference point of every row of ``Z``.

    Parameters
    ----------
    Z : ndarray of shape (n_rows, state_size)
    ref : ndarray of shape (n_ref, state_size)
    chunk : int
        Rows per block (bounds memory at ``chunk * max_ref`` floats).
    max_ref : int
        At most this many reference points are compared (an evenly spaced subset).

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    idx = np.arange(len(ref))
    if len(ref) > max_ref:
        idx = np.linspace(0, len(ref) - 1, max_ref).round().astype(np.int64)
    R = ref[idx]
    out = np.empty(len(Z), dtype=np.int64)
    for s in range(0, len(Z), chunk):
        out[s : s + chunk] = idx[nearest_center(Z[s : s + chunk], R)]
    return out


def _split(tree: _Tree, state: np.ndarray, members: np.ndarray, a: int, next_id: int,
           max_new: int, max_ref: int = 4096) -> int:
    """Split the nodes ``members`` of one state along symbol ``a``; returns the next free id.

    Nodes with an ``a``-child are grouped by the child's state (at most ``max_new + 1``
    groups: the heaviest targets first, the rest pooled); every other node joins the group
    of its nearest grouped node in hidden space (see :func:`_nearest_point`).
    """
    kids = tree.child[members, a]
    has = kids >= 0
    tgt = state[kids[has]]
    w = tree.occ[kids[has]].astype(np.float64)
    _, inv = np.unique(tgt, return_inverse=True)
    inv = inv.reshape(-1)
    weight = np.bincount(inv, weights=w)
    ranked = np.argsort(-weight, kind="stable")  # group 0 = majority target keeps the id
    rank = np.empty_like(ranked)
    rank[ranked] = np.arange(len(ranked))
    group = np.minimum(rank[inv], max_new)
    n_groups = int(group.max()) + 1 if group.size else 1
    if n_groups < 2:
        return next_id
    assign = np.empty(len(members), dtype=np.int64)
    assign[has] = group
    if (~has).any():
        assign[~has] = group[_nearest_point(tree.X[members[~has]], tree.X[members[has]],
                                            max_ref=max_ref)]
    ids = np.concatenate([[state[members[0]]], next_id + np.arange(n_groups - 1)])
    state[members] = ids[assign]
    return next_id + n_groups - 1


def _initial_partition(tree: _Tree, n_classes: int, initial_states: int | None,
                       random_state: int | None) -> np.ndarray:
    """One state per predicted class, or k-means split by predicted class."""
    present, state = np.unique(tree.pred, return_inverse=True)
    state = state.reshape(-1).astype(np.int64)
    if initial_states is None or initial_states <= len(present):
        return state
    from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor

    k = int(min(initial_states, len(tree.X)))
    proba = np.eye(n_classes)[tree.pred]
    ab = KMeansAbstractor(n_states=k, features="pca", pca_components=min(20, tree.X.shape[1]),
                          split_by_prediction=True, n_init=1, random_state=random_state)
    ab.fit(tree.X, proba=proba)
    _, state = np.unique(ab.predict(tree.X, proba=proba), return_inverse=True)
    return state.reshape(-1).astype(np.int64)




def refine(tree: _Tree, state: np.ndarray, n_symbols: int, max_states: int,
           max_rounds: int, max_ref: int = 4096) -> tuple[int, int, bool]:
    """Split conflicting states (in place in ``state``) until none is left or the budget.

    Within a round the states with the most conflicting traffic split first, each along
    its worst symbol; the last split is cut to fit the budget.

    Parameters
    ----------
    tree : _Tree
    state : ndarray of shape (n_nodes,)
        Abstract state of every prefix node; refined in place.
    n_symbols, max_states, max_rounds : int
    max_ref : int, default 4096
        Reference points of the nearest-neighbour step of a split (:func:`_nearest_point`).

    Returns
    -------
    n_states : int
    rounds : int
    budget_exhausted : bool
    """
    n_states = int(state.max()) + 1
    rounds = 0
    n_before = -1
    while rounds < max_rounds:
        pair, n_targets, total, _, top_w = _conflicts(tree, state, n_states, n_symbols)
        bad = np.flatnonzero(n_targets > 1)
        if bad.size == 0:
            break
        if n_states >= max_states:
            return n_states, rounds, True
        if rounds and n_states == n_before:
            break  # nothing could be split (cannot happen with a consistent tree)
        n_before = n_states
        rounds += 1
        minority = (total - top_w)[bad]
        src = pair[bad] // n_symbols
        # Worst symbol per state: sort by state, then by descending minority traffic.
        order = np.lexsort((-minority, src))
        first = np.ones(len(order), dtype=bool)
        first[1:] = src[order][1:] != src[order][:-1]
        pick = order[first]
        pick = pick[np.argsort(-minority[pick], kind="stable")]  # worst states first
        by_state = np.argsort(state, kind="stable")
        bounds = np.searchsorted(state[by_state], np.arange(n_states + 1))
        for j in pick:
            if n_states >= max_states:
                break
            q, a = int(src[j]), int(pair[bad][j] % n_symbols)
            members = by_state[bounds[q]:bounds[q + 1]]
            n_states = _split(tree, state, members, a, n_states, max_states - n_states,
                              max_ref)
    return n_states, rounds, False


def complete(tree: _Tree, state: np.ndarray, n_states: int, n_symbols: int, n_classes: int
             ) -> tuple[np.ndarray, np.ndarray, bool, int]:
    """Label states with their majority class and give every (state, symbol) a target.

    A pair seen in training takes its majority target; a pair never seen takes the target
    of the nearest state (centroid distance) that has seen the symbol. Every alphabet
    symbol occurs in training, so some state has always seen it.

    Returns
    -------
    transitions : ndarray of shape (n_states, n_symbols)
    state_class : ndarray of shape (n_states,)
    deterministic : bool
        No conflict was left on the training prefixes.
    conflicting_steps : int
        Training steps whose transition disagrees with the majority transition.
    """
    pair, n_targets, total, top_t, top_w = _conflicts(tree, state, n_states, n_symbols)
    votes = np.zeros((n_states, n_classes))
    np.add.at(votes, (state, tree.pred), tree.occ.astype(np.float64))
    trans = np.full((n_states, n_symbols), -1, dtype=np.int64)
    trans[pair // n_symbols, pair % n_symbols] = top_t
    sizes = np.bincount(state, minlength=n_states).astype(np.float64)
    centers = np.zeros((n_states, tree.X.shape[1]))
    np.add.at(centers, state, tree.X.astype(np.float64))
    centers /= np.maximum(sizes, 1.0)[:, None]
    missing = trans < 0
    if missing.any():
        d = ((centers[:, None, :] - centers[None, :, :]) ** 2).sum(-1)  # (S, S), S small
        ranked = np.argsort(d, axis=1, kind="stable")
        for q, a in np.argwhere(missing):
            for r in ranked[q]:
                if trans[r, a] >= 0 and not missing[r, a]:
                    trans[q, a] = trans[r, a]
                    break
    return (trans, votes.argmax(axis=1), bool((n_targets <= 1).all()),
            int((total - top_w).sum()))
