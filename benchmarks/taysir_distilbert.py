"""Inference for TAYSIR 1.7's pickled DistilBERT, whose classes today's ``transformers``
no longer has.

Net 1.7 is a whole ``DistilBertForSequenceClassification`` pickled with ``transformers``
4.26 (MLflow). Its pickle names classes of that version's ``modeling_distilbert``
(``MultiHeadSelfAttention`` among them) that later versions renamed or rebuilt, so it
does not unpickle with the installed one. :func:`load` unpickles it onto the classes
below instead: each keeps the attributes that version pickled (its submodules, weights
and settings come from the pickle) and has that version's inference ``forward`` (eval
mode: dropout off, no head mask, no chunking). The configuration unpickles onto a plain
attribute holder.

Whether this reproduces the net is checked where it is used
(:func:`taysir_nets.adapter`): the batched classes agree with the per-word forward on
the validation words, and the extracted automaton is scored beside the winner's, which
was learnt from the net itself.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["load"]

_OLD = "transformers.models.distilbert.modeling_distilbert"


class DistilBertConfig:
    """The pickled configuration's attributes (``dim``, ``n_heads``, ``vocab_size`` ...)."""


class GELUActivation(nn.Module):
    """``transformers.activations.GELUActivation``: ``act`` (torch's gelu) comes from the
    pickle."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


class Embeddings(nn.Module):
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        n = input_ids.shape[1]
        pos = self.position_ids[:, :n] if hasattr(self, "position_ids") else \
            torch.arange(n, device=input_ids.device)[None]
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos)
        return self.LayerNorm(x)


class MultiHeadSelfAttention(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        bs, n = x.shape[:2]
        h = self.n_heads
        per = self.dim // h

        def heads(t: torch.Tensor) -> torch.Tensor:  # (bs, h, n, per)
            return t.view(bs, -1, h, per).transpose(1, 2)

        q = heads(self.q_lin(x)) / math.sqrt(per)
        k, v = heads(self.k_lin(x)), heads(self.v_lin(x))
        scores = q @ k.transpose(2, 3)  # (bs, h, n, n)
        hidden = (mask == 0).view(bs, 1, 1, n).expand_as(scores)
        scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
        context = torch.softmax(scores, dim=-1) @ v
        context = context.transpose(1, 2).reshape(bs, -1, h * per)
        return self.out_lin(context)


class FFN(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin2(self.activation(self.lin1(x)))


class TransformerBlock(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        sa = self.sa_layer_norm(self.attention(x, mask) + x)
        return self.output_layer_norm(self.ffn(sa) + sa)


class Transformer(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for block in self.layer:
            x = block(x, mask)
        return x


class DistilBertModel(nn.Module):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        return self.transformer(self.embeddings(input_ids), mask)


class DistilBertForSequenceClassification(nn.Module):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Class logits, shape (batch, num_labels), from the first position's state."""
        hidden = self.distilbert(input_ids, attention_mask)
        return self.classifier(torch.relu(self.pre_classifier(hidden[:, 0])))


_CLASSES = {cls.__name__: cls for cls in (
    DistilBertConfig, GELUActivation, Embeddings, MultiHeadSelfAttention, FFN,
    TransformerBlock, Transformer, DistilBertModel, DistilBertForSequenceClassification)}


class _Unpickler(pickle.Unpickler):
    """Classes of the old ``transformers`` modules read as the ones above."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("transformers."):
            if name not in _CLASSES:
                raise pickle.UnpicklingError(f"no stand-in for {module}.{name}")
            return _CLASSES[name]
        return super().find_class(module, name)


class _PickleModule:
    """What ``torch.load(pickle_module=...)`` reads: ``Unpickler`` and ``load``."""

    Unpickler = _Unpickler
    load = staticmethod(pickle.load)
    __name__ = "taysir_distilbert"


def load(path: str | Path) -> nn.Module:
    """The pickled DistilBERT classifier at ``path`` (``data/model.pth``), in eval mode.

    Runs the pickle (``weights_only=False``): only for files you trust.
    """
    net = torch.load(path, weights_only=False, pickle_module=_PickleModule)
    return net.eval()
