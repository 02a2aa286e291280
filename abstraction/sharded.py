"""The abstraction as maps over trace shards and small reduces (in-process or on Dask).

A split's traces are stored as shards of whole inputs (:mod:`stateseer.core.traces`;
a split recorded before shards existed is one shard). Every heavy step of
:func:`stateseer.abstraction.pipeline.fit_abstraction` is a per-shard function here, mapped by an
engine (:mod:`stateseer.core.engine`: a plain loop in this process by default, or a
Dask cluster), and the per-shard results are combined in a fixed binary tree
(:func:`~stateseer.core.engine.tree_reduce`):

=====================  ==============================================================
:func:`sample_shard`   the fit sample: runs of rows drawn per shard, the shard's quota
                       proportional to its length, seeded by ``(random_state, index)``
                       (shard 0: ``random_state`` itself, so a one-shard split draws
                       exactly the rows an unsharded fit drew); the fit itself runs on
                       the driver (scikit-learn, unchanged)
:func:`assign_shard`   abstract state of every step (chunked ``predict``) and, for the
                       training split, the FSM's statistics (:class:`PathStats`):
                       visits, per-state prediction sums (fixed point: exact in any
                       order) and (source, token, target) counts as packed int64 keys;
                       on a cluster, per piece of a shard (:func:`assign_piece`), the
                       transitions between pieces added where they are joined
:func:`simulate_shard` the FSM run on the tokens alone, and its predictions
:func:`mine_patterns`  DeepSeer's pattern lists: counts per shard (merged exactly), the
                       lists chosen on the driver, then their phrases and inputs per
                       shard (the three phases of :mod:`stateseer.abstraction.analysis.patterns`)
=====================  ==============================================================

The in-process path uses these same functions, so for the same seed and shard layout the
states, the FSM, the patterns and the metrics are the same bits whichever engine ran them.
Per-shard outputs either come back to the driver or, with ``out`` (a ``.npy`` file made by
:func:`new_states_file`), are written by the worker into its own slice of that file, so
the driver never holds a whole split's states (writes are idempotent: a retried task
writes the same bytes again).

This module imports neither torch nor dash; Dask only through an engine it is given.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.abstractors.features import check_finite, sample_rows
from stateseer.abstraction.analysis import patterns as pat
from stateseer.abstraction.kernels import HAVE_NUMBA
from stateseer.core import layout
from stateseer.core.traces import SplitTraces, Traces

__all__ = [
    "TASKS_PER_WORKER",
    "PathStats",
    "ShardRef",
    "assign_piece",
    "assign_shard",
    "assign_split",
    "combine_stats",
    "fit_quotas",
    "fit_sharded",
    "fsm_from_stats",
    "index_piece",
    "index_shard",
    "input_pieces",
    "max_token",
    "mine_patterns",
    "n_pieces",
    "new_states_file",
    "open_ref",
    "path_stats",
    "pieces_per_shard",
    "sample_shard",
    "shard_refs",
    "simulate_piece",
    "simulate_shard",
    "simulate_split",
    "step_pieces",
]


@dataclass(frozen=True)
class ShardRef:
    """Where one shard lives; small and picklable (what a task receives).

    Attributes
    ----------
    traces : str
        The ``traces/`` directory.
    split : str
    index : int
        Shard number within the split.
    step_start, step_stop, input_start, input_stop : int
        The shard's steps and inputs within the split.
    """

    traces: str
    split: str
    index: int
    step_start: int
    step_stop: int
    input_start: int
    input_stop: int

    @property
    def n_steps(self) -> int:
        return self.step_stop - self.step_start


def shard_refs(traces: Traces, split: str) -> list[ShardRef]:
    """The shards of ``split`` in order (one for traces recorded without shards)."""
    shards = getattr(traces, "shards", None)
    if callable(shards):
        return [ShardRef(str(traces.path), split, int(s.index), int(s.step_start),
                         int(s.step_stop), int(s.input_start), int(s.input_stop))
                for s in shards(split)]
    tr = traces[split]
    return [ShardRef(str(traces.path), split, 0, 0, tr.n_steps, 0, tr.n_inputs)]


_OPEN: OrderedDict[tuple, SplitTraces] = OrderedDict()
_OPEN_MAX = 4  # memory maps are cheap; touched pages count as resident
_OPEN_LOCK = threading.Lock()


def open_ref(ref: ShardRef) -> SplitTraces:
    """The shard's traces, memory-mapped, with offsets local to the shard.

    Kept open per process (a worker runs several steps on the same shard), keyed by the
    traces' ``meta.json`` time stamp so that re-recorded traces are opened afresh.
    """
    meta = Path(ref.traces) / layout.META
    try:
        stamp = meta.stat().st_mtime_ns
    except OSError:
        stamp = 0
    key = (ref.traces, ref.split, ref.index, stamp)
    with _OPEN_LOCK:  # pattern, simulation and assignment threads open shards at once
        tr = _OPEN.get(key)
        if tr is not None:
            _OPEN.move_to_end(key)
            return tr
    from stateseer.core import traces as fmt

    opener = getattr(fmt, "open_shard", None)
    tr = (opener(ref.traces, ref.split, ref.index) if opener is not None
          else Traces(ref.traces)[ref.split])
    with _OPEN_LOCK:
        _OPEN[key] = tr
        _OPEN.move_to_end(key)
        while len(_OPEN) > _OPEN_MAX:
            _OPEN.popitem(last=False)
    return tr


def max_token(ref: ShardRef) -> int:
    """Largest token id of one shard (-1 when it has no steps)."""
    ids = open_ref(ref).token_ids
    return int(np.max(ids)) if len(ids) else -1


# -- the fit sample ------------------------------------------------------------------------
def fit_quotas(lengths: Sequence[int], k: int) -> np.ndarray:
    """Rows each shard gives to a fit sample of at most ``k`` rows, shape (n_shards,).

    Every row when the shards hold ``k`` or fewer; else shares proportional to the
    shards' lengths, rounded by largest remainder (ties: the earlier shard).
    """
    n = np.asarray(lengths, np.int64)
    total = int(n.sum())
    if total <= k:
        return n.copy()
    share = n * (k / total)
    q = np.floor(share).astype(np.int64)
    rest = int(k - q.sum())
    q[np.argsort(-(share - q), kind="stable")[:rest]] += 1
    return np.minimum(q, n)


def _seed(random_state: int | None, index: int) -> Any:
    return random_state if random_state is None or index == 0 else [random_state, index]


def sample_shard(item: tuple[ShardRef, int], *, random_state: int | None,
                 final: bool = False) -> tuple[np.ndarray, ...]:
    """The fit sample's rows from one shard.

    Parameters
    ----------
    item : (ShardRef, int)
        The shard and its quota of rows (:func:`fit_quotas`).
    random_state : int or None

    Returns
    -------
    S : ndarray of shape (n_rows, state_size), float32
    P : ndarray of shape (n_rows, n_classes)
        Runs of 16 consecutive rows
        (:func:`stateseer.abstraction.abstractors.features.sample_rows`).
    F : ndarray of shape (n_rows, n_classes)
        With ``final`` only: the final prediction of each row's input.

    Raises
    ------
    AbstractionError
        A sampled hidden state is NaN or infinite (named by its step in the split).
    """
    ref, quota = item
    tr = open_ref(ref)
    if quota <= 0:
        empty = np.zeros((0, tr.proba.shape[1]), np.asarray(tr.proba[:0]).dtype)
        return (np.zeros((0, tr.hidden.shape[1]), np.float32), empty,
                *((np.zeros((0, tr.proba.shape[1]), np.float32),) if final else ()))
    idx = sample_rows(tr.n_steps, int(quota), np.random.default_rng(_seed(random_state,
                                                                            ref.index)))
    idx = idx[:quota]
    S = np.asarray(tr.hidden[idx], dtype=np.float32)
    bad = ~np.isfinite(S).all(axis=1)
    if bad.any():
        check_finite(S[bad][:1], ref.step_start + int(idx[bad][0]))
    if not final:
        return S, np.asarray(tr.proba[idx])
    inputs, _ = tr.locate(idx)  # each row's input
    return S, np.asarray(tr.proba[idx]), np.asarray(tr.final_proba)[inputs]


def fit_sharded(abstractor: Any, refs: Sequence[ShardRef], engine: Any) -> Any:
    """Fit ``abstractor`` on a sample drawn per shard (the fit runs here, on the driver).

    The sample holds at most ``abstractor.max_fit_samples`` rows, so the abstractor
    takes it whole; with one shard it is exactly the sample an unsharded fit draws.
    ``labels_`` then holds the states of the sample's rows only: the states of every
    step come from :func:`assign_split`.
    """
    abstractor._validate_params()
    n_steps = sum(r.n_steps for r in refs)
    abstractor._check_size(n_steps)
    quotas = fit_quotas([r.n_steps for r in refs], int(abstractor.max_fit_samples))
    items = [(r, int(q)) for r, q in zip(refs, quotas, strict=True) if q > 0]
    takes_final = "final_proba" in inspect.signature(abstractor.fit).parameters
    parts = engine.map(sample_shard, items, random_state=abstractor.random_state,
                       final=takes_final)
    S, P, *F = parts[0] if len(parts) == 1 else [np.concatenate([p[k] for p in parts])
                                                 for k in range(len(parts[0]))]
    # margin features add the value axes (features.Projection.fit)
    return abstractor.fit(S, proba=P, **({"final_proba": F[0]} if takes_final else {}))


# -- assignment and the FSM's statistics ---------------------------------------------------
@dataclass
class PathStats:
    """What the FSM needs from the training paths, summable over shards and pieces.

    The statistics of a run of consecutive steps (a shard, or a piece of one on a
    cluster). Everything in them is an integer, so their sum is exact: whatever shards or
    pieces the steps were cut into and in whichever order they were added, the total is the
    same bits. A run that starts mid-input cannot see the transition into its first step;
    ``head`` and ``tail`` keep what :func:`combine_stats` needs to add it when the run
    before it is joined on.

    Attributes
    ----------
    visits : ndarray of shape (n_fsm_states,), int64
        Steps per FSM state.
    sums : ndarray of shape (n_fsm_states, n_classes), int64
        Sum of the steps' intermediate predictions per state, in fixed point
        (:func:`stateseer.abstraction.automata.fsm.prediction_sums`).
    n_inputs : int
        Inputs that start in the run (those of length 0 included).
    keys, counts : ndarray of shape (n_keys,), int64
        Sorted packed ``(source * n_tokens + token) * n_fsm_states + target`` keys and how
        often each was seen.
    head : tuple or None
        ``(shard, step, token * n_fsm_states + state, starts_input)`` of the run's first
        step (None for a run without steps).
    tail : tuple or None
        ``(shard, step after the last, state * n_tokens * n_fsm_states)`` of its last step.
    """

    visits: np.ndarray
    sums: np.ndarray
    n_inputs: int
    keys: np.ndarray
    counts: np.ndarray
    head: tuple | None = None
    tail: tuple | None = None


def path_stats(states: np.ndarray, tr: SplitTraces, n_fsm_states: int, n_tokens: int, *,
               lo: int = 0, hi: int | None = None, shard: int = 0) -> PathStats:
    """:class:`PathStats` of one shard's FSM states (abstract state + 1).

    Parameters
    ----------
    states : ndarray of shape (hi - lo,)
        FSM states of steps ``lo`` to ``hi`` of the shard.
    tr : SplitTraces
        The shard (local offsets).
    n_fsm_states, n_tokens : int
    lo, hi : int
        The run of the shard's steps (default: all of them).
    shard : int
        The shard's number (runs of different shards are never joined).

    The keys are those :meth:`stateseer.abstraction.automata.fsm.FSM.from_paths` counts on a whole
    split
    (``np.unique`` of packed keys), the sums its
    :func:`~stateseer.abstraction.automata.fsm.prediction_sums`.
    """
    from stateseer.abstraction.automata.fsm import prediction_sums

    S = n_fsm_states
    n = tr.n_steps
    hi = n if hi is None else hi
    st = np.asarray(states, dtype=np.int64)
    visits = np.bincount(st, minlength=S).astype(np.int64)
    sums = prediction_sums(st, tr.proba[lo:hi], S)
    offsets = np.asarray(tr.offsets)
    begins = offsets[:-1]
    # inputs starting in [lo, hi); the last run also takes empty inputs at the very end
    n_inputs = int(np.searchsorted(begins, hi if hi < n else n + 1, "left")
                   - np.searchsorted(begins, lo, "left"))
    head = tail = None
    if len(st):
        tok = np.asarray(tr.token_ids[lo:hi], np.int64)
        prev = np.empty_like(st)
        prev[1:] = st[:-1]
        starts = begins[np.diff(offsets) > 0]
        starts = starts[(starts >= lo) & (starts < hi)] - lo
        prev[starts] = 0
        key = (prev * n_tokens + tok) * S + st
        joins = len(starts) == 0 or starts[0] != 0  # the first step continues an input
        keys, counts = np.unique(key[1:] if joins else key, return_counts=True)
        head = (int(shard), int(lo), int(tok[0] * S + st[0]), not joins)
        tail = (int(shard), int(hi), int(st[-1] * n_tokens * S))
    else:
        keys = counts = np.zeros(0, np.int64)
    return PathStats(visits, sums, n_inputs, keys, counts.astype(np.int64), head, tail)


def combine_stats(a: PathStats, b: PathStats) -> PathStats:
    """Statistics of two runs of steps, ``a`` before ``b`` (keys merged, counts added;
    where ``b`` continues the input ``a`` ends in, the transition between them added)."""
    keys = [a.keys, b.keys]
    counts = [a.counts, b.counts]
    if (a.tail is not None and b.head is not None and not b.head[3]
            and a.tail[:2] == b.head[:2]):
        keys.append(np.array([a.tail[2] + b.head[2]], np.int64))
        counts.append(np.ones(1, np.int64))
    keys, counts = np.concatenate(keys), np.concatenate(counts)
    if len(keys):
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        keys, counts = keys[first], np.add.reduceat(counts, first)
    return PathStats(a.visits + b.visits, a.sums + b.sums, a.n_inputs + b.n_inputs, keys,
                     counts, a.head if a.head is not None else b.head,
                     b.tail if b.tail is not None else a.tail)


def fsm_from_stats(stats: PathStats, initial_proba: np.ndarray, *, n_states: int,
                   classes: Sequence[str], alphabet: Sequence[str],
                   coords: np.ndarray | None = None, fallback: str = "displacement",
                   simulation: str = "argmax", **kwargs: Any) -> Any:
    """The FSM of :meth:`~stateseer.abstraction.automata.fsm.FSM.from_paths`, from reduced
    statistics.

    Parameters
    ----------
    stats : PathStats
        Of the whole training split (:func:`combine_stats` over its shards).
    initial_proba : ndarray of shape (n_classes,)
    n_states : int
        Abstract states (the FSM has one more).
    **kwargs
        Further :class:`~stateseer.abstraction.automata.fsm.FSM` fields (``bandwidth``, ``info``
        ...).
    """
    from stateseer.abstraction.automata.fsm import FSM, mean_predictions

    S, V = n_states + 1, len(alphabet)
    visits = stats.visits.copy()
    visits[0] = stats.n_inputs
    prediction = mean_predictions(stats.sums, visits, initial_proba)
    dst = stats.keys % S
    pair = stats.keys // S
    src, tok = pair // V, pair % V
    cnt = stats.counts
    order = np.lexsort((dst, -cnt, tok, src))
    return FSM(classes=list(classes), alphabet=list(alphabet), visits=visits,
               prediction=prediction, source=src[order], token=tok[order],
               target=dst[order], count=cnt[order],
               coords=None if coords is None else np.asarray(coords, np.float64),
               fallback=fallback, simulation=simulation, **kwargs)


def new_states_file(path: str | Path, n_steps: int) -> str:
    """An int32 ``.npy`` file of ``n_steps`` zeros for the shards to fill (``out``)."""
    np.lib.format.open_memmap(path, "w+", np.int32, (n_steps,)).flush()
    return str(path)


def _write(out: str, start: int, values: np.ndarray) -> None:
    mm = np.load(out, mmap_mode="r+")
    mm[start:start + len(values)] = values
    mm.flush()
    del mm


# -- pieces: tasks smaller than a shard, on a cluster -----------------------------------------
TASKS_PER_WORKER = 4
"""A cluster map cuts shards into pieces until there are about this many tasks per worker:
a split of fewer shards than workers (a default recording holds up to 65,536 inputs in one
shard) still fills every worker, and the last tasks even out. Results do not depend on
the pieces (each piece's outputs are the whole shard's, bit for bit)."""


def pieces_per_shard(engine: Any, n_shards: int) -> int:
    """Pieces each shard of a split is cut into for ``engine``: 1 in this process (whole
    shards, as recorded), else enough for :data:`TASKS_PER_WORKER` tasks per worker."""
    if not getattr(engine, "is_cluster", False) or n_shards == 0:
        return 1
    want = TASKS_PER_WORKER * max(int(getattr(engine, "n_workers", 1)), 1)
    return max(1, -(-want // n_shards))


#: steps one task holds at most: a longer shard (an imported run is one shard of the
#: whole split) is cut into pieces, so that assignment, simulation and pattern mining
#: hold a bounded part of a split at once, on any engine (at 1M inputs, 18M steps, one
#: piece held 5.1 GB)
PIECE_STEPS = 1 << 21


def n_pieces(engine: Any, ref: ShardRef, n_shards: int) -> int:
    """Pieces of ``ref`` for ``engine`` (:func:`pieces_per_shard`), enough that none holds
    more than :data:`PIECE_STEPS` steps."""
    return max(pieces_per_shard(engine, n_shards), -(-ref.n_steps // PIECE_STEPS))


def step_pieces(ref: ShardRef, k: int, chunk: int) -> list[tuple[ShardRef, int, int]]:
    """Up to ``k`` runs ``(ref, lo, hi)`` of the shard's steps (local to the shard) that
    start on multiples of ``chunk``: the chunks a piece's ``predict`` reads are those of
    the whole shard, so its states are the same bits.

    Examples
    --------
    >>> r = ShardRef("t", "train", 0, 100, 110, 5, 7)
    >>> [(lo, hi) for _, lo, hi in step_pieces(r, 3, 4)]
    [(0, 4), (4, 8), (8, 10)]
    """
    n_chunks = -(-ref.n_steps // chunk)
    if k <= 1 or n_chunks <= 1:
        return [(ref, 0, ref.n_steps)]
    cuts = np.linspace(0, n_chunks, min(k, n_chunks) + 1).round().astype(int) * chunk
    return [(ref, int(a), int(min(b, ref.n_steps))) for a, b in pairwise(cuts)]


def input_pieces(ref: ShardRef, k: int) -> list[tuple[ShardRef, int, int]]:
    """Up to ``k`` runs ``(ref, a, b)`` of the shard's inputs (local), about equal in
    number.

    Examples
    --------
    >>> r = ShardRef("t", "train", 0, 0, 50, 0, 5)
    >>> [(a, b) for _, a, b in input_pieces(r, 2)]
    [(0, 2), (2, 5)]
    """
    n = ref.input_stop - ref.input_start
    if k <= 1 or n <= 1:
        return [(ref, 0, n)]
    cuts = np.unique(np.linspace(0, n, min(k, n) + 1).astype(int))
    return [(ref, int(a), int(b)) for a, b in pairwise(cuts)]


def assign_shard(ref: ShardRef, *, abstractor: Any, stats: tuple[int, int] | None = None,
                 out: str | None = None) -> dict[str, Any]:
    """FSM state (abstract state + 1) of every step of one shard.

    Parameters
    ----------
    ref : ShardRef
    abstractor : fitted abstractor
    stats : (n_fsm_states, n_tokens), optional
        Also return the shard's :class:`PathStats`.
    out : str, optional
        An int32 ``.npy`` of the whole split: the states go into the shard's slice
        instead of coming back.

    Returns
    -------
    dict
        ``states`` (ndarray of shape (n_steps,), int64) unless ``out``; ``stats``.
    """
    return assign_piece((ref, 0, ref.n_steps), abstractor=abstractor, stats=stats, out=out)


def assign_piece(item: tuple[ShardRef, int, int], *, abstractor: Any,
                 stats: tuple[int, int] | None = None, out: str | None = None
                 ) -> dict[str, Any]:
    """:func:`assign_shard` of steps ``lo`` to ``hi`` of one shard (``item``, from
    :func:`step_pieces`): the states, returned or written into the split's ``out`` file,
    and with ``stats`` the piece's :class:`PathStats` (summed over the pieces by
    :func:`combine_stats`, the shard's exactly)."""
    ref, lo, hi = item
    tr = open_ref(ref)
    st = (abstractor.predict(tr.hidden, tr.proba, rows=(lo, hi)) + 1 if hi > lo
          else np.zeros(0, np.int64))
    res: dict[str, Any] = {}
    if stats is not None:
        res["stats"] = path_stats(st, tr, *stats, lo=lo, hi=hi, shard=ref.index)
    if out is None:
        res["states"] = st.astype(np.int32)  # as in the file: half the memory of int64
    else:
        _write(out, ref.step_start + lo, st.astype(np.int32))
    return res


def _assign_stats(item: tuple[ShardRef, int, int], **kw: Any) -> PathStats:
    """:func:`assign_piece` writing its states to ``out``, returning the statistics only."""
    return assign_piece(item, **kw)["stats"]


def _states_out(out_dir: str | Path | None, name: str, n: int) -> str | None:
    return None if out_dir is None else new_states_file(Path(out_dir) / name, n)


def _gather(parts: list[dict[str, Any]], key: str, out: str | None) -> np.ndarray:
    if out is not None:
        return np.load(out, mmap_mode="r")
    arrays = [p[key] for p in parts]
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int32)


def assign_split(engine: Any, abstractor: Any, refs: Sequence[ShardRef], *,
                 stats: tuple[int, int] | None = None, out_dir: str | Path | None = None
                 ) -> tuple[np.ndarray, PathStats | None]:
    """States of a whole split, mapped over its shards, and the reduced statistics.

    Returns
    -------
    states : ndarray of shape (n_steps,)
        int32, in memory or a memory map of ``out_dir/SPLIT.states.npy``.
    stats : PathStats or None
    """
    n = sum(r.n_steps for r in refs)
    split = refs[0].split if refs else "split"
    out = _states_out(out_dir, f"{split}.states.npy", n)
    # pieces of shards (each with its statistics: their sum is the shard's): enough for
    # the workers of a cluster, and none longer than PIECE_STEPS
    items = [p for r in refs for p in step_pieces(r, n_pieces(engine, r, len(refs)),
                                                  int(abstractor.chunk_size))]
    if stats is not None and items and out is not None:  # only the statistics come back
        return _gather([], "states", out), engine.map_reduce(
            _assign_stats, items, combine_stats, abstractor=abstractor, stats=stats, out=out)
    if stats is not None and items:
        parts = engine.map(assign_piece, items, abstractor=abstractor, stats=stats, out=out)
        total = engine.reduce(combine_stats, [p["stats"] for p in parts])
    else:
        parts = engine.map(assign_piece, items, abstractor=abstractor, out=out)
        total = None
    return _gather(parts, "states", out), total


# -- simulation ------------------------------------------------------------------------------
def simulate_shard(ref: ShardRef, *, fsm: Any, modes: Sequence[str | None] = (None,),
                   out: str | None = None) -> dict[str, Any]:
    """The FSM run on one shard's tokens alone.

    Parameters
    ----------
    ref : ShardRef
    fsm : FSM
    modes : sequence of {None, 'argmax', 'probabilistic'}
        Simulations whose predictions to return (``None``: the FSM's own).
    out : str, optional
        As in :func:`assign_shard`, for the simulated path.

    Returns
    -------
    dict
        ``path`` (ndarray of shape (n_steps,), unless ``out``) and ``pred``: a list, one
        ndarray of shape (n_inputs,) per mode.
    """
    return simulate_piece((ref, 0, ref.input_stop - ref.input_start), fsm=fsm, modes=modes,
                          out=out)


def simulate_piece(item: tuple[ShardRef, int, int], *, fsm: Any,
                   modes: Sequence[str | None] = (None,), out: str | None = None
                   ) -> dict[str, Any]:
    """:func:`simulate_shard` of inputs ``a`` to ``b`` of one shard (``item``, from
    :func:`input_pieces`); every input's simulation depends on that input alone."""
    ref, a, b = item
    tr = open_ref(ref)
    off = np.asarray(tr.offsets[a:b + 1])
    tok = np.asarray(tr.token_ids[off[0]:off[-1]])
    first, off = int(off[0]), off - off[0]
    preds, path = [], None
    for mode in modes:
        p, pred = fsm.simulate_predictions(tok, off, mode)
        path = p if path is None else path
        preds.append(pred)
    if path is None:
        path = fsm.simulate(tok, off)
    res: dict[str, Any] = {"pred": preds}
    if out is None:
        res["path"] = path.astype(np.int32)
    else:
        _write(out, ref.step_start + first, path.astype(np.int32))
    return res


def simulation_tables(fsm: Any) -> None:
    """Compute the FSM's cached tables that simulations read (labels, the fallback table,
    the transition matrix in the form the simulation reads), so that shards and threads
    find them built. The tables they were built from are dropped (rebuilt if ever asked
    for; they would only travel with the FSM to every worker): the per-pair counts and
    pair index always, and with the compiled loop the scipy matrix (on Rotten Tomatoes
    the FSM pickles to 10 MB instead of 21)."""
    compiled = HAVE_NUMBA and hasattr(type(fsm), "_compiled_matrix")
    for name in ("labels", "delta", "_mean_transition",
                 "_compiled_matrix" if compiled else "_transition_matrix"):
        getattr(fsm, name, None)  # (a second call finds them built: nothing is redone)
    for name in ("_pair_counts", "_by_pair", *(("_transition_matrix",) if compiled else ())):
        vars(fsm).pop(name, None)


def _simulation_copy(fsm: Any) -> Any:
    """What a worker's simulation reads of ``fsm`` (after :func:`simulation_tables`): a
    shallow copy without the transition list, which the built tables replace (on Rotten
    Tomatoes 7 MB to ship to every worker instead of 10). The FSM itself when the
    compiled tables are not built."""
    import copy

    if "_compiled_matrix" not in vars(fsm) or "delta" not in vars(fsm):
        return fsm
    light = copy.copy(fsm)
    none = np.zeros(0, np.int64)
    light.source = light.token = light.target = light.count = none
    return light


def simulate_split(engine: Any, fsm: Any, refs: Sequence[ShardRef], *,
                   modes: Sequence[str | None] = (None,), out_dir: str | Path | None = None
                   ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Simulated path of a whole split and the predictions per mode (shard order).

    Returns
    -------
    path : ndarray of shape (n_steps,), int32
    preds : list of ndarray of shape (n_inputs,)
        One per entry of ``modes``.
    """
    simulation_tables(fsm)  # computed once here, shipped with the FSM
    n = sum(r.n_steps for r in refs)
    split = refs[0].split if refs else "split"
    out = _states_out(out_dir, f"{split}.simulated.npy", n)
    ship = _simulation_copy(fsm) if getattr(engine, "is_cluster", False) else fsm
    parts = engine.map(simulate_piece, [p for r in refs
                                        for p in input_pieces(r, n_pieces(engine, r, len(refs)))],
                       fsm=ship, modes=tuple(modes), out=out)
    preds = [np.concatenate([p["pred"][j] for p in parts]) if parts
             else np.zeros(0, np.int64) for j in range(len(modes))]
    return _gather(parts, "path", out), preds


# -- the context index -----------------------------------------------------------------------
def index_shard(ref: ShardRef, *, index: Any) -> tuple[np.ndarray, np.ndarray]:
    """Codes (n_steps, n_components) and inverted-list number (n_steps,) of one shard's
    steps under a fitted :class:`~stateseer.abstraction.analysis.neighbors.ContextIndex`
    projection."""
    return index_piece((ref, 0, ref.n_steps), index=index)


def index_piece(item: tuple[ShardRef, int, int], *, index: Any
                ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`index_shard` of steps ``lo`` to ``hi`` of one shard (``item``, from
    :func:`step_pieces` with the index's ``chunk_size``: the same bits)."""
    ref, lo, hi = item
    return index.encode(open_ref(ref).hidden, rows=(lo, hi))


# -- patterns --------------------------------------------------------------------------------
PATTERN_LISTS = ("ngrams", "contexts", "influential", "buggy")
# the lists mined side by side, one task each group, longest first: influential and buggy
# patterns read the same collapsed paths and window keys, computed once for both
PATTERN_TASKS = (("influential", "buggy"), ("ngrams",), ("contexts",))
PATTERN_MEMO_STEPS = 1 << 22  # splits up to 4M steps keep their parts between the phases
CONTEXTS_PER_STATE = 5


PatternItem = tuple[ShardRef, int, int, np.ndarray]


def _pattern_items(engine: Any, refs: Sequence[ShardRef], states: np.ndarray
                   ) -> list[PatternItem]:
    """``(ref, a, b, states)``: inputs ``a`` to ``b`` of a shard (local) and their FSM
    states, in pieces of at most :data:`PIECE_STEPS` steps (:func:`n_pieces`)."""
    items = []
    for r in refs:
        off = open_ref(r).offsets
        items += [(r, a, b, states[r.step_start + int(off[a]):r.step_start + int(off[b])])
                  for _, a, b in input_pieces(r, n_pieces(engine, r, len(refs)))]
    return items


def _pattern_part(item: PatternItem, memo: dict | None = None) -> pat.Part:
    """The piece's :class:`~stateseer.abstraction.analysis.patterns.Part`, kept in
    ``memo`` (one dict per :func:`mine_patterns` call): in this process its count and
    describe phases get the same part, so what one computed from the paths the other
    reuses (``None`` on a cluster: the dict would be scattered and fill on every
    worker)."""
    ref, a, b, states = item
    key = (ref.split, ref.index, ref.step_start, a, b)
    if memo is not None and key in memo:
        return memo[key]
    tr = open_ref(ref)
    off = np.asarray(tr.offsets[a:b + 1], np.int64)
    lo, hi = int(off[0]), int(off[-1])
    part = pat.Part(np.asarray(states, np.int64), off - lo,
                    np.asarray(tr.surface_ids[lo:hi]),
                    None if tr.proba is None else tr.proba[lo:hi],
                    np.asarray(tr.labels[a:b]), np.asarray(tr.predictions[a:b]),
                    ref.step_start + lo, ref.input_start + a)
    if memo is not None:
        memo[key] = part
    return part


def count_patterns_shard(item: PatternItem, *, lists: tuple[str, ...],
                         n_states: int, surface: list[str], stop: np.ndarray | None,
                         initial_proba: np.ndarray, memo: dict | None = None,
                         bucket: tuple[int, int] = (0, 1)) -> dict[str, Any]:
    """The count phase of each pattern list on one shard (``item``: the shard and its
    FSM states; ``stop``: :func:`stateseer.abstraction.analysis.patterns.stop_table`, for the
    n-grams, and ``bucket`` the n-grams counted (:func:`~stateseer.abstraction.analysis.
    patterns.ngram_counts`); ``memo``: see :func:`_pattern_part`)."""
    part = _pattern_part(item, memo)
    out: dict[str, Any] = {}
    if "ngrams" in lists:
        out["ngrams"] = pat.ngram_counts(part, n_states, vocab_size=len(surface), stop=stop,
                                         bucket=bucket)
    if "contexts" in lists:
        out["contexts"] = pat.context_candidates(part, surface, n_states,
                                                 per_state=CONTEXTS_PER_STATE)
    if "influential" in lists:
        out["influential"] = pat.influential_counts(part, n_states,
                                                    initial_proba=initial_proba)
    if "buggy" in lists:
        out["buggy"] = pat.buggy_counts(part, n_states)
    return out


def combine_pattern_counts(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two shards' counts as one (exact integer sums; contexts: the smallest keys)."""
    out: dict[str, Any] = {}
    for name in a:
        if name == "contexts":
            out[name] = pat.smallest_candidates([*a[name], *b[name]], CONTEXTS_PER_STATE)
        else:
            out[name] = pat.merge_counts(a[name], b[name])
    return out


def describe_patterns_shard(item: PatternItem, *, influential: list,
                            buggy: list, n_states: int, surface: list[str],
                            initial_proba: np.ndarray, memo: dict | None = None
                            ) -> dict[str, Any]:
    """The describe phase on one shard: phrases and inputs of the chosen patterns."""
    part = _pattern_part(item, memo)
    return {"influential": pat.influential_describe(part, influential, surface, n_states,
                                                    initial_proba=initial_proba),
            "buggy": pat.buggy_describe(part, buggy, surface, n_states)}


#: steps per n-gram bucket: a longer split counts its n-grams in several passes, each
#: over the n-grams of one hash bucket (every n-gram, exactly, in one of them), since
#: distinct n-grams grow with the data (at 1M inputs counting all at once took 3.5 GB)
NGRAM_BUCKET_STEPS = 1 << 21
#: in process, count every piece once into files partitioned by bucket
#: (:func:`_bucket_candidates`); False: one pass over all pieces per bucket (as on a
#: cluster, whose workers share no files; ``benchmarks/ngram_buckets.py``'s baseline)
NGRAM_PARTITION = True


def _mine_ngrams(engine: Any, items: list[PatternItem], shared: dict[str, Any],
                 n_steps: int) -> list[dict[str, Any]]:
    """:func:`~stateseer.abstraction.analysis.patterns.state_ngrams` of the split in
    ``items``, counted one hash bucket of n-grams at a time (the same lists)."""
    surface, n_states = shared["surface"], shared["n_states"]
    stop = pat.stop_table(surface)
    n_buckets = max(1, -(-n_steps // NGRAM_BUCKET_STEPS))
    if n_buckets > 1 and NGRAM_PARTITION and not getattr(engine, "is_cluster", False):
        return pat.ngrams_from_candidates(
            _bucket_candidates(items, shared, stop, n_buckets), surface, n_states)
    rows = []
    for b in range(n_buckets):
        counts = engine.map_reduce(count_patterns_shard, items, combine_pattern_counts,
                                   lists=("ngrams",), stop=stop, bucket=(b, n_buckets),
                                   **shared)
        rows.append(pat.ngram_candidates(counts["ngrams"], len(surface)))
    return pat.ngrams_from_candidates(rows, surface, n_states)


def _bucket_candidates(items: list[PatternItem], shared: dict[str, Any], stop: np.ndarray,
                       n_buckets: int) -> list[Any]:
    """:func:`~stateseer.abstraction.analysis.patterns.ngram_candidates` of each hash
    bucket, in process, reading every step once: each piece's counts are written to
    files partitioned by bucket (one pass), then each bucket's are summed from its
    partitions. The same rows as one pass over all pieces per bucket, whose work grew
    with the square of the steps (86 passes over 180M steps at 10M inputs)."""
    import tempfile

    surface, n_states = shared["surface"], shared["n_states"]
    whole: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # steps and states per state:
    # every n-gram's, summed over the pieces
    at: dict[str, list[np.ndarray]] = {}  # totals and pairs: each piece's bucket offsets
    written: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="stateseer-ngrams-") as tmp:
        files: dict[str, tuple[Any, Any]] = {}
        try:
            for item in items:  # one pass: every piece's counts, partitioned by bucket
                c = pat.ngram_counts(_pattern_part(item, shared["memo"]), n_states,
                                     vocab_size=len(surface), stop=stop)
                for name, (keys, cnt) in c.items():
                    if not name.startswith(("total", "pair")):
                        whole[name] = (keys, cnt + whole[name][1] if name in whole else cnt)
                        continue
                    if name not in files:
                        files[name] = (open(Path(tmp) / f"{name}.keys", "wb"),
                                       open(Path(tmp) / f"{name}.counts", "wb"))
                        at[name], written[name] = [], 0
                    b = pat.ngram_key_bucket(name, keys, len(surface), n_buckets)
                    order = np.argsort(b, kind="stable")  # keys stay sorted per bucket
                    files[name][0].write(keys[order].tobytes())
                    files[name][1].write(cnt[order].tobytes())
                    at[name].append(written[name] + np.searchsorted(
                        b[order], np.arange(n_buckets + 1)))
                    written[name] += len(keys)
        finally:
            for fk, fc in files.values():
                fk.close()
                fc.close()
        rows = []
        maps = {name: tuple(np.memmap(Path(tmp) / f"{name}.{x}", np.int64, "r")
                            if written[name] else np.zeros(0, np.int64)
                            for x in ("keys", "counts")) for name in at}
        for b in range(n_buckets):  # then each bucket from its partitions
            counts: dict[str, Any] = dict(whole)
            for name, (keys, cnt) in maps.items():
                counts[name] = pat.summed_counts(
                    [keys[o[b]:o[b + 1]] for o in at[name]] or [keys[:0]],
                    [cnt[o[b]:o[b + 1]] for o in at[name]] or [cnt[:0]])
            rows.append(pat.ngram_candidates(counts, len(surface)))
        del maps
    return rows


def mine_patterns(engine: Any, refs: Sequence[ShardRef], states: np.ndarray,
                  surface: list[str], initial_proba: np.ndarray, n_states: int,
                  lists: Sequence[str] = PATTERN_LISTS) -> dict[str, Any]:
    """DeepSeer's pattern lists of a split, mapped over its shards.

    The same lists as :func:`stateseer.abstraction.analysis.patterns.state_ngrams`,
    ``state_contexts``,
    ``influential_patterns`` and ``buggy_patterns`` with their defaults on the whole
    split, whatever the shard layout or the engine.

    Parameters
    ----------
    engine : Engine
    refs : sequence of ShardRef
        The split's shards.
    states : ndarray of shape (n_steps,)
        FSM state of every step of the split.
    surface : list of str
        The traces' surface table (what ``surface_ids`` index).
    initial_proba : ndarray of shape (n_classes,)
    n_states : int
        FSM states.
    lists : sequence of str
        Which of :data:`PATTERN_LISTS` to mine.

    Returns
    -------
    dict
        One entry per list.
    """
    lists = tuple(lists)
    items = _pattern_items(engine, refs, states)
    # the shards' parts, kept for the describe phase (in this process) while the split is
    # small enough: about 100 bytes a step, so a bounded memory, not one that grows with N
    n_steps = sum(r.n_steps for r in refs)
    small = n_steps <= PATTERN_MEMO_STEPS
    memo = {} if small and not getattr(engine, "is_cluster", False) else None
    shared = {"n_states": n_states, "surface": list(surface), "initial_proba": initial_proba,
              "memo": memo}
    out: dict[str, Any] = {}
    if "ngrams" in lists:
        out["ngrams"] = _mine_ngrams(engine, items, shared, n_steps)
    lists = tuple(x for x in lists if x != "ngrams")
    counts = engine.map_reduce(count_patterns_shard, items, combine_pattern_counts,
                               lists=lists, **shared, stop=None) if lists else {}
    if "contexts" in lists:
        out["contexts"] = pat.contexts_from_candidates(counts["contexts"], n_states,
                                                       CONTEXTS_PER_STATE)
    influential = pat.influential_select(counts["influential"]) if "influential" in lists \
        else []
    buggy = pat.buggy_select(counts["buggy"]) if "buggy" in lists else ([], 0, 0, 0)
    described = engine.map(describe_patterns_shard, items, influential=influential,
                           buggy=buggy[0], **shared) if influential or buggy[0] else []
    if "influential" in lists:
        out["influential"] = pat.influential_from(
            influential, [d["influential"] for d in described], n_states)
    if "buggy" in lists:
        out["buggy"] = pat.buggy_from(buggy, [d["buggy"] for d in described], n_states)
    return out
