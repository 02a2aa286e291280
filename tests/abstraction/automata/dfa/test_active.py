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


def _first_equals_last():
    """Words over {a, b} whose first symbol is their last (5 minimal states)."""
    from stateseer.core.automaton import DFA

    return DFA(("a", "b"), np.array([[1, 3], [1, 2], [1, 2], [4, 3], [4, 3]]),
               np.array([False, True, False, True, False]), 0)


def test_the_abstraction_guides_the_search_to_counterexamples_the_tests_miss():
    g = _first_equals_last()
    words = [list(w) for w in ["ab", "ba", "aab", "bba", "aba", "bab"]]
    # the "network's" abstract states: here its true states after each prefix
    abstract = [g.run_batch(*g.encode([w]))[0, 1:] for w in words]
    every = all_strings(g.alphabet, 10)
    blind = learn_active(g.alphabet, _model_of(g), words=words, walks=0, walks_per_state=0)
    guided = learn_active(g.alphabet, _model_of(g), words=words, walks=0, walks_per_state=0,
                          abstract=abstract)
    assert blind.dfa.n_states < g.n_states
    assert not np.array_equal(blind.dfa.accepts(every), g.accepts(every))
    assert guided.dfa.n_states == g.n_states
    assert np.array_equal(guided.dfa.accepts(every), g.accepts(every))
    assert any(h["counterexample"] == "guided" for h in guided.history)
    with pytest.raises(DataError, match="one array per word"):
        learn_active(g.alphabet, _model_of(g), words=words, abstract=abstract[:2])


def test_membership_queries_ask_the_whole_word_only_when_they_can():
    g = GRAMMARS["tomita4"].dfa
    asked = {"prefixes": 0, "final": 0}
    every_prefix = _model_of(g)

    def answer(words):
        asked["prefixes"] += len(words)
        return every_prefix(words)

    def final(words):
        asked["final"] += len(words)
        return g.accepts(words)

    res = learn_active(g.alphabet, answer, final=final, walks=200, seed=0)
    assert res.dfa.n_states == g.n_states
    assert asked["final"] > 0
    assert asked["prefixes"] <= res.test_words + 1  # the tests (and the empty word) only
    assert res.membership_queries == asked["prefixes"] + asked["final"]


def test_held_out_words_choose_the_smallest_hypothesis_within_epsilon():
    g = GRAMMARS["tomita5"].dfa
    held = all_strings(g.alphabet, 8)
    labels = g.accepts(held)
    exact = learn_active(g.alphabet, _model_of(g), select=(held, labels), epsilon=0.0)
    assert exact.dfa.n_states == g.n_states
    assert exact.history[exact.provenance["chosen_round"] - 1]["heldout_error"] == 0.0
    loose = learn_active(g.alphabet, _model_of(g), select=(held, labels), epsilon=1.0)
    sizes = [h["n_states"] for h in loose.history]
    assert loose.dfa.n_states <= min(sizes) < g.n_states


def test_one_held_out_words_worth_of_epsilon_is_not_lost_to_rounding():
    """Errors are k/n: at n = 68, 2/68 + 1/68 < 3/68 in floating point, and the smaller
    hypothesis one word worse than the best must still be chosen."""
    from stateseer.abstraction.automata.dfa.active import _choose

    n = 68
    assert 2 / n + 1 / n < 3 / n  # the rounding this guards against
    history = [{"n_states": 9, "heldout_error": 2 / n}, {"n_states": 4, "heldout_error": 3 / n},
               {"n_states": 3, "heldout_error": 4 / n}]
    assert _choose(history, 1 / n) == 1


def test_mutants_are_near_the_data_and_join_the_choice():
    from stateseer.abstraction.automata.dfa.active import mutant_words, selection_epsilon

    data = [tuple("abba"), tuple("aaaaaa")]
    near = mutant_words(data, 200, ("a", "b", "c"), np.random.default_rng(0))
    assert len(near) == 200
    for w in near:  # one to three symbols replaced in a copy of a data word
        diffs = min(sum(x != y for x, y in zip(w, d, strict=True)) for d in data
                    if len(d) == len(w))
        assert diffs <= 3
    assert any("c" in w for w in near)
    assert mutant_words([()], 5, ("a",), np.random.default_rng(0)) == []
    g = GRAMMARS["tomita4"].dfa
    words = [list(s) for s in all_strings(g.alphabet, 6)]
    res = learn_active(g.alphabet, _model_of(g), words=words, mutants=300, seed=0)
    assert res.provenance["mutants"] == 300 and res.provenance["n_select"] == 300
    assert all("heldout_error" in h for h in res.history)
    assert res.dfa.n_states == g.n_states  # still the exact minimal automaton
    # the default epsilon: one standard error of the best, at least one word's worth
    assert res.provenance["epsilon"] == selection_epsilon(0.0, 300) == 1 / 300
    assert selection_epsilon(0.1, 100) == pytest.approx(0.03)


def test_kv_asks_its_sifting_queries_in_batches_and_learns_the_same(monkeypatch):
    """The batched classification tree changes how often the model is called, not what
    is learnt: the same hypotheses, round by round, in fewer calls."""
    import contextlib

    import stateseer.abstraction.automata.dfa.active as active
    from stateseer.core.automaton import DFA

    rng = np.random.default_rng(3)
    g = DFA(("a", "b", "c"), rng.integers(0, 12, (12, 3)), rng.random(12) < 0.5, 0)
    words = [list(s) for s in all_strings(g.alphabet, 4)]

    def learn():
        calls = []

        def final(ws):
            calls.append(len(ws))
            return g.accepts(ws)

        res = learn_active(g.alphabet, _model_of(g), final=final, words=words, seed=0)
        return res, calls

    batched, calls_batched = learn()
    monkeypatch.setattr(active, "_batched_sifting",
                        lambda answers, on: contextlib.nullcontext())
    one_by_one, calls_single = learn()
    assert [h["n_states"] for h in batched.history] == \
        [h["n_states"] for h in one_by_one.history]
    assert np.array_equal(batched.dfa.transitions, one_by_one.dfa.transitions)
    every = all_strings(g.alphabet, 8)
    assert np.array_equal(batched.dfa.accepts(every), g.accepts(every))
    assert len(calls_batched) < len(calls_single) / 2
    assert max(calls_batched) > 1


def test_whole_words_are_the_tests_unless_prefixes_are_asked_for():
    g = GRAMMARS["tomita2"].dfa
    one = [list(s) for s in all_strings(g.alphabet, 6) if len(s) == 6]
    many = [list(s) for s in all_strings(g.alphabet, 6)]
    got = {n: learn_active(g.alphabet, _model_of(g), words=w, seed=0, tests_on=t)
           for n, w, t in (("one", one, "auto"), ("many", many, "auto"),
                           ("prefixes", many, "prefixes"))}
    assert got["one"].provenance["tests_on"] == "words"
    assert got["many"].provenance["tests_on"] == "words"
    assert got["prefixes"].provenance["tests_on"] == "prefixes"
    for res in got.values():  # either way the known language, exactly
        assert res.dfa.n_states == g.n_states
    with pytest.raises(DataError, match="auto, prefixes or words"):
        learn_active(g.alphabet, _model_of(g), tests_on="suffixes")


def test_the_chosen_automaton_is_checked_off_the_data_beside_the_majority():
    g = GRAMMARS["tomita3"].dfa
    words = [list(s) for s in all_strings(g.alphabet, 7)]
    exact = learn_active(g.alphabet, _model_of(g), words=words, seed=0)
    off = exact.provenance["off_data"]
    assert off["n_words"] == 1000 and off["error"] == 0.0  # the language itself
    assert 0.0 < off["majority_error"] < 1.0
    capped = learn_active(g.alphabet, _model_of(g), words=words, seed=0, max_states=1)
    assert capped.dfa.n_states == 1  # one class for every word, on the same random words
    e, m = capped.provenance["off_data"]["error"], capped.provenance["off_data"]["majority_error"]
    assert min(abs(e - m), abs(e - (1 - m))) < 1e-9 and m == off["majority_error"]
