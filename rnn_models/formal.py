"""Formal languages with exact ground-truth DFAs: the seven Tomita grammars and bounded parens.

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

All Tomita grammars use the alphabet ``("0", "1")``; the empty string is a valid input.
Helpers enumerate (:func:`all_strings`) and sample (:func:`sample_strings`) strings, and
:func:`minimize` builds the minimal DFA equivalent to a given one (canonically numbered) and
:func:`minimal_size` counts its states.

This module needs numpy and the standard library only.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import DataError

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
class DFA:
    """A complete deterministic finite automaton over a finite alphabet of symbol strings.

    Parameters
    ----------
    alphabet : tuple of str
        The symbols, shape (n_symbols,). Symbol id ``a`` is ``alphabet[a]``.
    transitions : np.ndarray
        Integer array of shape (n_states, n_symbols); ``transitions[q, a]`` is the state
        reached from state ``q`` on symbol id ``a``. Every entry must be a valid state.
    accepting : np.ndarray
        Boolean array of shape (n_states,).
    initial : int, default 0
        The initial state.

    Notes
    -----
    The arrays are stored as read-only copies (int64 / bool). Equality is identity
    (``eq=False``) because element-wise array comparison has no single truth value.
    """

    alphabet: tuple[str, ...]
    transitions: np.ndarray
    accepting: np.ndarray
    initial: int = 0

    def __post_init__(self) -> None:
        alphabet = tuple(str(s) for s in self.alphabet)
        if not alphabet:
            raise DataError("DFA alphabet is empty; give at least one symbol.")
        if len(set(alphabet)) != len(alphabet):
            raise DataError(f"DFA alphabet {alphabet} has repeated symbols.")
        trans = np.array(self.transitions, dtype=np.int64, copy=True)
        acc = np.array(self.accepting, dtype=bool, copy=True)
        if trans.ndim != 2 or trans.shape[1] != len(alphabet):
            raise DataError(
                f"DFA transitions must have shape (n_states, {len(alphabet)}), got {trans.shape}."
            )
        n_states = trans.shape[0]
        if n_states == 0:
            raise DataError("DFA has no states.")
        if acc.shape != (n_states,):
            raise DataError(f"DFA accepting must have shape ({n_states},), got {acc.shape}.")
        if trans.min() < 0 or trans.max() >= n_states:
            raise DataError(f"DFA transitions must lie in [0, {n_states}); the DFA is incomplete.")
        initial = int(self.initial)
        if not 0 <= initial < n_states:
            raise DataError(f"DFA initial state {initial} is not in [0, {n_states}).")
        trans.setflags(write=False)
        acc.setflags(write=False)
        object.__setattr__(self, "alphabet", alphabet)
        object.__setattr__(self, "transitions", trans)
        object.__setattr__(self, "accepting", acc)
        object.__setattr__(self, "initial", initial)

    @property
    def n_states(self) -> int:
        """Number of states (rows of ``transitions``)."""
        return int(self.transitions.shape[0])

    @property
    def n_symbols(self) -> int:
        """Number of symbols in the alphabet."""
        return len(self.alphabet)

    def encode(self, strings: Sequence[str | Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Map strings to padded symbol ids.

        Parameters
        ----------
        strings : sequence of (str or sequence of str), length B
            A ``str`` is split into single-character symbols; any other sequence is taken as
            a sequence of symbol strings.

        Returns
        -------
        symbol_ids : np.ndarray
            int64, shape (B, T) with T the longest length; padded with 0.
        lengths : np.ndarray
            int64, shape (B,).

        Raises
        ------
        ValueError
            (a :class:`~rnn_models.errors.DataError`) if a symbol is not in the alphabet.
        """
        index = {s: i for i, s in enumerate(self.alphabet)}
        rows: list[list[int]] = []
        for string in strings:
            symbols = list(string) if isinstance(string, str) else [str(s) for s in string]
            row = []
            for sym in symbols:
                sid = index.get(sym)
                if sid is None:
                    raise DataError(f"Unknown symbol {sym!r}; the alphabet is {self.alphabet}.")
                row.append(sid)
            rows.append(row)
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        t_max = int(lengths.max()) if len(rows) else 0
        ids = np.zeros((len(rows), t_max), dtype=np.int64)
        for b, row in enumerate(rows):
            ids[b, : len(row)] = row
        return ids, lengths

    def run(self, symbol_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """States after every prefix, vectorised over the batch.

        Parameters
        ----------
        symbol_ids : np.ndarray
            int, shape (B, T). Entries at positions ``>= lengths[b]`` are ignored.
        lengths : np.ndarray
            int, shape (B,), each in [0, T].

        Returns
        -------
        np.ndarray
            int64, shape (B, T + 1). Column 0 is the initial state, column ``t`` the state
            after the first ``t`` symbols; past a string's length its last state repeats,
            so column T holds every string's final state.
        """
        ids = np.asarray(symbol_ids)
        lens = np.asarray(lengths, dtype=np.int64)
        if ids.ndim != 2:
            raise DataError(f"symbol_ids must have shape (B, T), got {ids.shape}.")
        n_batch, t_max = ids.shape
        if lens.shape != (n_batch,):
            raise DataError(f"lengths must have shape ({n_batch},), got {lens.shape}.")
        if n_batch and (lens.min() < 0 or lens.max() > t_max):
            raise DataError(f"lengths must lie in [0, {t_max}] (the padded width).")
        active = np.arange(t_max)[None, :] < lens[:, None]  # (B, T)
        if ids.size:
            live = ids[active]
            if live.size and (live.min() < 0 or live.max() >= self.n_symbols):
                raise DataError(f"symbol ids must lie in [0, {self.n_symbols}).")
        states = np.empty((n_batch, t_max + 1), dtype=np.int64)
        cur = np.full(n_batch, self.initial, dtype=np.int64)
        states[:, 0] = cur
        for t in range(t_max):
            sym = np.where(active[:, t], ids[:, t], 0)
            cur = np.where(active[:, t], self.transitions[cur, sym], cur)
            states[:, t + 1] = cur
        return states

    def prefix_labels(self, symbol_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Acceptance of every prefix.

        Parameters
        ----------
        symbol_ids : np.ndarray
            int, shape (B, T).
        lengths : np.ndarray
            int, shape (B,).

        Returns
        -------
        np.ndarray
            bool, shape (B, T + 1); entry ``[b, t]`` says whether the first ``t`` symbols of
            string ``b`` are accepted (past the length it repeats the full string's label).
        """
        return self.accepting[self.run(symbol_ids, lengths)]

    def accepts(self, strings: Sequence[str | Sequence[str]]) -> np.ndarray:
        """Whether each string is in the language.

        Parameters
        ----------
        strings : sequence of (str or sequence of str), length B

        Returns
        -------
        np.ndarray
            bool, shape (B,).
        """
        ids, lengths = self.encode(strings)
        return self.accepting[self.run(ids, lengths)[:, -1]]


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
    return g


GRAMMARS: dict[str, Grammar] = _build_grammars()


# ---------------------------------------------------------------------------------------------
# Enumeration, sampling, minimisation.
# ---------------------------------------------------------------------------------------------


def all_strings(alphabet: Sequence[str], max_len: int) -> list[str]:
    """Every string of length 0..max_len over ``alphabet``.

    Parameters
    ----------
    alphabet : sequence of str
        Symbols, shape (n_symbols,).
    max_len : int
        Longest length (inclusive).

    Returns
    -------
    list of str
        ``sum(n_symbols**k for k in 0..max_len)`` strings (the empty string first), ordered by
        length, then lexicographically.
    """
    if max_len < 0:
        return []
    symbols = sorted(set(alphabet))
    out: list[str] = []
    for length in range(max_len + 1):
        out.extend("".join(p) for p in itertools.product(symbols, repeat=length))
    return out


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


def _reachable(dfa: DFA) -> np.ndarray:
    """Reachable states from the initial one, in BFS order (symbols in alphabet order).

    Returns
    -------
    np.ndarray
        int64, shape (n_reachable,); element 0 is ``dfa.initial``.
    """
    trans = dfa.transitions.tolist()
    order = [dfa.initial]
    seen = {dfa.initial}
    head = 0
    while head < len(order):
        for nxt in trans[order[head]]:
            if nxt not in seen:
                seen.add(nxt)
                order.append(nxt)
        head += 1
    return np.array(order, dtype=np.int64)


def minimize(dfa: DFA) -> DFA:
    """The minimal complete DFA equivalent to ``dfa``, in canonical numbering.

    Unreachable states are dropped, Moore partition refinement (vectorised with numpy)
    merges equivalent states, and the blocks are renumbered in breadth-first order from the
    initial state (symbols in alphabet order), so the result has ``initial == 0`` and two
    equivalent DFAs over the same alphabet minimise to identical arrays. A dead state, if
    reachable, is kept (the result is complete).

    Parameters
    ----------
    dfa : DFA

    Returns
    -------
    DFA
        Same alphabet; ``transitions`` of shape (n_min, n_symbols), ``accepting`` of shape
        (n_min,), ``initial`` 0.

    Examples
    --------
    >>> import numpy as np
    >>> twice = DFA(("a",), np.array([[1], [0]]), np.array([True, True]))
    >>> minimize(twice).n_states
    1
    """
    keep = _reachable(dfa)  # keep[0] is the initial state
    remap = np.full(dfa.n_states, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    sub = remap[dfa.transitions[keep]]  # (n_reach, n_symbols), all valid: reachable set is closed
    labels = np.unique(dfa.accepting[keep], return_inverse=True)[1].reshape(-1)
    n_blocks = int(labels.max()) + 1
    while True:
        signature = np.column_stack([labels, labels[sub]])  # (n_reach, 1 + n_symbols)
        _, new = np.unique(signature, axis=0, return_inverse=True)
        new = new.reshape(-1)
        n_new = int(new.max()) + 1
        labels = new
        if n_new == n_blocks:
            break
        n_blocks = n_new
    # Block transitions (any representative will do), then BFS renumbering from the initial
    # block (row 0 of ``sub`` is the initial state).
    _, first = np.unique(labels, return_index=True)  # representative per block
    block_trans = labels[sub[first]]  # (n_blocks, n_symbols)
    block_acc = dfa.accepting[keep[first]]
    quotient = DFA(dfa.alphabet, block_trans, block_acc, initial=int(labels[0]))
    order = _reachable(quotient)
    rank = np.empty(n_blocks, dtype=np.int64)
    rank[order] = np.arange(n_blocks)
    return DFA(dfa.alphabet, rank[block_trans[order]], block_acc[order], initial=0)


def minimal_size(dfa: DFA) -> int:
    """Number of states of the minimal complete DFA equivalent to ``dfa``.

    Unreachable states are dropped, then Moore partition refinement merges equivalent
    states (see :func:`minimize`). A dead state, if reachable, counts as a state.

    Parameters
    ----------
    dfa : DFA

    Returns
    -------
    int
    """
    return minimize(dfa).n_states
