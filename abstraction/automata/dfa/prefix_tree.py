"""Step 1 of the extraction: every distinct training prefix becomes one point of a tree.

Equal prefixes share one node, so equal hidden states can never land in different
abstract states. The empty prefix is node 0 (``initial_hidden``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from stateseer.abstraction.arrays import distinct
from stateseer.abstraction.errors import AbstractionError
from stateseer.core import layout
from stateseer.core.traces import SplitTraces, Traces


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
    child : Children
        Child node on each symbol, -1 if the prefix was never extended by it:
        ``child[nodes, a]``.
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
    used = distinct(np.asarray(st.surface_ids))
    surface = list(traces.surface)
    if used.size and (used.min() < 0 or used.max() >= len(surface)):
        raise AbstractionError(f"split {split!r} refers to unknown surface ids; re-record the run")
    symbols = sorted({surface[int(i)] for i in used})
    index = {s: i for i, s in enumerate(symbols)}
    lookup = np.array([index.get(s, -1) for s in surface], dtype=np.int64)
    return tuple(symbols), lookup


class Children:
    """The prefix tree's child table, ``child[nodes, a]`` (-1: no such child), kept as the
    sorted (parent, symbol) keys of the nodes rather than a dense (n_nodes, n_symbols)
    table: a text run's 206,006 prefixes over 18,921 symbols made that table 29 GiB.

    >>> ch = Children(np.array([-1, 0, 0, 1]), np.array([-1, 1, 0, 1]), 2)
    >>> ch[np.array([0, 1, 2, 3]), 1].tolist(), ch[np.array([0]), 0].tolist()
    ([1, 3, -1, -1], [2])
    """

    def __init__(self, parent: np.ndarray, symbol: np.ndarray, n_symbols: int) -> None:
        key = parent[1:].astype(np.int64) * n_symbols + symbol[1:]
        self._order = np.argsort(key, kind="stable")
        self._keys = key[self._order]
        self.n_symbols = int(n_symbols)

    def __getitem__(self, where: tuple[np.ndarray, int]) -> np.ndarray:
        nodes, a = where
        want = np.asarray(nodes, np.int64) * self.n_symbols + int(a)
        at = np.searchsorted(self._keys, want)
        hit = at < len(self._keys)
        hit[hit] = self._keys[at[hit]] == want[hit]
        out = np.full(want.shape, -1, np.int64)
        out[hit] = self._order[at[hit]] + 1  # node ids start after the root
        return out


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
    child = Children(parent, symbol, n_symbols)
    return _Tree(X=X, pred=pred, occ=occ, parent=parent, symbol=symbol, child=child,
                 step_node=step_node, level=np.array(level, dtype=np.int64))




def _weighted(tree: _Tree, offsets: np.ndarray, weights: np.ndarray) -> _Tree:
    """The tree with ``occ`` counting input ``i`` ``weights[i]`` times (refinement and votes
    only; the automaton's visit counts keep one per input)."""
    lengths = np.diff(np.asarray(offsets, np.int64))
    occ = np.bincount(tree.step_node, weights=np.repeat(weights, lengths),
                      minlength=len(tree.X)).astype(np.int64)
    occ[0] = int(weights.sum())
    return replace(tree, occ=occ)


def _with_extra(st: SplitTraces, sym: np.ndarray, extra: list[tuple[SplitTraces, int]],
                alphabet: tuple[str, ...]) -> tuple[SplitTraces, np.ndarray, np.ndarray]:
    """The split with more inputs appended: ``(split, symbol ids, weight per input)``.

    Parameters
    ----------
    st : SplitTraces
        The training split; ``sym`` (n_steps,) its symbol ids.
    extra : list of (SplitTraces, int)
        More traced inputs (e.g. ``stateseer.rnn_models.record.record_texts`` output, which carries
        its own ``surface`` table) and the weight of each of their inputs.
    alphabet : tuple of str
        Symbols of the automaton; an extra input with another symbol is refused.

    Raises
    ------
    AbstractionError
        An extra input uses a symbol that is not in the training split.
    """
    index = {s: i for i, s in enumerate(alphabet)}
    parts, syms = [st], [sym]
    weights = [np.ones(st.n_inputs, np.int64)]
    for ex, w in extra:
        surface = list(ex.surface)
        ids = np.asarray(ex.surface_ids, dtype=np.int64)
        s = np.array([index.get(surface[i], -1) for i in ids], dtype=np.int64)
        if (s < 0).any():
            bad = surface[int(ids[np.flatnonzero(s < 0)[0]])]
            raise AbstractionError(
                f"symbol {bad!r} of an extra string is not in the training alphabet "
                f"{list(alphabet)}; use only symbols seen in training"
            )
        parts.append(ex)
        syms.append(s)
        weights.append(np.full(ex.n_inputs, int(w), np.int64))
    lengths = np.concatenate([np.diff(np.asarray(p.offsets, np.int64)) for p in parts])
    cat = SplitTraces(
        name=st.name,
        hidden=np.concatenate([np.asarray(p.hidden, np.float32) for p in parts]),
        proba=np.concatenate([np.asarray(p.proba, np.float32) for p in parts]),
        token_ids=np.concatenate([np.asarray(p.token_ids) for p in parts]),
        surface_ids=np.concatenate(syms), offsets=np.concatenate([[0], np.cumsum(lengths)]),
        labels=np.concatenate([np.asarray(p.labels) for p in parts]),
        final_proba=np.concatenate([np.asarray(p.final_proba, np.float32) for p in parts]),
        rows=np.arange(len(lengths)), surface=list(alphabet))
    return cat, np.concatenate(syms), np.concatenate(weights)


def _alphabet_lookup(traces: Traces, alphabet: tuple[str, ...]) -> np.ndarray:
    """Map every surface id of the traces to a symbol id of ``alphabet`` (-1: unknown)."""
    index = {s: i for i, s in enumerate(alphabet)}
    return np.array([index.get(s, -1) for s in traces.surface], dtype=np.int64)



def _tokenizer_of(traces: Traces) -> str:
    """``char`` or ``space``: how the run split its texts (from the run's config.json)."""
    try:
        cfg = json.loads((Path(traces.path).parent / layout.CONFIG).read_text())
        tok = cfg["data"]["tokenizer"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "char"
    return "char" if tok == "char" else "space"

