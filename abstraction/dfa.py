"""Exact DFA extraction from recorded traces (white-box state-abstraction refinement).

For an RNN trained on a formal language, :func:`extract_dfa` turns the hidden states of the
training split into a deterministic, complete, minimal automaton, without running the RNN:

1. **Prefix tree.** Every distinct training prefix (the empty one included) becomes one
   point: its hidden state (``initial_hidden`` for the empty prefix) and the RNN's
   intermediate prediction after it. Equal prefixes share one point, so equal hidden states
   can never land in different abstract states.
2. **Initial abstraction.** One abstract state per predicted class (the default), or
   ``initial_states`` k-means clusters split by predicted class
   (:class:`~abstraction.kmeans.KMeansAbstractor`); either way no state mixes classes.
3. **Refinement.** A transition ``(state, symbol)`` is *in conflict* when the children of
   the state's points on that symbol lie in more than one state. Each conflicting state is
   split along its worst symbol: its points with a child on that symbol are grouped by the
   child's state, every other point joins the group of its nearest grouped point (hidden
   space). Rounds repeat until no conflict is left or ``max_states`` states exist; within a
   round the states with the most conflicting traffic split first, and the last split is
   cut to fit the budget (remaining conflicts are then settled by the majority target).
4. **Completion.** States are labelled with their majority predicted class; every
   ``(state, symbol)`` gets its majority target, and a pair never seen in training takes the
   target that the nearest state (centroid distance) that has seen the symbol goes to. Every
   alphabet symbol occurs in training, so no sink state is needed.
5. **Minimisation.** Moore refinement through
   :func:`rnn_models.formats.automaton.minimize` (for more than two classes, one
   minimisation per class indicator, then their common refinement),
   states renumbered in breadth-first order from the initial state 0.

The result, an :class:`ExtractedDFA`, is checked against the RNN on the evaluation split:
the traces hold the RNN's prediction after every prefix of every test string, so agreement
needs no torch. When the caller passes the language (``grammar=``, e.g. a built-in grammar
of :mod:`rnn_models.formal`) the report also compares the automaton with it on every
string of length at most 12.

Notes
-----
The method assumes that the RNN's hidden states after equivalent prefixes lie closer to
each other than to those of other prefixes of the same predicted class; it needs no
equivalence oracle, but only generalises where the training prefixes cover the language.
On an imperfect RNN, refinement also chases the RNN's isolated mistakes on the training
prefixes, so the state count grows with the budget; agreement with the RNN grows with it.
A symbol never seen in training is not in the alphabet: :meth:`ExtractedDFA.step` refuses
it, and the agreement figures leave the state unchanged on it (``n_unknown_symbols``).

Examples
--------
A hand-made automaton (``extract_dfa`` builds the same kind of object from traces):

>>> import numpy as np
>>> parity = ExtractedDFA(alphabet=("a", "b"), classes=["reject", "accept"],
...                       transitions=np.array([[1, 0], [0, 1]]),
...                       state_class=np.array([1, 0]))
>>> parity.accepts(["", "a", "ab", "aab"]).tolist()
[True, False, False, True]
>>> parity.run("aab")
[0, 1, 0, 0]
>>> print(parity.to_dot().splitlines()[2])
  s0 [label="s0", shape=doublecircle];
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from rnn_models.formats.automaton import DFA, TableAutomaton, all_strings, minimize
from rnn_models.formats.traces import SplitTraces, Traces

from .errors import AbstractionError
from .features import nearest
from .io import read_text, write_output

__all__ = ["ExtractedDFA", "extract_dfa"]

FORMAT = "stateseer.fsm"
VERSION = 1
KIND = "dfa"


# ---------------------------------------------------------------------------------------------
# The automaton
# ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class ExtractedDFA(TableAutomaton):
    """A deterministic, complete automaton whose states carry a predicted class.

    A small, honest object in the manner of AALpy's ``Dfa``: an
    :class:`~rnn_models.formats.automaton.Automaton` whose :meth:`reset`, :meth:`step` and
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
        """The automaton as a :class:`rnn_models.formats.automaton.DFA` (accepting =
        :attr:`accepting`)."""
        return DFA(self.alphabet, self.transitions, self.accepting, self.initial)

    def __repr__(self) -> str:
        return (f"ExtractedDFA(n_states={self.n_states}, alphabet={self.alphabet!r}, "
                f"classes={self.classes!r})")

    # walking (reset/step/run/encode/final_states come from TableAutomaton) -----------------
    def unknown_symbol(self, symbol: Any) -> Exception:
        return AbstractionError(
            f"symbol {symbol!r} is not in the DFA's alphabet {self.alphabet}; "
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

    def to_networkx(self) -> Any:
        """The automaton as a ``networkx.MultiDiGraph``.

        Nodes are state ids with scalar attributes (``visits``, ``label``, ``accepting``,
        ``initial``, ``p_<class>``); one edge per (source, symbol), keyed by the symbol, with
        ``token`` and ``count`` (so GraphML export works).
        """
        import networkx as nx

        g = nx.MultiDiGraph(initial=self.initial, classes=",".join(self.classes), kind=KIND)
        for q in range(self.n_states):
            attrs = {f"p_{c}": float(self.prediction[q, i]) for i, c in enumerate(self.classes)}
            g.add_node(q, visits=int(self.visits[q]),
                       label=self.classes[int(self.state_class[q])],
                       accepting=bool(self.accepting[q]), initial=q == self.initial, **attrs)
        for q in range(self.n_states):
            for a, sym in enumerate(self.alphabet):
                g.add_edge(q, int(self.transitions[q, a]), key=sym, token=sym,
                           count=int(self.counts[q, a]))
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


# ---------------------------------------------------------------------------------------------
# Data preparation
# ---------------------------------------------------------------------------------------------


@dataclass
class _Tree:
    """The prefix tree of a split.

    Attributes
    ----------
    X : ndarray of shape (n_nodes, state_size)
        Hidden state after each distinct prefix; node 0 is the empty prefix (h0).
    pred : ndarray of shape (n_nodes,)
        RNN's predicted class after the prefix.
    occ : ndarray of shape (n_nodes,)
        How many (input, prefix) pairs end at the node (node 0: number of inputs).
    parent, symbol : ndarray of shape (n_nodes,)
        Parent node and the symbol id leading to the node (-1 for the root).
    child : ndarray of shape (n_nodes, n_symbols)
        Child node on each symbol, -1 if the prefix was never extended by it.
    step_node : ndarray of shape (n_steps,)
        Node of every recorded step.
    level : ndarray of shape (max_len + 2,)
        Nodes of depth ``t`` are ``level[t]:level[t + 1]`` (parents precede children).
    """

    X: np.ndarray
    pred: np.ndarray
    occ: np.ndarray
    parent: np.ndarray
    symbol: np.ndarray
    child: np.ndarray
    step_node: np.ndarray
    level: np.ndarray


def _check_finite(rows: np.ndarray, what: str, chunk: int = 65_536) -> None:
    """Refuse NaN or infinite rows of ``rows`` (n_rows, n_cols), read in chunks."""
    for start in range(0, len(rows), chunk):
        bad = ~np.isfinite(np.asarray(rows[start : start + chunk])).all(axis=1)
        if bad.any():
            raise AbstractionError(
                f"{what} {start + int(np.flatnonzero(bad)[0])} contains NaN or infinity; the "
                "model or its traces are broken — retrain or re-record the run"
            )


def _alphabet(traces: Traces, split: str) -> tuple[tuple[str, ...], np.ndarray]:
    """Sorted distinct symbols of ``split`` and the map surface id -> symbol id (-1 unused)."""
    st = traces[split]
    used = np.unique(np.asarray(st.surface_ids))
    surface = list(traces.surface)
    if used.size and (used.min() < 0 or used.max() >= len(surface)):
        raise AbstractionError(f"split {split!r} refers to unknown surface ids; re-record the run")
    symbols = sorted({surface[int(i)] for i in used})
    index = {s: i for i, s in enumerate(symbols)}
    lookup = np.array([index.get(s, -1) for s in surface], dtype=np.int64)
    return tuple(symbols), lookup


def _prefix_tree(st: SplitTraces, sym: np.ndarray, n_symbols: int, h0: np.ndarray,
                 p0: np.ndarray) -> _Tree:
    """Merge equal prefixes of a split into a tree (loop over positions, vectorised)."""
    offsets = np.asarray(st.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    n_inputs = len(lengths)
    step_node = np.empty(int(offsets[-1]), dtype=np.int64)
    cur = np.zeros(n_inputs, dtype=np.int64)
    parents, symbols, reps = [np.array([-1])], [np.array([-1])], []
    n_nodes = 1
    level = [0, 1]
    for t in range(int(lengths.max(initial=0))):
        alive = np.flatnonzero(lengths > t)
        pos = offsets[alive] + t
        key = cur[alive] * n_symbols + sym[pos]
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
        ids = n_nodes + inv.reshape(-1)
        step_node[pos] = ids
        parents.append(uniq // n_symbols)
        symbols.append(uniq % n_symbols)
        reps.append(pos[first])
        n_nodes += len(uniq)
        level.append(n_nodes)
        cur[alive] = ids
    parent = np.concatenate(parents)
    symbol = np.concatenate(symbols)
    rep = np.concatenate([np.zeros(0, np.int64), *reps])
    hidden = np.asarray(st.hidden[np.sort(rep)], dtype=np.float32)  # sorted reads: memmap
    order = np.argsort(np.argsort(rep))
    X = np.concatenate([np.asarray(h0, np.float32)[None, :], hidden[order]])
    _check_finite(X[:1], "initial hidden state")
    _check_finite(st.hidden, f"hidden state of {st.name!r} step")  # every step, not just reps
    proba = np.asarray(st.proba[np.sort(rep)], dtype=np.float64)[order]
    pred = np.concatenate([[int(np.argmax(p0))], proba.argmax(axis=1)]).astype(np.int64)
    occ = np.bincount(step_node, minlength=n_nodes).astype(np.int64)
    occ[0] = n_inputs
    child = np.full((n_nodes, n_symbols), -1, dtype=np.int64)
    child[parent[1:], symbol[1:]] = np.arange(1, n_nodes)
    return _Tree(X=X, pred=pred, occ=occ, parent=parent, symbol=symbol, child=child,
                 step_node=step_node, level=np.array(level, dtype=np.int64))


# ---------------------------------------------------------------------------------------------
# Refinement
# ---------------------------------------------------------------------------------------------


def _conflicts(
    tree: _Tree, state: np.ndarray, n_states: int, n_symbols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Transition statistics of the current partition.

    Returns
    -------
    pair : ndarray of shape (n_pairs,)
        ``source * n_symbols + symbol`` of every (state, symbol) seen, sorted.
    n_targets, total, top_target, top_weight : ndarrays of shape (n_pairs,)
        Distinct targets, traffic (occurrences), majority target and its traffic.
    """
    ch = np.arange(1, len(state))
    src = state[tree.parent[1:]]
    tgt = state[ch]
    w = tree.occ[ch]
    trip = (src * n_symbols + tree.symbol[1:]) * n_states + tgt
    utrip, inv = np.unique(trip, return_inverse=True)
    tw = np.bincount(inv.reshape(-1), weights=w)
    upair = utrip // n_states
    utgt = utrip % n_states
    # Sort by pair, then descending weight: the first entry of each pair is its majority.
    order = np.lexsort((utgt, -tw, upair))
    upair, utgt, tw = upair[order], utgt[order], tw[order]
    pair, start, n_targets = np.unique(upair, return_index=True, return_counts=True)
    total = np.add.reduceat(tw, start)
    return pair, n_targets, total, utgt[start], tw[start]


def _nearest_point(Z: np.ndarray, ref: np.ndarray, chunk: int = 2048,
                   max_ref: int = 4096) -> np.ndarray:
    """Index into ``ref`` of the nearest reference point of every row of ``Z``.

    Parameters
    ----------
    Z : ndarray of shape (n_rows, state_size)
    ref : ndarray of shape (n_ref, state_size)
    chunk : int
        Rows per block (bounds memory at ``chunk * max_ref`` floats).
    max_ref : int
        At most this many reference points are compared (an evenly spaced subset).

    Returns
    -------
    ndarray of shape (n_rows,)
    """
    idx = np.arange(len(ref))
    if len(ref) > max_ref:
        idx = np.linspace(0, len(ref) - 1, max_ref).round().astype(np.int64)
    R = ref[idx]
    out = np.empty(len(Z), dtype=np.int64)
    for s in range(0, len(Z), chunk):
        out[s : s + chunk] = idx[nearest(Z[s : s + chunk], R)]
    return out


def _split(tree: _Tree, state: np.ndarray, members: np.ndarray, a: int, next_id: int,
           max_new: int) -> int:
    """Split the nodes ``members`` of one state along symbol ``a``; returns the next free id.

    Nodes with an ``a``-child are grouped by the child's state (at most ``max_new + 1``
    groups: the heaviest targets first, the rest pooled); every other node joins the group
    of its nearest grouped node in hidden space (see :func:`_nearest_point`).
    """
    kids = tree.child[members, a]
    has = kids >= 0
    tgt = state[kids[has]]
    w = tree.occ[kids[has]].astype(np.float64)
    _, inv = np.unique(tgt, return_inverse=True)
    inv = inv.reshape(-1)
    weight = np.bincount(inv, weights=w)
    ranked = np.argsort(-weight, kind="stable")  # group 0 = majority target keeps the id
    rank = np.empty_like(ranked)
    rank[ranked] = np.arange(len(ranked))
    group = np.minimum(rank[inv], max_new)
    n_groups = int(group.max()) + 1 if group.size else 1
    if n_groups < 2:
        return next_id
    assign = np.empty(len(members), dtype=np.int64)
    assign[has] = group
    if (~has).any():
        assign[~has] = group[_nearest_point(tree.X[members[~has]], tree.X[members[has]])]
    ids = np.concatenate([[state[members[0]]], next_id + np.arange(n_groups - 1)])
    state[members] = ids[assign]
    return next_id + n_groups - 1


def _initial_partition(tree: _Tree, n_classes: int, initial_states: int | None,
                       random_state: int | None) -> np.ndarray:
    """One state per predicted class, or k-means split by predicted class."""
    present, state = np.unique(tree.pred, return_inverse=True)
    state = state.reshape(-1).astype(np.int64)
    if initial_states is None or initial_states <= len(present):
        return state
    from .kmeans import KMeansAbstractor

    k = int(min(initial_states, len(tree.X)))
    proba = np.eye(n_classes)[tree.pred]
    ab = KMeansAbstractor(n_states=k, features="pca", pca_components=min(20, tree.X.shape[1]),
                          split_by_prediction=True, n_init=1, random_state=random_state)
    ab.fit(tree.X, proba=proba)
    _, state = np.unique(ab.predict(tree.X, proba=proba), return_inverse=True)
    return state.reshape(-1).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Minimisation of a class-labelled automaton
# ---------------------------------------------------------------------------------------------


def _state_map(big: np.ndarray, big_initial: int, small: np.ndarray) -> np.ndarray:
    """Map every state of ``big`` reachable from its initial state to the state of ``small``
    reached by the same strings (BFS over the product; -1 for unreachable states)."""
    out = np.full(len(big), -1, dtype=np.int64)
    out[big_initial] = 0
    frontier = [big_initial]
    while frontier:
        nxt = []
        for q in frontier:
            for a in range(big.shape[1]):
                r = int(big[q, a])
                if out[r] < 0:
                    out[r] = small[out[q], a]
                    nxt.append(r)
        frontier = nxt
    return out


def _minimise(alphabet: tuple[str, ...], trans: np.ndarray, state_class: np.ndarray,
              initial: int, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Minimal automaton with the same class on every string.

    Returns
    -------
    transitions : ndarray of shape (n_min, n_symbols)
        BFS-numbered from the initial state 0.
    state_class : ndarray of shape (n_min,)
    block : ndarray of shape (n_states,)
        Minimal state of every input state (-1 if unreachable).
    """
    present = np.unique(state_class)
    if len(present) <= 2:  # one indicator determines the class
        c = present[-1]
        m = minimize(DFA(alphabet, trans, state_class == c, initial))
        block = _state_map(trans, initial, m.transitions)
        cls = np.empty(m.n_states, dtype=np.int64)
        cls[block[block >= 0]] = state_class[block >= 0]
        return np.array(m.transitions), cls, block
    # Equal class on every suffix <=> equal indicator of every class on every suffix: the
    # minimal partition is the common refinement of the per-class minimal partitions.
    maps = [_state_map(trans, initial,
                       minimize(DFA(alphabet, trans, state_class == c, initial)).transitions)
            for c in present]
    sig = np.stack(maps, axis=1)
    reach = sig[:, 0] >= 0
    _, joint = np.unique(sig[reach], axis=0, return_inverse=True)
    block_r = np.full(len(trans), -1, dtype=np.int64)
    block_r[reach] = joint.reshape(-1)
    n_b = int(joint.max()) + 1
    rep = np.zeros(n_b, dtype=np.int64)
    rep[block_r[reach]] = np.flatnonzero(reach)
    q_trans = block_r[trans[rep]]
    q_cls = state_class[rep]
    # Canonical BFS numbering from the initial block.
    order = [int(block_r[initial])]
    seen = {order[0]}
    for q in order:
        for r in q_trans[q].tolist():
            if r not in seen:
                seen.add(r)
                order.append(r)
    rank = np.empty(n_b, dtype=np.int64)
    rank[order] = np.arange(n_b)
    block = np.where(block_r >= 0, rank[np.maximum(block_r, 0)], -1)
    return rank[q_trans[order]], q_cls[order], block


# ---------------------------------------------------------------------------------------------
# Agreement with the RNN
# ---------------------------------------------------------------------------------------------


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

    ``grammar`` is a :class:`rnn_models.formats.automaton.DFA` (its accepting states are
    class ``accept``) or anything with ``name``, ``dfa`` and ``classes`` (reject, accept)
    such as an ``rnn_models.formal.Grammar``; None or another alphabet gives ``{}``.
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


# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------


def _tokenizer_of(traces: Traces) -> str:
    """``char`` or ``space``: how the run split its texts (from the run's config.json)."""
    try:
        cfg = json.loads((Path(traces.path).parent / "config.json").read_text())
        tok = cfg["data"]["tokenizer"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "char"
    return "char" if tok == "char" else "space"


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
) -> ExtractedDFA:
    """Extract a deterministic, complete, minimal automaton from recorded traces.

    See the module docstring for the algorithm. Everything that touches all hidden states
    is vectorised; Python loops run over refinement rounds and split states only.

    Parameters
    ----------
    traces : rnn_models.traces.Traces
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
        ``rnn_models.formal.GRAMMARS[name]``): the report then compares the automaton with
        it on every string of length at most 12.

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
    if not isinstance(max_states, (int, np.integer)) or isinstance(max_states, bool) or \
            max_states < 1:
        raise AbstractionError(f"max_states must be a positive integer, not {max_states!r}")
    if initial_states is not None and (not isinstance(initial_states, (int, np.integer))
                                       or initial_states < 1):
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
    classes = list(traces.classes)
    n_classes = len(classes)
    alphabet, lookup = _alphabet(traces, split)
    if not alphabet:
        raise AbstractionError(
            f"split {split!r} holds only empty strings; a DFA needs strings with symbols"
        )
    n_sym = len(alphabet)
    sym = lookup[np.asarray(st.surface_ids, dtype=np.int64)]
    h0 = np.asarray(traces.initial_hidden, dtype=np.float32)
    p0 = np.asarray(traces.initial_proba, dtype=np.float64)
    tree = _prefix_tree(st, sym, n_sym, h0, p0)
    n_pred = len(np.unique(tree.pred))
    if max_states < n_pred:
        raise AbstractionError(
            f"max_states={max_states} cannot separate the {n_pred} classes the RNN predicts; "
            f"pass max_states >= {n_pred}"
        )

    # --- refinement ------------------------------------------------------------------------
    state = _initial_partition(tree, n_classes, initial_states, random_state)
    n_initial = int(state.max()) + 1
    n_states = n_initial
    rounds = 0
    n_before = -1
    budget_exhausted = False
    while rounds < max_rounds:
        pair, n_targets, total, _, top_w = _conflicts(tree, state, n_states, n_sym)
        bad = np.flatnonzero(n_targets > 1)
        if bad.size == 0:
            break
        if n_states >= max_states:
            budget_exhausted = True
            break
        if rounds and n_states == n_before:
            break  # nothing could be split (cannot happen with a consistent tree)
        n_before = n_states
        rounds += 1
        minority = (total - top_w)[bad]
        src = pair[bad] // n_sym
        # Worst symbol per state: sort by state, then by descending minority traffic.
        order = np.lexsort((-minority, src))
        first = np.ones(len(order), dtype=bool)
        first[1:] = src[order][1:] != src[order][:-1]
        pick = order[first]
        pick = pick[np.argsort(-minority[pick], kind="stable")]  # worst states first
        by_state = np.argsort(state, kind="stable")
        bounds = np.searchsorted(state[by_state], np.arange(n_states + 1))
        for j in pick:
            if n_states >= max_states:
                break
            q, a = int(src[j]), int(pair[bad][j] % n_sym)
            members = by_state[bounds[q]:bounds[q + 1]]
            n_states = _split(tree, state, members, a, n_states, max_states - n_states)

    # --- completion ------------------------------------------------------------------------
    pair, n_targets, total, top_t, top_w = _conflicts(tree, state, n_states, n_sym)
    deterministic = bool((n_targets <= 1).all())
    conflicting_steps = int((total - top_w).sum())
    occ = tree.occ.astype(np.float64)
    votes = np.zeros((n_states, n_classes))
    np.add.at(votes, (state, tree.pred), occ)
    cls = votes.argmax(axis=1)
    trans = np.full((n_states, n_sym), -1, dtype=np.int64)
    trans[pair // n_sym, pair % n_sym] = top_t
    sizes = np.bincount(state, minlength=n_states).astype(np.float64)
    centers = np.zeros((n_states, tree.X.shape[1]))
    np.add.at(centers, state, tree.X.astype(np.float64))
    centers /= np.maximum(sizes, 1.0)[:, None]
    missing = trans < 0
    if missing.any():
        d = ((centers[:, None, :] - centers[None, :, :]) ** 2).sum(-1)  # (S, S), S small
        ranked = np.argsort(d, axis=1, kind="stable")
        for q, a in np.argwhere(missing):
            for r in ranked[q]:
                if trans[r, a] >= 0 and not missing[r, a]:
                    trans[q, a] = trans[r, a]
                    break
    # Every symbol of the alphabet occurs in the split, so some state has seen it.
    initial = int(state[0])

    # --- minimisation ----------------------------------------------------------------------
    m_trans, m_cls, _ = _minimise(alphabet, trans, cls, initial, n_classes)
    n_min = len(m_trans)
    # Statistics from the DFA's own run over the training prefixes (parents come first).
    dstate = np.zeros(len(tree.X), dtype=np.int64)
    for lo, hi in zip(tree.level[1:-1], tree.level[2:], strict=True):  # one level per depth
        dstate[lo:hi] = m_trans[dstate[tree.parent[lo:hi]], tree.symbol[lo:hi]]
    visits = np.bincount(dstate, weights=tree.occ, minlength=n_min)
    step_state = dstate[tree.step_node]
    proba_sum = np.zeros((n_min, n_classes))
    for c in range(n_classes):  # loop over classes, vectorised over steps
        proba_sum[:, c] = np.bincount(step_state, minlength=n_min,
                                      weights=np.asarray(st.proba[:, c], np.float64))
    proba_sum[0] += p0 * st.n_inputs
    prediction = proba_sum / np.maximum(visits, 1)[:, None]
    prediction[visits == 0] = np.eye(n_classes)[m_cls[visits == 0]]
    m_counts = np.zeros((n_min, n_sym), dtype=np.int64)
    np.add.at(m_counts, (dstate[tree.parent[1:]], tree.symbol[1:]), tree.occ[1:])
    same = m_cls[dstate] == tree.pred
    lengths = np.diff(np.asarray(st.offsets))
    final_node = np.zeros(st.n_inputs, dtype=np.int64)
    final_node[lengths > 0] = tree.step_node[np.asarray(st.offsets)[1:][lengths > 0] - 1]
    seconds = time.perf_counter() - t_start

    report: dict[str, Any] = {
        "n_states": int(n_min),
        "n_states_before_minimisation": int(n_states),
        "n_initial_states": int(n_initial),
        "refinement_rounds": int(rounds),
        "max_states": int(max_states),
        "budget_exhausted": bool(budget_exhausted),
        "deterministic": deterministic,
        "conflicting_steps": conflicting_steps,
        "n_prefixes": len(tree.X),
        "train_agreement": float(same[final_node].mean()),
        "train_prefix_agreement": float(same.astype(np.float64) @ tree.occ / tree.occ.sum()),
        "seconds": round(seconds, 4),
    }
    info = {**dict(traces.provenance), "split": split, "max_states": int(max_states),
            "initial_states": initial_states, "random_state": random_state,
            "method": "prefix-tree refinement + Moore minimisation",
            "traces": str(getattr(traces, "path", ""))}
    out = ExtractedDFA(alphabet=alphabet, classes=classes, transitions=m_trans,
                       state_class=m_cls, initial=0, visits=visits.astype(np.int64),
                       prediction=prediction, counts=m_counts, tokenizer=_tokenizer_of(traces),
                       report=report, info=info)
    if eval_split is not None and eval_split in traces:
        report.update(_agreement(traces, eval_split, _alphabet_lookup(traces, alphabet),
                                 m_trans, m_cls, 0))
    report.update(_grammar_check(grammar, out))
    return out


def _alphabet_lookup(traces: Traces, alphabet: tuple[str, ...]) -> np.ndarray:
    """Map every surface id of the traces to a symbol id of ``alphabet`` (-1: unknown)."""
    index = {s: i for i, s in enumerate(alphabet)}
    return np.array([index.get(s, -1) for s in traces.surface], dtype=np.int64)
