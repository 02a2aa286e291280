"""The extracted automaton: :class:`ExtractedDFA` and its ``stateseer.fsm`` exchange format.

Examples
--------
>>> import numpy as np
>>> parity = ExtractedDFA(alphabet=("a", "b"), classes=["reject", "accept"],
...                       transitions=np.array([[1, 0], [0, 1]]),
...                       state_class=np.array([1, 0]))
>>> parity.run("aab")
[0, 1, 0, 0]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from stateseer.abstraction.automata.io import read_text, write_output
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.automaton import DFA, TableAutomaton
from stateseer.core.dot import dot_document

__all__ = ["FORMAT", "KIND", "VERSION", "ExtractedDFA"]

FORMAT = "stateseer.fsm"
VERSION = 1
KIND = "dfa"


@dataclass(eq=False)
class ExtractedDFA(TableAutomaton):
    """A deterministic, complete automaton whose states carry a predicted class.

    A small, honest object in the manner of AALpy's ``Dfa``: an
    :class:`~stateseer.core.automaton.Automaton` whose :meth:`reset`, :meth:`step` and
    :meth:`run` walk it symbol by symbol; :meth:`classify` and :meth:`accepts` run many
    strings at once (vectorised over strings).

    Parameters
    ----------
    alphabet : tuple of str
        The symbols, shape (n_symbols,); symbol id ``a`` is ``alphabet[a]``.
    classes : list of str
        Class names, shape (n_classes,).
    transitions : ndarray of shape (n_states, n_symbols)
        ``transitions[q, a]`` is the state reached from ``q`` on symbol ``a``.
    state_class : ndarray of shape (n_states,)
        Class index each state outputs (the RNN's prediction after prefixes ending there).
    initial : int, default 0
    visits : ndarray of shape (n_states,), optional
        Training prefixes (the empty prefix of every input included) that end in each state.
    prediction : ndarray of shape (n_states, n_classes), optional
        Mean intermediate prediction of those prefixes (one-hot of ``state_class`` if absent).
    counts : ndarray of shape (n_states, n_symbols), optional
        Training steps that took each transition (0: completed, never seen).
    tokenizer : {'char', 'space'}, default 'char'
        How :meth:`classify` splits a ``str`` into symbols (characters, or on whitespace).
    report : dict
        Extraction figures (see :func:`extract_dfa`).
    info : dict
        Provenance: the traces' model hash, layer, data set, the parameters used.

    Attributes
    ----------
    accepting : ndarray of shape (n_states,)
        ``state_class == accept_class``.
    accept_class : int
        The class called ``accept`` if there is one, else class 1.
    """

    alphabet: tuple[str, ...]
    classes: list[str]
    transitions: np.ndarray
    state_class: np.ndarray
    initial: int = 0
    visits: np.ndarray | None = None
    prediction: np.ndarray | None = None
    counts: np.ndarray | None = None
    tokenizer: str = "char"
    report: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.alphabet = tuple(str(s) for s in self.alphabet)
        self.classes = [str(c) for c in self.classes]
        if len(self.classes) < 2:
            raise AbstractionError(f"a DFA needs at least two classes, got {self.classes}")
        if self.tokenizer not in ("char", "space"):
            raise AbstractionError(
                f"unknown tokenizer {self.tokenizer!r} for a DFA; use 'char' or 'space'"
            )
        # formal.DFA validates shape, completeness and the initial state for us.
        try:
            dfa = DFA(self.alphabet, self.transitions,
                      np.zeros(len(self.transitions), dtype=bool), int(self.initial))
        except ValueError as exc:
            raise AbstractionError(f"invalid DFA: {exc}") from None
        self.transitions = np.array(dfa.transitions)
        self.initial = dfa.initial
        n, k, c = dfa.n_states, dfa.n_symbols, len(self.classes)
        self.state_class = np.asarray(self.state_class, dtype=np.int64).reshape(-1)
        if self.state_class.shape != (n,) or self.state_class.min() < 0 or \
                self.state_class.max() >= c:
            raise AbstractionError(
                f"state_class must hold {n} class indices in [0, {c}); got "
                f"{self.state_class.tolist()[:10]}"
            )
        self.visits = (np.zeros(n, np.int64) if self.visits is None
                       else np.asarray(self.visits, np.int64).reshape(n))
        self.prediction = (np.eye(c)[self.state_class] if self.prediction is None
                           else np.asarray(self.prediction, np.float64).reshape(n, c))
        self.counts = (np.zeros((n, k), np.int64) if self.counts is None
                       else np.asarray(self.counts, np.int64).reshape(n, k))
        self._index = {s: i for i, s in enumerate(self.alphabet)}
        self.reset()

    # basic facts ---------------------------------------------------------------------------
    @property
    def accept_class(self) -> int:
        """Index of the class called ``accept`` if present, else 1."""
        return self.classes.index("accept") if "accept" in self.classes else 1

    @property
    def accepting(self) -> np.ndarray:
        """Whether each state outputs the accepting class, bool of shape (n_states,)."""
        return self.state_class == self.accept_class

    @property
    def dfa(self) -> DFA:
        """The automaton as a :class:`stateseer.core.automaton.DFA` (accepting =
        :attr:`accepting`)."""
        return DFA(self.alphabet, self.transitions, self.accepting, self.initial)

    def __repr__(self) -> str:
        return (f"ExtractedDFA(n_states={self.n_states}, alphabet={_brief(self.alphabet)}, "
                f"classes={self.classes!r})")

    # walking (reset/step/run/encode/final_states come from TableAutomaton) -----------------
    def unknown_symbol(self, symbol: Any) -> Exception:
        return AbstractionError(
            f"symbol {symbol!r} is not in the DFA's alphabet {_brief(self.alphabet)}; "
            "use only symbols seen in training"
        )

    def symbols(self, string: str | Sequence[str]) -> list[str]:
        """Split a ``str`` with :attr:`tokenizer` (characters or whitespace)."""
        if isinstance(string, str):
            return list(string) if self.tokenizer == "char" else string.split()
        return [str(s) for s in string]

    def is_accepting(self, state: int) -> bool:
        return bool(self.accepting[state])

    def output(self) -> str:
        """Class name of the current state."""
        return self.classes[int(self.state_class[self.state])]

    def classify(self, strings: Sequence[str | Sequence[str]]) -> np.ndarray:
        """Class index of each string, shape (n_strings,)."""
        return self.state_class[self.final_states(strings)]

    def accepts(self, strings: Sequence[str | Sequence[str]]) -> np.ndarray:
        """Whether each string ends in an accepting state, bool of shape (n_strings,)."""
        return self.classify(strings) == self.accept_class

    # views ---------------------------------------------------------------------------------
    def dot_nodes(self) -> list[tuple[str, dict[str, Any]]]:
        """Nodes for :meth:`to_dot` (AALpy's conventions: an invisible ``__start0`` node
        points at the initial state; accepting states are ``doublecircle``; parallel
        symbols between two states share one edge labelled ``"0,1"``). With more than two
        classes, node labels also name the state's class."""
        many = len(self.classes) > 2
        return [(f"s{q}", {"label": f"s{q}\n{self.classes[int(self.state_class[q])]}"
                           if many else f"s{q}",
                           "shape": "doublecircle" if self.accepting[q] else "circle"})
                for q in range(self.n_states)]

    def built_by(self) -> dict[str, Any]:
        """How the automaton was built, for the exports' graph attributes: ``method``
        (``active`` or ``refine``) and, where known, its figures (the off-data check's as
        ``off_data_error`` and ``off_data_majority_error``)."""
        r = self.report or {}
        out: dict[str, Any] = {"method": str(r.get("method", "refine"))}
        for key in ("membership_queries", "heldout_error", "majority_error"):
            if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool):
                out[key] = r[key]
        off = r.get("off_data")
        if isinstance(off, dict):  # the off-data check, flat: graph attributes are scalars
            for key in ("error", "majority_error"):
                if isinstance(off.get(key), (int, float)):
                    out[f"off_data_{key}"] = off[key]
        return out

    def to_dot(self, name: str = "learnedModel") -> str:
        """Graphviz DOT in AALpy's conventions (an invisible ``__start0`` marks the start),
        with :meth:`built_by` as ``stateseer_*`` graph attributes."""
        return dot_document(self.dot_nodes(), self.dot_edges(), initial=f"s{self.initial}",
                            name=name, graph={f"stateseer_{k}": v
                                              for k, v in self.built_by().items()})

    def to_networkx(self) -> Any:
        """The automaton as a ``networkx.MultiDiGraph``.

        Nodes are state ids with scalar attributes (``visits``, ``label``, ``accepting``,
        ``initial``, ``p_<class>``); one edge per (source, symbol), keyed ``e0``, ``e1`` …
        with ``token`` and ``count`` (so GraphML export works, and ``networkx.read_graphml``
        with default arguments reads every edge back).
        """
        import networkx as nx

        g = nx.MultiDiGraph(initial=self.initial, classes=",".join(self.classes), kind=KIND,
                            **self.built_by())
        for q in range(self.n_states):
            attrs = {f"p_{c}": float(self.prediction[q, i]) for i, c in enumerate(self.classes)}
            g.add_node(q, visits=int(self.visits[q]),
                       label=self.classes[int(self.state_class[q])],
                       accepting=bool(self.accepting[q]), initial=q == self.initial, **attrs)
        n_symbols = len(self.alphabet)
        for q in range(self.n_states):
            for a, sym in enumerate(self.alphabet):
                g.add_edge(q, int(self.transitions[q, a]), key=f"e{q * n_symbols + a}",
                           token=sym, count=int(self.counts[q, a]))
        return g

    # exchange format -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The ``stateseer.fsm`` v1 exchange format (DESIGN.md) with ``"kind": "dfa"``.

        One transition entry per (source, symbol), complete over the alphabet; every state
        also says whether it is ``accepting``.
        """
        states = [
            {"id": q, "visits": int(self.visits[q]),
             "label": self.classes[int(self.state_class[q])],
             "prediction": [round(float(p), 6) for p in self.prediction[q]],
             "accepting": bool(self.accepting[q])}
            for q in range(self.n_states)
        ]
        transitions = [
            {"source": q, "target": int(self.transitions[q, a]), "token": sym,
             "count": int(self.counts[q, a])}
            for q in range(self.n_states) for a, sym in enumerate(self.alphabet)
        ]
        return {"format": FORMAT, "version": VERSION, "kind": KIND,
                "classes": list(self.classes), "initial": int(self.initial),
                "alphabet": list(self.alphabet), "tokenizer": self.tokenizer,
                "states": states, "transitions": transitions,
                "report": _jsonable(self.report), "provenance": _jsonable(self.info)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExtractedDFA:
        """Rebuild from :meth:`to_dict` output.

        Raises
        ------
        AbstractionError
            Not a ``stateseer.fsm`` v1 DFA document, or not deterministic and complete.
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT or \
                data.get("version") != VERSION:
            got = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise AbstractionError(f"not a {FORMAT} v{VERSION} document (format={got!r})")
        if data.get("kind", KIND) != KIND:
            raise AbstractionError(
                f"this {FORMAT} document is a {data.get('kind')!r}, not a DFA; load it with FSM"
            )
        try:
            classes = [str(c) for c in data["classes"]]
            states = sorted(data["states"], key=lambda s: int(s["id"]))
            n = len(states)
            if [int(s["id"]) for s in states] != list(range(n)):
                raise AbstractionError("DFA document state ids must be 0..n-1")
            tr = data["transitions"]
            alphabet = list(data.get("alphabet") or sorted({str(t["token"]) for t in tr}))
            index = {s: i for i, s in enumerate(alphabet)}
            table = np.full((n, len(alphabet)), -1, dtype=np.int64)
            counts = np.zeros((n, len(alphabet)), dtype=np.int64)
            for t in tr:
                q, a = int(t["source"]), index[str(t["token"])]
                if table[q, a] != -1:
                    raise AbstractionError(
                        f"DFA document has two transitions from state {q} on {t['token']!r}; "
                        "a DFA needs exactly one"
                    )
                table[q, a] = int(t["target"])
                counts[q, a] = int(t.get("count", 0))
            if (table < 0).any():
                q, a = np.argwhere(table < 0)[0]
                raise AbstractionError(
                    f"DFA document lacks a transition from state {q} on {alphabet[a]!r}; "
                    "a DFA must be complete"
                )
            cindex = {c: i for i, c in enumerate(classes)}
            return cls(
                alphabet=tuple(alphabet), classes=classes, transitions=table,
                state_class=np.array([cindex[s["label"]] for s in states], np.int64),
                initial=int(data.get("initial", 0)),
                visits=np.array([int(s.get("visits", 0)) for s in states], np.int64),
                prediction=np.array([s["prediction"] for s in states], np.float64)
                if all("prediction" in s for s in states) else None,
                counts=counts, tokenizer=str(data.get("tokenizer", "char")),
                report=dict(data.get("report") or {}), info=dict(data.get("provenance") or {}),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            if isinstance(exc, AbstractionError):
                raise
            raise AbstractionError(f"DFA document is malformed ({exc!r})") from None

    def save(self, path: str | Path | IO[str], *, overwrite: bool = False) -> None:
        """Write the JSON exchange format to a path (never silently replaced) or open file.

        Raises
        ------
        AbstractionError
            ``path`` exists and ``overwrite`` is False.
        """
        write_output(json.dumps(self.to_dict(), indent=1, ensure_ascii=False), path,
                     overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path | IO[str]) -> ExtractedDFA:
        """Read a DFA written by :meth:`save`."""
        try:
            data = json.loads(read_text(path))
        except FileNotFoundError:
            raise AbstractionError(
                f"DFA file {path} not found; run `stateseer extract-dfa` first"
            ) from None
        except ValueError as exc:
            raise AbstractionError(f"DFA file {path} is not valid JSON ({exc})") from None
        return cls.from_dict(data)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def _brief(symbols: tuple[str, ...], shown: int = 12) -> str:
    """An alphabet as a repr or a message shows it: whole when short, else its first
    symbols and how many in all (a text run's alphabet is its vocabulary).

    >>> _brief(("a", "b")), _brief(tuple("abcdefghijklmnop"), 3)
    ("('a', 'b')", "('a', 'b', 'c', ... 16 symbols)")
    """
    if len(symbols) <= shown:
        return repr(tuple(symbols))
    return f"({', '.join(map(repr, symbols[:shown]))}, ... {len(symbols):,} symbols)"
