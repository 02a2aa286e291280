"""Tests for stateseer.rnn_models.formal: Tomita grammars, bounded parens, sampling,
minimisation."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from stateseer.rnn_models.formal import DFA, GRAMMARS, all_strings, minimal_size, sample_strings

EXPECTED_SIZES = {
    "tomita1": 2,
    "tomita2": 3,
    "tomita3": 5,
    "tomita4": 4,
    "tomita5": 4,
    "tomita6": 3,
    "tomita7": 5,
    "parens": 6,
    "parity": 2,
}

# (string, accepted) pairs worked out by hand from the definitions.
HAND_EXAMPLES: dict[str, list[tuple[str, bool]]] = {
    "tomita1": [("", True), ("1", True), ("111", True), ("0", False), ("110", False)],
    "tomita2": [
        ("", True),
        ("10", True),
        ("1010", True),
        ("10100", False),
        ("1", False),
        ("01", False),
        ("101", False),
    ],
    # Tomita 3 (reject iff an odd maximal run of 1s is followed anywhere later by an odd
    # maximal run of 0s; a final run of 0s is maximal too):
    "tomita3": [
        ("", True),  # no runs at all
        ("0", True),  # odd 0-run but no 1-run before it
        ("1", True),  # odd 1-run, nothing after it
        ("10", False),  # odd run "1", then the final run "0" is odd
        ("110", True),  # the 1-run "11" is even, so the odd "0" after it is harmless
        ("100", True),  # "1" odd, but "00" even
        ("1001", True),  # "1", "00", "1": no odd 0-run at all
        ("101", False),  # "1" odd, then "0" odd (closed by the final 1)
        ("10010", False),  # "1" odd ... final "0" odd
        ("11101", False),  # "111" odd, then "0" odd
        ("011100", True),  # "111" odd, but the only later 0-run "00" is even
        # "1", "00", "11", "0": the odd 0-run is not *immediately* after an odd 1-run
        # ("11" is even) but the odd "1" at the start comes before it, so reject. This is the
        # string that separates the "anywhere later" reading from the "immediately" one.
        ("100110", False),
        ("1001100", True),  # same runs but the last 0-run is even
    ],
    "tomita4": [("", True), ("00", True), ("000", False), ("00100", True), ("10001", False)],
    "tomita5": [("", True), ("0011", True), ("0101", True), ("01", False), ("000", False)],
    "tomita6": [
        ("", True),
        ("01", True),
        ("000", True),
        ("111", True),
        ("0", False),
        ("0001", False),
    ],
    "tomita7": [
        ("", True),
        ("0101", True),
        ("0011001", True),
        ("1010", False),
        ("01010", False),
    ],
    "parity": [("", True), ("0", True), ("1", False), ("0110", True), ("10101", False)],
    "parens": [
        ("", True),
        ("()", True),
        ("(())()", True),
        ("(((())))", True),  # depth 4
        ("((((()))))", False),  # depth 5
        (")(", False),
        ("(", False),
        ("(()", False),
        ("())", False),
    ],
}


def test_grammar_keys() -> None:
    assert set(GRAMMARS) == set(EXPECTED_SIZES)
    for name, grammar in GRAMMARS.items():
        assert grammar.name == name
        assert grammar.classes == ("reject", "accept")
        assert grammar.dfa.initial == 0


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_dfa_matches_reference_up_to_length_12(name: str) -> None:
    grammar = GRAMMARS[name]
    strings = all_strings(grammar.dfa.alphabet, 12)
    assert strings[0] == ""
    assert len(strings) == 2**13 - 1
    got = grammar.dfa.accepts(strings)
    want = np.array([grammar.reference(s) for s in strings])
    assert got.dtype == bool and got.shape == (len(strings),)
    mismatches = [s for s, g, w in zip(strings, got, want, strict=True) if g != w]
    assert not mismatches, mismatches[:10]


@pytest.mark.parametrize("name", sorted(HAND_EXAMPLES))
def test_hand_examples(name: str) -> None:
    grammar = GRAMMARS[name]
    strings = [s for s, _ in HAND_EXAMPLES[name]]
    want = [a for _, a in HAND_EXAMPLES[name]]
    assert grammar.dfa.accepts(strings).tolist() == want
    assert [grammar.reference(s) for s in strings] == want


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_minimal_sizes(name: str) -> None:
    dfa = GRAMMARS[name].dfa
    assert minimal_size(dfa) == dfa.n_states == EXPECTED_SIZES[name]


def test_minimal_size_merges_duplicates_and_drops_unreachable() -> None:
    base = GRAMMARS["tomita6"].dfa  # 3 states, mod-3 counter
    # States 0..5: q and q + 3 behave alike; transitions alternate between the two copies.
    # State 6 is unreachable.
    trans = np.zeros((7, 2), dtype=np.int64)
    for q in range(6):
        for a in range(2):
            trans[q, a] = base.transitions[q % 3, a] + 3 * ((q // 3 + a) % 2)
    trans[6] = [6, 6]
    accepting = np.array([base.accepting[q % 3] for q in range(6)] + [True])
    redundant = DFA(base.alphabet, trans, accepting)
    strings = all_strings(base.alphabet, 8)
    assert np.array_equal(redundant.accepts(strings), base.accepts(strings))
    assert minimal_size(redundant) == 3

    everything = DFA(("a", "b"), np.array([[1, 0], [0, 1]]), np.array([True, True]))
    assert minimal_size(everything) == 1
    nothing = DFA(("a",), np.array([[0]]), np.array([False]))
    assert minimal_size(nothing) == 1


def test_all_strings_order() -> None:
    assert all_strings(("1", "0"), 2) == ["", "0", "1", "00", "01", "10", "11"]
    assert all_strings(("0", "1"), 0) == [""]


def test_sample_strings_lengths_and_determinism() -> None:
    dfa = GRAMMARS["tomita4"].dfa
    a = sample_strings(dfa, 300, 3, 9, np.random.default_rng(7))
    b = sample_strings(dfa, 300, 3, 9, np.random.default_rng(7))
    c = sample_strings(dfa, 300, 3, 9, np.random.default_rng(8))
    assert a == b
    assert a != c
    assert len(a) == 300
    assert all(isinstance(s, str) and 3 <= len(s) <= 9 for s in a)
    assert {len(s) for s in a} == set(range(3, 10))
    assert set("".join(a)) <= {"0", "1"}


def test_sample_strings_accept_share_sparse_language() -> None:
    dfa = GRAMMARS["tomita2"].dfa
    strings = sample_strings(dfa, 4000, 11, 20, np.random.default_rng(0), accept_share=0.5)
    assert all(11 <= len(s) <= 20 for s in strings)
    acc = dfa.accepts(strings)
    even = np.array([len(s) % 2 == 0 for s in strings])
    # Accepted strings exist only at even lengths (half of 11..20); odd lengths fall back to
    # random strings, which are never accepted. Random strings of length >= 12 are accepted
    # with probability <= 2**-12, so the overall share is about 0.5 * 0.5 = 0.25.
    assert not acc[~even].any()
    assert 0.21 < acc.mean() < 0.29
    assert 0.45 < acc[even].mean() < 0.55
    assert all(s == "10" * (len(s) // 2) for s, ok in zip(strings, acc, strict=True) if ok)

    none = sample_strings(dfa, 500, 12, 12, np.random.default_rng(1), accept_share=0.0)
    assert dfa.accepts(none).mean() < 0.01
    all_acc = sample_strings(dfa, 200, 12, 12, np.random.default_rng(1), accept_share=1.0)
    assert dfa.accepts(all_acc).all()


def test_sample_strings_uniform_over_accepted() -> None:
    dfa = GRAMMARS["tomita5"].dfa  # 8 accepted strings of length 4
    strings = sample_strings(dfa, 4000, 4, 4, np.random.default_rng(3), accept_share=1.0)
    counts = Counter(strings)
    assert len(counts) == 8
    assert all(dfa.accepts(list(counts)))
    assert min(counts.values()) > 400 and max(counts.values()) < 600  # expected 500 each


def test_sample_strings_long_lengths_no_overflow() -> None:
    for name in ("parens", "tomita4", "tomita6"):
        dfa = GRAMMARS[name].dfa
        strings = sample_strings(dfa, 50, 58, 60, np.random.default_rng(5), accept_share=1.0)
        ok = dfa.accepts(strings)
        # parens has no accepted strings at odd lengths (fallback to random strings there)
        lengths = np.array([len(s) for s in strings])
        assert ok[lengths % 2 == 0].all() if name == "parens" else ok.all()


def test_sample_strings_rejects_bad_arguments() -> None:
    dfa = GRAMMARS["tomita1"].dfa
    with pytest.raises(ValueError):
        sample_strings(dfa, 5, 4, 3, np.random.default_rng(0))
    with pytest.raises(ValueError):
        sample_strings(dfa, 5, 1, 3, np.random.default_rng(0), accept_share=1.5)


def test_encode_unknown_symbol() -> None:
    dfa = GRAMMARS["tomita1"].dfa
    with pytest.raises(ValueError, match=r"'2'.*\('0', '1'\)"):
        dfa.encode(["01", "012"])
    with pytest.raises(ValueError, match="'10'"):
        dfa.encode([["1", "10"]])


def test_encode_padding_and_symbol_sequences() -> None:
    dfa = GRAMMARS["parens"].dfa
    ids, lengths = dfa.encode(["(()", "", [")", "("]])
    assert ids.dtype == np.int64 and lengths.dtype == np.int64
    assert ids.tolist() == [[0, 0, 1], [0, 0, 0], [1, 0, 0]]
    assert lengths.tolist() == [3, 0, 2]
    empty_ids, empty_lengths = dfa.encode([])
    assert empty_ids.shape == (0, 0) and empty_lengths.shape == (0,)


def test_run_and_prefix_labels_varied_lengths() -> None:
    dfa = GRAMMARS["tomita2"].dfa  # 0 --1--> 1 --0--> 0; anything else -> 2 (dead)
    ids, lengths = dfa.encode(["", "1", "10", "101", "11"])
    states = dfa.run_batch(ids, lengths)
    assert states.shape == (5, 4)
    assert states.tolist() == [
        [0, 0, 0, 0],
        [0, 1, 1, 1],
        [0, 1, 0, 0],
        [0, 1, 0, 1],
        [0, 1, 2, 2],
    ]
    labels = dfa.prefix_labels(ids, lengths)
    assert labels.dtype == bool and labels.shape == (5, 4)
    assert labels.tolist() == [
        [True, True, True, True],
        [True, False, False, False],
        [True, False, True, True],
        [True, False, True, False],
        [True, False, False, False],
    ]
    # Padding values past a string's length are ignored.
    garbage = ids.copy()
    garbage[0, :] = 1
    assert np.array_equal(dfa.run_batch(garbage, lengths), states)

    only_empty_ids, only_empty_lengths = dfa.encode([""])
    assert dfa.run_batch(only_empty_ids, only_empty_lengths).tolist() == [[0]]
    assert dfa.accepts([""]).tolist() == [True]


def test_dfa_validation() -> None:
    with pytest.raises(ValueError):
        DFA(("0", "1"), np.array([[0, 2], [1, 1]]), np.array([True, False]))  # state 2 missing
    with pytest.raises(ValueError):
        DFA(("0", "1"), np.array([[0, 1], [1, 1]]), np.array([True]))
    dfa = GRAMMARS["tomita1"].dfa
    assert not dfa.transitions.flags.writeable


def test_grammar_dfa_is_an_automaton_with_reset_step_run() -> None:
    from stateseer.core.automaton import Automaton

    dfa = GRAMMARS["tomita2"].dfa
    assert isinstance(dfa, Automaton)
    assert dfa.run("101") == [0, 1, 0, 1]
    assert dfa.state == 1
    dfa.reset()
    assert dfa.state == 0 and dfa.step("1") == 1 and dfa.step("1") == 2
    ids, lengths = dfa.encode(["101"])
    assert dfa.run_batch(ids, lengths)[0].tolist() == [0, 1, 0, 1]
    with pytest.raises(TypeError):
        dfa.run(ids, lengths)  # the old batch spelling is gone: run_batch
    with pytest.raises(ValueError, match="Unknown symbol 'x'"):
        dfa.step("x")
    dot = dfa.to_dot()
    assert '__start0 -> s0;' in dot and 's0 [label="s0", shape=doublecircle];' in dot
