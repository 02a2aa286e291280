"""Active DFA extraction: the model is the oracle.

A learner (AALpy's L* or KV) asks the model for the class of any string it needs
(membership queries) and proposes hypotheses; an equivalence oracle looks for a string on
which a hypothesis and the model disagree. The model answers in batches: one pass over a
string gives its class after every prefix (the intermediate predictions stateseer
records), so every answer fills the cache for all the string's prefixes, and the
equivalence oracle's test strings (the data's words, random walks of the data's lengths)
are asked for all at once, then checked against each hypothesis in one vectorised run.

Membership queries (the learner's, one string at a time) need only the class of the
whole string; given ``final`` the model is asked for that alone (a cheap call), and every
answer is cached. When the fixed tests find no counterexample, two searches made for the
current hypothesis run, each asked of the model in one batch:

* **abstraction-guided**: the data's prefixes that reach the same hypothesis state but
  lie in different abstract states of the network (its clustered hidden states) are where
  the hypothesis may have merged what the network keeps apart (Weiss, Goldberg & Yahav
  2018); one prefix per (hypothesis state, abstract state) is extended by the data's
  suffixes and checked;
* **state coverage**: every hypothesis state's access string, extended by random walks
  (AALpy's random W-method oracle, batched).

Selection: with held-out words (``select``), every hypothesis is scored on them, and the
smallest one within ``epsilon`` of the best held-out error is returned.

Budgets: ``max_states`` (a hypothesis that large is returned as it is) and ``seconds``
(checked between hypotheses); :class:`ActiveResult` says whether either ran out.

Examples
--------
>>> def parity(words):  # a "model" that accepts an even number of 1s, after every prefix
...     return [np.r_[True, np.cumsum([w == "1" for w in word]) % 2 == 0] for word in words]
>>> res = learn_active(("0", "1"), parity, seed=0)
>>> res.dfa.n_states, res.budget_ran_out
(2, False)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stateseer.core.automaton import DFA, minimize
from stateseer.core.errors import DataError

__all__ = ["ActiveResult", "learn_active", "mutant_words", "selection_epsilon", "to_dfa"]

#: what the model is asked: words (each a list of symbols) -> per word, a bool array of
#: shape (len(word) + 1,): its class after each prefix, the empty prefix first
Answer = Callable[[list[list[str]]], Sequence[np.ndarray]]
#: the cheap question: words -> whether each whole word is accepted, bool of shape (n,)
Final = Callable[[list[list[str]]], np.ndarray]


@dataclass
class ActiveResult:
    """An actively learnt DFA and what learning it took.

    Attributes
    ----------
    dfa : DFA
        The chosen hypothesis, minimal and complete: the last one, or with ``select`` the
        smallest within ``epsilon`` of the best held-out error.
    membership_queries : int
        Distinct strings the model was asked about.
    rounds : int
        Hypotheses proposed (equivalence queries).
    seconds : float
    budget_ran_out : bool
        Learning stopped at ``max_states`` or ``seconds`` rather than with no
        counterexample left among the tests.
    test_words : int
        Strings the equivalence oracle checks every hypothesis on.
    history : list of dict
        Per hypothesis: ``n_states``, ``heldout_error`` (with ``select``) and where its
        counterexample came from (``tests``, ``guided``, ``coverage`` or None).
    """

    dfa: DFA
    membership_queries: int
    rounds: int
    seconds: float
    budget_ran_out: bool
    test_words: int
    history: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)


class _Answers:
    """The model's answers by string; a string asked with every prefix fills them all."""

    def __init__(self, answer: Answer, final: Final | None = None) -> None:
        self.answer, self.final, self.cache, self.asked = answer, final, {}, 0

    def fill(self, words: Sequence[tuple[str, ...]]) -> None:
        """Ask the model about every prefix of the words, in one batch."""
        missing = [w for w in dict.fromkeys(words)
                   if not all(w[:k] in self.cache for k in range(len(w), -1, -1))]
        if not missing:
            return
        out = self.answer([list(w) for w in missing])
        self.asked += len(missing)
        for w, labels in zip(missing, out, strict=True):
            labels = np.asarray(labels, bool)
            if labels.shape != (len(w) + 1,):
                raise DataError(f"the model answered {labels.shape[0]} prefixes for a word "
                                f"of {len(w)} symbols; answer len(word) + 1 (the empty "
                                "prefix first)")
            for k in range(len(w) + 1):
                self.cache.setdefault(w[:k], bool(labels[k]))

    def last(self, words: Sequence[tuple[str, ...]]) -> np.ndarray:
        """Whether each whole word is accepted, bool of shape (n,), asked in one batch."""
        missing = [w for w in dict.fromkeys(words) if w not in self.cache]
        if missing and self.final is None:
            self.fill(missing)
        elif missing:
            got = np.asarray(self.final([list(w) for w in missing]), bool).reshape(-1)
            if got.shape != (len(missing),):
                raise DataError(f"the model answered {got.shape[0]} words of {len(missing)}; "
                                "answer one class per word")
            self.asked += len(missing)
            self.cache.update(zip(missing, got.tolist(), strict=True))
        return np.fromiter((self.cache[w] for w in words), bool, len(words))

    def __call__(self, word: tuple[str, ...]) -> bool:
        if word not in self.cache:
            self.last([word])
        return self.cache[word]


class _Outputs(Sequence):
    """AALpy's answer to a query: the class after each symbol of ``word``. The learners
    of a DFA read the last one only, so that is asked alone; any other is asked with
    every prefix."""

    def __init__(self, answers: _Answers, word: tuple[str, ...]) -> None:
        self.answers, self.word = answers, word

    def __len__(self) -> int:
        return max(len(self.word), 1)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = i + len(self) if i < 0 else i
        if not 0 <= i < len(self):
            raise IndexError(i)
        if not self.word or i == len(self) - 1:
            return self.answers(self.word)
        self.answers.fill([self.word])
        return self.answers.cache[self.word[:i + 1]]


def _sul(answers: _Answers) -> Any:
    from aalpy.base import SUL

    class ModelSUL(SUL):
        """AALpy's system under learning: whole strings, answered from the cache."""

        def query(self, word: tuple) -> Any:
            self.num_queries += 1
            return _Outputs(answers, tuple(word))

        def pre(self) -> None:  # whole strings only: query() never steps
            pass

        def post(self) -> None:
            pass

        def step(self, letter: Any) -> Any:
            raise NotImplementedError("the model answers whole strings (query)")

    return ModelSUL()


def to_dfa(hypothesis: Any, alphabet: Sequence[Any]) -> DFA:
    """An AALpy ``Dfa`` as stateseer's complete :class:`~stateseer.core.automaton.DFA`
    (``alphabet``: AALpy's input symbols, in the order wanted; the DFA's are their
    strings)."""
    states = list(hypothesis.states)
    index = {id(s): k for k, s in enumerate(states)}
    trans = np.array([[index[id(s.transitions[a])] for a in alphabet] for s in states],
                     np.int64)
    return DFA(tuple(alphabet), trans, np.array([bool(s.is_accepting) for s in states]),
               index[id(hypothesis.initial_state)])


def _encode(alphabet: Sequence[str], words: Sequence[tuple[str, ...]]
            ) -> tuple[np.ndarray, np.ndarray]:
    """Padded symbol ids (B, T) and lengths (B,) of words over ``alphabet``."""
    index = {a: i for i, a in enumerate(alphabet)}
    lengths = np.fromiter(map(len, words), np.int64, len(words))
    ids = np.zeros((len(words), int(lengths.max(initial=0))), np.int64)
    flat = np.fromiter((index[s] for w in words for s in w), np.int64, int(lengths.sum()))
    ids[np.arange(ids.shape[1])[None, :] < lengths[:, None]] = flat
    return ids, lengths


@dataclass
class _Search:
    """What the equivalence oracle tests, beyond the fixed words.

    ``guide_words``/``guide_ids``/``guide_lengths`` and ``abstract`` (B, T): the data's
    words and the network's abstract state after each of their prefixes (-1 past the
    end); ``suffixes``: suffixes appended in the guided search; ``walks_per_state``,
    ``walk_lengths``: the state-coverage walks.
    """

    alphabet: list[str]
    rng: np.random.Generator
    guide_words: list[tuple[str, ...]] = field(default_factory=list)
    abstract: np.ndarray | None = None
    suffixes: list[tuple[str, ...]] = field(default_factory=list)
    walks_per_state: int = 10
    walk_lengths: np.ndarray = field(default_factory=lambda: np.arange(1, 13))
    per_round: int = 4000

    def __post_init__(self) -> None:
        self.guide_ids, self.guide_lengths = _encode(self.alphabet, self.guide_words)

    def guided(self, dfa: DFA) -> list[tuple[str, ...]]:
        """One data prefix per (hypothesis state, abstract state) pair, in hypothesis
        states that hold several abstract states, extended by the suffixes."""
        if self.abstract is None or not self.suffixes or not self.abstract.size:
            return []
        hyp = dfa.run_batch(self.guide_ids, self.guide_lengths)  # (B, T + 1)
        b, t = np.nonzero(self.abstract >= 0)
        # the empty prefix is an abstract state of its own (the FSM's initial state)
        b, t = np.r_[0, b], np.r_[-1, t]
        ab = np.r_[int(self.abstract.max()) + 1, self.abstract[b[1:], t[1:]]]
        q = hyp[b, t + 1]
        key = q * (int(ab.max()) + 1) + ab
        order = np.lexsort((t, key))  # shortest prefix first within a pair
        first = order[np.r_[True, key[order][1:] != key[order][:-1]]]
        shared = np.isin(q[first], np.flatnonzero(np.bincount(q[first]) > 1))
        first = first[shared]
        n_suffix = max(1, self.per_round // max(len(first), 1))
        first = first[:self.per_round]
        out = []
        for k in first.tolist():
            prefix = self.guide_words[b[k]][:t[k] + 1]
            pick = self.rng.choice(len(self.suffixes), min(n_suffix, len(self.suffixes)),
                                   replace=False)
            out.extend(prefix + self.suffixes[j] for j in pick.tolist())
        return out

    def coverage(self, hypothesis: Any) -> list[tuple[str, ...]]:
        """Each hypothesis state's access string, extended by random walks."""
        out = []
        for state in hypothesis.states:
            lens = self.rng.choice(self.walk_lengths, self.walks_per_state)
            for n in lens.tolist():
                out.append(tuple(state.prefix) + tuple(self.rng.choice(self.alphabet, n)))
        return out[:self.per_round * 2]


#: levels of the classification tree asked ahead per batch while sifting (speculatively:
#: the queries of every internal node within this many levels below a word's node)
SIFT_AHEAD = 6


def _prefetch_sifts(root: Any, words: list[tuple[str, ...]], answers: _Answers) -> None:
    """Ask the model, in batches, every query that sifting ``words`` through AALpy's
    classification tree will ask: KV's hypothesis update then sifts them one query at a
    time from the cache. A model asked one short word at a time spends most of its time
    in per-call overhead (0.5 ms a word on TAYSIR's SRNs); a batch holds, for each word
    still sifting, the queries of its node and of the internal nodes up to
    :data:`SIFT_AHEAD` levels below it (a few unneeded queries for a few times fewer
    calls)."""
    nodes = [root] * len(words)
    live = [i for i in range(len(words)) if not root.is_leaf()]
    while live:
        queries = []
        for i in live:
            frontier = [nodes[i]]
            for _ in range(SIFT_AHEAD):
                below = []
                for n in frontier:
                    queries.append(words[i] + n.distinguishing_string)
                    below += [c for c in n.children.values() if not c.is_leaf()]
                frontier = below
        answers.last(queries)
        nxt = []
        for i in live:  # down the tree as far as the answers now go
            n = nodes[i]
            while n is not None and (q := words[i] + n.distinguishing_string) in answers.cache:
                child = n.children.get(answers.cache[q])
                n = child if child is not None and not child.is_leaf() else None
                if n is not None:
                    nodes[i] = n
            if n is not None:
                nxt.append(i)
        live = nxt


@contextmanager
def _batched_sifting(answers: _Answers, on: bool) -> Iterator[None]:
    """While learning with KV, its classification tree asks the model in batches: each
    hypothesis update's sifting queries (:func:`_prefetch_sifts`) and every query the
    Rivest-Schapire search of a counterexample may ask; the tree, its answers and so the
    hypotheses are the same."""
    if not on:
        yield
        return
    import aalpy.learning_algs.deterministic.KV as kv
    from aalpy.learning_algs.deterministic.ClassificationTree import ClassificationTree

    class BatchedTree(ClassificationTree):
        def update_hypothesis(self) -> Any:
            words = [(*n.access_string, a) for n in self.new_states for a in self.alphabet]
            words += [(*s.prefix, a) for s, a in self.transitions_to_update]
            _prefetch_sifts(self.root, words, answers)
            return super().update_hypothesis()

        def process_counterexample(self, cex: tuple, hypothesis: Any,
                                   cex_processing_fun: str) -> None:
            if cex_processing_fun == "rs":  # every query its binary search may ask
                words = [tuple(cex)]
                hypothesis.reset_to_initial()
                for mid in range(1, len(cex) - 1):
                    hypothesis.step(cex[mid - 1])
                    words.append(tuple(hypothesis.current_state.prefix) + tuple(cex[mid:]))
                answers.last(words)
            return super().process_counterexample(cex, hypothesis, cex_processing_fun)

    kv.ClassificationTree = BatchedTree
    try:
        yield
    finally:
        kv.ClassificationTree = ClassificationTree


def _oracle(alphabet: Sequence[str], sul: Any, answers: _Answers,
            tests: list[tuple[str, ...]], search: _Search, select: Any, max_states: int,
            deadline: float, whole: bool = False) -> Any:
    from aalpy.base import Oracle

    ids, lengths = _encode(alphabet, tests)
    width = ids.shape[1] + 1
    truth = np.zeros((len(tests), width), bool)
    for b, w in enumerate(tests):  # the model's answers, padded as prefix_labels pads
        row = [answers.cache[w[:k]] for k in range(len(w) + 1)]
        truth[b] = row + [row[-1]] * (width - len(row))
    sel_ids, sel_len, sel_truth = select if select is not None else (None, None, None)

    class TestOracle(Oracle):
        """The first test string (shortest first) whose some prefix the hypothesis and
        the model label differently; then the guided and coverage searches; none once a
        budget has run out."""

        def __init__(self) -> None:
            super().__init__(list(alphabet), sul)
            self.ran_out, self.rounds = False, 0
            self.history: list[dict[str, Any]] = []
            self.kept: list[DFA] = []

        def find_cex(self, hypothesis: Any) -> tuple | None:
            self.rounds += 1
            dfa = to_dfa(hypothesis, alphabet)
            entry: dict[str, Any] = {"n_states": dfa.n_states, "counterexample": None}
            if sel_ids is not None:
                got = dfa.prefix_labels(sel_ids, sel_len)[np.arange(len(sel_len)), sel_len]
                entry["heldout_error"] = float((got != sel_truth).mean())
            self.history.append(entry)
            self.kept.append(dfa)
            if len(hypothesis.states) >= max_states or time.perf_counter() > deadline:
                self.ran_out = True
                return None
            cex = self._tests(dfa)
            entry["counterexample"] = "tests" if cex is not None else None
            for name, found in (("guided", search.guided), ("coverage", search.coverage)):
                if cex is None:
                    words = found(dfa if name == "guided" else hypothesis)
                    cex = self._first_wrong(dfa, words)
                    entry["counterexample"] = name if cex is not None else None
            return cex

        def _tests(self, dfa: DFA) -> tuple | None:
            if not len(tests):
                return None
            got = dfa.prefix_labels(ids, lengths)
            if whole:  # the words as they are; their prefixes are no tests of their own
                rows = np.arange(len(lengths))
                bad = np.flatnonzero(got[rows, lengths] != truth[rows, lengths])
                return tests[int(bad[0])] if len(bad) else None
            bad = np.flatnonzero((got != truth).any(1))
            if not len(bad):
                return None
            b = int(bad[0])
            k = int(np.flatnonzero(got[b] != truth[b])[0])
            return tests[b][:max(k, 1)]

        def _first_wrong(self, dfa: DFA, words: list[tuple[str, ...]]) -> tuple | None:
            words = [w for w in dict.fromkeys(words) if w]
            if not words:
                return None
            want = answers.last(words)
            w_ids, w_len = _encode(alphabet, words)
            got = dfa.prefix_labels(w_ids, w_len)[np.arange(len(words)), w_len]
            bad = np.flatnonzero(got != want)
            if not len(bad):
                return None
            return min((words[i] for i in bad.tolist()), key=len)

    return TestOracle()


def _choose(history: list[dict[str, Any]], epsilon: float | None) -> int:
    """The smallest hypothesis within ``epsilon`` of the best held-out error (the last
    one without held-out words)."""
    if not history or "heldout_error" not in history[0]:
        return len(history) - 1
    errors = np.array([h["heldout_error"] for h in history])
    sizes = np.array([h["n_states"] for h in history])
    # errors are counts over the held-out words: k/n + 1/n can round below (k+1)/n (at
    # n = 68, 3/68 > 2/68 + 1/68), so "one word's worth" needs a tolerance
    ok = np.flatnonzero(errors <= errors.min() + epsilon + 1e-9)
    return int(ok[np.lexsort((-ok, errors[ok], sizes[ok]))[0]])


def selection_epsilon(best: float, n: int) -> float:
    """One standard error of an error rate ``best`` measured on ``n`` words, at least one
    word's worth (``1 / n``): the default ``epsilon`` (a smaller difference is not
    evidence; Breiman et al.'s one-standard-error rule).

    >>> round(selection_epsilon(0.0, 200), 4), round(selection_epsilon(0.02, 5000), 4)
    (0.005, 0.002)
    """
    n = max(int(n), 1)
    return max(1.0 / n, float(np.sqrt(best * (1.0 - best) / n)))


def mutant_words(words: Sequence[tuple[str, ...]], n: int, alphabet: Sequence[str],
                 rng: np.random.Generator) -> list[tuple[str, ...]]:
    """``n`` copies of randomly drawn non-empty ``words``, each with one to three of its
    symbols (drawn with replacement) replaced by uniformly drawn ones: words near the
    data, where the model's class is asked, not known.

    >>> w = mutant_words([("a", "b", "a")], 4, ("a", "b"), np.random.default_rng(0))
    >>> len(w), all(len(x) == 3 for x in w)
    (4, True)
    """
    pool = [w for w in words if w]
    if not pool or n <= 0:
        return []
    out = []
    symbols = np.asarray(list(alphabet), dtype=object)
    for i in rng.integers(0, len(pool), n).tolist():
        w = list(pool[i])
        at = rng.integers(0, len(w), int(rng.integers(1, 4)))
        for j, s in zip(at.tolist(), symbols[rng.integers(0, len(symbols), len(at))].tolist(),
                        strict=True):
            w[j] = s
        out.append(tuple(w))
    return out


def learn_active(alphabet: Sequence[str], answer: Answer, *,
                 final: Final | None = None,
                 words: Sequence[Sequence[str]] = (), walks: int = 2000,
                 lengths: tuple[int, int] | None = None, max_states: int = 200,
                 seconds: float = 600.0, seed: int = 0, algorithm: str = "kv",
                 known: dict[tuple[str, ...], bool] | None = None,
                 abstract: Sequence[np.ndarray] | None = None,
                 select: tuple[Sequence[Sequence[str]], np.ndarray] | None = None,
                 epsilon: float | None = None, walks_per_state: int = 10,
                 tests_on: str = "auto", mutants: int = 0) -> ActiveResult:
    """Learn a DFA of what ``answer`` (the model) accepts, by asking it.

    Parameters
    ----------
    alphabet : sequence of str
        The symbols, shape (n_symbols,).
    answer : callable
        ``answer(list of words) -> per word a bool array of shape (len(word) + 1,)``: the
        model's class (accepted or not) after each prefix, the empty prefix first.
    final : callable, optional
        ``final(list of words) -> bool array of shape (n_words,)``: the class of each
        whole word (cheaper; the learner's membership queries use it). Default: from
        ``answer``.
    words : sequence of sequence of str
        The data's words: tests for the equivalence oracle, with all their prefixes, and
        the prefixes and suffixes of the guided search.
    walks : int
        Random strings added to the tests, their lengths drawn from ``words``' (or
        uniformly from ``lengths``, default 1 to 12 without words).
    max_states, seconds : int, float
        Budgets.
    seed : int
    algorithm : {"kv", "lstar"}
    known : dict, optional
        Answers already known (a string's class, e.g. the recorded predictions of every
        prefix of the data's words): never asked again.
    abstract : sequence of ndarray, optional
        Per word of ``words``, the network's abstract state after each prefix, shape
        (len(word),): turns on the abstraction-guided counterexample search.
    select : (words, labels), optional
        Held-out words and the model's class of each (bool, shape (n,)): every hypothesis
        is scored on them and the smallest within ``epsilon`` of the best error wins.
    epsilon : float, optional
        Default: one standard error of the best error, at least one word's worth
        (:func:`selection_epsilon`).
    mutants : int
        Words near the data (:func:`mutant_words` of ``words``, seeded apart from the
        tests), their class asked of the model, added to the held-out words: a choice
        read on a few hundred words cannot tell hypotheses a few errors apart.
    walks_per_state : int
        Random walks per hypothesis state in the state-coverage search (0: none).
    tests_on : {"auto", "prefixes", "words"}
        What the fixed tests compare: the class after every prefix of each test word (a
        counterexample is the shortest wrong prefix), or each whole word's class only.
        ``auto``: whole words. The data's labels are the whole words' classes, and an
        automaton is scored on whole words; the class of a prefix that is not itself a
        data word is behaviour the data never ask, and copying it costs states and
        accuracy off the data (TAYSIR 1.1: 0.062 held-out error with 5,439 states
        against 0.109 with 7,544; 1.10: see the automata guide). Where the data hold
        every prefix (Tomita samples), the two compare the same strings.

    Returns
    -------
    ActiveResult

    Raises
    ------
    DataError
        An empty alphabet, an unknown algorithm, a word with a symbol outside the
        alphabet, or answers of the wrong shape (one line each).
    """
    from aalpy.learning_algs import run_KV, run_Lstar

    alphabet = [str(a) for a in alphabet]
    if not alphabet:
        raise DataError("active extraction needs a non-empty alphabet")
    runs = {"lstar": run_Lstar, "kv": run_KV}
    if algorithm not in runs:
        raise DataError(f"unknown algorithm {algorithm!r}; choose kv or lstar")
    if tests_on not in ("auto", "prefixes", "words"):
        raise DataError(f"unknown tests_on {tests_on!r}; choose auto, prefixes or words")
    known_symbols = set(alphabet)
    data = [tuple(str(s) for s in w) for w in words]
    held = [tuple(str(s) for s in w) for w in select[0]] if select is not None else []
    odd = next((s for w in data + held for s in w if s not in known_symbols), None)
    if odd is not None:
        raise DataError(f"the words hold {odd!r}, which is not in the alphabet")
    if abstract is not None and len(abstract) != len(data):
        raise DataError(f"abstract states are given for {len(abstract)} words of "
                        f"{len(data)}; give one array per word")
    rng = np.random.default_rng(seed)
    if tests_on == "auto":
        tests_on = "words"
    data_lengths = np.array([len(w) for w in data if w]) if data else None
    if data_lengths is not None and len(data_lengths):
        lens = rng.choice(data_lengths, walks)
    else:
        lo, hi = lengths or (1, 12)
        data_lengths = np.arange(lo, hi + 1)
        lens = rng.integers(lo, hi + 1, walks)
    # the data's words first (shortest first), then the walks: a hypothesis is fixed where
    # the data go before it is fixed elsewhere
    in_data = set(data)
    tests = sorted(in_data | set(_random_words(alphabet, lens, rng)),
                   key=lambda w: (w not in in_data, len(w), w))
    t0 = time.perf_counter()
    answers = _Answers(answer, final)
    if known:
        answers.cache.update({tuple(k): bool(v) for k, v in known.items()})
    answers.fill([(), *tests])
    search = _Search(alphabet, rng, guide_words=data if abstract is not None else [],
                     abstract=_pad_states(abstract, data) if abstract is not None else None,
                     suffixes=sorted({w[i:] for w in data for i in range(1, len(w))})[:20000],
                     walks_per_state=walks_per_state,
                     walk_lengths=np.unique(np.maximum(data_lengths // 2, 1)))
    sel = None
    near = mutant_words(data, mutants, alphabet, np.random.default_rng([seed, 1]))
    if select is not None or near:
        given = np.asarray(select[1], bool).reshape(-1) if select is not None else []
        s_ids, s_len = _encode(alphabet, held + near)
        sel = (s_ids, s_len, np.r_[given, answers.last(near)].astype(bool))
    sul = _sul(answers)
    oracle = _oracle(alphabet, sul, answers, tests, search, sel, max_states, t0 + seconds,
                     whole=tests_on == "words")
    with _batched_sifting(answers, algorithm == "kv"):
        runs[algorithm](alphabet, sul, oracle, automaton_type="dfa",
                        cache_and_non_det_check=False, print_level=0)
    n_select = 0 if sel is None else len(sel[1])
    if epsilon is None and sel is not None and oracle.history:
        epsilon = selection_epsilon(min(h["heldout_error"] for h in oracle.history),
                                    n_select)
    pick = _choose(oracle.history, epsilon)
    dfa = minimize(oracle.kept[pick])
    off = _off_data(dfa, alphabet, answers, data, data_lengths, min(1000, max(walks, 100)),
                    np.random.default_rng([seed, 2]))
    return ActiveResult(dfa, answers.asked, oracle.rounds, round(time.perf_counter() - t0, 3),
                        oracle.ran_out, len(tests), history=oracle.history,
                        provenance={"algorithm": algorithm, "seed": seed, "walks": walks,
                                    "max_states": max_states, "seconds_budget": seconds,
                                    "epsilon": epsilon, "chosen_round": pick + 1,
                                    "guided": abstract is not None,
                                    "walks_per_state": walks_per_state,
                                    "tests_on": tests_on, "mutants": len(near),
                                    "n_select": n_select, "off_data": off})


def _off_data(dfa: DFA, alphabet: Sequence[str], answers: _Answers,
              data: list[tuple[str, ...]], lengths: np.ndarray, n: int,
              rng: np.random.Generator) -> dict[str, Any]:
    """The chosen automaton on ``n`` random words of the data's lengths that neither the
    learner nor the choice saw (drawn apart from the tests), against the model, beside
    always answering the model's majority class of the data's words: an automaton chosen
    on a few hundred held-out words can be right there and worse than the majority off
    the data (TAYSIR 1.10 on a fresh split: 0.49 of such words wrong)."""
    words = _random_words(alphabet, rng.choice(lengths, n), rng)
    truth = answers.last(words)
    got = dfa.accepts(words)
    seen = [w for w in data if w]
    major = bool(answers.last(seen).mean() >= 0.5) if seen else bool(truth.mean() >= 0.5)
    return {"n_words": len(words), "error": round(float((got != truth).mean()), 6),
            "majority_error": round(float((truth != major).mean()), 6)}


def _random_words(alphabet: Sequence[str], lengths: np.ndarray, rng: np.random.Generator
                  ) -> list[tuple[str, ...]]:
    """One word of uniformly drawn symbols per length in ``lengths``."""
    return [tuple(rng.choice(alphabet, int(k))) for k in lengths]


def _pad_states(abstract: Sequence[np.ndarray], data: list[tuple[str, ...]]) -> np.ndarray:
    """Per-word abstract states as one (B, T) array, -1 past each word's end."""
    width = max((len(w) for w in data), default=0)
    out = np.full((len(data), width), -1, np.int64)
    for b, (w, s) in enumerate(zip(data, abstract, strict=True)):
        s = np.asarray(s, np.int64).reshape(-1)
        if len(s) != len(w):
            raise DataError(f"word {b} has {len(w)} symbols but {len(s)} abstract states; "
                            "give one per prefix")
        out[b, :len(w)] = s
    return out
