"""Text patterns per state, influential patterns and buggy patterns (DeepSeer's lists).

Everything here is vectorised over all steps of a split with integer keys and
``np.unique``; no Python loop touches individual steps.

State paths are read *collapsed*: consecutive repeats of a state (self-loops) are merged,
so a pattern is a sequence of distinct consecutive states, e.g. ``0 → 12 → 7``.

``state_ngrams``
    The 1–3-grams of tokens that lead into each state, ranked by frequency and by lift
    (P(n-gram | state) / P(n-gram)), optionally without stop-word-only n-grams.
``state_contexts``
    Example contexts (±k tokens) per state, the state's step marked.
``influential_patterns``
    Windows of 2–4 states ending where the intermediate prediction flips, mined from
    correctly classified inputs; ``support`` = flips, ``lift`` = P(flip | window).
``buggy_patterns``
    State windows over-represented in misclassified inputs: ``support`` = misclassified
    inputs containing it, ``lift`` = P(window | wrong) / P(window), ``p_value`` =
    hypergeometric upper tail, ``q_value`` its Bonferroni correction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import hypergeom
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

__all__ = [
    "buggy_patterns",
    "collapsed_paths",
    "influential_patterns",
    "state_contexts",
    "state_ngrams",
    "window_keys",
]


def _positions(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.diff(offsets)
    n = int(offsets[-1])
    inp = np.repeat(np.arange(len(lengths)), lengths)
    pos = np.arange(n) - np.repeat(offsets[:-1], lengths)
    return inp, pos


def _uninformative(words: Sequence[str]) -> np.ndarray:
    """True for stop words and tokens without a letter or digit."""
    return np.array([w in ENGLISH_STOP_WORDS or not any(ch.isalnum() for ch in w)
                     for w in words], dtype=bool)


def state_ngrams(
    states: np.ndarray,
    offsets: np.ndarray,
    token_ids: np.ndarray,
    vocab: Sequence[str],
    n_states: int,
    *,
    max_n: int = 3,
    top_k: int = 10,
    min_count_for_lift: int = 5,
    drop_stopwords: bool = True,
) -> list[dict[str, list[dict[str, Any]]]]:
    """N-grams (1..max_n) of tokens ending at the steps that enter each state.

    Parameters
    ----------
    states : ndarray of shape (n_steps,)
        FSM state of every step.
    offsets : ndarray of shape (n_inputs + 1,)
    token_ids : ndarray of shape (n_steps,)
        Indices into ``vocab`` (e.g. ``surface_ids`` with the surface table).
    vocab : sequence of str
    n_states : int
        FSM states (the result has one entry per state).

    Returns
    -------
    list of dict
        Per state ``{"frequent": [...], "lift": [...]}``, each item
        ``{"ngram": str, "n": int, "count": int, "lift": float}``.
    """
    states = np.asarray(states, np.int64)
    tok = np.asarray(token_ids, np.int64)
    V = max(len(vocab), 1)
    _, pos = _positions(np.asarray(offsets))
    stop = _uninformative(vocab) if drop_stopwords else np.zeros(V, bool)
    rows: list[tuple[np.ndarray, ...]] = []
    for n in range(1, max_n + 1):
        idx = np.flatnonzero(pos >= n - 1)
        key = np.zeros(len(idx), np.int64)
        all_stop = np.ones(len(idx), bool)
        for j in range(n - 1, -1, -1):  # loop over n-gram positions, vectorised over steps
            t = tok[idx - j]
            key = key * V + t
            all_stop &= stop[t]
        keep = ~all_stop
        idx, key = idx[keep], key[keep]
        uk, total = np.unique(key, return_counts=True)
        pair = states[idx] * (V ** n) + key
        up, cnt = np.unique(pair, return_counts=True)
        st, k = up // (V ** n), up % (V ** n)
        state_total = np.bincount(states[idx], minlength=n_states)
        p_state = cnt / np.maximum(state_total[st], 1)
        p_all = total[np.searchsorted(uk, k)] / max(len(idx), 1)
        rows.append((st, k, cnt, p_state / p_all, np.full(len(st), n)))
    st, key, cnt, lift, nn = (np.concatenate(c) for c in zip(*rows, strict=True))

    def decode(k: int, n: int) -> str:
        words = []
        for _ in range(n):
            k, t = divmod(k, V)
            words.append(vocab[t])
        return " ".join(reversed(words))

    out: list[dict[str, list[dict[str, Any]]]] = [{"frequent": [], "lift": []}
                                                  for _ in range(n_states)]
    for name, order_key, ok in (
        ("frequent", -cnt, np.ones(len(cnt), bool)),
        ("lift", -lift, cnt >= min_count_for_lift),
    ):
        sel = np.flatnonzero(ok)
        order = sel[np.lexsort((nn[sel], order_key[sel], st[sel]))]
        s_sorted = st[order]
        first = np.searchsorted(s_sorted, s_sorted, side="left")
        rank = np.arange(len(order)) - first
        for i in order[rank < top_k]:
            out[int(st[i])][name].append({"ngram": decode(int(key[i]), int(nn[i])),
                                          "n": int(nn[i]), "count": int(cnt[i]),
                                          "lift": round(float(lift[i]), 3)})
    return out


def state_contexts(
    states: np.ndarray,
    offsets: np.ndarray,
    token_ids: np.ndarray,
    vocab: Sequence[str],
    n_states: int,
    *,
    per_state: int = 5,
    window: int = 4,
    random_state: int = 0,
) -> list[list[dict[str, Any]]]:
    """Up to ``per_state`` example contexts for every state.

    Returns
    -------
    list of list of dict
        Per state: ``{"input": i, "position": p, "tokens": [...], "focus": j}`` where
        ``tokens[focus]`` is the token whose step lands in the state.
    """
    states = np.asarray(states, np.int64)
    inp, pos = _positions(np.asarray(offsets))
    rng = np.random.default_rng(random_state)
    perm = rng.permutation(len(states))
    order = perm[np.argsort(states[perm], kind="stable")]
    s_sorted = states[order]
    first = np.searchsorted(s_sorted, s_sorted, side="left")
    picked = order[(np.arange(len(order)) - first) < per_state]
    out: list[list[dict[str, Any]]] = [[] for _ in range(n_states)]
    offsets = np.asarray(offsets)
    for step in picked:  # at most per_state * n_states items
        i, p = int(inp[step]), int(pos[step])
        lo = max(0, p - window)
        hi = min(int(offsets[i + 1] - offsets[i]), p + window + 1)
        toks = [vocab[int(t)] for t in token_ids[offsets[i] + lo : offsets[i] + hi]]
        out[int(states[step])].append({"input": i, "position": p, "tokens": toks,
                                       "focus": p - lo})
    return out


def collapsed_paths(states: np.ndarray, offsets: np.ndarray, initial: int = 0):
    """Paths with the initial state prepended and self-loops merged.

    Returns
    -------
    cstates : ndarray of shape (n_collapsed,)
    cinput : ndarray of shape (n_collapsed,)
        Input of each collapsed position.
    cstep : ndarray of shape (n_collapsed,)
        Step index (into the split's steps) at which the state was entered; -1 for the
        initial state.
    step_to_c : ndarray of shape (n_steps,)
        Collapsed position that contains each step.
    """
    offsets = np.asarray(offsets)
    lengths = np.diff(offsets)
    n_in = len(lengths)
    full_len = lengths + 1
    full_off = np.concatenate([[0], np.cumsum(full_len)])
    full = np.full(int(full_off[-1]), initial, np.int64)
    fstep = np.full(len(full), -1, np.int64)
    mask = np.ones(len(full), bool)
    mask[full_off[:-1]] = False
    full[mask] = states
    fstep[mask] = np.arange(len(states))
    finput = np.repeat(np.arange(n_in), full_len)
    keep = np.ones(len(full), bool)
    keep[1:] = (full[1:] != full[:-1]) | (finput[1:] != finput[:-1])
    cidx = np.cumsum(keep) - 1
    step_to_c = cidx[mask]
    return full[keep], finput[keep], fstep[keep], step_to_c


def window_keys(cstates, cinput, w, S):
    """Key of the window of ``w`` collapsed states ending at each position (-1 if none)."""
    n = len(cstates)
    key = np.full(n, -1, np.int64)
    if n < w:
        return key
    k = np.zeros(n - w + 1, np.int64)
    same = np.ones(n - w + 1, bool)
    for j in range(w):
        k = k * S + cstates[j : n - w + 1 + j]
        same &= cinput[j : n - w + 1 + j] == cinput[w - 1 :]
    key[w - 1 :] = np.where(same, k, -1)
    return key


def _decode_window(key: int, w: int, S: int) -> list[int]:
    out = []
    for _ in range(w):
        key, s = divmod(key, S)
        out.append(int(s))
    return out[::-1]


def _phrases(steps_lists, token_ids, vocab, top=3, max_len=6):
    counts: dict[str, int] = {}
    for lo, hi in steps_lists:
        lo = max(lo, hi - max_len + 1)
        ph = " ".join(vocab[int(t)] for t in token_ids[lo : hi + 1])
        counts[ph] = counts.get(ph, 0) + 1
    return [{"phrase": p, "count": c}
            for p, c in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:top]]


def influential_patterns(
    states: np.ndarray,
    offsets: np.ndarray,
    token_ids: np.ndarray,
    vocab: Sequence[str],
    proba: np.ndarray,
    initial_proba: np.ndarray,
    labels: np.ndarray,
    predictions: np.ndarray,
    n_states: int,
    *,
    lengths: Sequence[int] = (2, 3, 4),
    top_k: int = 30,
    min_support: int = 3,
) -> list[dict[str, Any]]:
    """State windows in which the intermediate prediction flips (correct inputs only).

    Returns
    -------
    list of dict
        ``{"states", "support", "lift", "flip": [from, to], "phrases", "inputs"}`` sorted
        by support.
    """
    offsets = np.asarray(offsets)
    token_ids = np.asarray(token_ids)
    step_pred = np.asarray(proba).argmax(1)
    inp, pos = _positions(offsets)
    prev_pred = np.empty_like(step_pred)
    prev_pred[1:] = step_pred[:-1]
    prev_pred[pos == 0] = int(np.argmax(initial_proba))
    correct = (np.asarray(labels) == np.asarray(predictions))[inp] if len(inp) else inp
    # A flip away from head(h0) on the first token says little: count flips after it.
    flips = np.flatnonzero((step_pred != prev_pred) & correct & (pos >= 1))
    cstates, cinput, cstep, step_to_c = collapsed_paths(states, offsets)
    S = n_states
    cands = []  # (support, lift, w, key, direction)
    keys_by_w = {}
    for w in lengths:
        key = window_keys(cstates, cinput, w, S)
        keys_by_w[w] = key
        fk = key[step_to_c[flips]]
        ok = fk >= 0
        combo = fk[ok] * 1_000_000 + prev_pred[flips[ok]] * 1000 + step_pred[flips[ok]]
        uc, sup = np.unique(combo, return_counts=True)
        occ_keys, occ = np.unique(key[key >= 0], return_counts=True)
        for j in np.flatnonzero(sup >= min_support):
            k, d = divmod(int(uc[j]), 1_000_000)
            lift = float(sup[j] / occ[np.searchsorted(occ_keys, k)])
            cands.append((int(sup[j]), lift, w, k, d))
    cands.sort(key=lambda c: (-c[0], -c[1], c[2], c[3]))
    out: list[dict[str, Any]] = []
    for support, lift, w, k, d in cands[:top_k]:
        key = keys_by_w[w]
        members = flips[(key[step_to_c[flips]] == k)
                        & (prev_pred[flips] == d // 1000) & (step_pred[flips] == d % 1000)]
        starts = cstep[step_to_c[members] - (w - 2)]
        spans = [(int(a), int(b)) for a, b in zip(starts, members, strict=True)]
        out.append({"states": _decode_window(k, w, S), "support": support,
                    "lift": round(lift, 4), "flip": [d // 1000, d % 1000],
                    "phrases": _phrases(spans, token_ids, vocab),
                    "inputs": sorted({int(inp[m]) for m in members})[:50]})
    return out


def buggy_patterns(
    states: np.ndarray,
    offsets: np.ndarray,
    token_ids: np.ndarray,
    vocab: Sequence[str],
    labels: np.ndarray,
    predictions: np.ndarray,
    n_states: int,
    *,
    lengths: Sequence[int] = (2, 3, 4),
    top_k: int = 30,
    min_support: int = 3,
) -> list[dict[str, Any]]:
    """State windows over-represented in misclassified inputs.

    Returns
    -------
    list of dict
        ``{"states", "support", "n_inputs", "lift", "p_value", "q_value", "phrases",
        "inputs"}`` sorted by p-value.
    """
    offsets = np.asarray(offsets)
    token_ids = np.asarray(token_ids)
    wrong = np.asarray(labels) != np.asarray(predictions)
    n_all, n_wrong = len(wrong), int(wrong.sum())
    if n_wrong == 0 or n_all == 0:
        return []
    cstates, cinput, cstep, _ = collapsed_paths(states, offsets)
    S = n_states
    keys_by_w = {}
    found = []  # per window length: (w, keys, support, n_with)
    n_tests = 0
    for w in lengths:
        key = window_keys(cstates, cinput, w, S)
        keys_by_w[w] = key
        pos = np.flatnonzero(key >= 0)
        pk = np.sort(cinput[pos] * (S ** w) + key[pos])  # presence per input
        pk = pk[np.concatenate([[True], pk[1:] != pk[:-1]])] if len(pk) else pk
        p_in, p_key = pk // (S ** w), pk % (S ** w)
        uk, inv, n_with = np.unique(p_key, return_inverse=True, return_counts=True)
        n_wrong_with = np.bincount(inv, weights=wrong[p_in], minlength=len(uk)).astype(int)
        n_tests += len(uk)
        cand = np.flatnonzero((n_wrong_with >= min_support)
                              & (n_wrong_with / n_wrong > n_with / n_all))
        found.append((np.full(len(cand), w), uk[cand], n_wrong_with[cand], n_with[cand]))
    ws, ks, sup, nw = (np.concatenate(c) for c in zip(*found, strict=True))
    if len(ws) == 0:
        return []
    # Rank by the normal approximation, then compute exact p-values for the leaders only.
    frac = nw / n_all
    var = n_wrong * frac * (1 - frac) * (n_all - n_wrong) / max(n_all - 1, 1)
    z = (sup - n_wrong * frac) / np.sqrt(np.maximum(var, 1e-12))
    lead = np.argsort(-z, kind="stable")[: max(10 * top_k, 100)]
    pv = hypergeom.sf(sup[lead] - 1, n_all, nw[lead], n_wrong)
    cands = [(float(p), int(ws[j]), int(ks[j]), int(sup[j]), int(nw[j]))
             for j, p in zip(lead, pv, strict=True)]
    cands.sort(key=lambda c: (c[0], -c[3], c[1], c[2]))
    out: list[dict[str, Any]] = []
    for p, w, k, support, n_with_k in cands[:top_k]:
        key = keys_by_w[w]
        hits = np.flatnonzero(key == k)
        hits = hits[wrong[cinput[hits]]]
        spans = [(int(cstep[h - (w - 2)]), int(cstep[h])) for h in hits[:200]]
        out.append({"states": _decode_window(k, w, S), "support": support,
                    "n_inputs": n_with_k,
                    "lift": round((support / n_wrong) / (n_with_k / n_all), 4),
                    "p_value": p, "q_value": min(1.0, p * max(n_tests, 1)),
                    "phrases": _phrases(spans, token_ids, vocab),
                    "inputs": sorted({int(cinput[h]) for h in hits})[:50]})
    return out
