"""Active DFA extraction: the model is the oracle.

A learner (AALpy's L* or KV) asks the model for the class of any string it needs
(membership queries) and proposes hypotheses; an equivalence oracle looks for a string on
which a hypothesis and the model disagree. The model answers in batches: one pass over a
string gives its class after every prefix (the intermediate predictions stateseer
records), so every answer fills the cache for all the string's prefixes, and the
equivalence oracle's test strings (the data's words, random walks of the data's lengths)
are asked for all at once, then checked against each hypothesis in one vectorised run.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stateseer.core.automaton import DFA, minimize
from stateseer.core.errors import DataError

__all__ = ["ActiveResult", "learn_active"]

#: what the model is asked: words (each a list of symbols) -> per word, a bool array of
#: shape (len(word) + 1,): its class after each prefix, the empty prefix first
Answer = Callable[[list[list[str]]], Sequence[np.ndarray]]


@dataclass
class ActiveResult:
    """An actively learnt DFA and what learning it took.

    Attributes
    ----------
    dfa : DFA
        The last hypothesis, minimal and complete.
    membership_queries : int
        Distinct strings the model was asked about (each answers all its prefixes).
    rounds : int
        Hypotheses proposed (equivalence queries).
    seconds : float
    budget_ran_out : bool
        Learning stopped at ``max_states`` or ``seconds`` rather than with no
        counterexample left among the tests.
    test_words : int
        Strings the equivalence oracle checks every hypothesis on.
    """

    dfa: DFA
    membership_queries: int
    rounds: int
    seconds: float
    budget_ran_out: bool
    test_words: int
    method: str = "active"
    provenance: dict[str, Any] = field(default_factory=dict)


class _Answers:
    """The model's answers by string, every prefix of an asked string included."""

    def __init__(self, answer: Answer) -> None:
        self.answer, self.cache, self.asked = answer, {}, 0

    def fill(self, words: Sequence[tuple[str, ...]]) -> None:
        """Ask the model about the words not yet known, in one batch."""
        missing = [w for w in dict.fromkeys(words) if w not in self.cache]
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

    def __call__(self, word: tuple[str, ...]) -> bool:
        if word not in self.cache:
            self.fill([word])
        return self.cache[word]


def _sul(answers: _Answers) -> Any:
    from aalpy.base import SUL

    class ModelSUL(SUL):
        """AALpy's system under learning: whole strings, answered from the cache."""

        def query(self, word: tuple) -> list:
            self.num_queries += 1
            w = tuple(word)
            if not w:
                return [answers(())]
            answers.fill([w])
            return [answers.cache[w[:k]] for k in range(1, len(w) + 1)]

        def pre(self) -> None:  # whole strings only: query() never steps
            pass

        def post(self) -> None:
            pass

        def step(self, letter: Any) -> Any:
            raise NotImplementedError("the model answers whole strings (query)")

    return ModelSUL()


def to_dfa(hypothesis: Any, alphabet: Sequence[str]) -> DFA:
    """An AALpy ``Dfa`` as stateseer's complete :class:`~stateseer.core.automaton.DFA`."""
    states = list(hypothesis.states)
    index = {id(s): k for k, s in enumerate(states)}
    trans = np.array([[index[id(s.transitions[a])] for a in alphabet] for s in states],
                     np.int64)
    return DFA(tuple(alphabet), trans, np.array([bool(s.is_accepting) for s in states]),
               index[id(hypothesis.initial_state)])


def _oracle(alphabet: Sequence[str], sul: Any, answers: _Answers,
            tests: list[tuple[str, ...]], max_states: int, deadline: float) -> Any:
    from aalpy.base import Oracle

    dummy = DFA(tuple(alphabet), np.zeros((1, len(alphabet)), np.int64), [False])
    ids, lengths = dummy.encode(tests) if tests else (np.zeros((0, 0), np.int64),
                                                       np.zeros(0, np.int64))
    width = ids.shape[1] + 1
    truth = np.zeros((len(tests), width), bool)
    for b, w in enumerate(tests):  # the model's answers, padded as prefix_labels pads
        row = [answers.cache[w[:k]] for k in range(len(w) + 1)]
        truth[b] = row + [row[-1]] * (width - len(row))

    class TestOracle(Oracle):
        """The first test string (shortest first) whose some prefix the hypothesis and
        the model label differently; none once a budget has run out."""

        ran_out = False
        rounds = 0

        def find_cex(self, hypothesis: Any) -> tuple | None:
            self.rounds += 1
            if len(hypothesis.states) >= max_states or time.perf_counter() > deadline:
                self.ran_out = True
                return None
            if not len(tests):
                return None
            got = to_dfa(hypothesis, alphabet).prefix_labels(ids, lengths)
            bad = np.flatnonzero((got != truth).any(1))
            if not len(bad):
                return None
            b = int(bad[0])
            k = int(np.flatnonzero(got[b] != truth[b])[0])
            return tests[b][:max(k, 1)] if k else tests[b][:1]

    return TestOracle(list(alphabet), sul)


def learn_active(alphabet: Sequence[str], answer: Answer, *,
                 words: Sequence[Sequence[str]] = (), walks: int = 2000,
                 lengths: tuple[int, int] | None = None, max_states: int = 200,
                 seconds: float = 600.0, seed: int = 0, algorithm: str = "lstar"
                 ) -> ActiveResult:
    """Learn a DFA of what ``answer`` (the model) accepts, by asking it.

    Parameters
    ----------
    alphabet : sequence of str
        The symbols, shape (n_symbols,).
    answer : callable
        ``answer(list of words) -> per word a bool array of shape (len(word) + 1,)``: the
        model's class (accepted or not) after each prefix, the empty prefix first.
    words : sequence of sequence of str
        The data's words: tests for the equivalence oracle, with all their prefixes.
    walks : int
        Random strings added to the tests, their lengths drawn from ``words``' (or
        uniformly from ``lengths``, default 1 to 12 without words).
    max_states, seconds : int, float
        Budgets.
    seed : int
    algorithm : {"lstar", "kv"}

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
        raise DataError(f"unknown algorithm {algorithm!r}; choose lstar or kv")
    known = set(alphabet)
    data = [tuple(str(s) for s in w) for w in words]
    odd = next((s for w in data for s in w if s not in known), None)
    if odd is not None:
        raise DataError(f"the words hold {odd!r}, which is not in the alphabet")
    rng = np.random.default_rng(seed)
    if data:
        lens = rng.choice([len(w) for w in data], walks)
    else:
        lo, hi = lengths or (1, 12)
        lens = rng.integers(lo, hi + 1, walks)
    tests = sorted(set(data) | {tuple(rng.choice(alphabet, int(n))) for n in lens},
                   key=lambda w: (len(w), w))
    t0 = time.perf_counter()
    answers = _Answers(answer)
    answers.fill([(), *tests])
    sul = _sul(answers)
    oracle = _oracle(alphabet, sul, answers, tests, max_states, t0 + seconds)
    hyp = runs[algorithm](alphabet, sul, oracle, automaton_type="dfa",
                          cache_and_non_det_check=False, print_level=0)
    dfa = minimize(to_dfa(hyp, alphabet))
    return ActiveResult(dfa, answers.asked, oracle.rounds, round(time.perf_counter() - t0, 3),
                        oracle.ran_out, len(tests),
                        provenance={"algorithm": algorithm, "seed": seed, "walks": walks,
                                    "max_states": max_states, "seconds_budget": seconds})
