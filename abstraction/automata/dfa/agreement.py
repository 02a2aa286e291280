"""How well an extracted automaton agrees with the RNN (and with a known grammar).

The traces hold the RNN's prediction after every prefix of every evaluation string, so
agreement needs no torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA
from stateseer.abstraction.automata.dfa.prefix_tree import _Tree
from stateseer.core.automaton import all_strings
from stateseer.core.traces import SplitTraces, Traces


def _agreement(traces: Traces, split: str, lookup: np.ndarray, trans: np.ndarray,
               state_class: np.ndarray, initial: int) -> dict[str, Any]:
    """Compare the DFA with the RNN's recorded predictions on every prefix of ``split``."""
    st = traces[split]
    offsets = np.asarray(st.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    n_inputs = len(lengths)
    if n_inputs == 0:
        return {"eval_split": split, "n_eval_strings": 0}
    sym = lookup[np.asarray(st.surface_ids, dtype=np.int64)]
    rnn_step = np.asarray(st.proba).argmax(axis=1)
    rnn_final = np.asarray(st.final_proba).argmax(axis=1)
    rnn_empty = int(np.argmax(traces.initial_proba))
    cur = np.full(n_inputs, initial, dtype=np.int64)
    step_state = np.empty(len(sym), dtype=np.int64)
    for t in range(int(lengths.max(initial=0))):  # positions; vectorised over inputs
        alive = np.flatnonzero(lengths > t)
        pos = offsets[alive] + t
        s = sym[pos]
        ok = s >= 0  # a symbol never seen in training leaves the state unchanged
        nxt = cur[alive]
        nxt[ok] = trans[nxt[ok], s[ok]]
        cur[alive] = nxt
        step_state[pos] = nxt
    dfa_final = state_class[cur]
    same = dfa_final == rnn_final
    step_same = state_class[step_state] == rnn_step
    empty_same = int(state_class[initial]) == rnn_empty
    short = lengths <= 12
    return {
        "eval_split": split,
        "n_eval_strings": int(n_inputs),
        "agreement": float(same.mean()),
        "prefix_agreement": float((step_same.sum() + empty_same * n_inputs)
                                  / (len(step_same) + n_inputs)),
        "agreement_le12": float(same[short].mean()) if short.any() else None,
        "n_eval_strings_le12": int(short.sum()),
        "n_unknown_symbols": int((sym < 0).sum()),
    }


def _grammar_check(grammar: Any, dfa: ExtractedDFA, max_len: int = 12) -> dict[str, Any]:
    """Agreement with a known language on every string up to ``max_len``.

    ``grammar`` is a :class:`stateseer.core.automaton.DFA` (its accepting states are
    class ``accept``) or anything with ``name``, ``dfa`` and ``classes`` (reject, accept)
    such as an ``stateseer.rnn_models.formal.Grammar``; None or another alphabet gives ``{}``.
    """
    if grammar is None:
        return {}
    gdfa = getattr(grammar, "dfa", grammar)
    name = getattr(grammar, "name", "grammar")
    classes = tuple(getattr(grammar, "classes", ("reject", "accept")))
    if set(gdfa.alphabet) != set(dfa.alphabet) or dfa.tokenizer != "char" or \
            set(classes) != set(dfa.classes):
        return {}
    strings = all_strings(gdfa.alphabet, max_len)
    want = gdfa.accepts(strings)
    got = dfa.classify(strings) == dfa.classes.index(classes[1])
    return {"grammar": name,
            "grammar_agreement_le12": float((got == want).mean()),
            "grammar_min_states": gdfa.n_states,
            "minimal_size_match": dfa.n_states == gdfa.n_states}




def training_statistics(tree: _Tree, st: SplitTraces, trans: np.ndarray,
                        state_class: np.ndarray, p0: np.ndarray, n_classes: int
                        ) -> dict[str, Any]:
    """The automaton's own run over the training prefixes (parents come before children).

    Returns
    -------
    dict
        ``visits`` (n_states,), ``prediction`` (n_states, n_classes) the mean RNN
        prediction of the prefixes ending in each state, ``counts`` (n_states, n_symbols)
        training steps per transition, and ``train_agreement`` /
        ``train_prefix_agreement`` with the RNN on the training strings / prefixes.
    """
    n_min, n_sym = trans.shape
    dstate = np.zeros(len(tree.X), dtype=np.int64)
    for lo, hi in zip(tree.level[1:-1], tree.level[2:], strict=True):  # one level per depth
        dstate[lo:hi] = trans[dstate[tree.parent[lo:hi]], tree.symbol[lo:hi]]
    visits = np.bincount(dstate, weights=tree.occ, minlength=n_min)
    step_state = dstate[tree.step_node]
    proba_sum = np.zeros((n_min, n_classes))
    for c in range(n_classes):  # loop over classes, vectorised over steps
        proba_sum[:, c] = np.bincount(step_state, minlength=n_min,
                                      weights=np.asarray(st.proba[:, c], np.float64))
    proba_sum[0] += p0 * st.n_inputs
    prediction = proba_sum / np.maximum(visits, 1)[:, None]
    prediction[visits == 0] = np.eye(n_classes)[state_class[visits == 0]]
    counts = np.zeros((n_min, n_sym), dtype=np.int64)
    np.add.at(counts, (dstate[tree.parent[1:]], tree.symbol[1:]), tree.occ[1:])
    same = state_class[dstate] == tree.pred
    lengths = np.diff(np.asarray(st.offsets))
    final_node = np.zeros(st.n_inputs, dtype=np.int64)
    final_node[lengths > 0] = tree.step_node[np.asarray(st.offsets)[1:][lengths > 0] - 1]
    return {"visits": visits.astype(np.int64), "prediction": prediction, "counts": counts,
            "train_agreement": float(same[final_node].mean()),
            "train_prefix_agreement": float(same.astype(np.float64) @ tree.occ
                                            / tree.occ.sum())}
