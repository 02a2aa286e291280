"""The finite state machine built from abstract-state paths.

States are the abstract states plus a synthetic initial state (id 0) standing for ``h0``;
the abstract state ``k`` of a hidden state is FSM state ``k + 1``. Transitions are counted
per (source, token, target). The machine is a small, honest object in the manner of
AALpy's automata, an :class:`~stateseer.core.automaton.Automaton`:
:meth:`FSM.reset`, :meth:`FSM.step` and :meth:`FSM.run` simulate it on tokens alone,
without the RNN; :meth:`FSM.simulate` runs every input at once (vectorised over inputs)
and :meth:`FSM.to_dot` draws it with the one DOT writer.

Simulation
    From a state on a token, the machine goes to the most frequent target seen for that
    (state, token) pair (ties: lowest id). For a pair never seen in training the
    ``fallback`` decides:

    ``displacement`` (default)
        move as the token moves the states that have seen it: the average displacement
        (target centroid − source centroid) of the token's transitions, weighted by a
        Gaussian kernel on the distance between those sources and the current state
        (width ``bandwidth`` × the spread of the centroids), is added to the current
        state's centroid, and the machine goes to the nearest state;
    ``nearest``
        take the transition on that token of the nearest state (by centroid distance)
        that has seen the token;
    ``token``
        go to the token's most frequent target over all states;
    ``stay``
        stay in the current state.

    A token that no state has seen (not even ``<unk>``) always stays.

Probabilistic simulation (``simulation='probabilistic'``, :meth:`FSM.simulate_distribution`)
    The machine tracks a distribution over states, as a probabilistic automaton does: on a
    token, each state's mass moves by the transition probabilities counted in training for
    that (state, token) pair, or wholly to the fallback's target when the pair was never
    seen; ``smoothing`` mixes in the state's token-independent transitions. The machine's
    prediction is the class of the final distribution × the states' mean predictions
    (:meth:`FSM.simulate_predictions`). The single ``simulate`` path stays the
    deterministic one (what :meth:`FSM.run` gives). The run is a compiled loop per input
    (:mod:`stateseer.abstraction.kernels`, numba), else one sparse product per position (scipy).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import IO, Any

import numpy as np

from stateseer.abstraction.arrays import numpy_threads
from stateseer.abstraction.automata.io import read_text, write_chunks
from stateseer.abstraction.colors import ClassColors
from stateseer.abstraction.errors import AbstractionError
from stateseer.abstraction.kernels import HAVE_NUMBA, det_run, nearest_centre, pfa_run
from stateseer.core.automaton import Automaton
from stateseer.core.dot import dot_document
from stateseer.core.errors import StateseerError
from stateseer.core.reading import load_json

__all__ = ["FALLBACKS", "FSM", "PREDICTION_BITS", "SIMULATIONS", "mean_predictions",
           "paths_to_transitions", "prediction_sums"]

FALLBACKS = ("displacement", "nearest", "token", "stay")
SIMULATIONS = ("argmax", "probabilistic")
FORMAT = "stateseer.fsm"
VERSION = 1
#: transitions an FSM's document holds one to a line; above, a line holds this many and
#: the document is written in pieces (:meth:`FSM.save`)
STREAM_TRANSITIONS = 65_536


def _exchange_order(source: np.ndarray, token: np.ndarray, target: np.ndarray,
                    count: np.ndarray) -> np.ndarray:
    """The order of the transitions an FSM read from its document holds: by source, then
    token, then count (largest first), then target."""
    return np.lexsort((target, -count, token, source))


PREDICTION_BITS = 30
"""Fixed point of the per-state prediction sums: each intermediate prediction counts as
``round(p * 2**30)``, an integer, so the sums are exact and the same whatever order or
grouping of steps added them (one split, its shards, or pieces of shards on a cluster);
the means keep 2**-31 of absolute precision, and int64 holds 2**33 steps a state."""
_EXACT_ROWS = 1 << 22  # 2**22 steps of at most 2**30 each: float64 bincounts stay exact


def prediction_sums(fsm_states: np.ndarray, proba: np.ndarray, n_fsm_states: int
                    ) -> np.ndarray:
    """Sum of the steps' intermediate predictions per FSM state, in fixed point.

    Parameters
    ----------
    fsm_states : ndarray of shape (n_steps,)
    proba : ndarray of shape (n_steps, n_classes)
    n_fsm_states : int

    Returns
    -------
    ndarray of shape (n_fsm_states, n_classes), int64
        Sums of ``round(p * 2**PREDICTION_BITS)`` (:data:`PREDICTION_BITS`).
    """
    st = np.asarray(fsm_states, np.int64)
    C = proba.shape[1]
    sums = np.zeros((n_fsm_states, C), np.int64)
    scale = float(2 ** PREDICTION_BITS)
    for a in range(0, len(st), _EXACT_ROWS):  # blocks: float64 sums stay exact integers
        s = st[a:a + _EXACT_ROWS]
        for c in range(C):  # a loop over classes, vectorised over steps
            w = np.array(proba[a:a + _EXACT_ROWS, c], np.float64)  # a copy, scaled in place
            w *= scale
            np.rint(w, out=w)
            sums[:, c] += np.bincount(s, weights=w, minlength=n_fsm_states).astype(np.int64)
    return sums


def mean_predictions(sums: np.ndarray, visits: np.ndarray, initial_proba: np.ndarray
                     ) -> np.ndarray:
    """Mean intermediate prediction per FSM state from :func:`prediction_sums`, shape
    (n_fsm_states, n_classes): the initial state's is ``initial_proba``, an unvisited
    state's is uniform."""
    C = sums.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        prediction = (np.asarray(sums, np.float64) * 2.0 ** -PREDICTION_BITS
                      / np.maximum(visits, 1)[:, None])
    prediction[0] = np.asarray(initial_proba, np.float64)
    prediction[np.asarray(visits) == 0] = 1.0 / C
    return prediction


def paths_to_transitions(
    states: np.ndarray, offsets: np.ndarray, token_ids: np.ndarray, n_fsm_states: int,
    n_tokens: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Count (source, token, target) triples of all paths, vectorised.

    Parameters
    ----------
    states : ndarray of shape (n_steps,)
        FSM state after every token (≥ 1), inputs one after another.
    offsets : ndarray of shape (n_inputs + 1,)
    token_ids : ndarray of shape (n_steps,)
    n_fsm_states, n_tokens : int

    Returns
    -------
    source, token, target, count : ndarrays of shape (n_transitions,)
        Sorted by source, token, then descending count.
    """
    states = np.asarray(states, dtype=np.int64)
    if len(states) == 0:
        e = np.zeros(0, np.int64)
        return e, e, e, e
    prev = np.empty_like(states)
    prev[1:] = states[:-1]
    starts = np.asarray(offsets[:-1])[np.diff(offsets) > 0]
    prev[starts] = 0
    tok = np.asarray(token_ids, dtype=np.int64)
    key = (prev * n_tokens + tok) * n_fsm_states + states
    uniq, count = np.unique(key, return_counts=True)
    dst = uniq % n_fsm_states
    pair = uniq // n_fsm_states
    src, tk = pair // n_tokens, pair % n_tokens
    order = np.lexsort((dst, -count, tk, src))
    return src[order], tk[order], dst[order], count[order]


def _input_blocks(offsets: np.ndarray, k: int) -> list[tuple[int, int]]:
    """Up to ``k`` runs ``(first input, end input)`` of consecutive inputs holding about
    equal numbers of steps (the blocks a simulation runs on threads)."""
    n = len(offsets) - 1
    cuts = np.searchsorted(offsets, np.linspace(0, offsets[-1], k + 1)[1:-1])
    return list(pairwise([0, *sorted(set(int(c) for c in cuts) - {0, n}), n]))


@dataclass
class FSM(Automaton):
    """An abstract-state machine with transition statistics.

    Attributes
    ----------
    classes : list of str
    alphabet : list of str
        Token strings; transitions refer to them by index.
    visits : ndarray of shape (n_states,)
        How many recorded steps sit in each state (initial state: number of inputs).
    prediction : ndarray of shape (n_states, n_classes)
        Mean intermediate prediction of the steps in each state.
    source, token, target, count : ndarray of shape (n_transitions,)
        One entry per (source, token, target) seen, sorted by source, token, -count.
    coords : ndarray of shape (n_states, n_dims) or None
        State centroids in the abstraction's space (used by the ``displacement`` and
        ``nearest`` fallbacks).
    fallback : {'displacement', 'nearest', 'token', 'stay'}
    bandwidth : float
        Kernel width of the ``displacement`` fallback, relative to the centroids' spread.
    simulation : {'argmax', 'probabilistic'}
        How :meth:`simulate_predictions` predicts: the label of the single most-frequent
        path's last state, or the class of the tracked state distribution.
    smoothing : float
        Weight of the token-independent transitions in the probabilistic simulation.
    initial : int
    info : dict
        Provenance: model hash, layer, method, seed, split the FSM was built from;
        ``graph_attrs`` (a dict of scalars), when present, become the graph attributes of
        :meth:`to_networkx` (a DFA's export says how the DFA was built).
    """

    classes: list[str]
    alphabet: list[str]
    visits: np.ndarray
    prediction: np.ndarray
    source: np.ndarray
    token: np.ndarray
    target: np.ndarray
    count: np.ndarray
    coords: np.ndarray | None = None
    fallback: str = "displacement"
    initial: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    bandwidth: float = 0.5
    simulation: str = "argmax"
    smoothing: float = 0.0
    #: the run's class colours for drawings (:class:`~stateseer.abstraction.colors.ClassColors`;
    #: default stateseer's scale); not part of the exchange format
    palette: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.fallback not in FALLBACKS:
            raise AbstractionError(
                f"unknown fallback {self.fallback!r}; choose one of: {', '.join(FALLBACKS)}"
            )
        if self.simulation not in SIMULATIONS:
            raise AbstractionError(f"unknown simulation {self.simulation!r}; choose one of: "
                                   f"{', '.join(SIMULATIONS)}")
        if not 0 <= float(self.smoothing) < 1:
            raise AbstractionError(f"smoothing must be in [0, 1), not {self.smoothing}")
        self.reset()

    # construction -----------------------------------------------------------------------
    @classmethod
    def from_paths(
        cls,
        states: np.ndarray,
        offsets: np.ndarray,
        token_ids: np.ndarray,
        proba: np.ndarray,
        initial_proba: np.ndarray,
        *,
        n_states: int,
        classes: Sequence[str],
        alphabet: Sequence[str],
        coords: np.ndarray | None = None,
        fallback: str = "displacement",
        bandwidth: float = 0.5,
        info: dict[str, Any] | None = None,
        simulation: str = "argmax",
    ) -> FSM:
        """Build the machine from abstract-state paths.

        Parameters
        ----------
        states : ndarray of shape (n_steps,)
            Abstract state (0..n_states-1) of every step; FSM ids are these + 1.
        offsets : ndarray of shape (n_inputs + 1,)
        token_ids : ndarray of shape (n_steps,)
            Indices into ``alphabet``.
        proba : ndarray of shape (n_steps, n_classes)
            Intermediate predictions.
        initial_proba : ndarray of shape (n_classes,)
        n_states : int
            Number of abstract states (the FSM has one more).
        coords : ndarray of shape (n_states + 1, n_dims), optional
            Centroids, row 0 for the initial state.
        """
        S = n_states + 1
        fsm_states = np.asarray(states, dtype=np.int64) + 1
        n_inputs = len(offsets) - 1
        visits = np.bincount(fsm_states, minlength=S).astype(np.int64)
        visits[0] = n_inputs
        prediction = mean_predictions(prediction_sums(fsm_states, proba, S), visits,
                                      initial_proba)
        src, tok, dst, cnt = paths_to_transitions(fsm_states, offsets, token_ids, S,
                                                  len(alphabet))
        return cls(classes=list(classes), alphabet=list(alphabet), visits=visits,
                   prediction=prediction, source=src, token=tok, target=dst, count=cnt,
                   coords=None if coords is None else np.asarray(coords, np.float64),
                   fallback=fallback, info=dict(info or {}), bandwidth=bandwidth,
                   simulation=simulation)

    # basic facts --------------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        """Number of FSM states, the initial state included."""
        return len(self.visits)

    @property
    def n_transitions(self) -> int:
        return len(self.source)

    @cached_property
    def labels(self) -> np.ndarray:
        """Class index each state mostly predicts, shape (n_states,)."""
        return self.prediction.argmax(axis=1)

    @cached_property
    def token_index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.alphabet)}

    @property
    def unknown_id(self) -> int:
        """Alphabet id that tokens outside the alphabet read as (``<unk>``), or -1."""
        return self.token_index.get("<unk>", -1)

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Token strings to alphabet ids; tokens outside the alphabet read as ``<unk>`` when
        the alphabet has it (as the RNN's vocabulary does), else -1 (the machine stays)."""
        get, unk = self.token_index.get, self.unknown_id
        return np.fromiter((get(t, unk) for t in tokens), dtype=np.int64, count=len(tokens))

    # simulation ---------------------------------------------------------------------------
    @cached_property
    def delta(self) -> np.ndarray:
        """Deterministic transition table, shape (n_states, len(alphabet)), fallbacks filled."""
        S, V = self.n_states, len(self.alphabet)
        table = np.tile(np.arange(S, dtype=np.int64)[:, None], (1, V))
        if self.n_transitions == 0:
            return table
        first = np.ones(self.n_transitions, dtype=bool)
        first[1:] = (self.source[1:] != self.source[:-1]) | (self.token[1:] != self.token[:-1])
        seen = np.zeros((S, V), dtype=bool)
        seen[self.source[first], self.token[first]] = True
        table[self.source[first], self.token[first]] = self.target[first]
        if self.fallback == "stay":
            return table
        if self.fallback == "token":
            per_tok = np.zeros((V, S), np.int64)
            np.add.at(per_tok, (self.token, self.target), self.count)
            has = per_tok.sum(1) > 0
            best = per_tok.argmax(1)
            fill = ~seen & has[None, :]
            table[fill] = np.broadcast_to(best[None, :], (S, V))[fill]
            return table
        if self.coords is None:
            raise AbstractionError(
                f"the {self.fallback!r} fallback needs state coordinates (coords)")
        d = ((self.coords[:, None, :] - self.coords[None, :, :]) ** 2).sum(-1)
        if self.fallback == "displacement":
            return self._displacement(table, seen, d)
        d_self = d.copy()
        np.fill_diagonal(d_self, -1.0)
        order = np.argsort(d_self, axis=1, kind="stable")  # order[s, 0] == s
        done = seen.copy()
        for r in range(1, S):  # loop over neighbour ranks, vectorised over states and tokens
            nb = order[:, r]
            fill = ~done & seen[nb]
            table[fill] = table[nb][fill]
            done |= fill
            if done.all():
                break
        return table

    def _displacement(self, table: np.ndarray, seen: np.ndarray, d2: np.ndarray) -> np.ndarray:
        """Fill unseen (state, token) pairs by the kernel-weighted mean move of the token.

        Per coordinate, the kernel-smoothed moves are one (S, S) x (S, V) product, read at
        the unseen pairs only (no (S, V, D) table: 0.10 -> 0.06 s on a 41 x 18,414 FSM,
        the same table)."""
        S, V = table.shape
        c = self.coords
        spread = float(np.sqrt(c[1:].var(axis=0).mean())) if S > 2 else 1.0
        tau = max(self.bandwidth * (spread or 1.0), 1e-12)
        K = np.exp(-0.5 * d2 / tau**2)                         # (S, S)
        flat = self.source * V + self.token
        den = K @ np.bincount(flat, weights=self.count, minlength=S * V).reshape(S, V)
        unseen = ~seen & (den > 1e-12)
        if not unseen.any():
            return table
        at = np.flatnonzero(unseen.ravel())                     # the pairs to fill
        inv = 1.0 / den.ravel()[at]
        p = c[at // V].copy()                                   # where each pair's state is
        for j in range(c.shape[1]):  # ... moved by the token's kernel-weighted mean move
            move = self.count * (c[self.target, j] - c[self.source, j])
            num = K @ np.bincount(flat, weights=move, minlength=S * V).reshape(S, V)
            p[:, j] += num.ravel()[at] * inv
        cc = (c[1:] * c[1:]).sum(1)
        m2 = -2 * c[1:].T
        out = table.reshape(-1)
        if HAVE_NUMBA:  # no (pairs, states) distance matrix (0.22 -> 0.18 s, the table;
            # its sums are taken in another order than BLAS's, so a near-tie may go the
            # other way)
            best = np.empty(len(at), np.int64)
            nearest_centre(np.ascontiguousarray(p, np.float64),
                           np.ascontiguousarray(m2, np.float64), cc, best)
            out[at] = 1 + best  # never back to the initial state
            return table
        step = 1 << 14
        for a in range(0, len(at), step):  # chunks of unseen pairs, all states at once
            dist = p[a:a + step] @ m2
            dist += cc
            out[at[a:a + step]] = 1 + dist.argmin(1)  # never back to the initial state
        return table

    def next_state(self, state: int, token: str) -> int:
        """The state reached from ``state`` on ``token`` (fallbacks included; a token
        outside the alphabet reads as ``<unk>``, or stays where there is none)."""
        tid = self.token_index.get(token, self.unknown_id)
        return int(self.delta[state, tid]) if tid >= 0 else int(state)

    def simulate(self, token_ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Simulate every input at once (token ids, -1 = outside the alphabet).

        One compiled loop per input (:func:`stateseer.abstraction.kernels.det_run`), else,
        without numba, a loop over positions, vectorised over inputs.

        Returns
        -------
        ndarray of shape (n_steps,)
            The state after every token, inputs one after another.
        """
        offsets = np.asarray(offsets)
        lengths = np.diff(offsets)
        out = np.empty(int(offsets[-1]), dtype=np.int64)
        tok = np.asarray(token_ids, dtype=np.int64)
        delta = self._delta_stay
        if HAVE_NUMBA and (not len(tok) or int(tok.max()) < delta.shape[1]):
            # one compiled loop per input (the same states); ids past the table take the
            # numpy path below, which refuses them (the loop does not check bounds)
            det_run(np.ascontiguousarray(tok), np.ascontiguousarray(offsets, np.int64),
                    delta, int(self.initial), out)
            return out
        tok = np.where(tok < 0, delta.shape[1] - 1, tok)
        order = np.argsort(-lengths, kind="stable")   # longest first: alive inputs = prefix
        starts = offsets[:-1][order]
        # alive_at[t] = number of inputs longer than t
        alive_at = np.searchsorted(-lengths[order], -np.arange(int(lengths.max(initial=0))),
                                   side="left")
        cur = np.full(len(order), self.initial, dtype=np.int64)
        for t, k in enumerate(alive_at):  # loop over positions, vectorised over inputs
            pos = starts[:k] + t
            cur[:k] = delta[cur[:k], tok[pos]]
            out[pos] = cur[:k]
        return out

    @cached_property
    def _delta_stay(self) -> np.ndarray:
        """:attr:`delta` with one extra column, where tokens outside the alphabet (-1) stay
        (built once per machine, not once per :meth:`simulate` call)."""
        return np.concatenate([self.delta, np.arange(self.n_states)[:, None]], axis=1)

    @cached_property
    def _pair_counts(self) -> np.ndarray:
        """Training transitions out of each (state, token) pair, shape (n_states, V)."""
        V, S = len(self.alphabet), self.n_states
        return np.bincount(self.source * V + self.token, weights=self.count,
                           minlength=S * V).reshape(S, V)

    @cached_property
    def _mean_transition(self) -> np.ndarray:
        """Token-independent transition matrix, row-stochastic, shape (n_states, n_states);
        states without outgoing transitions stay."""
        S = self.n_states
        m = np.zeros((S, S))
        np.add.at(m, (self.source, self.target), self.count)
        tot = m.sum(1)
        m[tot == 0, np.flatnonzero(tot == 0)] = 1.0
        return m / m.sum(1, keepdims=True)

    @cached_property
    def _by_pair(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Transitions grouped by (source, token) pair: ``pair`` (n_states, V) int32, the
        pair's number (-1: never seen), ``ptr`` (n_pairs + 1,) its run in the transition
        arrays (sorted by source, token), and P(target | source, token) per transition."""
        keys = self.source * len(self.alphabet) + self.token
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        starts = np.flatnonzero(first)
        pair = np.full((self.n_states, len(self.alphabet)), -1, np.int32)
        pair[self.source[starts], self.token[starts]] = np.arange(len(starts))
        ptr = np.append(starts, len(keys)).astype(np.int64)
        prob = self.count / self._pair_counts[self.source, self.token]
        return pair, ptr, prob

    @cached_property
    def _transition_matrix(self):
        """The probabilistic step as one sparse matrix: row ``token * S + state`` holds
        P(target | state, token) — the training counts for a seen pair, the whole mass on
        the ``fallback``'s target for an unseen one — and the extra token ``V`` (outside the
        alphabet) stays. CSR, shape ((V + 1) * S, S)."""
        from scipy import sparse

        S, V = self.n_states, len(self.alphabet)
        pair, _, prob = self._by_pair
        us, ut = np.nonzero(pair < 0)
        rows = np.concatenate([self.token * S + self.source, ut * S + us, V * S + np.arange(S)])
        cols = np.concatenate([self.target, self.delta[us, ut], np.arange(S)])
        vals = np.concatenate([prob, np.ones(len(us)), np.ones(S)])
        return sparse.csr_matrix((vals, (rows, cols)), shape=((V + 1) * S, S))

    @cached_property
    def _compiled_matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:attr:`_transition_matrix` as the compiled loop reads it: ``det`` (int32 per
        row: the column of a row that is a single entry of exactly 1, else -1) and the CSR
        arrays (int32 indices, columns ascending) of the other rows (a ``det`` row's entry
        is never read, so it is left out: on Rotten Tomatoes 8.5 -> 3.8 MB to ship to
        every worker).

        Built from the transitions directly, without the scipy matrix (33 -> 7-18 ms on
        Rotten Tomatoes, where the simulation waits for it): a row is ``det`` unless its
        (state, token) pair was seen with two or more targets; its entries are those of
        :attr:`_transition_matrix`, the same probabilities in the same order.
        """
        S, V = self.n_states, len(self.alphabet)
        det = np.empty((V + 1) * S, np.int32)
        det[:V * S] = self.delta.T.ravel()          # row token * S + state
        det[V * S:] = np.arange(S)                  # outside the alphabet: stay
        row = self.token * S + self.source
        n_row = np.bincount(row, minlength=(V + 1) * S)
        multi = n_row >= 2
        det[multi] = -1
        kept = np.where(multi, n_row, 0)
        wide = np.int64 if int(kept.sum()) >= 2**31 - 1 else np.int32
        indptr = np.zeros(len(kept) + 1, wide)
        np.cumsum(kept, out=indptr[1:])
        take = np.flatnonzero(multi[row])
        take = take[np.lexsort((self.target[take], row[take]))]  # by row, then column
        total = np.bincount(row, weights=self.count, minlength=(V + 1) * S)
        data = self.count[take] / total[row[take]]
        return (det, indptr, np.ascontiguousarray(self.target[take], np.int32),
                np.ascontiguousarray(data, np.float64))

    def simulate_distribution(self, token_ids: np.ndarray, offsets: np.ndarray, *,
                              smoothing: float = 0.0, path: bool = True
                              ) -> tuple[np.ndarray, np.ndarray | None]:
        """Probabilistic simulation of every input at once (a PFA run).

        The machine holds a distribution over states; on a token, each state's mass moves
        by the transition probabilities seen in training for that (state, token) pair, or
        to the ``fallback``'s target for pairs never seen. ``smoothing`` mixes in the
        state's token-independent transition distribution. Loops over positions,
        vectorised over inputs (one sparse product per position, no loop over tokens
        of an input).

        Parameters
        ----------
        token_ids : ndarray of shape (n_steps,)
            Alphabet ids, -1 outside the alphabet (the mass stays).
        offsets : ndarray of shape (n_inputs + 1,)
        smoothing : float in [0, 1)
        path : bool
            Also return the most likely state after every token (without it only the
            rows of inputs ending at a position are made dense: about 20 % less work).

        Returns
        -------
        final : ndarray of shape (n_inputs, n_states)
            Distribution over states after each input's last token.
        path : ndarray of shape (n_steps,), or None without ``path``
            Most likely state after every token.
        """
        if not 0 <= smoothing < 1:
            raise AbstractionError(f"smoothing must be in [0, 1), not {smoothing}")
        offsets = np.asarray(offsets)
        tok = np.asarray(token_ids, dtype=np.int64)
        n, workers = len(offsets) - 1, numpy_threads()
        want = bool(path)
        if HAVE_NUMBA:  # the compiled loop, per input: any blocks give the same bits
            return self._simulate_compiled(tok, offsets, smoothing, want, workers)
        if n < 8192 or workers < 2 or smoothing > 0:
            return self._simulate_block(tok, offsets, smoothing, want)
        # inputs are independent: blocks of inputs (equal in steps) run on threads, where
        # the sparse products and numpy's gathers run in parallel (0.58 -> 0.40 s on 2
        # cores for 1.05M steps); every input's numbers are bit for bit those of one block
        # (not so with smoothing, whose matrix product BLAS computes by the block's size)
        blocks = [(tok[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a])
                  for a, b in _input_blocks(offsets, workers)]
        _ = self._transition_matrix  # built once, before the threads read it
        with ThreadPoolExecutor(len(blocks)) as pool:
            done = list(pool.map(lambda blk: self._simulate_block(*blk, smoothing, want),
                                 blocks))
        return (np.concatenate([f for f, _ in done]),
                np.concatenate([p for _, p in done]) if want else None)

    def _simulate_compiled(self, tok: np.ndarray, offsets: np.ndarray, smoothing: float,
                           want_path: bool, workers: int
                           ) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`simulate_distribution` by :func:`stateseer.abstraction.kernels.pfa_run` (about 3x
        the sparse products' speed), on up to ``workers`` threads over blocks of inputs
        of about equal steps. Each input's numbers depend on that input alone."""
        S, V = self.n_states, len(self.alphabet)
        n = len(offsets) - 1
        tok = np.ascontiguousarray(tok, np.int64)
        offsets = np.ascontiguousarray(offsets, np.int64)
        det, indptr, indices, data = self._compiled_matrix
        mean = (np.ascontiguousarray(self._mean_transition, np.float64) if smoothing > 0
                else np.zeros((1, 1)))
        final = np.empty((n, S))
        path = np.empty(len(tok) if want_path else 0, np.int64)
        blocks = _input_blocks(offsets, max(1, min(workers, n // 4096)))

        def run(a: int, b: int) -> None:  # path is written at the inputs' own steps
            pfa_run(tok, offsets[a:b + 1], det, indptr, indices, data, S, V, int(self.initial),
                    float(smoothing), mean, final[a:b], path)

        if len(blocks) == 1:
            run(*blocks[0])
        else:
            with ThreadPoolExecutor(len(blocks)) as pool:
                list(pool.map(lambda ab: run(*ab), blocks))
        return final, (path if want_path else None)

    def _simulate_block(self, tok: np.ndarray, offsets: np.ndarray, smoothing: float,
                        want_path: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`simulate_distribution` of a block of inputs, in this thread.

        Inputs run longest first, so the inputs still alive at a position are a prefix of
        the block. The distributions stay sparse from step to step (CSR rows, one per
        input): a step is one sparse product of the rows, re-indexed by each input's token,
        with :attr:`_transition_matrix` (3.4x faster than gathering the transitions of
        every state holding mass). Each row's numbers depend on that input alone, so any
        split into blocks or shards gives the same bits.
        """
        from scipy import sparse

        lengths = np.diff(offsets)
        S, V = self.n_states, len(self.alphabet)
        M = self._transition_matrix
        tok = np.where(np.asarray(tok) < 0, V, tok)
        path = np.empty(int(offsets[-1]), dtype=np.int64) if want_path else None
        n = len(lengths)
        order = np.argsort(-lengths, kind="stable")
        starts = offsets[:-1][order]
        alive_at = np.searchsorted(-lengths[order], -np.arange(int(lengths.max(initial=0))),
                                   side="left")
        final = np.zeros((n, S))
        final[:, self.initial] = 1.0  # empty inputs stay in the initial state
        data, idx, ptr = np.ones(n), np.full(n, self.initial, np.int64), np.arange(n + 1)
        D, mean = final.copy(), self._mean_transition if smoothing > 0 else None
        for t, k in enumerate(alive_at):  # loop over positions, vectorised over inputs
            pos = starts[:k] + t
            p = ptr[:k + 1]
            rows = np.repeat(tok[pos] * S, np.diff(p)) + idx[:p[-1]]
            A = sparse.csr_matrix((data[:p[-1]], rows, p), shape=(k, M.shape[0]))
            if smoothing > 0:  # the token-independent transitions mixed in (dense rows)
                D = (1 - smoothing) * (A @ M).toarray() + smoothing * (D[:k] @ mean)
                R = sparse.csr_matrix(D)
            else:
                R = A @ M
                D = R.toarray() if want_path else None
            done = alive_at[t + 1] if t + 1 < len(alive_at) else 0
            if D is not None:
                path[pos] = D.argmax(1)
                final[done:k] = D[done:]  # inputs whose last token this was
            elif done < k:
                final[done:k] = R[done:].toarray()
            data, idx, ptr = R.data, R.indices.astype(np.int64), R.indptr
        out = np.empty_like(final)
        out[order] = final
        return out, path

    def predict_distribution(self, final: np.ndarray) -> np.ndarray:
        """Class each input's final state distribution predicts: argmax of
        ``final @ prediction``, shape (n_inputs,)."""
        return (np.asarray(final) @ self.prediction).argmax(axis=1)

    def simulate_predictions(self, token_ids: np.ndarray, offsets: np.ndarray,
                             simulation: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The deterministic path and the machine's prediction for every input.

        Parameters
        ----------
        token_ids : ndarray of shape (n_steps,)
        offsets : ndarray of shape (n_inputs + 1,)
        simulation : {'argmax', 'probabilistic'}, optional
            Default: the machine's own ``simulation``.

        Returns
        -------
        path : ndarray of shape (n_steps,)
            :meth:`simulate`'s path.
        predictions : ndarray of shape (n_inputs,)
            Class index: the label of the path's last state (``argmax``), or the class of
            the final state distribution (``probabilistic``).
        """
        mode = simulation or self.simulation
        if mode not in SIMULATIONS:
            raise AbstractionError(f"unknown simulation {mode!r}; choose one of: "
                                   f"{', '.join(SIMULATIONS)}")
        path = self.simulate(token_ids, offsets)
        if mode == "argmax":
            return path, self.labels[self.final_states(path, offsets)]
        final, _ = self.simulate_distribution(token_ids, offsets, smoothing=self.smoothing,
                                              path=False)
        return path, self.predict_distribution(final)

    def final_states(self, paths: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Last state of each input given all-step paths; initial state for empty inputs."""
        offsets = np.asarray(offsets)
        lengths = np.diff(offsets)
        out = np.full(len(lengths), self.initial, dtype=np.int64)
        ne = lengths > 0
        out[ne] = np.asarray(paths)[offsets[1:][ne] - 1]
        return out

    # views ----------------------------------------------------------------------------------
    def state_edges(self, top_tokens: int = 5) -> list[dict[str, Any]]:
        """State-to-state aggregate: count, probability and most frequent tokens per edge.

        Computed once per ``top_tokens`` (an FSM's transitions do not change after it is
        built; the explorer asks for this on every diagram and card update); every call
        returns fresh dicts.
        """
        cache = self.__dict__.setdefault("_state_edges_cache", {})
        if top_tokens not in cache:
            cache[top_tokens] = self._state_edges(top_tokens)
        return [{**e, "top_tokens": list(e["top_tokens"])} for e in cache[top_tokens]]

    def _state_edges(self, top_tokens: int) -> list[dict[str, Any]]:
        if self.n_transitions == 0:
            return []
        S = self.n_states
        pair = self.source * S + self.target
        order = np.lexsort((-self.count, pair))
        pair_s, cnt_s, tok_s = pair[order], self.count[order], self.token[order]
        uniq, start = np.unique(pair_s, return_index=True)
        totals = np.add.reduceat(cnt_s, start)
        out_tot = np.bincount(self.source, weights=self.count, minlength=S)
        ends = np.append(start[1:], len(pair_s))
        edges = []
        for u, a, b, tot in zip(uniq, start, ends, totals, strict=True):
            s, d = divmod(int(u), S)
            stop = min(b, a + top_tokens)
            toks = [(self.alphabet[int(t)], int(c))
                    for t, c in zip(tok_s[a:stop], cnt_s[a:stop], strict=True)]
            edges.append({"source": s, "target": d, "count": int(tot),
                          "probability": float(tot / out_tot[s]), "top_tokens": toks,
                          "n_tokens": int(b - a)})
        return edges

    def pruned_edges(self, top_k: int = 3, min_count: int = 1, self_loops: bool = True,
                     top_tokens: int = 5) -> list[dict[str, Any]]:
        """The ``top_k`` heaviest outgoing edges per state, for display."""
        edges = [e for e in self.state_edges(top_tokens)
                 if e["count"] >= min_count and (self_loops or e["source"] != e["target"])]
        edges.sort(key=lambda e: (e["source"], -e["count"], e["target"]))
        out, per = [], {}
        for e in edges:
            n = per.get(e["source"], 0)
            if n < top_k:
                out.append(e)
                per[e["source"]] = n + 1
        return out

    def dot_nodes(self) -> list[tuple[str, dict[str, Any]]]:
        """Nodes for :meth:`to_dot`: coloured by mean prediction, sized by visits, and
        carrying ``visits``, ``prediction``, ``class_label`` (and ``coords``) so that
        :func:`stateseer.abstraction.automata.export.read_dot` loads the file back."""
        max_visits = max(int(self.visits.max(initial=1)), 1)
        pal = self.palette or ClassColors(len(self.classes))
        nodes = []
        for s in range(self.n_states):
            pred = self.prediction[s]
            label = self.classes[int(self.labels[s])]
            attrs = {"label": f"{s}\n{label}", "fillcolor": pal.mix(pred),
                     "width": f"{0.4 + 0.8 * np.sqrt(self.visits[s] / max_visits):.2f}",
                     "visits": str(int(self.visits[s])),
                     "prediction": json.dumps([round(float(p), 6) for p in pred]),
                     "class_label": label}
            if self.coords is not None:
                attrs["coords"] = json.dumps([round(float(x), 6) for x in self.coords[s]])
            nodes.append((f"s{s}", attrs))
        return nodes

    def dot_edges(self, top_k: int | None = None, min_count: int = 1, self_loops: bool = True,
                  label_tokens: int = 3) -> list[tuple[str, str, dict[str, Any]]]:
        """State-to-state edges for :meth:`to_dot` (label: top tokens; pen width by count;
        every (token, count) in a ``tokens`` attribute)."""
        edges = (self.pruned_edges(top_k, min_count, self_loops, top_tokens=10**9)
                 if top_k is not None else
                 [e for e in self.state_edges(top_tokens=10**9)
                  if e["count"] >= min_count and (self_loops or e["source"] != e["target"])])
        max_count = max((e["count"] for e in edges), default=1)
        out = []
        for e in edges:
            toks = e["top_tokens"]
            shown = ", ".join(t for t, _ in toks[:label_tokens])
            if len(toks) > label_tokens:
                shown += f" (+{len(toks) - label_tokens})"
            out.append((f"s{e['source']}", f"s{e['target']}", {
                "label": shown, "penwidth": round(0.5 + 4.5 * e["count"] / max_count, 2),
                "count": int(e["count"]), "tokens": json.dumps(toks, ensure_ascii=False)}))
        return out

    def to_dot(self, name: str = "fsm", *, top_k: int | None = None, min_count: int = 1,
               self_loops: bool = True, label_tokens: int = 3) -> str:
        """Graphviz DOT with AALpy's ``__start0`` start marker.

        Edges are aggregated per state pair; the file loads back without loss
        (:func:`stateseer.abstraction.automata.export.read_dot`) when every edge is kept.

        Parameters
        ----------
        name : str
            The graph's name.
        top_k : int, optional
            Keep only the ``top_k`` heaviest outgoing edges per state (display); ``None``
            keeps all (lossless).
        min_count : int
            Drop state-to-state edges seen fewer times.
        self_loops : bool
        label_tokens : int
            Tokens shown in an edge label.
        """
        graph = {"stateseer_classes": json.dumps(self.classes, ensure_ascii=False),
                 "stateseer_fallback": self.fallback,
                 "stateseer_bandwidth": float(self.bandwidth)}
        return dot_document(
            self.dot_nodes(), self.dot_edges(top_k, min_count, self_loops, label_tokens),
            initial=f"s{self.initial}", name=name, rankdir="LR", graph=graph,
            node_defaults={"shape": "circle", "style": "filled", "fontname": "Helvetica"},
            edge_defaults={"fontname": "Helvetica", "fontsize": 9})

    def to_networkx(self):
        """A ``networkx.MultiDiGraph``: one edge per (source, token, target), scalar attributes.

        Edge keys are ``e0``, ``e1`` … (the token is the ``token`` attribute), so that
        ``networkx.read_graphml`` with its default arguments reads every transition back:
        tokens such as ``0``, ``00`` and ``005`` as keys would collapse into one integer.
        """
        import networkx as nx

        g = nx.MultiDiGraph(initial=self.initial, classes=",".join(self.classes),
                            **dict(self.info.get("graph_attrs") or {}))
        for s in range(self.n_states):
            attrs = {f"p_{c}": float(self.prediction[s, i]) for i, c in enumerate(self.classes)}
            g.add_node(s, visits=int(self.visits[s]), label=self.classes[self.labels[s]],
                       initial=s == self.initial, **attrs)
        for i, (s, t, d, c) in enumerate(zip(self.source, self.token, self.target, self.count,
                                             strict=True)):
            g.add_edge(int(s), int(d), key=f"e{i}", token=self.alphabet[int(t)], count=int(c))
        return g

    # exchange format ----------------------------------------------------------------------
    def to_dict(self, *, transitions: bool = True) -> dict[str, Any]:
        """The ``stateseer.fsm`` v1 exchange format (DESIGN.md), with extra keys
        (``transitions=False``: an empty transition list)."""
        states = []
        for s in range(self.n_states):
            rec = {"id": s, "visits": int(self.visits[s]),
                   "label": self.classes[int(self.labels[s])],
                   "prediction": [round(float(p), 6) for p in self.prediction[s]]}
            if self.coords is not None:
                rec["coords"] = [round(float(x), 6) for x in self.coords[s]]
            states.append(rec)
        return {"format": FORMAT, "version": VERSION, "classes": self.classes,
                "initial": self.initial, "states": states,
                "transitions": self._transition_records(0, len(self.source))
                if transitions else [],
                "alphabet": self.alphabet, "fallback": self.fallback,
                "simulation": self.simulation, "smoothing": self.smoothing,
                "bandwidth": self.bandwidth, "provenance": self.info}

    def _transition_records(self, lo: int, hi: int) -> list[dict[str, Any]]:
        """Transitions ``lo`` to ``hi`` as exchange-format records."""
        a = self.alphabet
        return [{"source": int(s), "target": int(d), "token": a[int(t)], "count": int(c)}
                for s, t, d, c in zip(self.source[lo:hi], self.token[lo:hi],
                                      self.target[lo:hi], self.count[lo:hi], strict=True)]

    def exchanged(self) -> FSM:
        """This FSM as its saved document reads back (``from_dict(to_dict())``: the
        transitions in :meth:`from_dict`'s order, the figures rounded as saved), without a
        record per transition."""
        fsm = FSM.from_dict(self.to_dict(transitions=False))
        src, tok, dst, cnt = (np.asarray(a, np.int64)
                              for a in (self.source, self.token, self.target, self.count))
        order = _exchange_order(src, tok, dst, cnt)
        return replace(fsm, source=src[order], token=tok[order], target=dst[order],
                       count=cnt[order])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FSM:
        if not isinstance(data, dict):
            raise AbstractionError(
                f"an FSM document must be a JSON object, not {type(data).__name__}")
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise AbstractionError(
                f"not a {FORMAT} v{VERSION} document (format={data.get('format')!r}, "
                f"version={data.get('version')!r})"
            )
        try:
            states = sorted(data["states"], key=lambda s: s["id"])
            if [s["id"] for s in states] != list(range(len(states))):
                raise AbstractionError("state ids must be 0..n-1")
            alphabet = list(data.get("alphabet") or sorted({t["token"] for t in
                                                             data["transitions"]}))
            index = {t: i for i, t in enumerate(alphabet)}
            tr = data["transitions"]
            src = np.array([t["source"] for t in tr], np.int64)
            tok = np.array([index[t["token"]] for t in tr], np.int64)
            dst = np.array([t["target"] for t in tr], np.int64)
            cnt = np.array([t.get("count", 1) for t in tr], np.int64)
            order = _exchange_order(src, tok, dst, cnt)
            coords = (np.array([s["coords"] for s in states], np.float64)
                      if all("coords" in s for s in states) else None)
            n = len(states)
            bad = [t for t in tr if not (0 <= int(t["source"]) < n and 0 <= int(t["target"]) < n)]
            if bad:
                raise AbstractionError(
                    f"transition {bad[0]['source']} -> {bad[0]['target']} refers to a state "
                    f"that does not exist (states are 0..{n - 1})")
            if not 0 <= int(data.get("initial", 0)) < n:
                raise AbstractionError(f"initial state {data.get('initial')} does not exist")
            widths = {len(s["prediction"]) for s in states}
            if widths != {len(data["classes"])}:
                raise AbstractionError(
                    f"state predictions must have {len(data['classes'])} values (one per class)")
            prediction = np.array([s["prediction"] for s in states], np.float64)
            if not np.isfinite(prediction).all() or (
                    coords is not None and not np.isfinite(coords).all()):
                raise AbstractionError("state predictions and coordinates must be finite "
                                       "numbers (found NaN or infinity); re-run "
                                       "`stateseer abstract`")
            return cls(
                classes=list(data["classes"]), alphabet=alphabet,
                visits=np.array([s.get("visits", 0) for s in states], np.int64),
                prediction=prediction,
                source=src[order], token=tok[order], target=dst[order], count=cnt[order],
                coords=coords, fallback=data.get("fallback", "displacement"
                                                  if coords is not None else "stay"),
                initial=int(data.get("initial", 0)), info=dict(data.get("provenance", {})),
                bandwidth=float(data.get("bandwidth", 0.5)),
                simulation=str(data.get("simulation", "argmax")),
                smoothing=float(data.get("smoothing", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise AbstractionError(f"FSM document is malformed ({exc})") from None

    def save(self, path: str | Path | IO[str], *, overwrite: bool = False) -> None:
        """Write the JSON exchange format to a path or an open text file."""
        write_chunks(self._json_chunks(), path, overwrite=overwrite)

    def _json_chunks(self) -> Iterator[str]:
        """The saved document's text in pieces: whole (one transition a line) up to
        :data:`STREAM_TRANSITIONS` transitions; above, the transitions
        :data:`STREAM_TRANSITIONS` to a line, so that a big FSM's document is never held
        whole (at 1M inputs it is 1.5M transitions, 137 MB of JSON)."""
        n = len(self.source)
        if n <= STREAM_TRANSITIONS:
            yield json.dumps(self.to_dict(), indent=1, ensure_ascii=False)
            return
        key = '"transitions": []'  # the first occurrence: the keys before it are escaped
        before, after = json.dumps(self.to_dict(transitions=False), indent=1,
                                   ensure_ascii=False).split(key, 1)
        yield before + '"transitions": [\n'
        for lo in range(0, n, STREAM_TRANSITIONS):
            text = json.dumps(self._transition_records(lo, lo + STREAM_TRANSITIONS),
                              ensure_ascii=False)[1:-1]
            yield text if lo == 0 else ",\n" + text
        yield "\n ]" + after

    @classmethod
    def load(cls, path: str | Path | IO[str]) -> FSM:
        fix = ("rerun `stateseer abstract RUN`" if hasattr(path, "read") else
               f"rerun `stateseer abstract {Path(path).resolve().parent.parent}`")
        try:
            data = json.loads(read_text(path)) if hasattr(path, "read") else \
                load_json(path, fix=fix)
        except FileNotFoundError:
            raise AbstractionError(f"FSM file {path} not found; {fix}") from None
        except StateseerError as exc:  # not JSON, a non-file, too large, too deep
            raise AbstractionError(str(exc)) from None
        except ValueError as exc:
            raise AbstractionError(f"FSM file {path} is not valid JSON ({str(exc)[:80]}); "
                                   f"{fix}") from None
        return cls.from_dict(data)
