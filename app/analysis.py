"""Analyses that need both the model and the abstraction.

``abstraction`` never imports torch and ``rnn_models`` knows nothing of abstract states,
so what joins the two lives here: state forcing (and its faithfulness figure),
attribution of typed or recorded inputs, and the nearest training contexts of any step.
All are plain functions over a run's parts; the app and the CLI call them.

Files they keep in a run directory::

    RUN/abstraction/centroids.npy   hidden-space centroid of every FSM state (float32,
                                    removed whenever the abstraction is rewritten)
    RUN/index/train.contexts.npz    nearest-context index over the training steps
    RUN/index/train.contexts.json   what it was built from (traces' model and size)
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from abstraction.centroids import state_centroids
from abstraction.neighbors import ContextIndex
from abstraction.pipeline import Abstraction
from rnn_models.errors import StateseerError
from rnn_models.run import Run, atomic_write_text
from rnn_models.traces import SplitTraces, Traces

__all__ = ["context_index", "forced_trace", "forcing_figures", "load_centroids",
           "measure_forcing", "nearest_contexts", "projection_sample"]


# -- centroids ----------------------------------------------------------------------------
def load_centroids(run: Run, ab: Abstraction, traces: Traces) -> np.ndarray:
    """Hidden-space centroids of the FSM states, shape (n_fsm_states, state_size).

    Read from ``RUN/abstraction/centroids.npy`` or computed from the training split's
    states (and saved). State 0, the initial state, is the initial hidden state.
    """
    path = run.abstraction_dir / "centroids.npy"
    train = traces["train"]
    shape = (ab.fsm.n_states, train.hidden.shape[1])
    if path.exists():
        c = np.load(path, allow_pickle=False)
        if c.shape == shape:
            return c
    c, _ = state_centroids(train.hidden, ab.states["train"], ab.fsm.n_states,
                           initial=traces.initial_hidden)
    # a temporary name of its own: two threads or processes may compute them at once
    tmp = path.with_name(f"centroids.{os.getpid()}.{threading.get_ident()}.tmp.npy")
    try:
        np.save(tmp, c)
        tmp.replace(path)
    except OSError as exc:
        logging.getLogger("stateseer").warning("could not save %s (%s)", path, exc)
    return c


def _batches(tr: SplitTraces, idx: np.ndarray, batch_size: int):
    """Padded id batches ``(positions, ids, lengths)`` of inputs ``idx`` (length-sorted)."""
    import torch

    from rnn_models.batching import length_batches, pad_batch

    seqs = [np.asarray(tr.token_ids[tr.steps(int(i))], np.int64) for i in idx]
    for b in length_batches(np.array([len(s) for s in seqs]), batch_size):
        ids, lens = pad_batch(seqs, b)
        yield b, torch.as_tensor(ids), torch.as_tensor(lens)


# -- state forcing ------------------------------------------------------------------------
def forcing_figures(model, ab: Abstraction, centroids: np.ndarray, tr: SplitTraces, *,
                    layer: int = -1, per_state: bool = True,
                    batch_size: int = 512) -> dict[str, Any]:
    """How often the model's prediction survives state forcing on a split.

    Every step forced: each hidden state of the traced layer is replaced by its abstract
    state's centroid and the forward pass continues from it. Per state ``s``: only the
    steps where the (forced) run is in ``s`` are replaced, over the inputs whose
    recorded path visits ``s``.

    Returns
    -------
    dict
        ``forcing_agreement`` (share of non-empty inputs whose final prediction is
        unchanged with every step forced) and ``forcing`` (details: ``n_inputs``,
        ``per_state`` ``{state: {"n_inputs", "agreement"}}``, ``seconds``).
    """
    from rnn_models.forcing import forced_run  # runs without autograd

    t0 = time.perf_counter()
    nonempty = np.flatnonzero(tr.lengths > 0)
    pred = tr.predictions
    survived = np.zeros(tr.n_inputs, bool)
    assign = ab.assign
    for b, ids, lens in _batches(tr, nonempty, batch_size):
        r = forced_run(model, ids, lens, assign, centroids, layer=layer)
        survived[nonempty[b]] = r.predictions == pred[nonempty[b]]
    out: dict[str, Any] = {
        "forcing_agreement": float(survived[nonempty].mean()) if len(nonempty) else 1.0}
    details: dict[str, Any] = {"split": tr.name, "n_inputs": len(nonempty),
                               "every_step": out["forcing_agreement"]}
    if per_state:
        if tr.name not in ab.states:
            raise StateseerError(f"the abstraction has no states for split {tr.name!r}; "
                                 "re-run `stateseer abstract`")
        states = ab.states[tr.name]
        # inputs visiting each state, from the (state, input) pairs of every step
        pairs = np.unique(states.astype(np.int64) * tr.n_inputs + tr.step_input)
        # all (input, state) experiments in one set of batches: row b forces state
        # st[b] wherever the run is in it
        st, inp = pairs // tr.n_inputs, pairs % tr.n_inputs
        keep = st > 0
        st, inp = st[keep], inp[keep]
        ok = np.zeros(len(st), bool)
        for b, ids, lens in _batches(tr, inp, batch_size * 4):
            r = forced_run(model, ids, lens, assign, centroids, layer=layer,
                           row_state=st[b])
            ok[b] = r.predictions == pred[inp[b]]
        n = np.bincount(st, minlength=ab.fsm.n_states)
        good = np.bincount(st, weights=ok, minlength=ab.fsm.n_states)
        per = {str(s): {"n_inputs": int(n[s]), "agreement": round(float(good[s] / n[s]), 4)}
               for s in np.flatnonzero(n)}
        details["per_state"] = per
    details["seconds"] = round(time.perf_counter() - t0, 2)
    out["forcing"] = details
    return out


def measure_forcing(run_dir: str | Path, *, split: str = "test", per_state: bool = True,
                    save: bool = True) -> dict[str, Any]:
    """:func:`forcing_figures` for a run, merged into ``metrics.json["abstraction"]``."""
    run = Run(run_dir)
    traces = Traces(run.traces_dir)
    ab = Abstraction.load(run.abstraction_dir)
    if split not in traces:
        raise StateseerError(f"split {split!r} was not recorded; record it first")
    model = run.load_model()
    cent = load_centroids(run, ab, traces)
    figs = forcing_figures(model, ab, cent, traces[split], layer=traces.meta.get("layer", -1),
                           per_state=per_state)
    if save:
        m = run.metrics()
        run.update_metrics(abstraction={**m.get("abstraction", {}), **figs})
    return figs


def forced_trace(model, ab: Abstraction, centroids: np.ndarray, ids: np.ndarray, *,
                 layer: int = -1, step: int | None = None) -> dict[str, Any]:
    """One input run with forcing at every step (``step=None``) or at one step.

    Returns
    -------
    dict
        ``proba`` (n_tokens, n_classes) list, ``states`` (FSM states after every step,
        the initial state first), ``forced`` (bool per step), ``prediction``, ``step``.
    """
    import torch

    from rnn_models.forcing import forced_run

    ids = np.asarray(ids, np.int64)
    if len(ids) == 0:
        raise StateseerError("an empty input has no hidden state to force; type some text")
    mask = np.ones((1, len(ids)), bool)
    if step is not None:
        if not 0 <= step < len(ids):
            raise StateseerError(f"step {step} does not exist; the input has {len(ids)} tokens")
        mask[:] = False
        mask[0, step] = True
    r = forced_run(model, torch.as_tensor(ids)[None], torch.tensor([len(ids)]), ab.assign,
                   centroids, layer=layer, mask=mask)
    return {"proba": r.proba[0].round(5).tolist(),
            "states": [ab.fsm.initial, *r.states[0].tolist()],
            "forced": r.forced[0].tolist(), "prediction": int(r.predictions[0]),
            "step": step}


# -- nearest training contexts ------------------------------------------------------------
def _index_paths(run: Run) -> tuple[Path, Path]:
    d = run.path / "index"
    return d / "train.contexts.npz", d / "train.contexts.json"


def context_index(run: Run, traces: Traces, *, build: bool = True) -> ContextIndex | None:
    """The nearest-context index over the run's training steps (built once, then read).

    Rebuilt when the traces were re-recorded (another model or size). ``None`` when
    ``build`` is false and no up-to-date index exists.
    """
    npz, meta_path = _index_paths(run)
    train = traces["train"]
    want = {"model_sha256": traces.meta.get("model_sha256"), "n_steps": int(train.n_steps),
            "layer": traces.meta.get("layer"), "dim": int(train.hidden.shape[1])}
    if npz.exists() and meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
        except ValueError:
            meta = {}
        if all(meta.get(k) == v for k, v in want.items()):
            return ContextIndex.load(npz)
    if not build:
        return None
    if train.n_steps == 0:
        raise StateseerError("the training split has no steps to index")
    t0 = time.perf_counter()
    index = ContextIndex().fit(train.hidden)
    try:
        npz.parent.mkdir(parents=True, exist_ok=True)
        index.save(npz)
        atomic_write_text(meta_path, json.dumps({**want, "seconds": round(
            time.perf_counter() - t0, 2)}))
    except OSError as exc:  # e.g. a read-only run: use the index, rebuild it next time
        logging.getLogger("stateseer").warning(
            "could not save the context index in %s (%s); it is kept in memory only",
            npz.parent, exc)
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
    inp = train.step_input[idx]
    pos = train.step_position[idx]
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


def projection_sample(index: ContextIndex, train: SplitTraces, train_states: np.ndarray, *,
                      n: int = 4000, seed: int = 0) -> dict[str, np.ndarray]:
    """A sample of training steps on the index's first two principal axes.

    Returns
    -------
    dict
        ``xy`` (n, 2), ``states`` (n,), ``rows`` (n,) (step numbers in the split).
    """
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(train.n_steps, min(n, train.n_steps), replace=False))
    xy = index.transform(np.asarray(train.hidden[rows], np.float32))[:, :2]
    return {"xy": xy, "states": np.asarray(train_states)[rows], "rows": rows}
