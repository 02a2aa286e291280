"""Automata as objects: one :class:`Automaton` base, table DFAs, minimisation.

In the manner of AALpy's ``aalpy.base.Automaton``: every automaton of stateseer (the
grammar :class:`DFA` here, the abstraction's ``FSM`` and the extracted DFA of
:mod:`abstraction`) is an :class:`Automaton` with a current state, :meth:`~Automaton.reset`,
:meth:`~Automaton.step` and :meth:`~Automaton.run`, and one DOT export
(:meth:`~Automaton.to_dot`, written by :func:`stateseer.core.dot.dot_document`).

:class:`TableAutomaton` adds what a complete deterministic automaton stored as a
transition table (n_states, n_symbols) shares: symbol encoding and a run over a batch of
padded strings that is vectorised over the batch (:meth:`~TableAutomaton.run_batch`).
:func:`minimize` builds the minimal DFA (canonically numbered) and :func:`all_strings`
enumerates strings. This module needs numpy and the standard library only.

Examples
--------
>>> import numpy as np
>>> parity = DFA(("a", "b"), np.array([[1, 0], [0, 1]]), np.array([True, False]))
>>> parity.run("aab")
[0, 1, 0, 0]
>>> parity.accepts(["", "a", "aa"]).tolist()
[True, False, True]
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stateseer.core.dot import dot_document
from stateseer.core.errors import DataError

__all__ = [
    "DFA",
    "Automaton",
    "TableAutomaton",
    "all_strings",
    "minimal_size",
    "minimize",
    "run_table",
]


class Automaton(ABC):
    """Base class of every automaton: a current state that symbols move.

    Subclasses provide :attr:`n_states`, :attr:`initial` and :meth:`next_state`; they may
    override :meth:`symbols` (how a ``str`` splits into symbols) and the DOT hooks
    :meth:`dot_nodes` / :meth:`dot_edges`. :meth:`reset`, :meth:`step`, :meth:`run` and
    :meth:`to_dot` are shared. Works for frozen dataclasses too (the current state is
    kept outside the dataclass fields).
    """

    initial: int

    @property
    @abstractmethod
    def n_states(self) -> int:
        """Number of states."""

    @abstractmethod
    def next_state(self, state: int, symbol: Any) -> int:
        """The state reached from ``state`` on ``symbol`` (no side effect)."""

    def symbols(self, string: str | Sequence[Any]) -> list[Any]:
        """Split an input into symbols: a ``str`` into characters, else the items."""
        return list(string) if isinstance(string, str) else [str(s) for s in string]

    @property
    def state(self) -> int:
        """The current state (the initial one until :meth:`step` moves it)."""
        return int(self.__dict__.get("_state", self.initial))

    def reset(self) -> None:
        """Go back to the initial state."""
        object.__setattr__(self, "_state", int(self.initial))

    def step(self, symbol: Any) -> int:
        """Consume one symbol and return the new state."""
        nxt = int(self.next_state(self.state, symbol))
        object.__setattr__(self, "_state", nxt)
        return nxt

    def run(self, symbols: str | Sequence[Any]) -> list[int]:
        """States visited from the initial state, length ``len(symbols) + 1``.

        A ``str`` is split by :meth:`symbols`.
        """
        self.reset()
        return [int(self.initial)] + [self.step(s) for s in self.symbols(symbols)]

    # DOT -------------------------------------------------------------------------------
    def is_accepting(self, state: int) -> bool:
        """Whether ``state`` accepts (drawn as a double circle); False unless overridden."""
        return False

    def dot_nodes(self) -> list[tuple[str, dict[str, Any]]]:
        """``(id, attributes)`` of every state for :meth:`to_dot`."""
        return [(f"s{q}", {"label": f"s{q}",
                           "shape": "doublecircle" if self.is_accepting(q) else "circle"})
                for q in range(self.n_states)]

    def dot_edges(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(source, target, attributes)`` of every edge for :meth:`to_dot`."""
        raise NotImplementedError(f"{type(self).__name__} does not list its DOT edges")

    def to_dot(self, name: str = "learnedModel") -> str:
        """Graphviz DOT in AALpy's conventions (an invisible ``__start0`` marks the start)."""
        return dot_document(self.dot_nodes(), self.dot_edges(), initial=f"s{self.initial}",
                            name=name)


def run_table(transitions: np.ndarray, initial: int, symbol_ids: np.ndarray,
              lengths: np.ndarray) -> np.ndarray:
    """States after every prefix of a batch of padded strings, vectorised over the batch.

    Parameters
    ----------
    transitions : ndarray of shape (n_states, n_symbols)
    initial : int
    symbol_ids : ndarray of shape (B, T)
        Entries at positions ``>= lengths[b]`` are ignored.
    lengths : ndarray of shape (B,)
        Each in [0, T].

    Returns
    -------
    ndarray of shape (B, T + 1)
        int64. Column 0 is the initial state, column ``t`` the state after the first ``t``
        symbols; past a string's length its last state repeats, so column T holds every
        string's final state.
    """
    ids = np.asarray(symbol_ids)
    lens = np.asarray(lengths, dtype=np.int64)
    if ids.ndim != 2:
        raise DataError(f"symbol_ids must have shape (B, T), got {ids.shape}.")
    n_batch, t_max = ids.shape
    n_symbols = transitions.shape[1]
    if lens.shape != (n_batch,):
        raise DataError(f"lengths must have shape ({n_batch},), got {lens.shape}.")
    if n_batch and (lens.min() < 0 or lens.max() > t_max):
        raise DataError(f"lengths must lie in [0, {t_max}] (the padded width).")
    active = np.arange(t_max)[None, :] < lens[:, None]  # (B, T)
    if ids.size:
        live = ids[active]
        if live.size and (live.min() < 0 or live.max() >= n_symbols):
            raise DataError(f"symbol ids must lie in [0, {n_symbols}).")
    states = np.empty((n_batch, t_max + 1), dtype=np.int64)
    cur = np.full(n_batch, initial, dtype=np.int64)
    states[:, 0] = cur
    for t in range(t_max):
        sym = np.where(active[:, t], ids[:, t], 0)
        cur = np.where(active[:, t], transitions[cur, sym], cur)
        states[:, t + 1] = cur
    return states


class TableAutomaton(Automaton):
    """A complete deterministic automaton stored as a transition table.

    Subclasses hold ``alphabet`` (tuple of str), ``transitions`` (ndarray of shape
    (n_states, n_symbols)) and ``initial``; they get symbol lookup, :meth:`encode`, the
    batch run :meth:`run_batch` and DOT edges (parallel symbols share one edge).
    """

    alphabet: tuple[str, ...]
    transitions: np.ndarray

    @property
    def n_states(self) -> int:
        """Number of states (rows of ``transitions``)."""
        return int(self.transitions.shape[0])

    @property
    def n_symbols(self) -> int:
        """Number of symbols in the alphabet."""
        return len(self.alphabet)

    def _symbol_index(self) -> dict[str, int]:
        index = self.__dict__.get("_index")
        if index is None or len(index) != len(self.alphabet):
            index = {s: i for i, s in enumerate(self.alphabet)}
            object.__setattr__(self, "_index", index)
        return index

    def unknown_symbol(self, symbol: Any) -> Exception:
        """The error raised for a symbol outside the alphabet."""
        return DataError(f"Unknown symbol {symbol!r}; the alphabet is {self.alphabet}.")

    def symbol_id(self, symbol: Any) -> int:
        """Alphabet index of ``symbol``."""
        sid = self._symbol_index().get(str(symbol))
        if sid is None:
            raise self.unknown_symbol(symbol)
        return sid

    def next_state(self, state: int, symbol: Any) -> int:
        return int(self.transitions[state, self.symbol_id(symbol)])

    def encode(self, strings: Sequence[str | Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Map strings to padded symbol ids.

        Parameters
        ----------
        strings : sequence of (str or sequence of str), length B
            Each split into symbols by :meth:`symbols`.

        Returns
        -------
        symbol_ids : ndarray of shape (B, T)
            int64, T the longest length; padded with 0.
        lengths : ndarray of shape (B,)
            int64.

        Raises
        ------
        Exception
            :meth:`unknown_symbol`'s error if a symbol is not in the alphabet.
        """
        rows = [[self.symbol_id(s) for s in self.symbols(x)] for x in strings]
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        ids = np.zeros((len(rows), int(lengths.max(initial=0))), dtype=np.int64)
        for b, row in enumerate(rows):
            ids[b, : len(row)] = row
        return ids, lengths

    def run_batch(self, symbol_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """States after every prefix of a padded batch, shape (B, T + 1); see
        :func:`run_table`."""
        return run_table(self.transitions, int(self.initial), symbol_ids, lengths)

    def final_states(self, strings: Sequence[str | Sequence[str]]) -> np.ndarray:
        """State reached by each string, shape (B,) (vectorised over strings)."""
        ids, lengths = self.encode(strings)
        return self.run_batch(ids, lengths)[:, -1]

    def dot_edges(self) -> list[tuple[str, str, dict[str, Any]]]:
        """One edge per (source, target), labelled with its symbols joined by ``,``."""
        out = []
        for q in range(self.n_states):
            targets: dict[int, list[str]] = {}
            for a, t in enumerate(self.transitions[q].tolist()):
                targets.setdefault(t, []).append(self.alphabet[a])
            out.extend((f"s{q}", f"s{t}", {"label": ",".join(syms)})
                       for t, syms in targets.items())
        return out


@dataclass(frozen=True, eq=False)
class DFA(TableAutomaton):
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

    def is_accepting(self, state: int) -> bool:
        return bool(self.accepting[state])

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
        return self.accepting[self.run_batch(symbol_ids, lengths)]

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
        return self.accepting[self.final_states(strings)]


# ---------------------------------------------------------------------------------------------
# Enumeration and minimisation.
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
