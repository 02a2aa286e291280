"""Active extraction from a run: :func:`extract_dfa_active`, the model answering the
learner's questions (:mod:`~stateseer.abstraction.automata.dfa.active`), the recorded
traces answering what they already know.

What the traces supply, so the model is never asked again:

* the alphabet and the data's words (training split): the equivalence oracle's tests;
* the network's prediction after every prefix of those words (known answers);
* with an abstraction, the abstract state after every training prefix, which turns on
  the abstraction-guided counterexample search;
* held-out words (``select_split``, default ``val``) and the network's class of each,
  with ``mutants`` words near the training words (the model asked their class): every
  hypothesis is scored on them and the smallest within ``epsilon`` (one standard error)
  of the best wins;
* an evaluation split (default ``test``): the report's ``heldout_error`` beside
  ``majority_error`` (always answering the network's most frequent class).

Only two-class runs: the learner learns a language (accepted or not).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stateseer.abstraction.automata.dfa.active import learn_active
from stateseer.abstraction.automata.dfa.agreement import (
    _agreement,
    _grammar_check,
    training_statistics,
)
from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA
from stateseer.abstraction.automata.dfa.prefix_tree import (
    _alphabet,
    _alphabet_lookup,
    _prefix_tree,
    _tokenizer_of,
)
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.automaton import DFA
from stateseer.core.traces import SplitTraces, Traces

__all__ = ["accept_class_of", "extract_dfa_active", "split_words"]


def accept_class_of(classes: Sequence[str]) -> int:
    """The class a learnt language accepts: ``accept`` if there is one, else class 1 (as
    :attr:`ExtractedDFA.accept_class`)."""
    return list(classes).index("accept") if "accept" in classes else 1


def split_words(traces: Traces, split: str, alphabet: Sequence[str]
                ) -> tuple[list[tuple[str, ...]], np.ndarray]:
    """The words of ``split`` as symbol tuples, and which hold only ``alphabet``'s symbols,
    bool of shape (n_inputs,)."""
    st = traces[split]
    lookup = _alphabet_lookup(traces, tuple(alphabet))
    sym = lookup[np.asarray(st.surface_ids, np.int64)]
    offsets = np.asarray(st.offsets, np.int64)
    names = np.asarray([*alphabet, ""], dtype=object)
    flat = names[sym]  # -1 (unknown) -> ""
    words = [tuple(w) for w in np.split(flat, offsets[1:-1])] if len(offsets) > 1 else []
    bad = np.zeros(len(words), bool)
    if (sym < 0).any():
        bad[np.searchsorted(offsets, np.flatnonzero(sym < 0), side="right") - 1] = True
    return words, ~bad


def _prefix_answers(st: SplitTraces, words: list[tuple[str, ...]], accept: int,
                    empty: bool) -> dict[tuple[str, ...], bool]:
    """The recorded class (accepted or not) of every prefix of the split's words."""
    step = np.asarray(st.proba).argmax(axis=1) == accept
    offsets = np.asarray(st.offsets, np.int64)
    known: dict[tuple[str, ...], bool] = {(): empty}
    for w, a in zip(words, offsets[:-1].tolist(), strict=True):
        labels = step[a:a + len(w)].tolist()
        known.update((w[:k + 1], labels[k]) for k in range(len(w)))
    return known


def _initial_first(dfa: DFA) -> DFA:
    """The same automaton with its initial state numbered 0."""
    n = dfa.n_states
    order = np.r_[dfa.initial, np.delete(np.arange(n), dfa.initial)]
    new = np.empty(n, np.int64)
    new[order] = np.arange(n)
    return DFA(dfa.alphabet, new[np.asarray(dfa.transitions)[order]],
               np.asarray(dfa.accepting)[order], 0)


def extract_dfa_active(
    traces: Traces,
    answer: Callable[[list[list[str]]], Sequence[np.ndarray]],
    final: Callable[[list[list[str]]], np.ndarray] | None = None,
    *,
    abstract_states: np.ndarray | None = None,
    max_states: int = 200,
    seconds: float = 600.0,
    random_state: int = 0,
    algorithm: str = "kv",
    epsilon: float | None = None,
    walks: int = 2000,
    split: str = "train",
    select_split: str | None = "val",
    eval_split: str | None = "test",
    grammar: Any = None,
    tests_on: str = "auto",
    mutants: int = 0,
) -> ExtractedDFA:
    """Learn the run's automaton by asking its model (see the module notes).

    Parameters
    ----------
    traces : Traces
        The run's recorded traces (``split`` needed; ``select_split`` and ``eval_split``
        used when recorded).
    answer, final : callable
        The model, asked about words (lists of symbols): ``answer`` gives the accepted-or-not
        class after every prefix (bool arrays of shape (len(word) + 1,)), ``final`` that of
        each whole word (bool, shape (n_words,)).
    abstract_states : ndarray of shape (n_steps,), optional
        The abstract state of every step of ``split`` (the run's abstraction): turns on
        the abstraction-guided counterexample search.
    max_states, seconds : int, float
        Budgets of the learner.
    random_state : int
    algorithm : {"kv", "lstar"}
    epsilon : float, optional
        Held-out error within which the smallest hypothesis wins. Default: one standard
        error of the best one's, at least one word's worth
        (:func:`~.active.selection_epsilon`; a smaller difference is not evidence).
    walks : int
        Random words added to the equivalence tests.
    split, select_split, eval_split : str or None
    grammar : optional
        A known language (as in :func:`~stateseer.abstraction.automata.dfa.extract_dfa`).
    tests_on : {"auto", "prefixes", "words"}
        What the equivalence tests compare (:func:`~.active.learn_active`).
    mutants : int
        Words near the training words (one to three symbols replaced), their class asked
        of the model, that join ``select_split``'s words for the choice
        (:func:`~.active.mutant_words`).

    Returns
    -------
    ExtractedDFA
        ``report``: ``method`` (``active``), ``algorithm``, ``n_states``,
        ``membership_queries``, ``rounds``, ``seconds``, ``budget_exhausted``,
        ``test_words``, ``heldout_error`` and ``majority_error`` (on ``eval_split``),
        ``selection_error`` (on ``select_split``), ``counterexamples`` by source, the
        agreement figures of the refinement method and, for a built-in grammar, the
        grammar check.

    Raises
    ------
    AbstractionError
        Not two classes, an empty split, or abstract states of the wrong length.
    """
    t0 = time.perf_counter()
    classes = list(traces.classes)
    if len(classes) != 2:
        raise AbstractionError(
            f"active extraction learns a language of two classes; this run has "
            f"{len(classes)} ({', '.join(classes[:5])}); use --method refine")
    if split not in traces or traces[split].n_inputs == 0:
        raise AbstractionError(f"split {split!r} was not recorded or is empty; record the "
                               "run with `stateseer record RUN`")
    st = traces[split]
    accept = accept_class_of(classes)
    alphabet, lookup = _alphabet(traces, split)
    if not alphabet:
        raise AbstractionError(f"split {split!r} holds only empty strings; a DFA needs "
                               "strings with symbols")
    words, _ = split_words(traces, split, alphabet)
    p0 = np.asarray(traces.initial_proba, np.float64)
    known = _prefix_answers(st, words, accept, bool(p0.argmax() == accept))
    per_word = None
    if abstract_states is not None:
        abstract_states = np.asarray(abstract_states, np.int64).reshape(-1)
        if len(abstract_states) != len(st.surface_ids):
            raise AbstractionError(
                f"{len(abstract_states)} abstract states for {len(st.surface_ids)} steps of "
                f"split {split!r}; re-run `stateseer abstract RUN`")
        per_word = np.split(abstract_states, np.asarray(st.offsets)[1:-1])
    select, sel_n = None, 0
    if select_split is not None and select_split in traces and traces[select_split].n_inputs:
        s_words, ok = split_words(traces, select_split, alphabet)
        s_label = np.asarray(traces[select_split].final_proba).argmax(1) == accept
        select = ([w for w, k in zip(s_words, ok, strict=True) if k], s_label[ok])
        sel_n = int(ok.sum())
    res = learn_active(alphabet, answer, final=final, words=words, walks=walks,
                       max_states=max_states, seconds=seconds, seed=random_state,
                       algorithm=algorithm, known=known, abstract=per_word, select=select,
                       epsilon=epsilon, tests_on=tests_on, mutants=mutants)
    dfa = _initial_first(res.dfa)
    trans = np.asarray(dfa.transitions)
    cls = np.where(np.asarray(dfa.accepting), accept, 1 - accept).astype(np.int64)
    tree = _prefix_tree(st, lookup[np.asarray(st.surface_ids, np.int64)], len(alphabet),
                        np.asarray(traces.initial_hidden, np.float32), p0)
    stats = training_statistics(tree, st, trans, cls, p0, len(classes))
    sources: dict[str, int] = {}
    for h in res.history:
        if h.get("counterexample"):
            sources[h["counterexample"]] = sources.get(h["counterexample"], 0) + 1
    chosen = res.history[res.provenance["chosen_round"] - 1] if res.history else {}
    report: dict[str, Any] = {
        "method": "active", "algorithm": algorithm, "n_states": dfa.n_states,
        "max_states": int(max_states), "membership_queries": res.membership_queries,
        "rounds": res.rounds, "budget_exhausted": res.budget_ran_out,
        "test_words": res.test_words, "chosen_round": res.provenance["chosen_round"],
        "epsilon": round(float(res.provenance["epsilon"] or 0.0), 6),
        "selection_split": select_split if select else None,
        "n_selection_words": sel_n, "n_selection_mutants": res.provenance["mutants"],
        "selection_error": chosen.get("heldout_error"),
        "counterexamples": sources, "guided": per_word is not None,
        "tests_on": res.provenance["tests_on"],
        "off_data": dict(res.provenance["off_data"]),
        "train_agreement": stats["train_agreement"],
        "train_prefix_agreement": stats["train_prefix_agreement"],
        "seconds": round(time.perf_counter() - t0, 3),
        "history": [dict(h) for h in res.history],
    }
    info = {**dict(traces.provenance), "split": split, "max_states": int(max_states),
            "random_state": random_state,
            "method": f"active learning ({algorithm.upper()}) with the model as oracle",
            "traces": str(getattr(traces, "path", ""))}
    out = ExtractedDFA(alphabet=alphabet, classes=classes, transitions=trans,
                       state_class=cls, initial=0, visits=stats["visits"],
                       prediction=stats["prediction"], counts=stats["counts"],
                       tokenizer=_tokenizer_of(traces), report=report, info=info)
    if eval_split is not None and eval_split in traces and traces[eval_split].n_inputs:
        report.update(_agreement(traces, eval_split, _alphabet_lookup(traces, alphabet),
                                 trans, cls, 0))
        report["heldout_error"] = round(1.0 - report["agreement"], 6)
        train_major = int(np.bincount(np.asarray(st.final_proba).argmax(1),
                                      minlength=2).argmax())
        ev = np.asarray(traces[eval_split].final_proba).argmax(1)
        report["majority_error"] = round(float((ev != train_major).mean()), 6)
    report.update(_grammar_check(grammar, out))
    return out
