"""The extraction: :func:`extract_dfa` strings the stages of
:mod:`stateseer.abstraction.automata.dfa` together."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from stateseer.abstraction.automata.dfa.agreement import (
    _agreement,
    _grammar_check,
    training_statistics,
)
from stateseer.abstraction.automata.dfa.approximate import eval_set, lossless_merge, relabel, shrink
from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA
from stateseer.abstraction.automata.dfa.minimise import _minimise
from stateseer.abstraction.automata.dfa.prefix_tree import (
    _alphabet,
    _alphabet_lookup,
    _prefix_tree,
    _tokenizer_of,
    _weighted,
    _with_extra,
)
from stateseer.abstraction.automata.dfa.refine import _initial_partition, complete, refine
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.traces import SplitTraces, Traces

__all__ = ["extract_dfa", "training_alphabet"]


def training_alphabet(traces: Traces, split: str = "train") -> tuple[str, ...]:
    """The sorted symbols of ``split``: the alphabet :func:`extract_dfa` gives the DFA."""
    return _alphabet(traces, split)[0]


def _is_count(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1


def _check_params(traces: Traces, split: str, max_states: Any, initial_states: Any
                  ) -> SplitTraces:
    """The split to extract from, after one-line checks of the parameters."""
    if not _is_count(max_states):
        raise AbstractionError(f"max_states must be a positive integer, not {max_states!r}")
    if initial_states is not None and not (isinstance(initial_states, (int, np.integer))
                                           and initial_states >= 1):
        raise AbstractionError(
            f"initial_states must be a positive integer or None, not {initial_states!r}"
        )
    if initial_states is not None and initial_states > max_states:
        raise AbstractionError(
            f"initial_states={initial_states} exceeds max_states={max_states}; raise "
            "max_states or lower initial_states"
        )
    if split not in traces:
        raise AbstractionError(
            f"split {split!r} was not recorded; record it with `stateseer record RUN`"
        )
    st = traces[split]
    if st.n_inputs == 0:
        raise AbstractionError(
            f"split {split!r} of the traces is empty; record a data set with training strings"
        )
    return st


def extract_dfa(
    traces: Traces,
    *,
    max_states: int = 200,
    initial_states: int | None = None,
    random_state: int | None = 0,
    split: str = "train",
    eval_split: str | None = "test",
    max_rounds: int = 10_000,
    grammar: Any = None,
    states: int | None = None,
    extra: Sequence[tuple[SplitTraces, int]] = (),
    fit_len: int = 12,
    time_limit: float = 6.0,
) -> ExtractedDFA:
    """Extract a deterministic, complete, minimal automaton from recorded traces.

    See the module docstring for the algorithm. Everything that touches all hidden states
    is vectorised; Python loops run over refinement rounds and split states only.

    Parameters
    ----------
    traces : stateseer.core.traces.Traces
        Recorded traces of a run (``stateseer record RUN``). ``traces[split]`` supplies
        ``hidden`` (n_steps, state_size), ``proba`` (n_steps, n_classes), ``surface_ids``
        and ``offsets``; ``initial_hidden`` (state_size,) and ``initial_proba``
        (n_classes,) stand for the empty prefix.
    max_states : int, default 200
        Budget of states *before* minimisation. When the budget is reached refinement
        stops, and the automaton is completed with majority transitions (still a valid,
        complete DFA); ``report["budget_exhausted"]`` then says so.
    initial_states : int or None, default None
        Start from this many k-means states (split by predicted class) instead of one state
        per predicted class.
    random_state : int or None, default 0
        Seed of the k-means start (the default start is deterministic).
    split : str, default 'train'
        Split whose traces build the automaton.
    eval_split : str or None, default 'test'
        Split on which agreement with the RNN is measured (skipped if None or not recorded).
    max_rounds : int, default 10_000
        Safety cap on refinement rounds.
    grammar : DFA or Grammar, optional
        The language the RNN was trained on, if known (e.g.
        ``stateseer.rnn_models.formal.GRAMMARS[name]``): the report then compares the automaton with
        it on every string of length at most 12.
    states : int, optional
        At most this many states in the result (after minimisation). The refined automaton
        is then shrunk by :func:`stateseer.abstraction.automata.dfa.approximate.shrink`: states
        whose
        behaviour agrees are merged, and the smallest-enough automaton that agrees most
        with the RNN is polished. Default: the refined automaton, minimised (exact on the
        training prefixes when the budget allows).
    extra : sequence of (SplitTraces, int)
        More traced strings and the weight of each: e.g. strings sampled to check the
        automaton (weight 1), or the user's examples (a weight larger than the training
        set, so refinement resolves their conflicts first and the votes follow them).
        Their symbols must occur in ``split``.
    fit_len : int, default 12
        With ``states``: agreement is maximised on the prefixes of length <= ``fit_len``,
        every length weighted by its share of all strings up to that length.
    time_limit : float, default 6.0
        With ``states``: seconds (from the start of the call) after which polishing stops.

    Returns
    -------
    ExtractedDFA
        With ``report`` keys ``n_states``, ``n_states_before_minimisation``,
        ``n_initial_states``, ``refinement_rounds``, ``budget_exhausted``,
        ``deterministic`` (no conflict left on the training prefixes),
        ``conflicting_steps`` (training steps whose transition disagrees with the majority
        transition of their abstract state, before minimisation),
        ``train_prefix_agreement``, ``seconds`` (extraction, without the evaluation),
        ``agreement`` / ``prefix_agreement`` / ``agreement_le12`` on ``eval_split`` and,
        for a built-in grammar, ``grammar_agreement_le12`` and ``minimal_size_match``.

    Raises
    ------
    AbstractionError
        Empty split, NaN hidden states, or ``max_states`` below the number of predicted
        classes (or below ``initial_states``).
    """
    t_start = time.perf_counter()
    st = _check_params(traces, split, max_states, initial_states)
    classes = list(traces.classes)
    n_classes = len(classes)
    alphabet, lookup = _alphabet(traces, split)
    if not alphabet:
        raise AbstractionError(
            f"split {split!r} holds only empty strings; a DFA needs strings with symbols"
        )
    n_sym = len(alphabet)
    p0 = np.asarray(traces.initial_proba, dtype=np.float64)
    tree = _prefix_tree(st, lookup[np.asarray(st.surface_ids, dtype=np.int64)], n_sym,
                        np.asarray(traces.initial_hidden, dtype=np.float32), p0)
    base = tree
    if extra:
        st, sym, weights = _with_extra(st, lookup[np.asarray(st.surface_ids, dtype=np.int64)],
                                       list(extra), alphabet)
        tree = _prefix_tree(st, sym, n_sym, np.asarray(traces.initial_hidden, np.float32), p0)
        work = _weighted(tree, st.offsets, weights)
    else:
        work = tree
    n_pred = len(np.unique(tree.pred))
    if max_states < n_pred:
        raise AbstractionError(
            f"max_states={max_states} cannot separate the {n_pred} classes the RNN predicts; "
            f"pass max_states >= {n_pred}"
        )
    state = _initial_partition(work, n_classes, initial_states, random_state)
    n_initial = int(state.max()) + 1
    n_states, rounds, budget_exhausted = refine(work, state, n_sym, max_states, max_rounds,
                                                max_ref=4096)
    trans, cls, deterministic, conflicting = complete(work, state, n_states, n_sym, n_classes)
    m_trans, m_cls, _ = _minimise(alphabet, trans, cls, int(state[0]), n_classes)
    merged: dict[str, Any] = {}
    if states is None:
        m_trans, m_cls, merged = lossless_merge(work, alphabet, m_trans, m_cls, n_classes)
    shrunk: dict[str, Any] = {}
    if states is not None:
        heavy = None
        if extra:
            heavy = np.zeros(len(tree.X), dtype=bool)
            heavy[tree.step_node[np.repeat(weights, np.diff(st.offsets)) > 1]] = True
        ev = eval_set(work, n_sym, fit_len, heavy)
        if extra and time.perf_counter() < t_start + time_limit / 3:
            # The training prefixes alone can refine better than with the extra strings
            # (the budget is spent elsewhere): keep whichever agrees more on the fit set.
            b_state = _initial_partition(base, n_classes, initial_states, random_state)
            b_n, b_rounds, b_exhausted = refine(base, b_state, n_sym, max_states, max_rounds)
            b = complete(base, b_state, b_n, n_sym, n_classes)
            b_trans, b_cls, _ = _minimise(alphabet, b[0], b[1], int(b_state[0]), n_classes)
            if relabel(ev, b_trans, 0, n_classes, b_cls)[1] > \
                    relabel(ev, m_trans, 0, n_classes, m_cls)[1]:
                m_trans, m_cls, n_states, rounds, budget_exhausted = (
                    b_trans, b_cls, b_n, b_rounds, b_exhausted)
                deterministic, conflicting = b[2], b[3]
        n_refined = len(m_trans)
        m_trans, m_cls, shrunk = shrink(work, ev, alphabet, m_trans, m_cls, n_classes,
                                        states, t_start + time_limit)
        shrunk["n_states_refined"] = n_refined
    stats = training_statistics(tree, st, m_trans, m_cls, p0, n_classes)
    report: dict[str, Any] = {
        "n_states": len(m_trans), "n_states_before_minimisation": int(n_states),
        "n_initial_states": n_initial, "refinement_rounds": int(rounds),
        "max_states": int(max_states), "budget_exhausted": bool(budget_exhausted),
        "deterministic": deterministic, "conflicting_steps": conflicting,
        "n_prefixes": len(tree.X), "train_agreement": stats["train_agreement"],
        "train_prefix_agreement": stats["train_prefix_agreement"],
        "seconds": round(time.perf_counter() - t_start, 4), **shrunk,
        "lossless_merge": merged or None,
    }
    info = {**dict(traces.provenance), "split": split, "max_states": int(max_states),
            "initial_states": initial_states, "random_state": random_state,
            "method": "prefix-tree refinement + Moore minimisation",
            "traces": str(getattr(traces, "path", ""))}
    out = ExtractedDFA(alphabet=alphabet, classes=classes, transitions=m_trans,
                       state_class=m_cls, initial=0, visits=stats["visits"],
                       prediction=stats["prediction"], counts=stats["counts"],
                       tokenizer=_tokenizer_of(traces), report=report, info=info)
    if eval_split is not None and eval_split in traces:
        report.update(_agreement(traces, eval_split, _alphabet_lookup(traces, alphabet),
                                 m_trans, m_cls, 0))
    report.update(_grammar_check(grammar, out))
    return out
