"""State forcing: replace hidden states by their abstract state's centroid and see whether
the model's prediction survives (the abstraction's interventional faithfulness).

Works on any model that :func:`stateseer.rnn_models.forcing.forced_run` accepts (the model protocol
of :mod:`stateseer.rnn_models.models`); a model lacking what forcing needs is refused there with a
one-line message naming the missing method.

Files kept in a run directory::

    RUN/abstraction/centroids.npy   hidden-space centroid of every FSM state (float32,
                                    removed whenever the abstraction is rewritten)
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.abstractors.centroids import state_centroids
from stateseer.abstraction.arrays import distinct
from stateseer.abstraction.pipeline import Abstraction
from stateseer.core import layout
from stateseer.core.errors import DAMAGED_NPY, StateseerError
from stateseer.core.traces import SplitTraces, Traces
from stateseer.rnn_models.run import ModelRun

__all__ = ["forced_trace", "forcing_figures", "forcing_survival", "load_centroids",
           "measure_forcing"]


# -- centroids ----------------------------------------------------------------------------
def load_centroids(run: ModelRun, ab: Abstraction, traces: Traces) -> np.ndarray:
    """Hidden-space centroids of the FSM states.

    Read from ``RUN/abstraction/centroids.npy`` or computed from the training split's
    states (and saved). State 0, the initial state, is the initial hidden state.

    Returns
    -------
    ndarray of shape (n_fsm_states, state_size)
    """
    path = run.abstraction_dir / layout.CENTROIDS
    train = traces["train"]
    shape = (ab.fsm.n_states, train.hidden.shape[1])
    if path.exists():
        try:
            c = np.load(path, allow_pickle=False)
        except DAMAGED_NPY:  # damaged: recomputed below
            c = None
        if c is not None and c.shape == shape and np.isfinite(c).all():
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


def _batches(tr: SplitTraces, idx: np.ndarray, batch_size: int) -> Iterator[tuple]:
    """Padded id batches ``(positions, ids, lengths)`` of inputs ``idx`` (length-sorted)."""
    import torch

    from stateseer.rnn_models.batching import length_batches, pad_batch

    seqs = [np.asarray(tr.token_ids[tr.steps(int(i))], np.int64) for i in idx]
    for b in length_batches(np.array([len(s) for s in seqs]), batch_size):
        ids, lens = pad_batch(seqs, b)
        yield b, torch.as_tensor(ids), torch.as_tensor(lens)


# -- state forcing ------------------------------------------------------------------------
def _per_state(model: Any, ab: Abstraction, centroids: np.ndarray, tr: SplitTraces,
               layer: int, batch_size: int) -> dict[str, dict[str, Any]]:
    """Agreement when only state ``s`` is forced, over the inputs whose path visits ``s``."""
    if tr.name not in ab.states:
        raise StateseerError(f"the abstraction has no states for split {tr.name!r}; "
                             "re-run `stateseer abstract`")
    n, good = _per_state_counts(model, ab, centroids, tr, ab.states[tr.name], layer,
                                batch_size)
    return _per_state_doc(n, good)


def _per_state_doc(n: np.ndarray, good: np.ndarray) -> dict[str, dict[str, Any]]:
    return {str(s): {"n_inputs": int(n[s]), "agreement": round(float(good[s] / n[s]), 4)}
            for s in np.flatnonzero(n)}


def _per_state_counts(model: Any, ab: Abstraction, centroids: np.ndarray, tr: SplitTraces,
                      states: np.ndarray, layer: int, batch_size: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Per FSM state: inputs of ``tr`` visiting it, and how many of them survive forcing
    it alone; shapes (n_fsm_states,). ``states`` (n_steps,) are ``tr``'s FSM states."""
    from stateseer.rnn_models.forcing import forced_run

    states = np.asarray(states)
    # inputs visiting each state, from the (state, input) pairs of every step
    pairs = distinct(states.astype(np.int64) * tr.n_inputs + tr.step_input)
    # all (input, state) experiments in one set of batches: row b forces state st[b]
    # wherever the run is in it
    st, inp = pairs // tr.n_inputs, pairs % tr.n_inputs
    keep = st > 0
    st, inp = st[keep], inp[keep]
    ok = np.zeros(len(st), bool)
    for b, ids, lens in _batches(tr, inp, batch_size):
        r = forced_run(model, ids, lens, ab.assign, centroids, layer=layer, row_state=st[b])
        ok[b] = r.predictions == tr.predictions[inp[b]]
    n = np.bincount(st, minlength=ab.fsm.n_states)
    good = np.bincount(st, weights=ok, minlength=ab.fsm.n_states)
    return n, good


def forcing_survival(model: Any, ab: Abstraction, centroids: np.ndarray, tr: SplitTraces,
                     *, layer: int = -1, batch_size: int = 512) -> np.ndarray:
    """Whether each non-empty input's prediction survives forcing at every step.

    Returns
    -------
    ndarray of bool, shape (n_nonempty_inputs,)
        In input order, empty inputs left out (they have no hidden state to force).
    """
    from stateseer.rnn_models.forcing import forced_run  # runs without autograd

    nonempty = np.flatnonzero(tr.lengths > 0)
    survived = np.zeros(tr.n_inputs, bool)
    for b, ids, lens in _batches(tr, nonempty, batch_size):
        r = forced_run(model, ids, lens, ab.assign, centroids, layer=layer)
        survived[nonempty[b]] = r.predictions == tr.predictions[nonempty[b]]
    return survived[nonempty]


def forcing_figures(model: Any, ab: Abstraction, centroids: np.ndarray, tr: SplitTraces, *,
                    layer: int = -1, per_state: bool = True,
                    batch_size: int = 512) -> dict[str, Any]:
    """How often the model's prediction survives state forcing on a split.

    Every step forced: each hidden state of the traced layer is replaced by its abstract
    state's centroid and the forward pass continues from it. Per state ``s``: only the
    steps where the (forced) run is in ``s`` are replaced, over the inputs whose
    recorded path visits ``s``.

    Parameters
    ----------
    model : model implementing the forcing protocol
    ab : Abstraction
    centroids : ndarray of shape (n_fsm_states, state_size)
    tr : SplitTraces
    layer : int
        The traced layer.

    Returns
    -------
    dict
        ``forcing_agreement`` (share of non-empty inputs whose final prediction is
        unchanged with every step forced) and ``forcing`` (details: ``n_inputs``,
        ``per_state`` ``{state: {"n_inputs", "agreement"}}``, ``seconds``).
    """
    t0 = time.perf_counter()
    survived = forcing_survival(model, ab, centroids, tr, layer=layer, batch_size=batch_size)
    out: dict[str, Any] = {
        "forcing_agreement": float(survived.mean()) if len(survived) else 1.0}
    details: dict[str, Any] = {"split": tr.name, "n_inputs": len(survived),
                               "every_step": out["forcing_agreement"]}
    if per_state:
        details["per_state"] = _per_state(model, ab, centroids, tr, layer, batch_size * 4)
    details["seconds"] = round(time.perf_counter() - t0, 2)
    out["forcing"] = details
    return out


def _force_shard(item: tuple[Any, np.ndarray], *, run: str, model_sha: str | None,
                 ab: Abstraction, centroids: np.ndarray, layer: int, per_state: bool,
                 batch_size: int, model: Any = None) -> dict[str, Any]:
    """Forcing figures of one shard (``item``: its ShardRef and its FSM states); the model
    is ``model`` or the one loaded once per worker process."""
    from stateseer.abstraction.sharded import open_ref
    from stateseer.rnn_models.engine import worker_model

    ref, states = item
    model = model if model is not None else worker_model(run, model_sha)
    tr = open_ref(ref)
    out: dict[str, Any] = {"survived": forcing_survival(model, ab, centroids, tr, layer=layer,
                                                        batch_size=batch_size)}
    if per_state:
        out["per_state"] = _per_state_counts(model, ab, centroids, tr, states, layer,
                                             batch_size * 4)
    return out


def _forcing_on_shards(engine: Any, run: ModelRun, traces: Traces, ab: Abstraction,
                       centroids: np.ndarray, split: str, per_state: bool,
                       batch_size: int = 512) -> dict[str, Any]:
    """:func:`forcing_figures` mapped over the shards of ``split`` on ``engine`` (in-process
    or Dask, the same figures), the per-state counts summed."""
    from stateseer.abstraction.pipeline import Abstraction as Ab
    from stateseer.abstraction.sharded import shard_refs

    t0 = time.perf_counter()
    if split not in ab.states:
        raise StateseerError(f"the abstraction has no states for split {split!r}; "
                             "re-run `stateseer abstract`")
    refs = shard_refs(traces, split)
    states = ab.states[split]
    items = [(r, np.asarray(states[r.step_start:r.step_stop])) for r in refs]
    light = Ab(abstractor=ab.abstractor, fsm=ab.fsm, states={}, simulated={})
    shared = {"run": str(run.path), "model_sha": traces.meta.get("model_sha256"),
              "ab": light, "centroids": centroids, "layer": traces.meta.get("layer", -1),
              "per_state": per_state, "batch_size": batch_size}
    if not engine.is_cluster:
        shared["model"] = run.load_model()
    parts = engine.map(_force_shard, items, **shared)
    survived = np.concatenate([p["survived"] for p in parts])
    out: dict[str, Any] = {
        "forcing_agreement": float(survived.mean()) if len(survived) else 1.0}
    details: dict[str, Any] = {"split": split, "n_inputs": len(survived),
                               "every_step": out["forcing_agreement"]}
    if per_state:
        n, good = engine.reduce(lambda a, b: (a[0] + b[0], a[1] + b[1]),
                                [p["per_state"] for p in parts])
        details["per_state"] = _per_state_doc(n, good)
    details["seconds"] = round(time.perf_counter() - t0, 2)
    out["forcing"] = details
    return out


def measure_forcing(run_dir: str | Path, *, split: str | None = None, per_state: bool = True,
                    save: bool = True, cluster: Any = None) -> dict[str, Any]:
    """:func:`forcing_figures` for a run, merged into ``metrics.json["abstraction"]``.

    ``split`` defaults to the one the abstraction's fidelity is measured on: ``test``
    where it has inputs, else ``val`` (an agreement over no inputs is no figure).

    The split's shards are forced one task each, in this process or on ``cluster``
    (``local``, ``local:N``, ``tcp://HOST:PORT`` or an open engine; default
    ``$STATESEER_CLUSTER``); workers load the model once each. Same figures either way.
    """
    from stateseer.core.engine import engine_scope

    run = ModelRun(run_dir)
    traces = Traces(run.traces_dir)
    ab = Abstraction.load(run.abstraction_dir)
    split = split or traces.measured_split
    if split not in traces:
        raise StateseerError(f"split {split!r} was not recorded; record it first")
    if not traces[split].n_inputs:
        raise StateseerError(f"the {split} split has no inputs to force; choose another "
                             f"with --split")
    with engine_scope(cluster) as engine:
        cent = load_centroids(run, ab, traces)
        figs = _forcing_on_shards(engine, run, traces, ab, cent, split, per_state)
    if save:
        m = run.metrics()
        prev = m.get("abstraction") if isinstance(m, dict) else None
        if not isinstance(prev, dict):
            raise StateseerError(f"{run.metrics_path} is damaged (no 'abstraction' section); "
                                 f"re-run `stateseer abstract {run.path}`")
        run.update_metrics(abstraction={**prev, **figs})
    return figs


def forced_trace(model: Any, ab: Abstraction, centroids: np.ndarray, ids: np.ndarray, *,
                 layer: int = -1, step: int | None = None) -> dict[str, Any]:
    """One input run with forcing at every step (``step=None``) or at one step.

    Parameters
    ----------
    ids : ndarray of shape (n_tokens,)
        Token ids of the input.

    Returns
    -------
    dict
        ``proba`` (n_tokens, n_classes) list, ``states`` (FSM states after every step,
        the initial state first), ``forced`` (bool per step), ``prediction``, ``step``.
    """
    import torch

    from stateseer.rnn_models.forcing import forced_run

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
