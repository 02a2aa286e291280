"""Text patterns per state, influential patterns and buggy patterns (DeepSeer's lists).

Everything here is vectorised over all steps of a split with integer keys and
``np.unique``; no Python loop touches individual steps.

Each list is mined in three phases so that a split's shards can be mined apart (in this
process or on a cluster, :func:`stateseer.abstraction.sharded.mine_patterns`) with the same result
as the whole split at once: *count* (per part: integer counts keyed by pattern, merged
by :func:`merge_counts`), *select* (on the merged counts: which patterns are listed) and
*describe* (per part: phrases and inputs of the selected patterns, merged in part order).
The public functions below run the three phases on one part, the whole split.

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

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
from scipy.stats import hypergeom
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from stateseer.abstraction.arrays import distinct
from stateseer.abstraction.kernels import HAVE_NUMBA, input_presence

__all__ = ["Part", "buggy_patterns", "collapsed_paths", "confusion_pair", "influential_patterns",
           "merge_counts", "state_contexts", "state_ngrams", "window_key_table",
           "window_keys"]

Counts = dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (sorted unique keys, counts)


@dataclass(frozen=True)
class Part:
    """The inputs of one part of a split (a shard, or the whole split), local offsets.

    ``step_start``/``input_start`` place the part in its split, so that what a part
    reports (inputs, step keys) is in the split's numbering. ``memo`` keeps what several
    lists read (collapsed paths, window keys, per-step predictions), computed once per part.
    """

    states: np.ndarray
    offsets: np.ndarray
    token_ids: np.ndarray
    proba: np.ndarray | None = None
    labels: np.ndarray | None = None
    predictions: np.ndarray | None = None
    step_start: int = 0
    input_start: int = 0
    memo: dict = field(default_factory=dict, compare=False, repr=False)


def _keyed(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(keys, np.int64), np.asarray(counts, np.int64)


#: key spaces up to this size are counted in a table of one slot per key (a pass, no sort)
DENSE_KEYS = 1 << 22


def _dense(n_keys: int, n: int) -> bool:
    return n_keys <= min(DENSE_KEYS, 8 * max(n, 1))


def _key_counts(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_counts=True)`` of keys in ``[0, n_keys)``, by a table of
    one count per key where the key space is small enough (the same arrays)."""
    keys = np.asarray(keys, np.int64)
    if not _dense(n_keys, len(keys)):
        return _keyed(*np.unique(keys, return_counts=True))
    table = np.bincount(keys, minlength=n_keys)
    at = np.flatnonzero(table)
    return at.astype(np.int64), table[at].astype(np.int64)


def summed_counts(keys: Sequence[np.ndarray], counts: Sequence[np.ndarray]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Several parts' ``(keys, counts)`` as one: the distinct keys, sorted, and each
    one's counts summed (exact: integer sums)."""
    uk, inv = np.unique(np.concatenate(keys), return_inverse=True)
    both = np.concatenate(counts)
    summed = np.zeros((len(uk), *both.shape[1:]), np.int64)
    np.add.at(summed, inv, both)
    return uk, summed


def merge_counts(a: Counts, b: Counts) -> Counts:
    """Sum two parts' counts key by key (associative and exact: integer sums)."""
    out: Counts = {}
    for name in a.keys() | b.keys():
        if name not in a or name not in b:
            out[name] = a.get(name) or b[name]
            continue
        (ka, ca), (kb, cb) = a[name], b[name]
        out[name] = summed_counts([ka, kb], [ca, cb])
    return out


def _positions(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.diff(offsets)
    n = int(offsets[-1])
    inp = np.repeat(np.arange(len(lengths)), lengths)
    pos = np.arange(n) - np.repeat(offsets[:-1], lengths)
    return inp, pos


def _part_positions(part: Part) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_positions` of a part's offsets (computed once per part)."""
    if "positions" not in part.memo:
        part.memo["positions"] = _positions(np.asarray(part.offsets))
    return part.memo["positions"]


def _uninformative(words: Sequence[str]) -> np.ndarray:
    """True for stop words and tokens without a letter or digit."""
    return np.array([w in ENGLISH_STOP_WORDS or not any(ch.isalnum() for ch in w)
                     for w in words], dtype=bool)


# -- per-state n-grams ----------------------------------------------------------------------
def ngram_counts(part: Part, n_states: int, *, vocab_size: int, stop: np.ndarray,
                 max_n: int = 3, bucket: tuple[int, int] = (0, 1)) -> Counts:
    """Count phase of :func:`state_ngrams`: per n, n-gram totals, (state, n-gram) pairs,
    steps per state and the number of steps counted.

    ``bucket=(b, B)`` counts only the n-grams whose :func:`key_bucket` is ``b`` of ``B``
    (their totals and pairs both; steps per state and the number of steps are always
    all of them), so that B passes count every n-gram once in 1/B of the memory."""
    states = np.asarray(part.states, np.int64)
    tok = np.asarray(part.token_ids, np.int64)
    V = max(vocab_size, 1)
    _, pos = _part_positions(part)
    tok_stop = np.asarray(stop)[tok]
    out: Counts = {}
    key, all_stop = tok, tok_stop  # [i]: the n-gram ending at step i + n - 1, shifted views
    for n in range(1, max_n + 1):
        if n > 1:
            key = key[:-1] * V + tok[n - 1:]
            all_stop = all_stop[:-1] & tok_stop[n - 1:]
        keep = np.flatnonzero((pos[n - 1:] >= n - 1) & ~all_stop)
        kept, at = key[keep], states[keep + (n - 1)]
        out[f"state{n}"] = _keyed(np.arange(n_states),
                                  np.bincount(at, minlength=n_states)[:n_states])
        out[f"steps{n}"] = _keyed(np.zeros(1), [len(keep)])
        if bucket[1] > 1:
            mine = key_bucket(kept, bucket[1]) == bucket[0]
            kept, at = kept[mine], at[mine]
        out[f"total{n}"] = _key_counts(kept, V ** n)
        out[f"pair{n}"] = _key_counts(at * (V ** n) + kept, n_states * V ** n)
    return out


def key_bucket(keys: np.ndarray, n_buckets: int) -> np.ndarray:
    """Bucket ``0..n_buckets-1`` of each int64 key: a multiplicative hash (Fibonacci
    hashing), so that buckets are even whatever the keys' distribution."""
    mixed = np.asarray(keys).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return ((mixed >> np.uint64(32)) % np.uint64(n_buckets)).astype(np.int64)


def ngram_key_bucket(name: str, keys: np.ndarray, vocab_size: int, n_buckets: int
                     ) -> np.ndarray:
    """:func:`key_bucket` of the n-gram in each key of :func:`ngram_counts`' ``total{n}`` or
    ``pair{n}`` (a pair's key is ``state * V**n + n-gram``): an n-gram's total and its
    pairs fall in the bucket that ``ngram_counts(bucket=...)`` counts them in."""
    if name.startswith("pair"):
        keys = np.asarray(keys) % max(vocab_size, 1) ** int(name[len("pair"):])
    return key_bucket(keys, n_buckets)


def _within_top(groups: np.ndarray, score: np.ndarray, k: int) -> np.ndarray:
    """Mask of the rows whose ``score`` is at most the ``k``-th smallest of their group:
    a superset (ties included) of every group's ``k`` first rows by score, whatever breaks
    the ties, found with one partition per group instead of one sort of all rows."""
    if not len(groups) or k <= 0:
        return np.zeros(len(groups), bool)
    runs = _group_runs(groups)
    thr = np.full(len(runs), np.inf)
    for g, seg in enumerate(runs):  # one pass per group
        if len(seg) > k:
            thr[g] = np.partition(score[seg], k - 1)[k - 1]
    return score <= thr[groups]


def _group_runs(groups: np.ndarray) -> list[np.ndarray]:
    """Per group id ``0..max(groups)``, the indices of its rows in order (a stable radix
    sort: the ids are int16 where they fit)."""
    top = int(groups.max())
    order = np.argsort(groups.astype(np.int16) if top < 2**15 else groups, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(groups, minlength=top + 1))])
    return [order[a:b] for a, b in pairwise(bounds)]


NgramRows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def ngrams_from_counts(counts: Counts, vocab: Sequence[str], n_states: int, *, max_n: int = 3,
                       top_k: int = 10, min_count_for_lift: int = 5
                       ) -> list[dict[str, list[dict[str, Any]]]]:
    """Select phase of :func:`state_ngrams`: rank the merged counts."""
    rows = ngram_candidates(counts, len(vocab), max_n=max_n, top_k=top_k,
                            min_count_for_lift=min_count_for_lift)
    return ngrams_from_candidates([rows], vocab, n_states, top_k=top_k,
                                  min_count_for_lift=min_count_for_lift)


def ngram_candidates(counts: Counts, vocab_size: int, *, max_n: int = 3, top_k: int = 10,
                     min_count_for_lift: int = 5) -> NgramRows:
    """The rows of merged counts (all n-grams, or one :func:`key_bucket` of them) that may
    be listed: ``(state, key, count, lift, n)``, a superset of each state's ``top_k`` by
    count and by lift, so that the lists of several buckets' candidates
    (:func:`ngrams_from_candidates`) are those of all the counts."""
    V = max(vocab_size, 1)
    rows: list[tuple[np.ndarray, ...]] = []
    for n in range(1, max_n + 1):
        uk, total = counts[f"total{n}"]
        up, cnt = counts[f"pair{n}"]
        state_total = counts[f"state{n}"][1]
        n_steps = int(counts[f"steps{n}"][1].sum())
        st, k = up // (V ** n), up % (V ** n)
        p_state = cnt / np.maximum(state_total[st], 1)
        p_all = total[np.searchsorted(uk, k)] / max(n_steps, 1)
        rows.append((st, k, cnt, p_state / p_all, np.full(len(st), n)))
    st, key, cnt, lift, nn = (np.concatenate(c) for c in zip(*rows, strict=True))
    ok = _within_top(st, -cnt, top_k)
    lifted = np.flatnonzero(cnt >= min_count_for_lift)
    ok[lifted[_within_top(st[lifted], -lift[lifted], top_k)]] = True
    return st[ok], key[ok], cnt[ok], lift[ok], nn[ok]


def ngrams_from_candidates(parts: Sequence[NgramRows], vocab: Sequence[str], n_states: int,
                           *, top_k: int = 10, min_count_for_lift: int = 5
                           ) -> list[dict[str, list[dict[str, Any]]]]:
    """Each state's ``top_k`` n-grams by count and by lift among
    :func:`ngram_candidates`' rows."""
    V = max(len(vocab), 1)
    st, key, cnt, lift, nn = (np.concatenate(c) for c in zip(*parts, strict=True))

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
        sel = sel[_within_top(st[sel], order_key[sel], top_k)]  # the rest cannot be listed
        # ties by n, then by key (the counts' own order): the same lists whatever
        # buckets the candidates came in
        order = sel[np.lexsort((key[sel], nn[sel], order_key[sel], st[sel]))]
        s_sorted = st[order]
        first = np.searchsorted(s_sorted, s_sorted, side="left")
        rank = np.arange(len(order)) - first
        for i in order[rank < top_k]:
            out[int(st[i])][name].append({"ngram": decode(int(key[i]), int(nn[i])),
                                          "n": int(nn[i]), "count": int(cnt[i]),
                                          "lift": round(float(lift[i]), 3)})
    return out


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
    counts = ngram_counts(Part(states, offsets, token_ids), n_states, vocab_size=len(vocab),
                          stop=stop_table(vocab, drop_stopwords), max_n=max_n)
    return ngrams_from_counts(counts, vocab, n_states, max_n=max_n, top_k=top_k,
                              min_count_for_lift=min_count_for_lift)


def stop_table(vocab: Sequence[str], drop_stopwords: bool = True) -> np.ndarray:
    """Per token: True where n-grams made of such tokens alone are dropped."""
    return _uninformative(vocab) if drop_stopwords else np.zeros(max(len(vocab), 1), bool)


# -- example contexts -----------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def step_keys(steps: np.ndarray, random_state: int) -> np.ndarray:
    """A seeded pseudo-random uint64 key per step number (splitmix64 of the step and the
    seed): the same for a step whichever part of the split holds it."""
    z = np.asarray(steps, np.uint64) + np.full(1, random_state, np.uint64) * _GOLDEN
    z = z + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def smallest_per_group(groups: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` smallest ``keys`` of every group, by group then key: the first
    ``k`` per group of ``np.lexsort((keys, groups))``, without sorting every key.

    Parameters
    ----------
    groups : ndarray of shape (n,)
        Non-negative group ids (states).
    keys : ndarray of shape (n,)
        Distinct keys (e.g. :func:`step_keys`).
    k : int
    """
    groups = np.asarray(groups)
    if not len(groups) or k <= 0:
        return np.zeros(0, np.int64)
    out = []
    for seg in _group_runs(groups):  # one pass per group
        if len(seg) > k:
            seg = seg[np.argpartition(keys[seg], k - 1)[:k]]
        out.append(seg[np.argsort(keys[seg])])
    return np.concatenate(out)


def context_candidates(part: Part, vocab: Sequence[str], n_states: int, *, per_state: int = 5,
                       window: int = 4, random_state: int = 0) -> list[tuple[int, int, dict]]:
    """Count phase of :func:`state_contexts`: a part's ``per_state`` steps of smallest key
    per state, as ``(state, key, context)``; the split's are the smallest of all parts'."""
    states = np.asarray(part.states, np.int64)
    inp, pos = _part_positions(part)
    keys = step_keys(np.arange(len(states)) + part.step_start, random_state)
    picked = smallest_per_group(states, keys, per_state)
    offsets, token_ids = np.asarray(part.offsets), part.token_ids
    out = []
    for step in picked:  # at most per_state * n_states items
        i, p = int(inp[step]), int(pos[step])
        lo = max(0, p - window)
        hi = min(int(offsets[i + 1] - offsets[i]), p + window + 1)
        toks = [vocab[int(t)] for t in token_ids[offsets[i] + lo : offsets[i] + hi]]
        out.append((int(states[step]), int(keys[step]),
                    {"input": i + part.input_start, "position": p, "tokens": toks,
                     "focus": p - lo}))
    return out


def smallest_candidates(candidates: Sequence[tuple[int, int, dict]], per_state: int = 5
                        ) -> list[tuple[int, int, dict]]:
    """The ``per_state`` candidates of smallest key per state, by state then key (what
    two parts' candidates merge into)."""
    out, taken = [], Counter()
    for cand in sorted(candidates, key=lambda c: (c[0], c[1])):
        if taken[cand[0]] < per_state:
            taken[cand[0]] += 1
            out.append(cand)
    return out


def contexts_from_candidates(candidates: Sequence[tuple[int, int, dict]], n_states: int,
                             per_state: int = 5) -> list[list[dict[str, Any]]]:
    """Select phase of :func:`state_contexts`: per state the ``per_state`` smallest keys."""
    out: list[list[dict[str, Any]]] = [[] for _ in range(n_states)]
    for state, _key, ctx in smallest_candidates(candidates, per_state):
        out[state].append(ctx)
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
    """Up to ``per_state`` example contexts for every state, drawn at random (seeded by
    ``random_state``; the steps of smallest :func:`step_keys` key).

    Returns
    -------
    list of list of dict
        Per state: ``{"input": i, "position": p, "tokens": [...], "focus": j}`` where
        ``tokens[focus]`` is the token whose step lands in the state.
    """
    cands = context_candidates(Part(states, offsets, token_ids), vocab, n_states,
                               per_state=per_state, window=window, random_state=random_state)
    return contexts_from_candidates(cands, n_states, per_state)


def collapsed_paths(states: np.ndarray, offsets: np.ndarray, initial: int = 0):
    """Paths with the initial state prepended and self-loops merged.

    Each input contributes its initial state, then every step whose state differs from
    the one before it (the initial state before its first step).

    Returns
    -------
    cstates : ndarray of shape (n_collapsed,)
    cinput : ndarray of shape (n_collapsed,)
        Input of each collapsed position (non-decreasing).
    cstep : ndarray of shape (n_collapsed,)
        Step index (into the split's steps) at which the state was entered; -1 for the
        initial state.
    step_to_c : ndarray of shape (n_steps,)
        Collapsed position that contains each step.
    """
    offsets = np.asarray(offsets, np.int64)
    states = np.asarray(states, np.int64)
    lengths = np.diff(offsets)
    n_in, n = len(lengths), len(states)
    prev = np.empty(n, np.int64)
    prev[1:] = states[:-1]
    prev[offsets[:-1][lengths > 0]] = initial
    entered = states != prev                        # the step opens a collapsed position
    before = np.zeros(n + 1, np.int64)              # entering steps before each step
    np.cumsum(entered, out=before[1:])
    inp = np.repeat(np.arange(n_in), lengths)
    step_to_c = inp + before[1:]
    heads = np.arange(n_in) + before[offsets[:-1]]  # where each input's initial state sits
    n_c = n_in + int(before[-1])
    cstates = np.full(n_c, initial, np.int64)
    cstep = np.full(n_c, -1, np.int64)
    at = np.flatnonzero(entered)
    cstates[step_to_c[at]] = states[at]
    cstep[step_to_c[at]] = at
    cinput = np.repeat(np.arange(n_in), np.diff(np.append(heads, n_c)))
    return cstates, cinput, cstep, step_to_c


def window_keys(cstates, cinput, w, S):
    """Key of the window of ``w`` collapsed states ending at each position (-1 if none)."""
    return window_key_table(cstates, cinput, (w,), S)[w]


def window_key_table(cstates: np.ndarray, cinput: np.ndarray, lengths: Sequence[int],
                     S: int) -> dict[int, np.ndarray]:
    """:func:`window_keys` for every window length in ``lengths``, each built on the
    shorter one (a window lies in one input when its two ends do: ``cinput`` is sorted).

    Returns
    -------
    dict of int to ndarray of shape (n_collapsed,)
        Per length ``w``: the base-``S`` key of the ``w`` states ending at each position,
        -1 where the window would start before its input does.
    """
    cstates = np.asarray(cstates, np.int64)
    cinput = np.asarray(cinput)
    n = len(cstates)
    out: dict[int, np.ndarray] = {}
    raw = cstates  # raw[i]: key of the window of length w ending at position i + w - 1
    for w in range(1, max(lengths, default=0) + 1):
        if w > 1:
            raw = raw[:-1] * S + cstates[w - 1:]
        if w in lengths:
            key = np.full(n, -1, np.int64)
            if n >= w:
                key[w - 1:] = np.where(cinput[: n - w + 1] == cinput[w - 1:], raw, -1)
            out[w] = key
    return out


def _decode_window(key: int, w: int, S: int) -> list[int]:
    out = []
    for _ in range(w):
        key, s = divmod(key, S)
        out.append(int(s))
    return out[::-1]


def _phrase(lo: int, hi: int, token_ids: np.ndarray, vocab: Sequence[str],
            max_len: int = 6) -> str:
    lo = max(lo, hi - max_len + 1)
    return " ".join(vocab[int(t)] for t in token_ids[lo : hi + 1])


def _phrase_counts(lo: np.ndarray, hi: np.ndarray, token_ids: np.ndarray,
                   vocab: Sequence[str], max_len: int = 6) -> Counter:
    """``Counter(_phrase(a, b) for a, b in zip(lo, hi))``, with one string per distinct
    token sequence (the sequences are told apart by one sort, not in Python)."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    if not len(hi):
        return Counter()
    lo = np.maximum(lo, hi - max_len + 1)
    width = int((hi - lo).max()) + 1
    at = hi[:, None] - np.arange(width)[::-1][None, :]           # right-aligned windows
    ids = np.where(at >= lo[:, None], np.asarray(token_ids)[np.maximum(at, 0)], -1)
    rows, counts = np.unique(ids, axis=0, return_counts=True)
    out: Counter = Counter()
    for row, c in zip(rows, counts, strict=True):
        out[" ".join(vocab[int(t)] for t in row if t >= 0)] += int(c)
    return out


def _top_phrases(counts: Counter, top: int = 3) -> list[dict[str, Any]]:
    return [{"phrase": p, "count": c}
            for p, c in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:top]]


def _windows(part: Part, n_states: int, lengths: Sequence[int]):
    """The part's collapsed paths and their window keys (computed once per part)."""
    key = ("windows", n_states, tuple(lengths))
    if key not in part.memo:
        cstates, cinput, cstep, step_to_c = collapsed_paths(part.states, part.offsets)
        part.memo[key] = (cinput, cstep, step_to_c,
                          window_key_table(cstates, cinput, lengths, n_states))
    return part.memo[key]


def _step_predictions(part: Part, initial_proba: np.ndarray):
    """Per step: the input, its position, the prediction before and after the step."""
    key = ("predictions", tuple(np.asarray(initial_proba, np.float64).tolist()))
    if key not in part.memo:
        part.memo[key] = _step_predictions_of(part, initial_proba)
    return part.memo[key]


def _step_predictions_of(part: Part, initial_proba: np.ndarray):
    step_pred = np.asarray(part.proba).argmax(1) if len(part.states) else \
        np.zeros(0, np.int64)
    inp, pos = _part_positions(part)
    prev_pred = np.empty_like(step_pred)
    prev_pred[1:] = step_pred[:-1]
    prev_pred[pos == 0] = int(np.argmax(initial_proba))
    return inp, pos, prev_pred, step_pred


# -- influential patterns -------------------------------------------------------------------
def _flips(part: Part, initial_proba: np.ndarray, n_states: int, lengths: Sequence[int]):
    inp, pos, prev_pred, step_pred = _step_predictions(part, initial_proba)
    correct = (np.asarray(part.labels) == np.asarray(part.predictions))[inp] if len(inp) \
        else inp.astype(bool)
    # A flip away from head(h0) on the first token says little: count flips after it.
    flips = np.flatnonzero((step_pred != prev_pred) & correct & (pos >= 1))
    _, cstep, step_to_c, keys = _windows(part, n_states, lengths)
    return inp, prev_pred, step_pred, flips, cstep, step_to_c, keys


def influential_counts(part: Part, n_states: int, *, initial_proba: np.ndarray,
                       lengths: Sequence[int] = (2, 3, 4)) -> Counts:
    """Count phase of :func:`influential_patterns`: per window length, flips per
    (window, flip direction) and occurrences per window."""
    _, prev_pred, step_pred, flips, _, step_to_c, keys = _flips(part, initial_proba,
                                                                 n_states, lengths)
    out: Counts = {}
    for w in lengths:
        key = keys[w]
        fk = key[step_to_c[flips]]
        ok = fk >= 0
        combo = fk[ok] * 1_000_000 + prev_pred[flips[ok]] * 1000 + step_pred[flips[ok]]
        out[f"flips{w}"] = _keyed(*np.unique(combo, return_counts=True))
        out[f"occurs{w}"] = _key_counts(key[key >= 0], n_states ** w)
    return out


def influential_select(counts: Counts, *, lengths: Sequence[int] = (2, 3, 4), top_k: int = 30,
                       min_support: int = 3) -> list[tuple[int, float, int, int, int]]:
    """Select phase: ``(support, lift, w, window key, direction)`` of the listed ones."""
    cols: list[tuple[np.ndarray, ...]] = []
    for w in lengths:
        uc, sup = counts[f"flips{w}"]
        occ_keys, occ = counts[f"occurs{w}"]
        j = np.flatnonzero(sup >= min_support)
        k, d = np.divmod(np.asarray(uc[j], np.int64), 1_000_000)
        lift = sup[j] / occ[np.searchsorted(occ_keys, k)]
        cols.append((np.asarray(sup[j], np.int64), lift, np.full(len(j), w), k, d))
    if not cols:
        return []
    sup, lift, ws, k, d = (np.concatenate(c) for c in zip(*cols, strict=True))
    top = np.lexsort((k, ws, -lift, -sup))[:top_k]  # stable: ties keep length, key order
    return [(int(sup[i]), float(lift[i]), int(ws[i]), int(k[i]), int(d[i])) for i in top]


def influential_describe(part: Part, chosen: Sequence[tuple], vocab: Sequence[str],
                         n_states: int, *, initial_proba: np.ndarray,
                         lengths: Sequence[int] = (2, 3, 4)) -> list[tuple[Counter, list[int]]]:
    """Describe phase: per chosen pattern, the part's phrase counts and inputs."""
    if not chosen:
        return []
    inp, prev_pred, step_pred, flips, cstep, step_to_c, keys = _flips(
        part, initial_proba, n_states, lengths)
    token_ids = np.asarray(part.token_ids)
    flip_c = step_to_c[flips]
    flip_key = {w: keys[w][flip_c] for w in {c[2] for c in chosen}}
    direction = prev_pred[flips] * 1000 + step_pred[flips]
    out = []
    for _support, _lift, w, k, d in chosen:
        members = flips[(flip_key[w] == k) & (direction == d)]
        starts = cstep[step_to_c[members] - (w - 2)]
        phrases = _phrase_counts(starts, members, token_ids, vocab)
        out.append((phrases, (distinct(inp[members])[:50] + part.input_start).tolist()))
    return out


def influential_from(chosen: Sequence[tuple], described: Sequence[Sequence[tuple]],
                     n_states: int) -> list[dict[str, Any]]:
    """The list, from the selection and every part's description (in part order)."""
    out = []
    for j, (support, lift, w, k, d) in enumerate(chosen):
        phrases: Counter = Counter()
        inputs: list[int] = []
        for part in described:
            phrases.update(part[j][0])
            inputs.extend(part[j][1])
        out.append({"states": _decode_window(k, w, n_states), "support": support,
                    "lift": round(lift, 4), "flip": [d // 1000, d % 1000],
                    "phrases": _top_phrases(phrases), "inputs": inputs[:50]})
    return out


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
    part = Part(states, offsets, token_ids, proba, labels, predictions)
    kw = {"initial_proba": initial_proba, "lengths": lengths}
    chosen = influential_select(influential_counts(part, n_states, **kw), lengths=lengths,
                                top_k=top_k, min_support=min_support)
    return influential_from(chosen, [influential_describe(part, chosen, vocab, n_states, **kw)],
                            n_states)


# -- buggy patterns -------------------------------------------------------------------------
MAX_SPANS = 200  # phrases of a buggy pattern come from its first 200 occurrences


def _wrong_windows(part: Part, n_states: int, lengths: Sequence[int]):
    wrong = np.asarray(part.labels) != np.asarray(part.predictions)
    cinput, cstep, _, keys = _windows(part, n_states, lengths)
    return wrong, cinput, cstep, keys


def buggy_counts(part: Part, n_states: int, *, lengths: Sequence[int] = (2, 3, 4)) -> Counts:
    """Count phase of :func:`buggy_patterns`: per window length, inputs holding each window
    and the misclassified ones among them; inputs and misclassified inputs of the part."""
    wrong, cinput, _, keys = _wrong_windows(part, n_states, lengths)
    S = n_states
    out: Counts = {"inputs": _keyed(np.zeros(1), [[len(wrong), int(wrong.sum())]])}
    for w in lengths:
        key = keys[w]
        if (HAVE_NUMBA and _dense(S ** w, len(key)) and int(key.max(initial=-1)) < S ** w
                and (not len(cinput) or int(cinput.max()) < len(wrong))):
            # one pass, no sort (the same counts); the loop does not check bounds
            n_with, n_wrong_with = np.zeros(S ** w, np.int64), np.zeros(S ** w, np.int64)
            input_presence(np.asarray(key, np.int64), np.asarray(cinput, np.int64),
                           np.asarray(wrong, np.bool_), n_with, n_wrong_with)
            at = np.flatnonzero(n_with)
            out[f"windows{w}"] = _keyed(at, np.stack([n_with[at], n_wrong_with[at]], 1))
            continue
        pos = np.flatnonzero(key >= 0)
        pk = distinct(cinput[pos] * (S ** w) + key[pos])  # presence per input
        p_in, p_key = np.divmod(pk, S ** w)
        # one sort of (window, misclassified?) pairs gives both counts per window
        flagged, n = np.unique(p_key * 2 + wrong[p_in], return_counts=True)
        k2 = flagged >> 1
        first = np.flatnonzero(np.concatenate([[True], k2[1:] != k2[:-1]])) if len(k2) \
            else np.zeros(0, np.int64)
        both = np.stack([n, n * (flagged & 1)], 1)
        counts = np.add.reduceat(both, first, axis=0) if len(k2) else both
        out[f"windows{w}"] = _keyed(k2[first], counts.reshape(-1, 2))
    return out


def buggy_select(counts: Counts, *, lengths: Sequence[int] = (2, 3, 4), top_k: int = 30,
                 min_support: int = 3) -> tuple[list[tuple], int, int, int]:
    """Select phase: ``(p, w, key, support, n_with)`` of the listed windows, the number of
    windows tested, the inputs and the misclassified inputs."""
    n_all, n_wrong = (int(v) for v in counts["inputs"][1].sum(0))
    if n_wrong == 0 or n_all == 0:
        return [], 0, n_all, n_wrong
    found, n_tests = [], 0
    for w in lengths:
        uk, c = counts[f"windows{w}"]
        n_with, n_wrong_with = c[:, 0], c[:, 1]
        n_tests += len(uk)
        cand = np.flatnonzero((n_wrong_with >= min_support)
                              & (n_wrong_with / n_wrong > n_with / n_all))
        found.append((np.full(len(cand), w), uk[cand], n_wrong_with[cand], n_with[cand]))
    ws, ks, sup, nw = (np.concatenate(c) for c in zip(*found, strict=True))
    if len(ws) == 0:
        return [], n_tests, n_all, n_wrong
    # Rank by the normal approximation, then compute exact p-values for the leaders only.
    frac = nw / n_all
    var = n_wrong * frac * (1 - frac) * (n_all - n_wrong) / max(n_all - 1, 1)
    z = (sup - n_wrong * frac) / np.sqrt(np.maximum(var, 1e-12))
    lead = np.argsort(-z, kind="stable")[: max(10 * top_k, 100)]
    pv = hypergeom.sf(sup[lead] - 1, n_all, nw[lead], n_wrong)
    cands = [(float(p), int(ws[j]), int(ks[j]), int(sup[j]), int(nw[j]))
             for j, p in zip(lead, pv, strict=True)]
    cands.sort(key=lambda c: (c[0], -c[3], c[1], c[2]))
    return cands[:top_k], n_tests, n_all, n_wrong


def buggy_describe(part: Part, chosen: Sequence[tuple], vocab: Sequence[str], n_states: int,
                   *, lengths: Sequence[int] = (2, 3, 4)) -> list[tuple[list[str], list[int]]]:
    """Describe phase: per chosen window, the phrases of the part's first occurrences in
    misclassified inputs and those inputs."""
    if not chosen:
        return []
    wrong, cinput, cstep, keys = _wrong_windows(part, n_states, lengths)
    token_ids = np.asarray(part.token_ids)
    out = []
    for _p, w, k, _support, _n_with in chosen:
        hits = np.flatnonzero(keys[w] == k)
        hits = hits[wrong[cinput[hits]]]
        phrases = [_phrase(int(cstep[h - (w - 2)]), int(cstep[h]), token_ids, vocab)
                   for h in hits[:MAX_SPANS]]
        out.append((phrases, sorted({int(cinput[h]) + part.input_start for h in hits})[:50]))
    return out


def buggy_from(selection: tuple[list[tuple], int, int, int],
               described: Sequence[Sequence[tuple]], n_states: int) -> list[dict[str, Any]]:
    """The list, from the selection and every part's description (in part order)."""
    chosen, n_tests, n_all, n_wrong = selection
    out = []
    for j, (p, w, k, support, n_with_k) in enumerate(chosen):
        phrases: list[str] = []
        inputs: list[int] = []
        for part in described:
            phrases.extend(part[j][0])
            inputs.extend(part[j][1])
        out.append({"states": _decode_window(k, w, n_states), "support": support,
                    "n_inputs": n_with_k,
                    "lift": round((support / n_wrong) / (n_with_k / n_all), 4),
                    "p_value": p, "q_value": min(1.0, p * max(n_tests, 1)),
                    "phrases": _top_phrases(Counter(phrases[:MAX_SPANS])),
                    "inputs": inputs[:50]})
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
    part = Part(states, offsets, token_ids, labels=labels, predictions=predictions)
    selection = buggy_select(buggy_counts(part, n_states, lengths=lengths), lengths=lengths,
                             top_k=top_k, min_support=min_support)
    return buggy_from(selection, [buggy_describe(part, selection[0], vocab, n_states,
                                                 lengths=lengths)], n_states)


def confusion_pair(p: dict[str, Any], labels: np.ndarray, predictions: np.ndarray
                   ) -> tuple[int, int] | None:
    """The most common ``(gold, predicted)`` among a buggy pattern's wrong inputs."""
    rows = [i for i in p.get("inputs", ()) if 0 <= i < len(labels)]
    pairs = Counter((int(labels[i]), int(predictions[i])) for i in rows
                    if labels[i] != predictions[i])
    return pairs.most_common(1)[0][0] if pairs else None
