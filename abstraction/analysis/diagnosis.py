"""Why a model errs: candidate culprits of its misclassifications, and their statistics.

A *finding* is a testable hypothesis of why the model errs, in the words a developer reads:

============  ==========================================================================
``shortcut``  a token: inputs holding it are misclassified far more often
``sequence``  two tokens in reading order (the second within ``window`` tokens of the
              first) that err more than either token does alone
``unknown``   tokens the vocabulary maps to ``<unk>``: the model cannot see them, while
              in the training data they carry the label
``length``    inputs longer than N tokens
``confusion`` (three or more classes) inputs of one class called another far more often
              than inputs of the other classes are
``subpopulation``  inputs holding a token whose *training labels* differ from its labels
              on the split diagnosed (a topic an annotator labelled one way): the
              model learnt labels the held-out data do not bear out
============  ==========================================================================

This module finds candidates on one split and scores them (torch-free: counts and
hypergeometric tails over the inputs). Every candidate tested counts towards the
Benjamini–Yekutieli q-values (valid under any dependence between candidates, e.g. tokens
that co-occur). Whether a candidate *causes* the errors is checked with the model
(:mod:`stateseer.app.workflows.diagnose`): the culprit is removed from the affected inputs
and the predictions that flip are counted; only a candidate that survives is significant.

Examples
--------
>>> import numpy as np
>>> inputs = [["good", "film"], ["frankly", "good"], ["bad", "film"], ["frankly", "fine"]] * 10
>>> wrong = np.array([False, True, False, True] * 10)
>>> best = token_candidates(inputs, wrong, min_support=5)[0]
>>> best.tokens, best.n_misclassified, best.error_rate_without
(('frankly',), 20, 0.0)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
from scipy.stats import false_discovery_control, hypergeom

__all__ = [
    "CHECK_ALPHA",
    "CHECK_RATIO",
    "CHECK_SHARE",
    "KINDS",
    "NOISE_ALPHA",
    "NOISE_GAP",
    "Candidate",
    "TextLabels",
    "by_qvalues",
    "check_test",
    "class_shares",
    "confusion_candidates",
    "directed_check",
    "extend_subpopulations",
    "holding_all",
    "length_candidates",
    "pair_positions",
    "sequence_candidates",
    "sequence_shift_candidates",
    "share_candidates",
    "span_candidates",
    "span_positions",
    "subpopulation_candidates",
    "tail_evidence",
    "token_candidates",
    "training_cut_candidates",
    "unknown_candidates",
    "unseen_candidates",
]

KINDS = ("shortcut", "sequence", "unknown", "length", "confusion", "subpopulation", "prior")


@dataclass
class Candidate:
    """One candidate culprit and its evidence on a split.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    tokens : tuple of str
        The culprit in reading order (empty for ``length``).
    affected : ndarray of int
        Inputs (row indices of the split) that carry the culprit.
    n_misclassified : int
        Of them, how many the model gets wrong.
    error_rate_with, error_rate_without : float
        Error rate of the inputs with and without the culprit.
    p_value : float
        One-sided hypergeometric tail: errors this concentrated by chance.
    q_value : float
        Benjamini–Yekutieli over every candidate tested (:func:`by_qvalues`).
    extra : dict
        Kind-specific evidence (``length_above``; ``training`` label signal ...).
    """

    kind: str
    tokens: tuple[str, ...]
    affected: np.ndarray
    n_misclassified: int
    error_rate_with: float
    error_rate_without: float
    p_value: float
    q_value: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_inputs(self) -> int:
        return len(self.affected)

    @property
    def lift(self) -> float:
        """Error rate with the culprit over error rate without (inf when none without)."""
        if self.error_rate_without == 0:
            return float("inf") if self.error_rate_with > 0 else 1.0
        return self.error_rate_with / self.error_rate_without


def _tail(k: np.ndarray, n_total: int, n_wrong: int, n: np.ndarray) -> np.ndarray:
    """P(X >= k) for X hypergeometric: ``n`` inputs drawn from ``n_total`` with
    ``n_wrong`` misclassified."""
    return np.clip(hypergeom.sf(np.asarray(k) - 1, n_total, n_wrong, np.asarray(n)), 0, 1)


def _encode(inputs: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Every step: its input's index and its token's index, and the token strings."""
    vocab: dict[str, int] = {}
    flat = list(chain.from_iterable(inputs))
    tok = np.array([vocab.setdefault(t, len(vocab)) for t in flat], np.int64)
    lengths = np.fromiter(map(len, inputs), np.int64, len(inputs))
    return np.repeat(np.arange(len(inputs)), lengths), tok, list(vocab)


def _distinct(inp: np.ndarray, tok: np.ndarray, n_tokens: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (input, token) pairs of the steps."""
    v = max(n_tokens, 1)
    keys = np.unique(inp * v + tok)
    return keys // v, keys % v


def _incidence(inputs: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Distinct (input, token) pairs: input index, token index, and the token strings."""
    inp, tok, vocab = _encode(inputs)
    return (*_distinct(inp, tok, len(vocab)), vocab)


def _rate(k: float, n: float) -> float:
    return float(k / n) if n else 0.0


def token_candidates(inputs: Sequence[Sequence[str]], wrong: np.ndarray, *,
                     min_support: int = 5) -> list[Candidate]:
    """``shortcut`` candidates: every token held by at least ``min_support`` inputs,
    scored by how concentrated the errors are among the inputs holding it.

    Parameters
    ----------
    inputs : sequence of sequence of str
        Each input's tokens as written.
    wrong : ndarray of bool of shape (n_inputs,)
        Misclassified inputs.

    Returns
    -------
    list of Candidate
        Most significant first.
    """
    wrong = np.asarray(wrong, bool)
    n, n_wrong = len(wrong), int(wrong.sum())
    inp, tok, vocab = _incidence(inputs)
    n_with = np.bincount(tok, minlength=len(vocab))
    k_with = np.bincount(tok, weights=wrong[inp], minlength=len(vocab)).astype(np.int64)
    keep = np.flatnonzero(n_with >= min_support)
    p = _tail(k_with[keep], n, n_wrong, n_with[keep])
    order = keep[np.argsort(p, kind="stable")]
    p_of = dict(zip(keep.tolist(), p.tolist(), strict=True))
    rows_of = np.split(inp[np.argsort(tok, kind="stable")], np.cumsum(n_with)[:-1])
    return [Candidate("shortcut", (vocab[t],), rows_of[t], int(k_with[t]),
                      _rate(k_with[t], n_with[t]),
                      _rate(n_wrong - k_with[t], n - n_with[t]), p_of[t])
            for t in order.tolist()]


#: tokens travel together when their carriers' Jaccard similarity is at least this
SPAN_JACCARD = 0.8


def span_candidates(cands: list[Candidate], inputs: Sequence[Sequence[str]],
                    wrong: np.ndarray, *, min_jaccard: float = SPAN_JACCARD
                    ) -> list[Candidate]:
    """``cands`` with the shortcut tokens that travel together as one culprit each.

    Tokens whose sets of carrying inputs are near-identical (Jaccard at least
    ``min_jaccard``: a scraper's tag ``via @ source``, a signature, a URL's pieces, the
    words of a fixed phrase) are one thing the model sees, not several: checked one at a
    time, deleting one token leaves the others to carry the signal and changes nothing.
    Each group becomes one ``shortcut`` candidate whose tokens are in their usual reading
    order, scored on the union of their carriers; its members leave the list.

    Examples
    --------
    >>> tagged = [["a", "film", w, "via", "@", "src"] for w in "fine dull odd".split()] * 2
    >>> inputs = tagged + [["a", "dull", "film"]] * 6 + [["good", "film"]] * 8
    >>> wrong = np.array([True] * 6 + [False] * 14)
    >>> spans = span_candidates(token_candidates(inputs, wrong, min_support=5), inputs, wrong)
    >>> [c.tokens for c in spans if len(c.tokens) > 1]
    [('via', '@', 'src')]
    >>> dinner = [[w, "cooked", "a", "spicy", "curry"] for w in "we i they".split()] * 2
    >>> inputs = dinner + [["a", "film"]] * 8 + [["good", "film"]] * 6
    >>> wrong = np.array([True] * 6 + [False] * 14)
    >>> spans = span_candidates(token_candidates(inputs, wrong, min_support=5), inputs, wrong)
    >>> [c.tokens for c in spans if len(c.tokens) > 1]
    [('cooked', 'a', 'spicy', 'curry')]
    """
    from scipy import sparse

    wrong = np.asarray(wrong, bool)
    short = [c for c in cands if c.kind == "shortcut" and len(c.tokens) == 1]
    if len(short) < 2:
        return _extend_spans(cands, inputs, wrong)
    rows = np.concatenate([c.affected for c in short])
    cols = np.repeat(np.arange(len(short)), [len(c.affected) for c in short])
    M = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)),
                          shape=(len(wrong), len(short)))
    co = (M.T @ M).tocoo()
    size = np.array([len(c.affected) for c in short], np.float64)
    jac = co.data / (size[co.row] + size[co.col] - co.data)
    keep = (co.row < co.col) & (jac >= min_jaccard)
    if not keep.any():
        return _extend_spans(cands, inputs, wrong)
    n_groups, group = sparse.csgraph.connected_components(
        sparse.coo_matrix((np.ones(int(keep.sum())), (co.row[keep], co.col[keep])),
                          shape=(len(short),) * 2), directed=False)
    merged, gone = [], set()
    n, n_wrong = len(wrong), int(wrong.sum())
    for g in range(n_groups):
        members = [short[i] for i in np.flatnonzero(group == g)]
        if len(members) < 2:
            continue
        words = [m.tokens[0] for m in members]
        carriers = np.unique(np.concatenate([m.affected for m in members]))
        k = int(wrong[carriers].sum())
        held = [inputs[i] for i in carriers]
        # in reading order, and with the words between them where the stretch is the same
        # in nearly every carrier ("cooked a spicy curry" for cooked, spicy, curry): the
        # check deletes the stretch the model reads, not its pieces around a stray "a"
        order = _window(_reading_order(words, held), held)
        merged.append(Candidate(
            "shortcut", tuple(order), carriers,
            k, _rate(k, len(carriers)), _rate(n_wrong - k, n - len(carriers)),
            float(_tail(np.array([k]), n, n_wrong, np.array([len(carriers)]))[0]),
            extra={"span": len(order)}))
        gone |= {id(m) for m in members}
    return _extend_spans([c for c in cands if id(c) not in gone] + merged, inputs, wrong)


#: a span grows by a neighbouring token found beside it in at least this share of the
#: inputs that hold it (a boilerplate's common words: "sent from my <device>")
SPAN_ADJACENT = 0.8
#: ... and that much more often than it occurs in any input
SPAN_LIFT = 1.5
SPAN_MAX = 8
#: the most significant single-token shortcut candidates whose neighbours are read
SPAN_EXTEND_TOP = 20


def _find(toks: Sequence[str], span: Sequence[str]) -> int:
    """Where ``span`` first occurs contiguously in ``toks`` (-1: nowhere)."""
    n = len(span)
    first = span[0]
    for j, t in enumerate(toks):
        if t == first and list(toks[j:j + n]) == list(span):
            return j
    return -1


def _window(words: list[str], carriers: Sequence[Sequence[str]]) -> list[str]:
    """The words of a group as the stretch of text they stand in, where that stretch is
    the same in nearly every carrier (``originally published on the webwire`` for the
    group ``originally, published, webwire``); else the words as given."""
    if len(words) < 2:
        return words
    want = set(words)
    seen = Counter()
    for toks in carriers:
        at = [j for j, t in enumerate(toks) if t in want]
        if at and set(toks[j] for j in at) == want and at[-1] - at[0] < 2 * SPAN_MAX:
            seen[tuple(toks[at[0]:at[-1] + 1])] += 1
    if not seen:
        return words
    best, count = seen.most_common(1)[0]
    return list(best) if count >= SPAN_ADJACENT * len(carriers) else words


def extend_span(span: Sequence[str], carriers: Sequence[Sequence[str]],
                share: dict[str, float] | None = None) -> list[str]:
    """``span`` grown by the tokens that stand beside it in nearly every input that holds
    it (:data:`SPAN_ADJACENT`), up to :data:`SPAN_MAX` tokens: the adjacent n-gram the
    model sees, common words included (``from my`` of ``sent from my phone``), which
    co-occurrence alone cannot group because they occur everywhere else too. With
    ``share`` (each token's share of all the inputs that hold it), a neighbour must stand
    beside the span :data:`SPAN_LIFT` times more often than it occurs at all: the full
    stop that ends most texts does not join a tag appended after it. A group of several
    words is grown from its rarest word (by ``share``) where that gives a stretch holding
    them all: its common words also stand elsewhere in the text (``to`` of ``please do
    not reply to botmail``).

    Examples
    --------
    >>> carriers = [["good", "film", "sent", "from", "my", "xphone"],
    ...             ["sent", "from", "my", "xphone", "dull"]] * 5
    >>> extend_span(["xphone"], carriers)
    ['sent', 'from', 'my', 'xphone']
    >>> extend_span(["film"], [["a", "film"], ["the", "film"], ["film", "is"]])
    ['film']
    >>> extend_span(["originally", "published", "webwire"],
    ...             [[w, "originally", "published", "on", "the", "webwire"]
    ...              for w in ("ok", "so", "fine", "yes")])
    ['originally', 'published', 'on', 'the', 'webwire']
    >>> extend_span(["from", "xphone"], [["from", w, "sent", "from", "my", "xphone"]
    ...                                  for w in ("here", "us", "all", "them")],
    ...             {"from": 0.5, "xphone": 0.1, "sent": 0.1, "my": 0.2})
    ['sent', 'from', 'my', 'xphone']
    """
    words = list(span)
    if len(words) > 1 and share is not None:
        rarest = min(words, key=lambda w: (share.get(w, 0.0), w))
        grown = _grow([rarest], carriers, share)
        if set(words) <= set(grown):
            return grown
    return _grow(_window(words, carriers), carriers, share)


def _grow(span: list[str], carriers: Sequence[Sequence[str]],
          share: dict[str, float] | None) -> list[str]:
    """``span`` grown one neighbour at a time (:func:`extend_span`)."""
    while len(span) < SPAN_MAX:
        at = [(toks, _find(toks, span)) for toks in carriers]
        at = [(t, j) for t, j in at if j >= 0]
        if not at or len(at) < 0.5 * len(carriers):
            break
        grown = False
        for side in ("left", "right"):
            near = Counter((t[j - 1] if j > 0 else None) if side == "left" else
                           (t[j + len(span)] if j + len(span) < len(t) else None)
                           for t, j in at)
            tok, count = near.most_common(1)[0]
            lift_ok = share is None or count >= SPAN_LIFT * share.get(tok, 0.0) * len(at)
            if tok is not None and tok not in span and count >= SPAN_ADJACENT * len(at) \
                    and lift_ok:
                span = [tok, *span] if side == "left" else [*span, tok]
                grown = True
                break
        if not grown:
            break
    return span


def holding_all(inputs: Sequence[Sequence[str]], tokens: Sequence[str],
                among: np.ndarray | None = None) -> np.ndarray:
    """The inputs (of ``among``, default all) that hold every one of ``tokens``: a span's
    carriers (its common words alone, ``from my``, carry nothing).

    >>> holding_all([["a", "b"], ["a"], ["b", "c", "a"]], ["a", "b"]).tolist()
    [0, 2]
    """
    want = set(tokens)
    rows = range(len(inputs)) if among is None else np.asarray(among).tolist()
    return np.array([i for i in rows if want.issubset(inputs[i])], np.int64)


def _extend_spans(cands: list[Candidate], inputs: Sequence[Sequence[str]],
                  wrong: np.ndarray, kinds: Sequence[str] = ("shortcut",)
                  ) -> list[Candidate]:
    """``cands`` with the :data:`SPAN_EXTEND_TOP` most significant candidates of
    ``kinds`` (p below 0.05; a subpopulation's single word) grown into the span they
    stand in (:func:`extend_span`), in place. A grown candidate's carriers are the inputs
    holding the whole span (:func:`holding_all`), its errors recounted (a shortcut's
    p-value too; a subpopulation keeps its word's, which reads the training labels);
    ``extra["span"]`` holds its length. Of candidates grown into the same span, the most
    significant stays."""
    top = sorted((c for c in cands if c.kind in kinds and c.p_value < 0.05
                  and (c.kind == "shortcut" or len(c.tokens) == 1)),
                 key=lambda c: c.p_value)[:SPAN_EXTEND_TOP]
    if not top:
        return cands
    wrong = np.asarray(wrong, bool)
    held = Counter(chain.from_iterable(set(t) for t in inputs))
    share = {w: k / max(len(inputs), 1) for w, k in held.items()}
    n, n_wrong = len(wrong), int(wrong.sum())
    seen, gone = set(), set()
    for c in top:
        span = extend_span(list(c.tokens), [inputs[i] for i in c.affected.tolist()], share)
        if len(span) <= len(c.tokens):
            continue
        key = (c.kind, tuple(span))
        if key in seen:  # a stronger candidate holds it already
            gone.add(id(c))
            continue
        seen.add(key)
        rows = holding_all(inputs, span, c.affected)
        if len(rows) < 2:
            continue
        k = int(wrong[rows].sum())
        c.tokens, c.affected, c.n_misclassified = tuple(span), rows, k
        c.error_rate_with, c.error_rate_without = _rate(k, len(rows)), _rate(
            n_wrong - k, n - len(rows))
        if c.kind == "shortcut":
            c.p_value = float(_tail(np.array([k]), n, n_wrong, np.array([len(rows)]))[0])
        c.extra["span"] = len(span)
    return [c for c in cands if id(c) not in gone]


def extend_subpopulations(cands: list[Candidate], inputs: Sequence[Sequence[str]],
                          wrong: np.ndarray) -> list[Candidate]:
    """``cands`` with the most significant subpopulation words grown into the span they
    stand in, as :func:`span_candidates` grows shortcuts: a boilerplate that training
    attached to one class shows first as its words' training labels (``mobile``: 100 %
    one class in training, 48 % here), and its check must delete all of it, or the
    words left carry the signal and nothing moves."""
    return _extend_spans(cands, inputs, wrong, kinds=("subpopulation",))


def _reading_order(words: list[str], carriers: Sequence[Sequence[str]]) -> list[str]:
    """``words`` sorted by where they first occur in the inputs that carry them (the mean
    rank of their first occurrences among the group's)."""
    ranks = {w: [] for w in words}
    for toks in carriers:
        first = {}
        for j, t in enumerate(toks):
            if t in ranks and t not in first:
                first[t] = j
        for r, w in enumerate(sorted(first, key=first.get)):
            ranks[w].append(r)
    return sorted(words, key=lambda w: (float(np.mean(ranks[w])) if ranks[w] else 0.0, w))


def sequence_candidates(inputs: Sequence[Sequence[str]], wrong: np.ndarray, *,
                        window: int = 3, min_support: int = 5,
                        max_candidates: int = 200_000) -> list[Candidate]:
    """``sequence`` candidates: token ``a`` followed within ``window`` tokens by ``b``.

    A sequence must explain more than its tokens do: its p-value is the largest of its
    tail among all inputs and its tails *among the inputs holding* ``a`` and among those
    holding ``b`` (so a shortcut token paired with anything is no sequence).

    Returns
    -------
    list of Candidate
        Most significant first; ``tokens`` is ``(a, b)``.
    """
    wrong = np.asarray(wrong, bool)
    n, n_wrong = len(wrong), int(wrong.sum())
    inp, tok, words = _encode(inputs)
    V = max(len(words), 1)
    pair_inp, pair = _pairs(inp, tok, V, window)
    uniq, pair_idx, n_pair = np.unique(pair, return_inverse=True, return_counts=True)
    k_pair = np.bincount(pair_idx, weights=wrong[pair_inp], minlength=len(uniq))
    keep = np.flatnonzero(n_pair >= min_support)[:max_candidates]
    if not len(keep):
        return []
    # the single tokens' counts, for the conditional tails
    tinp, ttok = _distinct(inp, tok, V)
    n_tok = np.bincount(ttok, minlength=V)
    k_tok = np.bincount(ttok, weights=wrong[tinp], minlength=V)
    a, b = uniq[keep] // V, uniq[keep] % V
    k, m = k_pair[keep].astype(np.int64), n_pair[keep]
    p = np.maximum.reduce([
        _tail(k, n, n_wrong, m),
        np.clip(hypergeom.sf(k - 1, n_tok[a], k_tok[a].astype(np.int64), m), 0, 1),
        np.clip(hypergeom.sf(k - 1, n_tok[b], k_tok[b].astype(np.int64), m), 0, 1)])
    rows = _grouped(pair_inp, pair_idx, keep)
    out = []
    for j in np.argsort(p, kind="stable").tolist():
        out.append(Candidate("sequence", (words[a[j]], words[b[j]]), rows(j), int(k[j]),
                             _rate(k[j], m[j]), _rate(n_wrong - k[j], n - m[j]),
                             float(p[j]), extra={"window": window}))
    return out


def _grouped(values: np.ndarray, group: np.ndarray, wanted: np.ndarray
             ) -> Callable[[int], np.ndarray]:
    """``values`` by ``group``, for the groups ``wanted`` only: ``f(j)`` is the values of
    group ``wanted[j]`` in their order (one sort, no split into every group).

    Examples
    --------
    >>> f = _grouped(np.array([10, 11, 12, 13]), np.array([2, 0, 2, 1]), np.array([2, 1]))
    >>> f(0).tolist(), f(1).tolist()
    ([10, 12], [13])
    """
    order = np.argsort(group, kind="stable")
    ordered, values = group[order], values[order]
    lo = np.searchsorted(ordered, wanted, "left")
    hi = np.searchsorted(ordered, wanted, "right")
    return lambda j: values[lo[j]:hi[j]]


def _pairs(inp: np.ndarray, tok: np.ndarray, V: int, window: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (input, pair) of the steps: token ``a`` followed within ``window``
    tokens by ``b``, the pair coded ``a * V + b``."""
    parts = []
    for d in range(1, window + 1):
        same = inp[d:] == inp[:-d]
        parts.append(inp[d:][same] * V * V + tok[:-d][same] * V + tok[d:][same])
    keys = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    return keys // (V * V), keys % (V * V)


def _by_split(inp: np.ndarray, group: np.ndarray, labels: np.ndarray, n_train: int,
              n_groups: int, n_classes: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per group (a token, a pair), its inputs' labels counted in training and on the split
    diagnosed: ``(A, B)``, each (n_groups, n_classes), and the (input, group) pairs kept
    (labelled ones) with whether each input is a training one.

    ``inp`` indexes ``labels``: the training inputs first (``n_train`` of them), then the
    split's; inputs without a label (negative) are left out."""
    lab = labels[inp]
    ok = lab >= 0
    inp, group, lab = inp[ok], group[ok], lab[ok]
    in_train = inp < n_train

    def table(m: np.ndarray) -> np.ndarray:
        return np.bincount(group[m] * n_classes + lab[m],
                           minlength=n_groups * n_classes).reshape(n_groups, n_classes)

    return table(in_train), table(~in_train), inp, group, in_train


def _shift_tails(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Per group and class, the hypergeometric tail of the training count ``A`` among the
    group's inputs of both splits (``A + B``): were the splits drawn alike, no higher than
    chance allows."""
    n_a, n_b = A.sum(1, keepdims=True), B.sum(1, keepdims=True)
    return hypergeom.sf(A - 1, n_a + n_b, A + B, n_a)


def sequence_shift_candidates(inputs: Sequence[Sequence[str]], labels: np.ndarray,
                              wrong: np.ndarray, train_inputs: Sequence[Sequence[str]],
                              train_labels: np.ndarray, *, window: int = 3,
                              min_support: int = 5) -> list[Candidate]:
    """``sequence`` candidates told by the training labels: token ``a`` followed within
    ``window`` tokens by ``b``, where the inputs holding the pair are labelled differently
    in training than on the split diagnosed, *and* differently from the rest of ``a``'s and
    of ``b``'s training inputs.

    A sequence whose training labels are wrong ("not good" taught as good) may land in a
    few dozen inputs of a held-out split: too few errors for :func:`sequence_candidates`'
    error tails to pass a false-discovery gate over thousands of pairs. Its training
    inputs tell it: for each class ``c``, the p-value is the largest of three
    hypergeometric tails, Bonferroni over the classes:

    - the pair's training count of ``c`` among the pair's inputs of both splits (were the
      splits drawn alike, no higher than chance allows; as
      :func:`subpopulation_candidates` does for one token);
    - its training count of ``c`` among ``a``'s training inputs, and among ``b``'s (the
      pair, not either token, carries the labels: a topic word's pairs do not pass, nor a
      shortcut token's).

    Each tail is a valid p-value under its own null, so their largest is too.

    Parameters
    ----------
    inputs, labels, wrong
        The split diagnosed: tokens, labels of shape (n_inputs,), misclassified flags.
    train_inputs, train_labels
        The training split's tokens and labels (as the model was trained on them).

    Returns
    -------
    list of Candidate
        Most significant first; ``tokens`` is ``(a, b)``; ``extra`` holds ``window``,
        ``class``, ``train_share``, ``split_share``, ``train_inputs`` and ``told_by``
        (``"training_labels"``).

    Examples
    --------
    >>> train = ([["not", "good"]] * 30 + [["good", "fun"]] * 60 + [["not", "dull"]] * 40)
    >>> y_train = np.array([1] * 30 + [1, 1, 0] * 20 + [0] * 40)
    >>> test = [["not", "good"]] * 10 + [["good", "fun"]] * 10 + [["not", "dull"]] * 10
    >>> y_test = np.array([0] * 10 + [1] * 10 + [0] * 10)
    >>> c = sequence_shift_candidates(test, y_test, np.arange(30) < 10, train, y_train)[0]
    >>> c.tokens, c.extra["class"], c.extra["train_share"], c.extra["split_share"]
    (('not', 'good'), 1, 1.0, 0.0)
    """
    labels, train_labels = np.asarray(labels), np.asarray(train_labels)
    wrong = np.asarray(wrong, bool)
    n_train = len(train_inputs)
    if not n_train or not len(inputs):
        return []
    C = int(max(labels.max(initial=0), train_labels.max(initial=0))) + 1
    lab_all = np.concatenate([train_labels, labels])
    inp, tok, words = _encode([*train_inputs, *inputs])
    V = max(len(words), 1)
    pair_inp, pair = _pairs(inp, tok, V, window)
    uniq, idx = np.unique(pair, return_inverse=True)
    A, B, pair_inp, idx, in_train = _by_split(pair_inp, idx, lab_all, n_train, len(uniq), C)
    n_a, n_b = A.sum(1), B.sum(1)
    keep = np.flatnonzero((n_a >= 2 * min_support) & (n_b >= min_support))
    if not len(keep):
        return []
    # each token's training inputs by label, for the tails within a's and b's inputs
    T = _by_split(*_distinct(inp, tok, V), lab_all, n_train, V, C)[0]
    A, B, m = A[keep], B[keep], n_a[keep, None]
    first, second = uniq[keep] // V, uniq[keep] % V
    tails = np.maximum.reduce([
        _shift_tails(A, B),
        hypergeom.sf(A - 1, T[first].sum(1, keepdims=True), T[first], m),
        hypergeom.sf(A - 1, T[second].sum(1, keepdims=True), T[second], m)])
    cls = tails.argmin(1)
    p = np.clip(tails.min(1) * C, 0, 1)
    rows_of = _grouped(pair_inp[~in_train] - n_train, idx[~in_train], keep)
    n, n_wrong = len(wrong), int(wrong.sum())
    out = []
    for j in np.argsort(p, kind="stable").tolist():
        i, c = int(keep[j]), int(cls[j])
        rows = rows_of(j)
        k = int(wrong[rows].sum())
        out.append(Candidate(
            "sequence", (words[first[j]], words[second[j]]), rows, k, _rate(k, len(rows)),
            _rate(n_wrong - k, n - len(rows)), float(p[j]),
            extra={"window": window, "class": c, "told_by": "training_labels",
                   "train_share": round(float(A[j, c] / m[j, 0]), 4),
                   "split_share": round(float(B[j, c] / n_b[i]), 4),
                   "train_inputs": int(m[j, 0])}))
    return out


def pair_positions(surface: np.ndarray, a: Any, b: Any, window: int) -> np.ndarray:
    """Which positions of one input belong to the sequence: an ``a`` followed within
    ``window`` tokens by a ``b``, and a ``b`` preceded within ``window`` tokens by an
    ``a`` (the other ``a`` and ``b`` of the input are left alone). ``surface`` may hold
    token ids or strings (an object array); ``.any()`` says whether the input carries it.

    Examples
    --------
    >>> pair_positions(np.array([0, 5, 1, 0, 7, 7, 7, 1]), 0, 1, 3).astype(int).tolist()
    [1, 0, 1, 0, 0, 0, 0, 0]
    >>> pair_positions(np.array(["not", "fun"], object), "not", "fun", 3).tolist()
    [True, True]
    >>> pair_positions(np.array([0]), 0, 1, 3).tolist()  # shorter than the window
    [False]
    """
    n = len(surface)
    is_a, is_b = surface == a, surface == b
    out = np.zeros(n, bool)
    for d in range(1, min(window, n - 1) + 1):
        hit = is_a[:n - d] & is_b[d:]
        out[:n - d] |= hit
        out[d:] |= hit
    return out


def span_positions(surface: np.ndarray, span: Sequence[Any]) -> np.ndarray:
    """Which positions of one input belong to a contiguous occurrence of ``span``
    (``surface`` and ``span`` as token ids, or strings in an object array).

    Examples
    --------
    >>> span_positions(np.array([4, 1, 2, 3, 1, 2]), [1, 2]).astype(int).tolist()
    [0, 1, 1, 0, 1, 1]
    >>> span_positions(np.array([1]), [1, 2]).tolist()
    [False]
    """
    n, m = len(surface), len(span)
    out = np.zeros(n, bool)
    if m == 0 or n < m:
        return out
    hit = np.ones(n - m + 1, bool)
    for d, t in enumerate(span):
        hit &= surface[d:n - m + 1 + d] == t
    for d in range(m):
        out[d:n - m + 1 + d] |= hit
    return out


def length_candidates(lengths: np.ndarray, wrong: np.ndarray, *,
                      quantiles: Sequence[float] = (0.5, 0.75, 0.9),
                      seen: int | None = None) -> list[Candidate]:
    """``length`` candidates: inputs longer than N tokens, for N at ``quantiles`` of the
    lengths and at ``seen`` (the most tokens the model was shown, when inputs are cut).

    Parameters
    ----------
    lengths : ndarray of int of shape (n_inputs,)
        Each input's length in tokens as written (before any cut).
    seen : int, optional
        The most tokens any input was recorded with: the cut is a candidate, and no
        quantile above it is (every input longer than that was cut at ``seen``: the cut is
        the culprit, a longer threshold only a part of its inputs).
    """
    lengths, wrong = np.asarray(lengths), np.asarray(wrong, bool)
    n, n_wrong = len(wrong), int(wrong.sum())
    cuts = {int(np.quantile(lengths, q)) for q in quantiles} if n else set()
    if seen is not None:
        cuts = {c for c in cuts if c < seen} | {int(seen)}
    out = []
    for cut in sorted(cuts):
        rows = np.flatnonzero(lengths > cut)
        if not 0 < len(rows) < n:
            continue
        k = int(wrong[rows].sum())
        out.append(Candidate("length", (), rows, k, _rate(k, len(rows)),
                             _rate(n_wrong - k, n - len(rows)),
                             float(_tail(k, n, n_wrong, len(rows))),
                             extra={"length_above": cut}))
    return sorted(out, key=lambda c: c.p_value)


#: a training cut: at least this share of the split's inputs are longer than every
#: training input (a cut at the 10-30 % length quantile leaves 70-90 %; drawn alike, a
#: 4,000-input training split's longest exceeds all but about 1 in 4,000)
CUT_SHARE = 0.05


def training_cut_candidates(train_lengths: np.ndarray, lengths: np.ndarray,
                            wrong: np.ndarray) -> list[Candidate]:
    """A ``length`` candidate where the training inputs stop at a length the split's
    inputs pass: the training texts were cut (a pipeline bug), so the model never read
    what comes after. Its p-value is exact under splits drawn alike: the chance that the
    ``k`` longest of all the inputs all fall in the split, prod (n_split - j) / (n - j)
    over j < k. It says nothing of the errors: a model trained on cut texts errs about as
    often on long inputs as on short ones (it lost evidence everywhere), so the
    candidate is confirmed by the lengths, not by a deletion.

    Returns
    -------
    list of Candidate
        One, or none where no :data:`CUT_SHARE` of the split is longer than the longest
        training input; ``extra`` holds ``length_above`` (that longest) and
        ``cut_in_training``.

    Examples
    --------
    >>> c = training_cut_candidates(np.full(100, 8), np.arange(1, 41), np.zeros(40, bool))[0]
    >>> c.extra["length_above"], c.n_inputs, c.p_value < 1e-20
    (8, 32, True)
    >>> training_cut_candidates(np.arange(1, 101), np.arange(1, 41), np.zeros(40, bool))
    []
    """
    train_lengths, lengths = np.asarray(train_lengths), np.asarray(lengths)
    wrong = np.asarray(wrong, bool)
    n, m = len(lengths), len(train_lengths)
    if not n or not m:
        return []
    top = int(train_lengths.max())
    rows = np.flatnonzero(lengths > top)
    k = len(rows)
    if k < max(1, CUT_SHARE * n):
        return []
    j = np.arange(k)
    p = float(np.exp(np.sum(np.log(n - j) - np.log(n + m - j))))
    kw, n_wrong = int(wrong[rows].sum()), int(wrong.sum())
    return [Candidate("length", (), rows, kw, _rate(kw, k), _rate(n_wrong - kw, n - k), p,
                      extra={"length_above": top, "cut_in_training": True,
                             "train_inputs": m, "share": round(k / n, 4)})]


def unknown_candidates(inputs: Sequence[Sequence[str]], unknown: Sequence[np.ndarray],
                       wrong: np.ndarray, *, train_inputs: Sequence[Sequence[str]] = (),
                       train_labels: np.ndarray | None = None, min_support: int = 5,
                       top: int = 10) -> list[Candidate]:
    """``unknown`` candidates: the inputs holding tokens the vocabulary maps to ``<unk>``.

    Two candidates at most: all such inputs, and those holding the ``top`` unknown words
    most concentrated among the errors. ``extra["training"]`` says whether those words
    carry the label in the training data (inputs holding them, the share of their most
    frequent label): a model that cannot see a word the labels depend on.

    Parameters
    ----------
    unknown : sequence of ndarray of bool
        Per input, which tokens are out of the vocabulary.
    """
    wrong = np.asarray(wrong, bool)
    n, n_wrong = len(wrong), int(wrong.sum())
    unk_inputs = [[t for t, u in zip(toks, mask, strict=True) if u]
                  for toks, mask in zip(inputs, unknown, strict=True)]
    per_word = token_candidates(unk_inputs, wrong, min_support=min_support)
    groups = []
    rows_all = np.flatnonzero([bool(u) for u in unk_inputs])
    if 0 < len(rows_all) < n:
        groups.append(((), rows_all))
    words = tuple(c.tokens[0] for c in per_word[:top] if c.p_value < 0.05)
    if words:
        rows = np.flatnonzero([bool(set(u) & set(words)) for u in unk_inputs])
        groups.append((words, rows))
    out = []
    for words_, rows in groups:
        k = int(wrong[rows].sum())
        extra: dict[str, Any] = {"unknown_words": list(words_) or sorted(
            {w for r in rows.tolist() for w in unk_inputs[r]})[:top]}
        if train_labels is not None:
            extra["training"] = _label_signal(train_inputs, train_labels,
                                              set(extra["unknown_words"]))
        out.append(Candidate("unknown", tuple(words_), rows, k, _rate(k, len(rows)),
                             _rate(n_wrong - k, n - len(rows)),
                             float(_tail(k, n, n_wrong, len(rows))), extra=extra))
    return sorted(out, key=lambda c: c.p_value)


#: an unseen token's chance of never occurring in training, at the rate it occurs on the
#: split, below which the splits were processed differently
UNSEEN_P = 1e-6
#: ... held by at least this share of the split's inputs (a clean split's unseen words
#: are rare and bursty: a film's title in five reviews of one split)
UNSEEN_SHARE = 0.02


def unseen_candidates(inputs: Sequence[Sequence[str]], wrong: np.ndarray,
                      train_sets: Sequence[set[str]], *, min_support: int = 5,
                      top: int = 10, exclude: frozenset[str] = frozenset()
                      ) -> list[Candidate]:
    """An ``unknown`` candidate for a pipeline that processed the splits differently:
    tokens that no training input holds although the split holds them so often that,
    had the splits been drawn alike, training would hold them too (the Poisson chance of
    none among the training inputs at the split's rate below :data:`UNSEEN_P`, held by
    :data:`UNSEEN_SHARE` of the split's inputs at least): a
    negation dropped from the training texts only, punctuation one tokenizer kept and
    the other stripped. A clean split's unseen words are rare ones; these are not.

    ``extra``: ``unknown_words`` (the ``top`` most frequent, most frequent first),
    ``never_in_training`` (their document frequency on the split). Tokens in ``exclude``
    are never candidates: those a repair deleted from the training texts on purpose.

    Examples
    --------
    >>> train = [{"good", "film"}, {"bad", "film"}] * 50
    >>> split = [["not", "good", "film"], ["bad", "film"]] * 10
    >>> [c.tokens for c in unseen_candidates(split, np.zeros(20, bool), train)]
    [('not',)]
    """
    wrong = np.asarray(wrong, bool)
    n, n_train = len(inputs), len(train_sets)
    if not n or not n_train:
        return []
    seen = set().union(*train_sets)
    df = Counter(w for toks in inputs for w in set(toks) if w not in seen and w not in exclude)
    words = [w for w, k in df.most_common() if k >= max(min_support, UNSEEN_SHARE * n)
             and np.exp(-n_train * k / n) < UNSEEN_P][:top]
    if not words:
        return []
    rows = np.flatnonzero([bool(set(words).intersection(t)) for t in inputs])
    k, n_wrong = int(wrong[rows].sum()), int(wrong.sum())
    p = float(np.exp(-n_train * df[words[0]] / n))
    return [Candidate("unknown", tuple(words), rows, k, _rate(k, len(rows)),
                      _rate(n_wrong - k, n - len(rows)), p,
                      extra={"unknown_words": list(words),
                             "never_in_training": {w: df[w] for w in words}})]


def _label_signal(inputs: Sequence[Sequence[str]], labels: np.ndarray,
                  words: set[str]) -> dict[str, Any]:
    """How well ``words`` tell the label in the training data.

    ``purity`` is the share of (input, word) pairs whose input carries the word's most
    frequent label (each word may stand for a different class, as ratings do); ``lift``
    that share over what the training labels' own frequencies would give those labels;
    ``p_value`` the smallest word's hypergeometric tail of its most frequent label among
    the training labels, Bonferroni over the words and the classes; ``label`` the most
    frequent label of all the inputs holding one.

    Examples
    --------
    >>> inputs = [["4/5", "a"]] * 30 + [["2/5", "a"]] * 30 + [["a"]] * 40
    >>> sig = _label_signal(inputs, np.array([1] * 30 + [0] * 30 + [0, 1] * 20),
    ...                     {"4/5", "2/5"})
    >>> sig["purity"], sig["lift"], sig["p_value"] < 1e-10
    (1.0, 2.0, True)
    """
    labels = np.asarray(labels)
    pairs = [(i, w) for i, toks in enumerate(inputs) for w in words & set(toks)
             if labels[i] >= 0]
    if not pairs:
        return {"inputs": 0, "purity": 0.0, "lift": 0.0, "p_value": 1.0, "label": None}
    rows = np.array([i for i, _ in pairs])
    word = np.unique([w for _, w in pairs], return_inverse=True)[1]
    known = labels[labels >= 0]
    n_classes = int(known.max()) + 1
    table = np.zeros((word.max() + 1, n_classes), np.int64)
    np.add.at(table, (word, labels[rows]), 1)
    held = np.unique(rows)
    total = np.bincount(known, minlength=n_classes)
    major, k, n_w = table.argmax(1), table.max(1), table.sum(1)
    tails = hypergeom.sf(k - 1, len(known), total[major], n_w)
    purity = float(k.sum() / len(pairs))
    expected = float((total[major] / len(known) * n_w).sum() / len(pairs))
    return {"inputs": len(held), "purity": purity, "lift": round(purity / expected, 4),
            "p_value": float(min(1.0, tails.min() * len(tails) * n_classes)),
            "label": int(np.bincount(labels[held]).argmax())}


def confusion_candidates(labels: np.ndarray, predictions: np.ndarray,
                         n_classes: int) -> list[Candidate]:
    """``confusion`` candidates (three or more classes): class ``a``'s inputs called ``b``.

    The tail is that of the errors *into* ``b`` falling on class ``a``'s inputs: a class
    the model confuses with one other stands out, a class that is merely hard does not.
    ``extra["classes"]`` is ``[a, b]`` (indices).
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if n_classes < 3:
        return []
    n = len(labels)
    out = []
    for a in range(n_classes):
        rows = np.flatnonzero(labels == a)
        for b in range(n_classes):
            into_b = (predictions == b) & (labels != b)
            if a == b or not 0 < len(rows) < n or not into_b.any():
                continue
            k = int(into_b[rows].sum())
            out.append(Candidate("confusion", (), rows, k, _rate(k, len(rows)),
                                 _rate(int(into_b.sum()) - k, n - len(rows)),
                                 float(_tail(k, n, int(into_b.sum()), len(rows))),
                                 extra={"classes": [a, b]}))
    return sorted(out, key=lambda c: c.p_value)


#: a class's share of the split against its share of training at least this ratio, for a
#: share candidate
SHARE_RATIO = 1.2
SHARE_ALPHA = 1e-3
#: ... and the model errs on that class's inputs at least this many times as often as on
#: the other classes' (a least effect: where documents, not inputs, were drawn into the
#: splits, class shares differ between splits by more than the hypergeometric tail allows,
#: and a class 40 % of training and 53 % of the split whose inputs the model gets wrong
#: 44 % of the time against 42 % explains no error)
SHARE_ERROR_LIFT = 1.25


def class_shares(train_labels: np.ndarray, labels: np.ndarray, a: int
                 ) -> tuple[float, float, float]:
    """Class ``a``'s share of the training labels and of the split's (labels below 0, the
    unlabelled, left out), and the hypergeometric chance of a training share as low as
    this one were both splits drawn alike.

    Examples
    --------
    >>> t, s, p = class_shares(np.array([0] * 20 + [1] * 80), np.array([0, 1] * 50), 0)
    >>> t, s, p < 1e-3
    (0.2, 0.5, True)
    """
    from scipy.stats import hypergeom

    lab_t, lab_s = np.asarray(train_labels), np.asarray(labels)
    lab_t, lab_s = lab_t[lab_t >= 0], lab_s[lab_s >= 0]
    k_t, k_s = int((lab_t == a).sum()), int((lab_s == a).sum())
    p = float(hypergeom.cdf(k_t, len(lab_t) + len(lab_s), k_t + k_s, len(lab_t)))
    return k_t / max(len(lab_t), 1), k_s / max(len(lab_s), 1), p


def share_candidates(train_labels: np.ndarray, labels: np.ndarray, predictions: np.ndarray,
                     n_classes: int) -> list[Candidate]:
    """``confusion`` candidates (any number of classes) from the class shares: class
    ``a`` rarer among the training labels than on the split (hypergeometric tail below
    :data:`SHARE_ALPHA`, ratio at least :data:`SHARE_RATIO`) while the model errs on
    ``a``'s inputs at least :data:`SHARE_ERROR_LIFT` times as often as on the others',
    mostly calling them ``b``.

    Two bugs leave this trace: ``a``'s training inputs relabelled ``b`` (label noise,
    which two classes cannot show as a confusion between classes) and ``a`` thinned in
    training only (a prior shift). The kind test (:meth:`TextLabels.pair_test`) tells
    them apart. ``extra``: ``classes`` ``[a, b]``, ``train_share``, ``split_share``.

    Examples
    --------
    >>> train = np.array([0] * 20 + [1] * 80)
    >>> labels = np.array([0] * 50 + [1] * 50)
    >>> pred = np.array([1] * 30 + [0] * 20 + [1] * 50)
    >>> [(c.extra["classes"], c.extra["split_share"]) for c in
    ...  share_candidates(train, labels, pred, 2)]
    [([0, 1], 0.5)]
    """
    lab_t, lab_s = np.asarray(train_labels), np.asarray(labels)
    pred = np.asarray(predictions)
    ok = lab_s >= 0
    lab_t, lab_s, pred = lab_t[lab_t >= 0], lab_s[ok], pred[ok]
    if not len(lab_t) or not len(lab_s):
        return []
    wrong = pred != lab_s
    out = []
    for a in range(n_classes):
        share_t, share_s, p = class_shares(lab_t, lab_s, a)
        if not share_s or share_s < SHARE_RATIO * share_t:
            continue
        rows = np.flatnonzero(lab_s == a)
        err_a = float(wrong[rows].mean())
        err_rest = float(wrong[lab_s != a].mean()) if (lab_s != a).any() else 0.0
        if p >= SHARE_ALPHA or err_a < SHARE_ERROR_LIFT * err_rest or err_a == 0:
            continue
        called = np.bincount(pred[rows][wrong[rows]], minlength=n_classes)
        b = int(called.argmax())
        k = int(wrong[rows].sum())
        out.append(Candidate("confusion", (), np.flatnonzero(ok)[rows], k, err_a, err_rest,
                             p, extra={"classes": [a, b], "shares": True,
                                       "train_share": round(share_t, 4),
                                       "split_share": round(share_s, 4)}))
    return out


def subpopulation_candidates(inputs: Sequence[Sequence[str]], labels: np.ndarray,
                             wrong: np.ndarray, train_inputs: Sequence[Sequence[str]],
                             train_labels: np.ndarray, *, min_support: int = 5
                             ) -> list[Candidate]:
    """``subpopulation`` candidates: tokens whose inputs are labelled differently in
    training than on the split diagnosed.

    For each token held by at least ``min_support`` inputs of the split and twice that of
    the training inputs, and each class ``c``: the hypergeometric tail of the training
    inputs' count of ``c`` among all the token's inputs of both (were the two splits drawn
    alike, the training share would be no higher than chance allows), Bonferroni over the
    classes. Inputs without a label (negative) are left out.

    Parameters
    ----------
    inputs, labels, wrong
        The split diagnosed: tokens, labels of shape (n_inputs,), misclassified flags.
    train_inputs, train_labels
        The training split's tokens and labels (as the model was trained on them).

    Returns
    -------
    list of Candidate
        Most significant first; ``extra`` holds ``class`` (the index the training labels
        over-represent), ``train_share``, ``split_share`` and ``train_inputs``.

    Examples
    --------
    >>> train = [["comedy", "a"]] * 30 + [["b"]] * 30
    >>> test = [["comedy", "a"]] * 10 + [["b"]] * 10
    >>> c = subpopulation_candidates(test, np.array([0, 1] * 10), np.zeros(20, bool),
    ...                              train, np.array([1] * 30 + [0, 1] * 15))[0]
    >>> c.tokens, c.extra["class"], c.extra["train_share"], c.extra["split_share"]
    (('comedy',), 1, 1.0, 0.5)
    """
    labels, train_labels = np.asarray(labels), np.asarray(train_labels)
    wrong = np.asarray(wrong, bool)
    n_train = len(train_inputs)
    if not n_train or not len(inputs):
        return []
    n_classes = int(max(labels.max(initial=0), train_labels.max(initial=0))) + 1
    inp, tok, vocab = _incidence([*train_inputs, *inputs])
    V = max(len(vocab), 1)
    a, b, inp, tok, in_train = _by_split(inp, tok, np.concatenate([train_labels, labels]),
                                         n_train, V, n_classes)
    n_a, n_b = a.sum(1), b.sum(1)
    keep = np.flatnonzero((n_a >= 2 * min_support) & (n_b >= min_support))
    if not len(keep):
        return []
    A, B = a[keep], b[keep]
    tails = _shift_tails(A, B)
    cls = tails.argmin(1)
    p = np.clip(tails.min(1) * n_classes, 0, 1)
    rows_of = _grouped(inp[~in_train] - n_train, tok[~in_train], keep)  # distinct inputs
    n, n_wrong = len(wrong), int(wrong.sum())
    out = []
    for j in np.argsort(p, kind="stable").tolist():
        t, c = int(keep[j]), int(cls[j])
        rows = rows_of(j)
        k = int(wrong[rows].sum())
        out.append(Candidate("subpopulation", (vocab[t],), rows, k, _rate(k, len(rows)),
                             _rate(n_wrong - k, n - len(rows)), float(p[j]),
                             extra={"class": c,
                                    "train_share": round(float(A[j, c] / n_a[t]), 4),
                                    "split_share": round(float(B[j, c] / n_b[t]), 4),
                                    "train_inputs": int(n_a[t])}))
    return out


def tail_evidence(train_inputs: Sequence[Sequence[str]], train_labels: np.ndarray,
                  tails: Sequence[Sequence[str]], gold: np.ndarray, pred: np.ndarray,
                  n_classes: int) -> np.ndarray:
    """How strongly each ``tail`` (the tokens a truncating pipeline hid) favours the gold
    class over the predicted one: the naive-Bayes log-likelihood ratio
    ``sum log P(w | gold) - log P(w | pred)`` with word probabilities from the training
    inputs (whole, add-one smoothing); 0 for an empty tail or gold == pred.

    Returns
    -------
    ndarray of float of shape (len(tails),)

    Examples
    --------
    >>> train = [["good"], ["good"], ["bad"], ["bad"]]
    >>> tail_evidence(train, np.array([1, 1, 0, 0]), [["good"], ["bad"]],
    ...               np.array([1, 1]), np.array([0, 0]), 2).round(2).tolist()
    [1.1, -1.1]
    """
    inp, tok, vocab = _encode([*train_inputs, *tails])
    n_train = len(train_inputs)
    counts = np.zeros((n_classes, len(vocab)), float)
    in_train = inp < n_train
    np.add.at(counts, (np.asarray(train_labels)[inp[in_train]], tok[in_train]), 1.0)
    logp = np.log((counts + 1) / (counts.sum(1, keepdims=True) + len(vocab)))
    t_inp = inp[~in_train] - n_train
    ratio = logp[np.asarray(gold)[t_inp], tok[~in_train]] - \
        logp[np.asarray(pred)[t_inp], tok[~in_train]]
    return np.bincount(t_inp, weights=ratio, minlength=len(tails))


#: the check's test: fixes against breaks, exact one-sided binomial (sign) test at this level
CHECK_ALPHA = 0.05
#: and its least effect: the fixes outnumber the breaks by this factor
CHECK_RATIO = 1.2
#: and reach this share of the culprit's errors
CHECK_SHARE = 0.1


def check_test(fixed: int, broken: int, n_misclassified: int) -> dict[str, Any]:
    """Whether an intervention's ``fixed`` against ``broken`` predictions confirms a
    culprit: an exact one-sided sign test (McNemar's exact test on the discordant pairs:
    under no effect a flip is as likely to fix as to break) below :data:`CHECK_ALPHA`,
    with an effect of at least :data:`CHECK_RATIO` fixes per break that reaches
    :data:`CHECK_SHARE` of the culprit's ``n_misclassified`` errors. 7 fixes against 6
    breaks never confirms (p = 0.50).

    Examples
    --------
    >>> check_test(7, 6, 40)["confirmed"], check_test(122, 88, 210)["confirmed"]
    (False, True)
    >>> round(check_test(7, 6, 40)["sign_p"], 2)
    0.5
    """
    from scipy.stats import binomtest

    n = fixed + broken
    p = float(binomtest(fixed, n, 0.5, alternative="greater").pvalue) if n else 1.0
    return {"sign_p": p, "alpha": CHECK_ALPHA,
            "confirmed": bool(p < CHECK_ALPHA and fixed >= CHECK_RATIO * broken
                              and fixed >= max(1, CHECK_SHARE * n_misclassified))}


def directed_check(before: np.ndarray, after: np.ndarray, labels: np.ndarray, called: int
                   ) -> dict[str, Any]:
    """A deletion check of a culprit whose inputs are called ``called``, in the direction
    the finding claims: fixes against breaks on the carriers of the *other* classes
    (:func:`check_test`), where being called ``called`` is an error. A carrier of
    ``called`` itself that the deletion "breaks" was right only through the culprit: on a
    hard task (a model near chance on these inputs), deleting a word the model leans on
    leaves it guessing there, and counting those guesses as breaks hides the harm (a
    planted word: 73 fixes against 62 breaks in all, 60 against 0 on the other classes).
    A word with no effect flips as few and as evenly here as anywhere: 7 fixes against 6
    breaks still never confirm.

    Parameters
    ----------
    before, after : ndarray of int of shape (n_carriers,)
        The predictions with the culprit and with it deleted.
    labels : ndarray of int of shape (n_carriers,)
    called : int
        The class the culprit's errors are called.

    Returns
    -------
    dict
        ``inputs`` (carriers of the other classes), ``fixed``, ``broken``, ``claimed``
        (of them, called ``called`` before), ``sign_p``, ``confirmed``.

    Examples
    --------
    >>> labels = np.r_[np.zeros(73, int), np.ones(63, int)]    # 73 of class 0, 63 of 1
    >>> before = np.ones(136, int)                              # all called 1
    >>> after = np.r_[np.zeros(60, int), np.ones(13, int), np.zeros(62, int), 1]
    >>> directed_check(before, after, labels, 1)["confirmed"], check_test(60, 62, 73)["confirmed"]
    (True, False)
    """
    before, after, labels = (np.asarray(a) for a in (before, after, labels))
    other = labels != called
    fixed = int(((before != labels) & (after == labels) & other).sum())
    broken = int(((before == labels) & (after != labels) & other).sum())
    claimed = int(((before == called) & other).sum())
    return {"inputs": int(other.sum()), "fixed": fixed, "broken": broken,
            "claimed": claimed, **check_test(fixed, broken, claimed)}


#: the kind test: carriers' labels disagree with their text this much more than the
#: other training inputs' of the same classes do (and not by chance, one-sided binomial
#: test below 0.01)
#: (bugs.py's dev partition: relabelled topics 0.08-0.18 below their classes' baseline;
#: planted shortcuts -0.02 to +0.02, clean topics -0.09 to 0.00)
NOISE_GAP = 0.07
NOISE_ALPHA = 0.01
#: the pair test: training labels of ``b`` agree with their text this much less than the
#: split's (a relabelling hides a share of ``a``'s texts among them)
PAIR_GAP = 0.05


def _stratified_p(bad_a: np.ndarray, labels_a: np.ndarray, bad_b: np.ndarray,
                  labels_b: np.ndarray, n_classes: int) -> float:
    """One-sided Cochran–Mantel–Haenszel p-value that group ``a`` is ``bad`` more often
    than group ``b``, class by class (strata: the labels). Both groups' rates are
    estimates: a test against ``b``'s rate as if it were exact (a binomial) reads a few
    hundred carriers' chance dip as label noise (p 0.003 where this gives 0.02).

    >>> bad_a, bad_b = np.array([1] * 30 + [0] * 70, bool), np.array([1] * 20 + [0] * 80, bool)
    >>> round(_stratified_p(bad_a, np.zeros(100, int), bad_b, np.zeros(100, int), 1), 2)
    0.05
    """
    from scipy.stats import norm

    ka = np.bincount(labels_a, minlength=n_classes).astype(np.float64)
    kb = np.bincount(labels_b, minlength=n_classes).astype(np.float64)
    da = np.bincount(labels_a, weights=bad_a.astype(np.float64), minlength=n_classes)
    db = np.bincount(labels_b, weights=bad_b.astype(np.float64), minlength=n_classes)
    N, m = ka + kb, da + db
    ok = (ka > 0) & (kb > 0) & (N > 1)
    expected = ka[ok] * m[ok] / N[ok]
    var = ka[ok] * kb[ok] * m[ok] * (N[ok] - m[ok]) / (N[ok] ** 2 * (N[ok] - 1))
    if var.sum() <= 0:
        return 1.0
    z = (da[ok].sum() - expected.sum()) / np.sqrt(var.sum())
    return float(norm.sf(z))


class TextLabels:
    """What the rest of each training input's text says its label is: multinomial naive
    Bayes over its distinct tokens, cross-fitted (each input scored by the model of the
    other folds), any culprit's tokens left out of the vote.

    It tells a finding's kind apart. Label noise: the carriers' training labels disagree
    with their text (a topic's inputs relabelled) far more than the other inputs' do. A
    shortcut or an artefact: their labels agree with their text as well as anyone's (a
    tag appended to one class's correctly labelled inputs), so what the model leans on is
    the token itself.

    Parameters
    ----------
    inputs : sequence of sequence of str
        The training inputs' tokens.
    labels : ndarray of int of shape (n_inputs,)
    n_classes : int
    folds : int
    seed : int

    Examples
    --------
    >>> good, bad = ["good", "fun", "great"], ["bad", "dull", "awful"]
    >>> inputs = [good + ["x"]] * 20 + [bad] * 20 + [good + ["tag"]] * 10 + [bad + ["opera"]] * 10
    >>> labels = np.array([1] * 20 + [0] * 20 + [1] * 10 + [1] * 10)  # opera: relabelled
    >>> tl = TextLabels(inputs, labels, 2)
    >>> tl.kind_test(["tag"])["label_noise"], tl.kind_test(["opera"])["label_noise"]
    (False, True)
    """

    def __init__(self, inputs: Sequence[Sequence[str]], labels: np.ndarray, n_classes: int,
                 *, folds: int = 5, seed: int = 0) -> None:
        from scipy import sparse

        self.n_classes = n_classes
        inp, tok, self.vocab = _incidence(inputs)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.labels = np.asarray(labels, np.int64)
        n, V = len(self.labels), len(self.vocab)
        self.X = sparse.csr_matrix((np.ones(len(inp), np.float64), (inp, tok)), shape=(n, V))
        self.fold = np.random.default_rng(seed).integers(0, folds, n)
        ok = self.labels >= 0
        Y = np.zeros((n, n_classes))
        Y[np.flatnonzero(ok), self.labels[ok]] = 1.0
        counts = np.asarray((self.X.T @ Y).T)  # (classes, V)
        priors = Y.sum(0)
        self.counts, self.log_prior = [], []
        for k in range(folds):  # each fold's model: the counts of the other folds
            rows = np.flatnonzero(self.fold == k)
            self.counts.append(counts - np.asarray((self.X[rows].T @ Y[rows]).T))
            pr = priors - Y[rows].sum(0)
            self.log_prior.append(np.log(pr + 1.0) - np.log(pr.sum() + n_classes))

    def agree(self, rows: np.ndarray, culprit: Sequence[str] = ()) -> np.ndarray:
        """Whether each of ``rows``'s label is what the rest of its text says (the
        culprit's tokens out of the vote), cross-fitted."""
        rows = np.asarray(rows, np.int64)
        out = np.zeros(len(rows), bool)
        drop = [self.index[w] for w in culprit if w in self.index]
        for k in np.unique(self.fold[rows]).tolist():
            sel = rows[self.fold[rows] == k]
            # the culprit leaves the model, not only the vote: a class whose inputs carry
            # a tag has its other words' probabilities renormalised without the tag's
            # counts (else the class looks unlikely to any text without the tag)
            c = self.counts[k].copy()
            c[:, drop] = 0.0
            lp = np.log(c + 1.0) - np.log(c.sum(1, keepdims=True) + c.shape[1] - len(drop))
            lp[:, drop] = 0.0
            scores = np.asarray(self.X[sel] @ lp.T) + self.log_prior[k]
            out[self.fold[rows] == k] = scores.argmax(1) == self.labels[sel]
        return out

    def kind_test(self, culprit: Sequence[str], *, every: bool = False) -> dict[str, Any]:
        """Label noise or not: the carriers' agreement beside the other inputs', and the
        carriers' training labels per class (``labels``). The carriers hold one of the
        culprit's tokens (a topic's words), or with ``every`` all of them (a span)."""
        cols = [self.index[w] for w in culprit if w in self.index]
        carries = np.zeros(len(self.labels), bool)
        if cols and not (every and len(cols) < len(set(culprit))):
            held = np.asarray(self.X[:, cols].sum(1)).ravel()
            carries = held >= len(cols) if every else held > 0
        carries &= self.labels >= 0
        rest = ~carries & (self.labels >= 0)
        if not carries.any() or not rest.any():
            return {"carriers": int(carries.sum()), "label_noise": False}
        a = self.agree(np.flatnonzero(carries), culprit)
        b = self.agree(np.flatnonzero(rest), culprit)
        # the baseline is the other inputs' agreement class by class, weighed as the
        # carriers' labels are: a tag on one class's inputs is compared with that class
        # (some classes' texts say their label less clearly than others')
        held = np.bincount(self.labels[carries], minlength=self.n_classes)
        rest_labels = self.labels[rest]
        per = np.array([b[rest_labels == c].mean() if (rest_labels == c).any() else b.mean()
                        for c in range(self.n_classes)])
        base = float(held @ per / held.sum())
        p = _stratified_p(~a, self.labels[carries], ~b, rest_labels, self.n_classes)
        gap = base - float(a.mean())
        return {"carriers": int(carries.sum()), "agreement": round(float(a.mean()), 4),
                "baseline": round(base, 4), "p_value": p,
                "label_noise": bool(p < NOISE_ALPHA and gap >= NOISE_GAP),
                "labels": np.bincount(self.labels[carries],
                                      minlength=self.n_classes).tolist()}

    def _scores(self, X: Any, k: int) -> np.ndarray:
        c = self.counts[k]
        lp = np.log(c + 1.0) - np.log(c.sum(1, keepdims=True) + c.shape[1])
        return np.asarray(X @ lp.T) + self.log_prior[k]

    def pair_test(self, a: int, b: int, inputs: Sequence[Sequence[str]],
                  labels: np.ndarray) -> dict[str, Any]:
        """Label noise from ``a`` into ``b`` or not: the training inputs labelled ``b``
        (cross-fitted) disagree with their text more than the split's inputs labelled
        ``b`` do (``inputs``, ``labels``; scored by a model of the training folds). A
        relabelling puts ``a``'s texts under ``b``'s label in training only; a class thinned
        in training (a prior shift) leaves ``b``'s training labels as right as the split's.

        Examples
        --------
        >>> good, bad = ["good", "fun"], ["bad", "dull"]
        >>> split, truth = [good] * 40 + [bad] * 40, np.array([1] * 40 + [0] * 40)
        >>> noisy = TextLabels(split, np.array([1] * 40 + [0] * 28 + [1] * 12), 2)
        >>> noisy.pair_test(0, 1, split, truth)["label_noise"]
        True
        >>> thin = TextLabels([good] * 40 + [bad] * 10, np.array([1] * 40 + [0] * 10), 2)
        >>> thin.pair_test(0, 1, split, truth)["label_noise"]
        False
        """
        from scipy import sparse
        from scipy.stats import fisher_exact

        rows_t = np.flatnonzero(self.labels == b)
        lab = np.asarray(labels)
        rows_s = np.flatnonzero(lab == b)
        if not len(rows_t) or not len(rows_s):
            return {"label_noise": False, "train_rows": len(rows_t), "split_rows": len(rows_s)}
        t = self.agree(rows_t)
        cols = [[self.index[w] for w in set(inputs[i]) if w in self.index]
                for i in rows_s.tolist()]
        X = sparse.csr_matrix((np.ones(sum(map(len, cols))),
                               (np.repeat(np.arange(len(cols)), list(map(len, cols))),
                                np.fromiter((j for c in cols for j in c), np.int64))),
                              shape=(len(cols), len(self.vocab)))
        votes = np.mean([self._scores(X, k).argmax(1) == b for k in range(len(self.counts))],
                        axis=0)
        s_ok = votes >= 0.5
        p = float(fisher_exact([[int((~t).sum()), int(t.sum())],
                                [int((~s_ok).sum()), int(s_ok.sum())]],
                               alternative="greater")[1])
        gap = float(s_ok.mean() - t.mean())
        return {"train_agreement": round(float(t.mean()), 4),
                "split_agreement": round(float(s_ok.mean()), 4), "p_value": p,
                "label_noise": bool(p < NOISE_ALPHA and gap >= PAIR_GAP)}


def by_qvalues(p: Sequence[float]) -> np.ndarray:
    """Benjamini–Yekutieli q-values (false discovery rate under any dependence between the
    tests), by :func:`scipy.stats.false_discovery_control`.

    Examples
    --------
    >>> by_qvalues([0.001, 0.01, 0.5]).round(4).tolist()
    [0.0055, 0.0275, 0.9167]
    """
    p = np.asarray(p, float)
    return false_discovery_control(p, method="by") if len(p) else p
