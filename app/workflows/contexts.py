"""Nearest training contexts: which training steps the model was in a state like this one.

Files kept in a run directory::

    RUN/index/train.contexts.npz    nearest-context index over the training steps (built in
                                    bounded memory; its codes read from disk on demand)
    RUN/index/train.contexts.json   what it was built from (traces' model and size)
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.analysis.neighbors import ContextIndex
from stateseer.core import layout
from stateseer.core.atomic import atomic_write_text
from stateseer.core.errors import StateseerError
from stateseer.core.traces import SplitTraces, Traces
from stateseer.rnn_models.run import ModelRun

__all__ = ["PROJECTION_BINS", "context_index", "nearest_contexts", "projection_bins"]


# -- nearest training contexts ------------------------------------------------------------
def _index_paths(run: ModelRun) -> tuple[Path, Path]:
    return layout.RunLayout(run.path).contexts


def context_index(run: ModelRun, traces: Traces, *, build: bool = True,
                  cluster: Any = None) -> ContextIndex | None:
    """The nearest-context index over the run's training steps (built once, then read).

    Rebuilt when the traces were re-recorded (another model or size). ``None`` when
    ``build`` is false and no up-to-date index exists. The training shards are encoded
    in this process or on ``cluster`` (``local``, ``local:N``, ``tcp://HOST:PORT`` or an
    open engine; default ``$STATESEER_CLUSTER``), with the same index either way.
    """
    npz, meta_path = _index_paths(run)
    train = traces["train"]
    want = {"model_sha256": traces.meta.get("model_sha256"), "n_steps": int(train.n_steps),
            "layer": traces.meta.get("layer"), "dim": int(train.hidden.shape[1])}
    if npz.exists() and meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            meta = {}
        if isinstance(meta, dict) and all(meta.get(k) == v for k, v in want.items()):
            try:
                return ContextIndex.load(npz)
            except (OSError, ValueError, KeyError, StateseerError):  # damaged: rebuilt below
                pass
    if not build:
        return None
    if train.n_steps == 0:
        raise StateseerError("the training split has no steps to index")
    t0 = time.perf_counter()
    from stateseer.abstraction.sharded import shard_refs
    from stateseer.core.engine import engine_scope

    work: Path | None = npz.parent / f"{npz.name}.build"  # the codes while building
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError:  # e.g. a read-only run: built in memory
        work = None
    try:
        with engine_scope(cluster) as engine:
            index = ContextIndex(workdir=work).fit_shards(shard_refs(traces, "train"),
                                                          engine)
        try:
            index.save(npz)
            atomic_write_text(meta_path, json.dumps({**want, "seconds": round(
                time.perf_counter() - t0, 2)}))
            index = ContextIndex.load(npz)  # mapped from the file, not held in memory
        except OSError as exc:  # e.g. a read-only run: use the index, rebuild it next time
            logging.getLogger("stateseer").warning(
                "could not save the context index in %s (%s); it is kept in memory only",
                npz.parent, exc)
            if work is not None:  # its work files are removed below: hold what they map
                index.codes_, index.norms_ = np.array(index.codes_), np.array(index.norms_)
                if getattr(index, "pc2_", None) is not None:
                    index.pc2_ = np.array(index.pc2_)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return index


def nearest_contexts(index: ContextIndex, train: SplitTraces, train_states: np.ndarray,
                     classes: list[str], query: np.ndarray, *, k: int = 8, window: int = 5,
                     query_state: int | None = None) -> dict[str, Any]:
    """The ``k`` training steps nearest to a hidden state, with context and a summary.

    Parameters
    ----------
    index : ContextIndex
        Built over ``train.hidden``.
    train : SplitTraces
    train_states : ndarray of shape (n_train_steps,)
        FSM state of every training step.
    classes : list of str
    query : ndarray of shape (state_size,)
    k, window : int
        Neighbours, and tokens of context on each side.
    query_state : int, optional
        The query's own FSM state (for "how many share the state").

    Returns
    -------
    dict
        ``rows``: one dict per neighbour (``input``, ``id``, ``position``, ``left``,
        ``token``, ``right``, ``state``, ``label``, ``prediction``, ``correct``,
        ``distance``); ``summary``: ``k``, ``same_state``, ``labels`` (counts),
        ``correct``, ``tokens`` (most common current tokens with counts), ``states``.
    """
    dist, idx = index.kneighbors(query, k, X=train.hidden)
    inp, pos = train.locate(idx)  # the k rows alone (not an array of every step)
    rows = []
    for d, r, i, p in zip(dist, idx, inp, pos, strict=True):
        toks = train.tokens(int(i))
        lab, pr = int(train.labels[i]), int(train.predictions[i])
        rows.append({"input": int(i), "id": int(train.rows[i]), "position": int(p),
                     "left": toks[max(0, p - window) : p], "token": toks[p],
                     "right": toks[p + 1 : p + 1 + window],
                     "cut_left": p - window > 0, "cut_right": p + 1 + window < len(toks),
                     "state": int(train_states[r]), "label": classes[lab],
                     "prediction": classes[pr], "correct": lab == pr,
                     "distance": round(float(d), 4)})
    states = Counter(r["state"] for r in rows)
    summary = {
        "k": len(rows),
        "same_state": sum(r["state"] == query_state for r in rows)
        if query_state is not None else None,
        "labels": dict(Counter(r["label"] for r in rows)),
        "correct": sum(r["correct"] for r in rows),
        "tokens": Counter(r["token"] for r in rows).most_common(5),
        "states": states.most_common(5),
    }
    return {"rows": rows, "summary": summary}


#: bins per axis of the projection of every training state
PROJECTION_BINS = 120


def projection_bins(index: ContextIndex, train_states: np.ndarray, *,
                    bins: int = PROJECTION_BINS, chunk: int = 1 << 20
                    ) -> dict[str, np.ndarray]:
    """Every indexed training step on the index's first two principal axes, binned.

    The index stores every step's projection (its codes; the first two columns are the
    first two principal axes), so nothing is recomputed: the codes are read in chunks
    (memory-mapped), binned on a ``bins`` x ``bins`` grid over their range, and each
    non-empty bin reports its count and its most frequent abstract state.

    Returns
    -------
    dict
        ``xy`` (m, 2) centres of the m non-empty bins, ``states`` (m,) each bin's most
        frequent state, ``count`` (m,) steps in it, ``n_total`` the steps binned (every
        indexed step) and ``bins``.
    """
    pc2 = getattr(index, "pc2_", None)  # contiguous: reads 8 bytes a step, not 192
    codes, order = (index.codes_ if pc2 is None else pc2), index.order_
    states = np.asarray(train_states)
    n, n_states = len(order), int(states.max(initial=0)) + 1
    lo = np.full(2, np.inf, np.float32)
    hi = np.full(2, -np.inf, np.float32)
    for a in range(0, n, chunk):  # the range first, then the counts: two reads
        xy = np.asarray(codes[a:a + chunk, :2])
        lo, hi = np.minimum(lo, xy.min(0)), np.maximum(hi, xy.max(0))
    width = np.where(hi > lo, (hi - lo) / bins, 1.0)
    per = np.zeros(bins * bins * n_states, np.int64)
    for a in range(0, n, chunk):
        xy = np.asarray(codes[a:a + chunk, :2])
        cell = np.clip(((xy - lo) / width).astype(np.int64), 0, bins - 1)
        key = (cell[:, 0] * bins + cell[:, 1]) * n_states + states[order[a:a + chunk]]
        per += np.bincount(key, minlength=len(per))
    per = per.reshape(bins * bins, n_states)
    count = per.sum(1)
    used = np.flatnonzero(count)
    cx, cy = np.divmod(used, bins)
    xy = np.stack([lo[0] + (cx + 0.5) * width[0], lo[1] + (cy + 0.5) * width[1]], 1)
    return {"xy": xy.astype(np.float32), "states": per[used].argmax(1),
            "count": count[used], "n_total": int(count.sum()), "bins": bins}
