"""Formal languages with exact ground-truth DFAs: the seven Tomita grammars, bounded parens
and parity.

Each :class:`Grammar` bundles a hand-written minimal complete :class:`DFA` (state 0 initial)
with an independent plain-Python ``reference`` recogniser used to verify it. The languages:

``tomita1``  ``1*``                                                   (2 states)
``tomita2``  ``(10)*``                                                (3 states)
``tomita3``  no odd-length run of 1s followed, anywhere later, by an
             odd-length run of 0s (AALpy's reading)                    (5 states)
``tomita4``  no ``000`` substring                                      (4 states)
``tomita5``  even number of 0s and even number of 1s                   (4 states)
``tomita6``  ``(#0 - #1) % 3 == 0``                                    (3 states)
``tomita7``  ``0*1*0*1*``                                              (5 states)
``parens``   balanced ``(``/``)`` with nesting depth at most 4         (6 states)
``parity``   an even number of 1s                                     (2 states)

All Tomita grammars use the alphabet ``("0", "1")``; the empty string is a valid input.
:func:`sample_strings` samples strings. The automaton machinery (:class:`DFA`,
:func:`all_strings`, :func:`minimize`, :func:`minimal_size`) lives in the torch-free
:mod:`stateseer.core.automaton` and is re-exported here.

This module needs numpy and the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stateseer.core.automaton import DFA, all_strings, minimal_size, minimize
from stateseer.core.errors import DataError

__all__ = [
    "DFA",
    "GRAMMARS",
    "Grammar",
    "all_strings",
    "minimal_size",
    "minimize",
    "sample_strings",
]


@dataclass(frozen=True, eq=False)
class Grammar:
    """A named formal language: its minimal DFA and an independent reference recogniser.

    Parameters
    ----------
    name : str
        Key in :data:`GRAMMARS`.
    description : str
        One line for humans.
    dfa : DFA
        The minimal complete DFA (state 0 initial).
    reference : callable
        ``reference(s) -> bool`` for a ``str`` of single-character symbols, written without
        the DFA (regex / counting) so that tests can check the DFA against it.
    classes : tuple of (str, str), default ("reject", "accept")
        Class names for label 0 (rejected) and 1 (accepted).
    """

    name: str
    description: str
    dfa: DFA
    reference: Callable[[str], bool]
    classes: tuple[str, str] = ("reject", "accept")


# ---------------------------------------------------------------------------------------------
# Reference recognisers (independent of the DFAs below).
# ---------------------------------------------------------------------------------------------

_RUNS = re.compile(r"0+|1+")


def _ref_tomita1(s: str) -> bool:
    return re.fullmatch(r"1*", s) is not None


def _ref_tomita2(s: str) -> bool:
    return re.fullmatch(r"(?:10)*", s) is not None


def _ref_tomita3(s: str) -> bool:
    if re.fullmatch(r"[01]*", s) is None:
        return False
    seen_odd_ones = False
    for run in _RUNS.findall(s):  # maximal runs, left to right (a final run counts too)
        odd = len(run) % 2 == 1
        if run[0] == "1" and odd:
            seen_odd_ones = True
        elif run[0] == "0" and odd and seen_odd_ones:
            return False
    return True


def _ref_tomita4(s: str) -> bool:
    return re.fullmatch(r"[01]*", s) is not None and "000" not in s


def _ref_tomita5(s: str) -> bool:
    return re.fullmatch(r"[01]*", s) is not None and s.count("0") % 2 == 0 and s.count("1") % 2 == 0


def _ref_tomita6(s: str) -> bool:
    return re.fullmatch(r"[01]*", s) is not None and (s.count("0") - s.count("1")) % 3 == 0


def _ref_tomita7(s: str) -> bool:
    return re.fullmatch(r"0*1*0*1*", s) is not None


def _ref_parity(s: str) -> bool:
    return s.count("1") % 2 == 0


def _ref_parens(s: str, max_depth: int = 4) -> bool:
    depth = 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        else:
            return False
        if depth < 0 or depth > max_depth:
            return False
    return depth == 0


# ---------------------------------------------------------------------------------------------
# Hand-written minimal complete DFAs. Columns follow the alphabet order.
# ---------------------------------------------------------------------------------------------

_BIN = ("0", "1")


def _dfa(alphabet: tuple[str, ...], rows: list[list[int]], accepting: list[bool]) -> DFA:
    return DFA(alphabet, np.array(rows, dtype=np.int64), np.array(accepting, dtype=bool))


def _build_grammars() -> dict[str, Grammar]:
    g: dict[str, Grammar] = {}

    def add(name: str, desc: str, dfa: DFA, ref: Callable[[str], bool]) -> None:
        g[name] = Grammar(name=name, description=desc, dfa=dfa, reference=ref)

    # 0: only 1s so far (accept); 1: dead.
    add("tomita1", "1*", _dfa(_BIN, [[1, 0], [1, 1]], [True, False]), _ref_tomita1)
    # 0: complete (10)* (accept); 1: after a '1', expecting '0'; 2: dead.
    add(
        "tomita2",
        "(10)*",
        _dfa(_BIN, [[2, 1], [0, 2], [2, 2]], [True, False, False]),
        _ref_tomita2,
    )
    # 0: no pending odd 1-run, not inside an odd 1-run;  1: inside an odd 1-run, none pending;
    # 2: an odd 1-run is pending and the current 0-run is odd (reject if it ends here);
    # 3: an odd 1-run is pending, current 0-run even or inside a later 1-run;  4: dead.
    add(
        "tomita3",
        "no odd run of 1s followed (anywhere later) by an odd run of 0s",
        _dfa(
            _BIN,
            [[0, 1], [2, 0], [3, 4], [2, 3], [4, 4]],
            [True, True, False, True, False],
        ),
        _ref_tomita3,
    )
    # state = number of trailing 0s (0..2); 3: dead (saw 000).
    add(
        "tomita4",
        "no 000 substring",
        _dfa(_BIN, [[1, 0], [2, 0], [3, 0], [3, 3]], [True, True, True, False]),
        _ref_tomita4,
    )
    # state = 2 * (#0 % 2) + (#1 % 2).
    add(
        "tomita5",
        "even number of 0s and even number of 1s",
        _dfa(_BIN, [[2, 1], [3, 0], [0, 3], [1, 2]], [True, False, False, False]),
        _ref_tomita5,
    )
    # state = (#0 - #1) mod 3.
    add(
        "tomita6",
        "(#0 - #1) divisible by 3",
        _dfa(_BIN, [[1, 2], [2, 0], [0, 1]], [True, False, False]),
        _ref_tomita6,
    )
    # 0: in first 0*; 1: in first 1*; 2: in second 0*; 3: in second 1*; 4: dead.
    add(
        "tomita7",
        "0*1*0*1*",
        _dfa(
            _BIN,
            [[0, 1], [2, 1], [2, 3], [4, 3], [4, 4]],
            [True, True, True, True, False],
        ),
        _ref_tomita7,
    )
    # state d in 0..4 = current depth; 5: dead (closed too much or depth > 4).
    rows = [[d + 1 if d < 4 else 5, d - 1 if d > 0 else 5] for d in range(5)] + [[5, 5]]
    add(
        "parens",
        "balanced parentheses with nesting depth <= 4",
        _dfa(("(", ")"), rows, [True] + [False] * 5),
        _ref_parens,
    )
    # 0: an even number of 1s so far; 1: odd. Not star-free (it counts modulo 2).
    add("parity", "an even number of 1s", _dfa(_BIN, [[0, 1], [1, 0]], [True, False]),
        _ref_parity)
    return g


GRAMMARS: dict[str, Grammar] = _build_grammars()


# ---------------------------------------------------------------------------------------------
# Sampling.
# ---------------------------------------------------------------------------------------------


def _accept_counts(dfa: DFA, max_len: int) -> list[list[int]]:
    """``counts[r][q]``: number of accepted strings of length ``r`` read from state ``q``.

    Exact Python ints (no overflow), shape (max_len + 1, n_states).
    """
    counts = [[int(a) for a in dfa.accepting]]
    trans = dfa.transitions.tolist()
    for _ in range(max_len):
        prev = counts[-1]
        counts.append([sum(prev[nxt] for nxt in row) for row in trans])
    return counts


def sample_strings(
    dfa: DFA,
    n: int,
    min_len: int,
    max_len: int,
    rng: np.random.Generator,
    accept_share: float = 0.5,
) -> list[str]:
    """Random strings, about ``accept_share`` of them accepted.

    Each string's length is uniform in [min_len, max_len]. With probability ``accept_share``
    the string is drawn uniformly among the accepted strings of that length (symbol by symbol,
    proportional to the number of accepted completions, counted exactly by dynamic
    programming); otherwise - or when no accepted string of that length exists - it is a
    uniformly random string of that length (which may itself be accepted).

    Parameters
    ----------
    dfa : DFA
        The language; its symbols are joined with ``""`` (single-character symbols expected).
    n : int
        Number of strings.
    min_len, max_len : int
        Inclusive length range, ``0 <= min_len <= max_len``.
    rng : np.random.Generator
        Source of randomness; the output is a deterministic function of its state.
    accept_share : float, default 0.5
        Probability, in [0, 1], of asking for an accepted string.

    Returns
    -------
    list of str
        Length n.
    """
    if not 0 <= min_len <= max_len:
        raise DataError(f"Need 0 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}.")
    if not 0.0 <= accept_share <= 1.0:
        raise DataError(f"accept_share must lie in [0, 1], got {accept_share}.")
    counts = _accept_counts(dfa, max_len)
    trans = dfa.transitions.tolist()
    alphabet = dfa.alphabet
    k = dfa.n_symbols
    out: list[str] = []
    for _ in range(n):
        length = int(rng.integers(min_len, max_len + 1))
        want_accept = bool(rng.random() < accept_share)
        if want_accept and counts[length][dfa.initial] > 0:
            state = dfa.initial
            symbols = []
            for left in range(length, 0, -1):
                weights = [counts[left - 1][trans[state][a]] for a in range(k)]
                total = sum(weights)
                p = np.array([w / total for w in weights], dtype=np.float64)
                a = int(rng.choice(k, p=p / p.sum()))
                if weights[a] == 0:  # float rounding picked an impossible symbol
                    a = int(np.argmax(weights))
                symbols.append(alphabet[a])
                state = trans[state][a]
            out.append("".join(symbols))
        else:
            ids = rng.integers(0, k, size=length)
            out.append("".join(alphabet[i] for i in ids))
    return out
