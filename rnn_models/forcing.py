"""State forcing: replace hidden states by their abstract state's centroid and run on.

This is the interventional test of an abstraction (Seq2Seq-Vis's "what if" applied to
DeepSeer's states). After step ``t`` of the traced layer, the hidden state is mapped to its
abstract state ``s`` by the caller's ``assign`` function and, where the caller's mask says
so, replaced by ``centroids[s]`` (the mean hidden state of ``s``). The forward pass then
continues from the replaced state: the layers above and every later step see the centroid.
If the model's predictions survive, the abstract states carry what the model uses.

The time recurrence is a loop over steps (it has to be: step ``t + 1`` depends on the
replaced state of step ``t``), vectorised over the whole batch of inputs; ``assign`` is
called once per step on all inputs together.

Any model with the protocol's stepping methods can be forced (see
:mod:`stateseer.rnn_models.protocol`): ``initial_state``, ``step``, ``get_state``, ``set_state`` and
``state_proba``; the model decides what "replace the traced state" means for the rest of
its state (an LSTM traced on ``h`` keeps ``c``; the layers above the traced one redo the
step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from stateseer.core.errors import StateseerError
from stateseer.rnn_models.protocol import STEPPING, model_device, require

__all__ = ["ForcedRun", "forced_run"]

Assign = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class ForcedRun:
    """The outcome of a forced forward pass.

    Attributes
    ----------
    proba : ndarray of shape (batch, time, n_classes)
        Intermediate predictions of the forced run (padded steps are meaningless).
    states : ndarray of shape (batch, time)
        Abstract state assigned at every step of the forced run (before replacement).
    final_proba : ndarray of shape (batch, n_classes)
        Prediction after each input's last token.
    forced : ndarray of bool, shape (batch, time)
        Where a state was replaced.
    """

    proba: np.ndarray
    states: np.ndarray
    final_proba: np.ndarray
    forced: np.ndarray

    @property
    def predictions(self) -> np.ndarray:
        return self.final_proba.argmax(axis=1)


@torch.no_grad()
def forced_run(
    model: Any,
    ids: Tensor,
    lengths: Tensor,
    assign: Assign,
    centroids: np.ndarray,
    *,
    layer: int = -1,
    mask: np.ndarray | None = None,
    only_states: np.ndarray | None = None,
    row_state: np.ndarray | None = None,
) -> ForcedRun:
    """Run ``model`` with hidden states replaced by their abstract state's centroid.

    Parameters
    ----------
    model : a model with the protocol's stepping methods
        In eval mode (e.g. RNNClassifier, RecurrentAdapter, MinRNNClassifier,
        MambaClassifier).
    ids : LongTensor of shape (batch, time)
        Right-padded token ids; ``time`` ≥ 1.
    lengths : LongTensor of shape (batch,)
    assign : callable (hidden (batch, state_size), proba (batch, n_classes)) -> (batch,)
        Abstract state of hidden states (values index ``centroids``).
    centroids : ndarray of shape (n_states, state_size)
        Hidden-space centroid of every abstract state.
    layer : int
        The traced layer (the one the abstraction was fitted on).
    mask : ndarray of bool, shape (batch, time), optional
        Where to replace; default every step.
    only_states : array-like of int, optional
        Replace only steps whose assigned state is one of these (within ``mask``): "every
        time the model is in state ``s``, put it on ``s``'s centroid".
    row_state : ndarray of int, shape (batch,), optional
        The same with one state per input: row ``b`` is replaced only where its assigned
        state is ``row_state[b]`` (many single-state experiments in one batch).

    Returns
    -------
    ForcedRun
    """
    require(model, ("initial", *STEPPING), "state forcing")
    try:
        h0, _ = model.initial(layer)
    except ValueError as exc:  # the model's own message names the layers it has
        raise StateseerError(str(exc).splitlines()[0]) from None
    B, T = ids.shape
    if mask is None:
        mask = np.ones((B, T), bool)
    mask = np.asarray(mask, bool)
    if mask.shape != (B, T):
        raise StateseerError(f"forcing mask has shape {mask.shape}, expected {(B, T)}")
    device = model_device(model)  # run where the model lives
    ids, lengths = ids.to(device), lengths.to(device)
    cent = torch.as_tensor(np.asarray(centroids, np.float32), device=device)
    want = int(h0.shape[-1])
    if cent.ndim != 2 or cent.shape[1] != want:
        raise StateseerError(f"centroids have shape {tuple(cent.shape)} but the traced state "
                             f"has {want} dimensions; recompute them for this model")
    state = model.initial_state(B)
    forced = np.zeros((B, T), bool)
    probas, assigned = [], np.empty((B, T), np.int64)
    for t in range(T):
        state = model.step(state, ids[:, t])
        vec = model.get_state(state, layer)
        p = model.state_proba(state)
        s = np.asarray(assign(vec.cpu().numpy(), p.cpu().numpy()), np.int64)
        assigned[:, t] = s
        mt = mask[:, t]
        if only_states is not None:
            mt = mt & np.isin(s, only_states)
        if row_state is not None:
            mt = mt & (s == row_state)
        forced[:, t] = mt
        m = torch.as_tensor(mt, device=device)[:, None]
        if m.any():
            new = cent[torch.as_tensor(s, device=device)]
            # continue from the replaced state: the layers above and the head see it now
            # (rows that are not forced recompute exactly what they had)
            state = model.set_state(state, layer, torch.where(m, new, vec))
            p = model.state_proba(state)
        probas.append(p)
    probas = torch.stack(probas, dim=1).cpu().numpy()
    last = (lengths - 1).clamp(min=0).cpu().numpy()
    final = probas[np.arange(B), last]
    return ForcedRun(proba=probas, states=assigned, final_proba=final, forced=forced)
