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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from .errors import StateseerError
from .models import RecurrentAdapter, RNNClassifier

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


def _layers(model: nn.Module) -> tuple[nn.Module, list[nn.RNNBase], nn.Module, str]:
    """Embedding, single-layer recurrent modules, head and traced state kind."""
    if isinstance(model, RNNClassifier):
        return model.embedding, list(model.rnns), model.head, model.state
    if isinstance(model, RecurrentAdapter) and model.rnn.num_layers == 1:
        return model.embedding, [model.rnn], model.head, "h"
    raise StateseerError(
        f"state forcing needs a stateseer RNNClassifier or a one-layer RecurrentAdapter, not "
        f"{type(model).__name__}; wrap the model's layers as single-layer modules")


def _split_state(rnn: nn.RNNBase, state) -> tuple[Tensor, Tensor | None]:
    if isinstance(rnn, nn.LSTM):
        h, c = state
        return h[0], c[0]
    return state[0], None


@torch.no_grad()
def forced_run(
    model: nn.Module,
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
    model : RNNClassifier or RecurrentAdapter (one layer)
        In eval mode.
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
    emb, rnns, head, kind = _layers(model)
    n_layers = len(rnns)
    idx = layer + n_layers if layer < 0 else layer
    if not 0 <= idx < n_layers:
        raise StateseerError(f"layer {layer} does not exist; the model has {n_layers}")
    B, T = ids.shape
    if mask is None:
        mask = np.ones((B, T), bool)
    mask = np.asarray(mask, bool)
    if mask.shape != (B, T):
        raise StateseerError(f"forcing mask has shape {mask.shape}, expected {(B, T)}")
    device = next(model.parameters()).device  # run where the model lives
    ids, lengths = ids.to(device), lengths.to(device)
    cent = torch.as_tensor(np.asarray(centroids, np.float32), device=device)
    size = rnns[idx].hidden_size
    want = size * (2 if kind == "hc" else 1)
    if cent.ndim != 2 or cent.shape[1] != want:
        raise StateseerError(f"centroids have shape {tuple(cent.shape)} but the traced state "
                             f"has {want} dimensions; recompute them for this model")
    x = emb(ids)
    for rnn in rnns[:idx]:  # layers below the traced one are not affected: run them at once
        x, _ = rnn(x)
    traced, upper = rnns[idx], rnns[idx + 1 :]

    def run_upper(inp: Tensor, prev: list) -> tuple[Tensor, list]:
        new = []
        for rnn, st in zip(upper, prev, strict=True):
            inp, st = rnn(inp, st)
            new.append(st)
        return inp[:, 0], new

    state, prev_upper = None, [None] * len(upper)
    forced = np.zeros((B, T), bool)
    probas, assigned = [], np.empty((B, T), np.int64)
    for t in range(T):
        out, state = traced(x[:, t : t + 1], state)
        top, new_upper = run_upper(out, prev_upper)
        p = torch.softmax(head(top), dim=-1)
        h, c = _split_state(traced, state)
        vec = h if kind == "h" else c if kind == "c" else torch.cat([h, c], dim=-1)
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
            if kind in ("h", "hc"):
                h = torch.where(m, new[:, :size], h)
            if kind in ("c", "hc"):
                c = torch.where(m, new[:, -size:], c)
            state = (h[None], c[None]) if c is not None else h[None]
            # continue from the replaced state: the layers above and the head see it now
            # (rows that are not forced recompute exactly what they had)
            top, new_upper = run_upper(h[:, None], prev_upper)
            p = torch.softmax(head(top), dim=-1)
        probas.append(p)
        prev_upper = new_upper
    probas = torch.stack(probas, dim=1).cpu().numpy()
    last = (lengths - 1).clamp(min=0).cpu().numpy()
    final = probas[np.arange(B), last]
    return ForcedRun(proba=probas, states=assigned, final_proba=final, forced=forced)
