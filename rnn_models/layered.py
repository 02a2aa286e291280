"""A base for classifiers built as embedding → recurrent layers → head (minGRU, Mamba ...).

A subclass says how its layers run over a whole sequence at once (:meth:`scan`, a parallel
scan where the arch has one) and one token at a time (:meth:`step`); this base turns that
into the model protocol (:mod:`stateseer.rnn_models.protocol`: recording, embeddings, stepping) and
into what training needs (:meth:`step_logits`, :meth:`initial_logits`, ``forward``).

The head reads the top layer's output at every step; the prediction for an empty input is
the head applied to a zero output, which is the head's bias for a linear head.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["LayeredClassifier"]


class LayeredClassifier(nn.Module):
    """Base class; subclasses set the attributes below and implement the four methods.

    Attributes
    ----------
    embedding : nn.Embedding
    head : nn.Module
        (..., head_size) → (..., n_classes).
    dropout : nn.Dropout
        Applied to the embeddings and to the head's input (training only).
    n_classes, n_layers, head_size, state_size : int
    state : str
        What :meth:`trace` records (the arch's ``--state``).
    """

    embedding: nn.Embedding
    head: nn.Module
    dropout: nn.Dropout
    n_classes: int
    n_layers: int
    head_size: int
    state_size: int
    state: str

    # -- what a subclass implements --------------------------------------------------------
    def scan(self, x: Tensor, keep: int | None = None) -> tuple[Tensor, Tensor | None]:
        """Run every layer over a sequence.

        Parameters
        ----------
        x : Tensor of shape (batch, time, embed)
        keep : int or None
            Layer index (≥ 0) whose traced state to return.

        Returns
        -------
        top : Tensor of shape (batch, time, head_size)
            The head's input after every step.
        kept : Tensor of shape (batch, time, state_size) or None
        """
        raise NotImplementedError

    def initial_state(self, batch_size: int) -> Any:
        raise NotImplementedError

    def step(self, state: Any, ids: Tensor) -> Any:
        raise NotImplementedError

    def get_state(self, state: Any, layer: int = -1) -> Tensor:
        raise NotImplementedError

    def set_state(self, state: Any, layer: int, value: Tensor) -> Any:
        raise NotImplementedError

    def top_of(self, state: Any) -> Tensor:
        """The head's input (batch, head_size) for the current step of ``state``."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    def _layer_index(self, layer: int) -> int:
        idx = layer + self.n_layers if layer < 0 else layer
        if not 0 <= idx < self.n_layers:
            raise ValueError(f"layer {layer} does not exist; the model has {self.n_layers}")
        return idx

    def _param(self) -> Tensor:
        return self.head.weight if isinstance(self.head, nn.Linear) else next(self.parameters())

    def step_logits(self, ids: Tensor) -> Tensor:
        """Head logits after every step, shape (batch, time, n_classes)."""
        top, _ = self.scan(self.dropout(self.embedding(ids)))
        return self.head(self.dropout(top))

    def initial_logits(self) -> Tensor:
        """Head logits for the empty input, shape (n_classes,)."""
        p = self._param()
        return self.head(p.new_zeros(self.head_size))

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Final logits, shape (batch, n_classes); empty inputs get the initial logits."""
        init = self.initial_logits().expand(len(ids), -1)
        if ids.shape[1] == 0:
            return init
        logits = self.step_logits(ids)
        out = logits[torch.arange(len(ids)), (lengths - 1).clamp(min=0)]
        return torch.where((lengths == 0)[:, None], init, out)

    # -- the protocol ---------------------------------------------------------------------
    def trace(self, ids: Tensor, lengths: Tensor, layer: int = -1) -> tuple[Tensor, Tensor]:
        """See :class:`stateseer.rnn_models.protocol.Traceable` (dropout only in training mode)."""
        top, kept = self.scan(self.dropout(self.embedding(ids)), keep=self._layer_index(layer))
        return kept, torch.softmax(self.head(top), dim=-1)

    def initial(self, layer: int = -1) -> tuple[Tensor, Tensor]:
        self._layer_index(layer)
        p = self._param()
        return (p.new_zeros(self.state_size).detach(),
                torch.softmax(self.initial_logits().detach(), dim=-1))

    def embed(self, ids: Tensor) -> Tensor:
        """Embeddings, shape (batch, time, embed)."""
        return self.embedding(ids)

    def forward_from_embeddings(self, emb: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Final logits (batch, n_classes) of the layers and head run on ``emb``."""
        top, _ = self.scan(emb)
        if lengths is None:
            return self.head(top[:, -1])
        return self.head(top[torch.arange(len(top)), (lengths.to(top.device) - 1).clamp(min=0)])

    def state_proba(self, state: Any) -> Tensor:
        return torch.softmax(self.head(self.top_of(state)), dim=-1)
