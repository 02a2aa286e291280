"""Active extraction on small known automata: behind a "model" that computes a known
language, the learner recovers its minimal DFA exactly, within its budgets, and says when
a budget ran out."""

from __future__ import annotations

import numpy as np
import pytest

from stateseer.abstraction.automata.dfa.active import learn_active
from stateseer.core.automaton import all_strings
from stateseer.core.errors import DataError
from stateseer.rnn_models.formal import GRAMMARS


def _model_of(dfa):
    """A model that computes ``dfa``: its class after every prefix of each word."""
    def answer(words):
        ids, lengths = dfa.encode(words) if words else (np.zeros((0, 0), int), np.zeros(0))
        labels = dfa.prefix_labels(ids, lengths)
        return [labels[b, :len(w) + 1] for b, w in enumerate(words)]
    return answer


@pytest.mark.parametrize("name", [f"tomita{i}" for i in range(1, 8)] + ["parity"])
def test_the_minimal_dfa_behind_a_model_is_recovered_exactly(name):
    g = GRAMMARS[name]
    words = [list(s) for s in all_strings(g.dfa.alphabet, 8)]
    res = learn_active(g.dfa.alphabet, _model_of(g.dfa), words=words, seed=0)
    assert res.dfa.n_states == g.dfa.n_states  # minimal and complete, as the grammar's
    every = all_strings(g.dfa.alphabet, 12)
    assert np.array_equal(res.dfa.accepts(every), g.dfa.accepts(every))
    assert not res.budget_ran_out and res.membership_queries > 0 and res.rounds >= 1


def test_kv_recovers_it_too_and_a_state_budget_stops_learning():
    g = GRAMMARS["tomita3"]
    res = learn_active(g.dfa.alphabet, _model_of(g.dfa), algorithm="kv", seed=1)
    assert res.dfa.n_states == g.dfa.n_states
    small = learn_active(g.dfa.alphabet, _model_of(g.dfa), max_states=2, seed=1)
    assert small.budget_ran_out and small.dfa.n_states <= g.dfa.n_states


def test_bad_requests_are_refused_in_one_line():
    g = GRAMMARS["tomita1"]
    with pytest.raises(DataError, match="not in the alphabet"):
        learn_active(g.dfa.alphabet, _model_of(g.dfa), words=[["0", "2"]])
    with pytest.raises(DataError, match="unknown algorithm"):
        learn_active(g.dfa.alphabet, _model_of(g.dfa), algorithm="rpni")
    with pytest.raises(DataError, match="prefixes"):
        learn_active(g.dfa.alphabet, lambda ws: [np.zeros(1, bool) for _ in ws])
