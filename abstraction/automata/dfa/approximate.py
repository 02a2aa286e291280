"""Step 6 (optional): a smaller automaton that still agrees with the RNN, for imperfect RNNs.

On an imperfect RNN the refinement of :mod:`.refine` chases the RNN's isolated mistakes: the
exact automaton of the training prefixes has many states, each bought for little agreement.
:func:`shrink` trades states for agreement in three moves, all measured on the prefix tree
(the RNN's own prediction after every distinct training prefix, no hidden states):

1. **Merge states whose behaviour agrees.** The *signature* of a state is the class it
   outputs after every suffix of up to ``depth`` symbols. States are merged, most visited
   first, into the first leader of their class whose signature differs on at most a share
   ``eps`` of the suffixes; merged transitions take the target most training steps took.
   Sweeping ``eps`` and ``depth`` gives a family of automata of every size.
2. **Keep the family member that agrees most** with the RNN among those within the state
   budget (after minimisation).
3. **Polish it**: relabel every state with the RNN's majority class over the prefixes the
   automaton brings there (:func:`relabel`), then re-target single transitions while that
   raises agreement (hill climbing, within a time limit).

Agreement is weighted so that every length up to ``fit_len`` counts as its share of all
strings up to that length (the figure ``agreement_le12`` reports for ``fit_len=12``), and the
user's examples weigh more than everything else together, so they are honoured first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from stateseer.abstraction.automata.dfa.minimise import _minimise
from stateseer.abstraction.automata.dfa.prefix_tree import _Tree

EPS_GRID = (0.0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.06, 0.1)
DEPTHS = (4, 6, 8)
PRE_MERGE_DEPTH = 10


@dataclass
class _Eval:
    """The prefixes agreement is measured on, in level order (parents before children).

    Attributes
    ----------
    parent, symbol, pred : ndarray of shape (n_nodes,)
        Parent (index into these arrays, -1 for the root), symbol id, RNN's class.
    weight : ndarray of shape (n_nodes,)
    level : ndarray of shape (n_levels + 1,)
        Nodes of depth ``t`` are ``level[t]:level[t + 1]``.
    """

    parent: np.ndarray
    symbol: np.ndarray
    pred: np.ndarray
    weight: np.ndarray
    level: np.ndarray

    def run(self, trans: np.ndarray, initial: int) -> np.ndarray:
        """State the automaton reaches after every prefix, shape (n_nodes,)."""
        dstate = np.empty(len(self.parent), dtype=np.int64)
        dstate[0] = initial
        for lo, hi in zip(self.level[1:-1], self.level[2:], strict=True):
            dstate[lo:hi] = trans[dstate[self.parent[lo:hi]], self.symbol[lo:hi]]
        return dstate


def eval_set(tree: _Tree, n_symbols: int, fit_len: int, heavy: np.ndarray | None = None
             ) -> _Eval:
    """Prefixes of length <= ``fit_len`` (plus the ``heavy`` nodes and their ancestors),
    weighted so every length counts as its share of all strings up to ``fit_len``.

    Parameters
    ----------
    tree : _Tree
    n_symbols, fit_len : int
    heavy : ndarray of bool of shape (n_nodes,), optional
        Nodes (the user's examples) that weigh more than all the others together.
    """
    n_levels = len(tree.level) - 1
    depth = np.repeat(np.arange(n_levels), np.diff(tree.level))
    keep = depth <= fit_len
    if heavy is not None:
        heavy = heavy.copy()
        up = np.flatnonzero(heavy)
        while up.size:  # ancestors of heavy nodes join (prefix-closed)
            up = tree.parent[up]
            up = up[(up >= 0) & ~heavy[np.maximum(up, 0)]]
            heavy[up] = True
        keep |= heavy
    idx = np.flatnonzero(keep)
    remap = np.full(len(tree.X), -1, dtype=np.int64)
    remap[idx] = np.arange(len(idx))
    d = depth[idx]
    count = np.bincount(d, minlength=n_levels).astype(np.float64)
    share = float(n_symbols) ** np.minimum(d, fit_len)
    weight = np.where(d <= fit_len, share / np.maximum(count[d], 1.0), 0.0)
    weight /= weight.sum()
    if heavy is not None and heavy.any():
        weight = weight + heavy[idx] * 2.0  # each example outweighs everything else
    level = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=n_levels))])
    return _Eval(parent=np.where(tree.parent[idx] >= 0, remap[tree.parent[idx]], -1),
                 symbol=tree.symbol[idx], pred=tree.pred[idx], weight=weight,
                 level=level[: int(d.max()) + 2])


def relabel(ev: _Eval, trans: np.ndarray, initial: int, n_classes: int,
            fallback: np.ndarray) -> tuple[np.ndarray, float]:
    """Label each state with the RNN's majority class over the prefixes it is reached by.

    Parameters
    ----------
    ev : _Eval
    trans : ndarray of shape (n_states, n_symbols)
    initial, n_classes : int
    fallback : ndarray of shape (n_states,)
        Class of the states no prefix reaches.

    Returns
    -------
    state_class : ndarray of shape (n_states,)
    agreement : float
        Weighted share of the prefixes whose state's class is the RNN's.
    """
    n = len(trans)
    dstate = ev.run(trans, initial)
    votes = np.bincount(dstate * n_classes + ev.pred, weights=ev.weight,
                        minlength=n * n_classes).reshape(n, n_classes)
    reached = votes.sum(axis=1) > 0
    cls = np.where(reached, votes.argmax(axis=1), fallback)
    return cls, float(votes.max(axis=1).sum() / ev.weight.sum())


#: the most entries a signature table holds (n_states x n_suffixes): every suffix of each
#: length while they fit, a seeded sample of them beyond (a text run's 5,833 symbols to
#: depth 2 would be 34M suffixes a state, 50 GiB for 198 states)
SIGNATURE_CELLS = 1 << 23


def signatures(trans: np.ndarray, state_class: np.ndarray, depth: int, *,
               max_cells: int = SIGNATURE_CELLS, seed: int = 0) -> np.ndarray:
    """Class after every suffix of length <= ``depth``, shape (n_states, n_suffixes).

    Where a length's suffixes would not fit in its share of ``max_cells`` (the table's
    entries shared equally over the lengths 1 .. ``depth``), a seeded sample of that many
    suffixes of that length stands in for them: the same columns for every state, so two
    states that differ on a sampled suffix still differ. Small alphabets (formal
    languages) are enumerated whole, as before.

    >>> trans = np.array([[1, 0], [1, 1]]); cls = np.array([0, 1])
    >>> signatures(trans, cls, 2).tolist()
    [[0, 1, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]]
    >>> big = np.random.default_rng(0).integers(0, 50, (50, 5000))
    >>> signatures(big, np.arange(50) % 2, 3, max_cells=50 * 301).shape
    (50, 301)
    """
    n, k = trans.shape
    per = max(1, (max_cells // max(n, 1) - 1) // max(depth, 1))
    rng = np.random.default_rng(seed)
    cur = np.arange(n)[:, None]
    cols = [state_class[cur]]
    for d in range(1, depth + 1):
        if cur is not None and cur.shape[1] * k <= per:
            cur = trans[cur].reshape(n, -1)  # every suffix of length d
            cols.append(state_class[cur])
            continue
        cur = None  # from here on, a sample of each length
        words = rng.integers(0, k, (per, d))
        at = np.broadcast_to(np.arange(n)[:, None], (n, per))
        for j in range(d):
            at = trans[at, words[:, j]]
        cols.append(state_class[at])
    return np.concatenate(cols, axis=1)


def merge(trans: np.ndarray, state_class: np.ndarray, counts: np.ndarray, visits: np.ndarray,
          initial: int, sig: np.ndarray, eps: float
          ) -> tuple[np.ndarray, np.ndarray, int]:
    """Merge states of one class whose signatures differ on at most a share ``eps``.

    Parameters
    ----------
    trans : ndarray of shape (n_states, n_symbols)
    state_class, visits : ndarray of shape (n_states,)
    counts : ndarray of shape (n_states, n_symbols)
        Training traffic of every transition (majority votes of the merged transitions).
    initial : int
    sig : ndarray of shape (n_states, n_suffixes)
        :func:`signatures`.
    eps : float

    Returns
    -------
    transitions : ndarray of shape (n_blocks, n_symbols)
    state_class : ndarray of shape (n_blocks,)
    initial : int
    """
    n, k = trans.shape
    block = np.full(n, -1, dtype=np.int64)
    leaders: list[int] = []
    for q in np.argsort(-visits, kind="stable"):
        if leaders:
            lead = np.asarray(leaders)
            dist = (sig[lead] != sig[q]).mean(axis=1)
            dist[state_class[lead] != state_class[q]] = np.inf
            j = int(dist.argmin())
            if dist[j] <= eps:
                block[q] = block[lead[j]]
                continue
        block[q] = len(leaders)
        leaders.append(int(q))
    nb = len(leaders)
    out = np.zeros((nb, k), dtype=np.int64)
    for a in range(k):
        vote = np.zeros((nb, nb))
        np.add.at(vote, (block, block[trans[:, a]]), counts[:, a] + 1e-3 * (visits + 1.0))
        out[:, a] = vote.argmax(axis=1)
    return out, state_class[np.asarray(leaders)], int(block[initial])


def _merge_pair(trans: np.ndarray, counts: np.ndarray, q: int, r: int) -> np.ndarray:
    """``trans`` with state ``q`` folded into ``r`` (q's row dropped, ids above q shift down).

    Where the two disagree, the merged state keeps the transition with more traffic.
    """
    t = trans.copy()
    keep_q = counts[q] > counts[r]
    t[r, keep_q] = t[q, keep_q]
    t[t == q] = r
    t = np.delete(t, q, axis=0)
    return t - (t > q)


def _reachable(trans: np.ndarray, state_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Only the states reachable from state 0 (kept as 0), renumbered in order."""
    seen = np.zeros(len(trans), dtype=bool)
    seen[0] = True
    frontier = np.array([0])
    while frontier.size:
        nxt = np.unique(trans[frontier].reshape(-1))
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
    if seen.all():
        return trans, state_class
    remap = np.cumsum(seen) - 1
    return remap[trans[seen]], state_class[seen]


def full_set(tree: _Tree) -> _Eval:
    """Every prefix of the tree, each weighing one (the stricter check of the knee)."""
    return _Eval(parent=tree.parent, symbol=tree.symbol, pred=tree.pred,
                 weight=np.ones(len(tree.parent)), level=tree.level)


def _plain_agreement(ev: _Eval, trans: np.ndarray, state_class: np.ndarray) -> float:
    """Weighted share of the prefixes where ``state_class`` of the state reached is the
    RNN's class (the classes as they are, not relabelled)."""
    hit = state_class[ev.run(trans, 0)] == ev.pred
    return float((hit * ev.weight).sum() / ev.weight.sum())


def _merge_blocks(trans: np.ndarray, block: np.ndarray, counts: np.ndarray,
                  visits: np.ndarray) -> np.ndarray:
    """Transitions between ``block``s (n_blocks, n_symbols), each the target most of the
    block's training traffic takes (ties to the most visited state's)."""
    nb, k = int(block.max()) + 1, trans.shape[1]
    out = np.zeros((nb, k), dtype=np.int64)
    for a in range(k):
        vote = np.zeros((nb, nb))
        np.add.at(vote, (block, block[trans[:, a]]), counts[:, a] + 1e-3 * (visits + 1.0))
        out[:, a] = vote.argmax(axis=1)
    return out


def lossless_merge(tree: _Tree, alphabet: tuple[str, ...], trans: np.ndarray,
                   state_class: np.ndarray, n_classes: int,
                   max_depth: int = PRE_MERGE_DEPTH) -> tuple[np.ndarray, np.ndarray, dict]:
    """Step 5b: merge states that behave alike, if no training prefix loses by it.

    The refined automaton is exact on the training prefixes, but refinement splits the
    hidden states along whatever separates them, and a model whose state also remembers
    its recent inputs (Mamba's convolution buffer and decaying SSM state) leaves states
    that no suffix the automaton knows tells apart within a few symbols yet which differ
    on rare long paths, so Moore minimisation keeps them (Tomita 7: 119 states instead of
    5). For ``d = 1, 2, …, max_depth`` the states whose classes agree after every suffix
    of up to ``d`` symbols (:func:`signatures`) are merged, each merged transition taking
    the target most training traffic takes; the first (coarsest) merge whose minimised
    automaton agrees with the RNN on every training prefix at least as often as the
    refined one is kept. None qualifying: the automaton is returned as it is.

    Parameters
    ----------
    tree : _Tree
    alphabet : tuple of str
    trans : ndarray of shape (n_states, n_symbols)
        The minimised refined automaton, initial state 0.
    state_class : ndarray of shape (n_states,)
    n_classes, max_depth : int

    Returns
    -------
    transitions, state_class : ndarrays, initial state 0
    info : dict
        ``{"depth": d, "n_states_before": n}`` when a merge was kept, else empty.
    """
    full = full_set(tree)
    base = _plain_agreement(full, trans, state_class)
    visits, counts = _traffic(full, trans, 0)
    for depth in range(1, max_depth + 1):
        sig = signatures(trans, state_class, depth)
        block = np.unique(sig, axis=0, return_inverse=True)[1].reshape(-1)
        n_blocks = int(block.max()) + 1
        if n_blocks == len(trans):
            break  # deeper signatures split no less
        leaders = np.unique(block, return_index=True)[1]
        m_t, m_c, _ = _minimise(alphabet, _merge_blocks(trans, block, counts, visits),
                                state_class[leaders], int(block[0]), n_classes)
        if len(m_t) < len(trans) and _plain_agreement(full, m_t, m_c) >= base - 1e-12:
            return m_t, m_c, {"depth": depth, "n_states_before": len(trans)}
    return trans, state_class, {}


def greedy_merge(ev: _Eval, trans: np.ndarray, state_class: np.ndarray, n_classes: int,
                 states: int, deadline: float, n_pairs: int = 16,
                 strict: _Eval | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Merge two states at a time, the merge the RNN agrees with most, down to ``states``,
    then on while a merge loses no agreement (stopping at the knee): neither on ``ev`` nor,
    if given, on ``strict`` (every prefix, so that a merge is not called free merely
    because the fit set does not see the strings it breaks).

    Each round tries the ``n_pairs`` same-class pairs whose depth-6 signatures (depth 4
    above 100 states) are closest
    (:func:`signatures`) and keeps the one whose automaton agrees most (:func:`relabel`).
    ``trans`` has its initial state 0 and stays so (a merge into state 0 keeps id 0).

    Returns
    -------
    transitions, state_class : ndarrays, at most ``states`` states unless ``deadline``
        (perf_counter) passed first
    agreement : float
    """
    cls, agree = relabel(ev, trans, 0, n_classes, state_class)
    s_agree = None
    while len(trans) > 1 and time.perf_counter() < deadline:
        n = len(trans)
        _, counts = _traffic(ev, trans, 0)
        sig = signatures(trans, cls, 6 if n <= 100 else 4)
        dist = (sig[:, None, :] != sig[None, :, :]).mean(-1)
        dist[cls[:, None] != cls[None, :]] = np.inf
        dist[np.tril_indices(n)] = np.inf
        flat = np.argsort(dist, axis=None, kind="stable")[:n_pairs]
        best = None
        for f in flat:
            a, b = divmod(int(f), n)
            if not np.isfinite(dist[a, b]):
                break
            q, r = (b, a) if a < b else (a, b)  # fold the higher id into the lower (0 stays)
            t, c = _reachable(_merge_pair(trans, counts, q, r), np.delete(cls, q))
            c2, ag = relabel(ev, t, 0, n_classes, c)
            if best is None or ag > best[0]:
                best = (ag, t, c2)
        if best is None:
            break
        if n <= states:  # within the budget, merge on only while nothing is lost (the knee)
            if best[0] < agree - 1e-12:
                break
            if strict is not None:
                if s_agree is None:
                    s_agree = relabel(strict, trans, 0, n_classes, cls)[1]
                s_new = relabel(strict, best[1], 0, n_classes, best[2])[1]
                if s_new < s_agree - 1e-12:
                    break
                s_agree = s_new
        agree, trans, cls = best
    return trans, cls, agree


def _traffic(ev: _Eval, trans: np.ndarray, initial: int) -> tuple[np.ndarray, np.ndarray]:
    """Weighted visits (n_states,) and transition traffic (n_states, n_symbols)."""
    n, k = trans.shape
    dstate = ev.run(trans, initial)
    visits = np.bincount(dstate, weights=ev.weight, minlength=n)
    counts = np.bincount(dstate[ev.parent[1:]] * k + ev.symbol[1:], weights=ev.weight[1:],
                         minlength=n * k).reshape(n, k)
    return visits, counts


def hill_climb(ev: _Eval, trans: np.ndarray, state_class: np.ndarray, n_classes: int,
               deadline: float, max_targets: int = 24) -> tuple[np.ndarray, np.ndarray, float]:
    """Re-target single transitions while agreement rises (``trans`` is not modified).

    Each ``(state, symbol)`` tries the ``max_targets`` states whose signatures are closest
    to its current target's, keeping any change that raises the agreement of
    :func:`relabel`; sweeps repeat until none helps or ``deadline`` (perf_counter) passes.

    Returns
    -------
    transitions, state_class : ndarrays
    agreement : float
    """
    trans = trans.copy()
    k = trans.shape[1]
    cls, best = relabel(ev, trans, 0, n_classes, state_class)
    sig = signatures(trans, cls, 4)
    dist = (sig[:, None, :] != sig[None, :, :]).sum(-1)  # (n, n), n is small here
    near = np.argsort(dist, axis=1, kind="stable")[:, 1 : max_targets + 1]
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        visits, _ = _traffic(ev, trans, 0)
        for q in np.argsort(-visits, kind="stable"):
            if visits[q] <= 0:
                continue
            for a in range(k):
                if time.perf_counter() >= deadline:
                    return trans, cls, best
                cur = int(trans[q, a])
                for r in near[cur]:
                    trans[q, a] = r
                    c2, agree = relabel(ev, trans, 0, n_classes, cls)
                    if agree > best + 1e-12:
                        best, cur, cls, improved = agree, int(r), c2, True
                trans[q, a] = cur
    return trans, cls, best


def shrink(tree: _Tree, ev: _Eval, alphabet: tuple[str, ...], trans: np.ndarray,
           state_class: np.ndarray, n_classes: int, states: int, deadline: float
           ) -> tuple[np.ndarray, np.ndarray, dict]:
    """The best-agreeing automaton with at most ``states`` states (see the module doc).

    Parameters
    ----------
    tree : _Tree
    ev : _Eval
        :func:`eval_set` of the tree.
    alphabet : tuple of str
    trans : ndarray of shape (n_min, n_symbols)
        The minimal automaton of the refinement, initial state 0.
    state_class : ndarray of shape (n_min,)
    n_classes, states : int
    deadline : float
        ``time.perf_counter()`` value after which polishing stops.

    Returns
    -------
    transitions : ndarray of shape (n, n_symbols), n <= ``states``, minimal, initial 0
    state_class : ndarray of shape (n,)
    info : dict
        ``fit_agreement`` before and after polishing, the ``eps`` and ``depth`` chosen.
    """
    t0 = time.perf_counter()
    if len(trans) > 2 * states:  # too many for pairwise merging: identical behaviour first
        visits, counts = _traffic(ev, trans, 0)
        sig = signatures(trans, state_class, PRE_MERGE_DEPTH)
        block = np.unique(sig, axis=0, return_inverse=True)[1].reshape(-1)
        leaders = np.unique(block, return_index=True)[1]
        pre_t, pre_c, _ = _minimise(alphabet, _merge_blocks(trans, block, counts, visits),
                                    state_class[leaders], int(block[0]), n_classes)
        if relabel(ev, pre_t, 0, n_classes, pre_c)[1] >= \
                relabel(ev, trans, 0, n_classes, state_class)[1] - 1e-3:
            trans, state_class = pre_t, pre_c
    g_t, g_c, g_agree = greedy_merge(ev, trans, state_class, n_classes, states,
                                     t0 + 0.7 * (deadline - t0), strict=full_set(tree))
    best = None
    if len(g_t) <= states:
        g_t, g_c, _ = _minimise(alphabet, g_t, g_c, 0, n_classes)
        best = (g_agree, g_t, g_c, "greedy", None)
    else:  # out of time: the merge family by signature distance instead
        visits, counts = _traffic(ev, trans, 0)
        for depth in DEPTHS:
            sig = signatures(trans, state_class, depth)
            for eps in EPS_GRID:
                if best is not None and time.perf_counter() > deadline:
                    break
                m_t, m_c, init = merge(trans, state_class, counts, visits, 0, sig, eps)
                m_t, m_c, _ = _minimise(alphabet, m_t, m_c, init, n_classes)
                if len(m_t) > states:
                    continue
                m_c, agree = relabel(ev, m_t, 0, n_classes, m_c)
                if best is None or agree > best[0] + 1e-12:
                    best = (agree, m_t, m_c, eps, depth)
    if best is None:  # nothing small enough: one state per class at worst
        visits, counts = _traffic(ev, trans, 0)
        sig = signatures(trans, state_class, 0)
        m_t, m_c, init = merge(trans, state_class, counts, visits, 0, sig, 1.0)
        m_t, m_c, _ = _minimise(alphabet, m_t, m_c, init, n_classes)
        m_c, agree = relabel(ev, m_t, 0, n_classes, m_c)
        best = (agree, m_t, m_c, 1.0, 0)
    agree, m_t, m_c, eps, depth = best
    p_t, p_c, p_agree = hill_climb(ev, m_t, m_c, n_classes, deadline)
    p_t, p_c, _ = _minimise(alphabet, p_t, p_c, 0, n_classes)
    return p_t, p_c, {"fit_agreement_merged": round(agree, 6),
                      "fit_agreement": round(p_agree, 6), "merge_eps": eps,
                      "merge_depth": depth}
