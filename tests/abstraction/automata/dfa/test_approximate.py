"""``extract_dfa(states=..., extra=...)``: a capped, best-agreeing automaton, and extra traced
strings (sampled checks, the user's examples). Synthetic traces only: no torch.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from stateseer.abstraction.automata.dfa import extract_dfa, training_alphabet
from stateseer.abstraction.automata.dfa.approximate import _merge_pair
from stateseer.abstraction.errors import AbstractionError
from stateseer.rnn_models.formal import DFA, GRAMMARS, all_strings
from tests.abstraction.automata.dfa.test_extract import write_traces
from tests.conftest import one_line


def _traces(tmp_path: Path, name: str, noise: float = 0.05, train_len: int = 8,
            extra: list[str] | None = None):
    dfa = GRAMMARS[name].dfa
    splits = {"train": all_strings(dfa.alphabet, train_len),
              "test": all_strings(dfa.alphabet, 10)}
    if extra is not None:
        splits["val"] = extra
    return write_traces(tmp_path / "traces", dfa, dfa.accepting.astype(np.int64),
                        ["reject", "accept"], splits, noise=noise)


def test_cap_at_or_above_the_true_size_keeps_the_exact_automaton(tmp_path):
    traces = _traces(tmp_path, "tomita4")
    dfa = extract_dfa(traces, states=10)
    assert dfa.n_states == 4  # merging on would lose agreement: stopped at the knee
    assert dfa.report["agreement"] == 1.0 and dfa.report["fit_agreement"] == 1.0
    assert dfa.report["n_states_refined"] == 4


@pytest.mark.parametrize("cap", [2, 3])
def test_cap_below_the_true_size_is_respected_and_reported(tmp_path, cap):
    traces = _traces(tmp_path, "tomita4")
    dfa = extract_dfa(traces, states=cap)
    r = dfa.report
    assert dfa.n_states <= cap
    assert 0.5 < r["fit_agreement"] < 1.0 and 0.5 < r["agreement"] < 1.0
    assert r["fit_agreement"] >= r["fit_agreement_merged"]  # polishing never loses
    # The automaton is complete and agrees with what it reports on the test split.
    test = traces["test"]
    strings = [test.tokens(i) for i in range(test.n_inputs)]
    assert r["agreement"] == pytest.approx((dfa.classify(strings) == test.predictions).mean())


def test_more_states_never_agree_less_on_the_fit_strings(tmp_path):
    traces = _traces(tmp_path, "tomita7")
    fits = [extract_dfa(traces, states=c).report["fit_agreement"] for c in (2, 3, 4, 5)]
    assert fits == sorted(fits)
    assert fits[-1] == 1.0


def test_merge_pair_folds_a_state_into_another():
    trans = np.array([[1, 2], [2, 0], [0, 1]])
    counts = np.array([[5, 5], [9, 0], [1, 1]])
    out = _merge_pair(trans, counts, 2, 1)  # state 2 into state 1
    # Symbol 0: state 1 is busier (9 vs 1) and keeps its target 2, which becomes 1;
    # symbol 1: state 2 is busier (1 vs 0), so the merged state takes 2's target 1.
    assert out.tolist() == [[1, 1], [1, 1]]
    counts[1, 1] = 3
    assert _merge_pair(trans, counts, 2, 1).tolist() == [[1, 1], [1, 0]]


def test_extra_strings_join_the_training_prefixes(tmp_path):
    """An extra string longer than any training string is learnt from (weighted)."""
    long = "0" * 3 + "1" * 9  # tomita4: contains 000, rejected
    traces = _traces(tmp_path, "tomita4", train_len=3, extra=[long])
    plain = extract_dfa(traces)
    with_extra = extract_dfa(traces, extra=[(traces["val"], 1000)])
    assert with_extra.report["n_prefixes"] > plain.report["n_prefixes"]
    assert not with_extra.accepts([long])[0]


def test_extra_string_with_an_unknown_symbol_is_refused(tmp_path):
    traces = _traces(tmp_path, "tomita4")
    other = GRAMMARS["parens"].dfa  # symbols ( and )
    bad = write_traces(tmp_path / "other", other, other.accepting.astype(np.int64),
                       ["reject", "accept"], {"train": ["()"]})
    with pytest.raises(AbstractionError) as err:
        extract_dfa(traces, extra=[(bad["train"], 1)])
    msg = one_line(err.value)
    assert "'('" in msg and "training alphabet" in msg


def test_training_alphabet(tmp_path):
    assert training_alphabet(_traces(tmp_path, "tomita4")) == ("0", "1")


def test_three_classes_with_a_cap(tmp_path):
    trans = np.array([[(q // 2 + 1) % 3 * 2 + (1 - q % 2), q - q % 2 + (1 - q % 2)]
                      for q in range(6)])
    dfa = DFA(("a", "b"), trans, np.zeros(6, dtype=bool))
    strings = {"train": all_strings(("a", "b"), 8), "test": all_strings(("a", "b"), 9)}
    traces = write_traces(tmp_path / "traces", dfa, np.arange(6) // 2, ["zero", "one", "two"],
                          strings)
    got = extract_dfa(traces, states=5)
    assert got.n_states == 3 and got.report["agreement"] == 1.0


def test_no_torch_dash_or_aalpy_in_the_extraction_code():
    root = Path(__file__).resolve().parents[3] / "abstraction" / "dfa"
    for path in root.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from)\s+(torch|dash|aalpy)\b", text, re.M), path


def _with_memory(dfa: DFA, k: int) -> DFA:
    """The same language, each state also remembering the last ``k`` symbols (as a
    Mamba's convolution buffer and decaying SSM state remember recent inputs)."""
    index, order, trans = {(dfa.initial, ()): 0}, [(dfa.initial, ())], []
    for q, h in order:  # order grows while it is walked: every reachable pair
        row = []
        for a in range(len(dfa.alphabet)):
            nxt = (int(dfa.transitions[q, a]), (*h, a)[-k:])
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
            row.append(index[nxt])
        trans.append(row)
    return DFA(dfa.alphabet, np.array(trans), np.array([dfa.accepting[q] for q, _ in order]))


def test_states_that_only_remember_recent_symbols_are_merged_without_loss(tmp_path):
    grammar = GRAMMARS["tomita7"]
    model = _with_memory(grammar.dfa, 5)  # 95 states, Tomita 7's language
    traces = write_traces(tmp_path / "traces", model, model.accepting.astype(np.int64),
                          ["reject", "accept"],
                          {"train": all_strings(grammar.dfa.alphabet, 7),
                           "test": all_strings(grammar.dfa.alphabet, 10)})
    dfa = extract_dfa(traces, grammar=grammar)
    r = dfa.report
    # refinement and Moore minimisation leave 8 states: the deepest prefixes' transitions
    # were never seen, and completing them from the nearest state tells histories apart
    assert r["lossless_merge"]["n_states_before"] > 5
    assert dfa.n_states == 5 and r["minimal_size_match"] and r["agreement"] == 1.0
    assert r["train_prefix_agreement"] == 1.0  # no training prefix lost by the merge
    # an automaton that is already minimal is left as it is
    plain = extract_dfa(_traces(tmp_path / "plain", "tomita7"), grammar=grammar)
    assert plain.n_states == 5 and plain.report["lossless_merge"] is None
