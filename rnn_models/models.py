"""Recurrent classifiers and the adapters that make any model explorable.

stateseer needs two things from a model, for a batch of token ids: the hidden state of a
chosen layer after every token, and the class probabilities the classifier head gives at
that step (the *intermediate prediction*). :class:`Traceable` (in
:mod:`stateseer.rnn_models.protocol`, with the optional embedding and stepping capabilities)
states this contract;
:class:`RNNClassifier` (LSTM, GRU, Elman) implements all of it, and :class:`TraceAdapter`
lets a user's own ``nn.Module`` implement it in a few lines (see ``RecurrentAdapter`` and
the example in its docstring).

The registry of what ``stateseer train --arch`` builds (LSTM, GRU, Elman here; minGRU and
minLSTM in :mod:`~stateseer.rnn_models.minrnn`; Mamba in :mod:`~stateseer.rnn_models.mamba`)
is :data:`stateseer.rnn_models.archs.ARCHITECTURES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from stateseer.rnn_models.protocol import TraceAdapter

__all__ = ["ARCHS", "RNNClassifier", "RecurrentAdapter"]

ARCHS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}
STATES = ("h", "c", "hc")


class RecurrentAdapter(TraceAdapter):
    """Wrap a user's embedding, batch-first ``nn.RNN``/``nn.GRU``/``nn.LSTM`` and head.

    Exact only where the model classifies from the *last* state of one unidirectional
    RNN; it is then the fast path (one pass per input). For any other model — a head that
    pools over the steps, a bidirectional or stacked net, a class read after an END
    token, a softmax output — use :class:`~stateseer.rnn_models.classifier.ClassifierAdapter`,
    which reads the model's own prediction of every prefix.

    Only the top layer is exposed (``layer=-1``): that is what ``nn.RNNBase`` returns for
    every step.

    Parameters
    ----------
    embedding : nn.Module
        Maps ids (batch, time) to vectors (batch, time, features).
    rnn : nn.RNNBase
        Unidirectional and ``batch_first=True``.
    head : nn.Module
        Maps hidden states (..., hidden) to class logits (..., n_classes).
    n_classes : int, optional
        Default: ``len(classes)``; one of the two is needed.
    vocab : list of str, optional
        The model's vocabulary, token strings indexed by id (containing ``'<unk>'``);
        ``stateseer create`` writes it as the run's ``vocab.json``.
    tokenize : callable, optional
        ``tokenize(text) -> list[str]``, the model's own tokeniser; recording and typed
        input then use it.
    classes : list of str, optional
        Class names in the order of the head's outputs; the run uses this order.
    model : nn.Module, optional
        The whole network as you run it (``forward(ids)`` or ``forward(ids, lengths)``):
        ``stateseer create`` then checks, on a sample of inputs, that its answer is the
        head on the last state (a head that pools over the steps is refused in one line,
        with the :class:`~stateseer.rnn_models.classifier.ClassifierAdapter` call to write).

    Attributes
    ----------
    vocab, tokenize, classes
        As given (None when not): what :mod:`stateseer.rnn_models.factory` reads.

    Examples
    --------
    >>> from torch import nn
    >>> class MyNet(nn.Module):           # the user's own model
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.emb = nn.Embedding(50, 8)
    ...         self.gru = nn.GRU(8, 16, batch_first=True)
    ...         self.out = nn.Linear(16, 3)
    >>> net = MyNet()
    >>> model = RecurrentAdapter(net.emb, net.gru, net.out, n_classes=3)
    >>> hidden, proba = model.trace(torch.tensor([[4, 5, 6]]), torch.tensor([3]))
    >>> tuple(hidden.shape), tuple(proba.shape)
    ((1, 3, 16), (1, 3, 3))

    With the model's own vocabulary, tokeniser and class names (what ``stateseer create``
    needs from a factory):

    >>> itos = ["<pad>", "<unk>"] + [f"w{i}" for i in range(48)]
    >>> model = RecurrentAdapter(net.emb, net.gru, net.out, vocab=itos,
    ...                          tokenize=str.split, classes=["neg", "neu", "pos"])
    >>> model.n_classes, model.classes, model.tokenize("w1 w2")
    (3, ['neg', 'neu', 'pos'], ['w1', 'w2'])
    """

    def __init__(self, embedding: nn.Module, rnn: nn.RNNBase, head: nn.Module,
                 n_classes: int | None = None, *, vocab: Any = None,
                 tokenize: Callable[[str], list[str]] | None = None,
                 classes: Sequence[str] | None = None, model: nn.Module | None = None):
        super().__init__()
        if getattr(rnn, "bidirectional", False):
            raise ValueError("RecurrentAdapter reads a unidirectional rnn; for a "
                             "bidirectional net use ClassifierAdapter(net, vocab=..., "
                             "tokenize=..., classes=...), which reads every prefix")
        if not getattr(rnn, "batch_first", False):
            raise ValueError("RecurrentAdapter needs an rnn with batch_first=True")
        if n_classes is None:
            if classes is None:
                raise ValueError("RecurrentAdapter needs n_classes or classes (the class "
                                 "names in the head's output order)")
            n_classes = len(classes)
        if classes is not None and len(classes) != n_classes:
            raise ValueError(f"RecurrentAdapter got {len(classes)} classes {list(classes)} "
                             f"but n_classes={n_classes}; make them agree")
        self.embedding, self.rnn, self.head = embedding, rnn, head
        self.n_classes = int(n_classes)
        self.vocab = list(vocab) if isinstance(vocab, (list, tuple)) else vocab
        self.tokenize = tokenize
        self.classes = list(classes) if classes is not None else None
        # the whole network, unregistered (its weights are the parts above): its own
        # prediction is what `stateseer create` checks the last traced state against
        self._whole = [model]

    def predict(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """The whole network's own class scores for each input (``model=`` given), read
        as :class:`~stateseer.rnn_models.classifier.ClassifierAdapter` reads it; without
        ``model``, the head on the last state (nothing to compare)."""
        net = self._whole[0]
        if net is None:
            return self.forward(ids, lengths)
        from stateseer.rnn_models.classifier import ClassifierAdapter

        vocab = list(self.vocab) if self.vocab else ["<pad>"]
        exact = ClassifierAdapter(  # pad: only a net that takes (ids, lengths) sees it
            net, vocab=vocab, tokenize=str.split, pad="<pad>" if "<pad>" in vocab else vocab[0],
            classes=self.classes or [str(k) for k in range(self.n_classes)])
        return exact.predict(ids, lengths)

    def _check_layer(self, layer: int) -> None:
        if layer not in (-1, self.rnn.num_layers - 1):
            raise ValueError(f"layer {layer} is not exposed by RecurrentAdapter; use -1 (top)")

    def trace(self, ids: Tensor, lengths: Tensor, layer: int = -1) -> tuple[Tensor, Tensor]:
        self._check_layer(layer)
        out, _ = self.rnn(self.embedding(ids))
        return out, torch.softmax(self.head(out), dim=-1)

    def initial(self, layer: int = -1) -> tuple[Tensor, Tensor]:
        self._check_layer(layer)
        h0 = torch.zeros(self.rnn.hidden_size)
        return h0, torch.softmax(self.head(h0), dim=-1)

    # -- embeddings (attribution) --------------------------------------------------------
    def embed(self, ids: Tensor) -> Tensor:
        """Embeddings, shape (batch, time, features)."""
        return self.embedding(ids)

    def forward_from_embeddings(self, emb: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Final logits (batch, n_classes) of the rnn and head run on ``emb``."""
        out, _ = self.rnn(emb)
        return self.head(_last(out, lengths))

    # -- stepping (forcing): the state is nn.RNNBase's (h, or (h, c) for an LSTM) ----------
    def initial_state(self, batch_size: int) -> Any:
        return None  # nn.RNNBase starts from zeros

    def step(self, state: Any, ids: Tensor) -> Any:
        _, state = self.rnn(self.embedding(ids[:, None]), state)
        return state

    def get_state(self, state: Any, layer: int = -1) -> Tensor:
        self._check_layer(layer)
        return _h_of(state)[-1]

    def set_state(self, state: Any, layer: int, value: Tensor) -> Any:
        self._check_layer(layer)
        h = _h_of(state).clone()
        h[-1] = value
        return (h, state[1]) if isinstance(state, tuple) else h

    def state_proba(self, state: Any) -> Tensor:
        return torch.softmax(self.head(_h_of(state)[-1]), dim=-1)


def _h_of(state: Any) -> Tensor:
    """``h`` (layers, batch, hidden) of an ``nn.RNNBase`` state (``(h, c)`` for LSTMs)."""
    return state[0] if isinstance(state, tuple) else state


def _last(out: Tensor, lengths: Tensor | None) -> Tensor:
    """``out[b, lengths[b] - 1]`` (the last step when ``lengths`` is None), (batch, ...)."""
    if lengths is None:
        return out[:, -1]
    return out[torch.arange(len(out)), (lengths.to(out.device) - 1).clamp(min=0)]


@dataclass
class StackState:
    """The recurrent state of a stack of single-layer recurrent modules.

    Attributes
    ----------
    layers : list
        Per layer, the module's state after the current step (``h`` of shape
        (1, batch, hidden), or ``(h, c)``), or None before the first step.
    previous : list
        The same before the current step (layers above a replaced one are recomputed
        from it).
    """

    layers: list = field(default_factory=list)
    previous: list = field(default_factory=list)


class RNNClassifier(nn.Module):
    """Embedding → 1–3 recurrent layers → linear head over the top layer's state.

    Each layer is its own single-layer ``nn.LSTM``/``nn.GRU``/``nn.RNN`` so the state of
    any layer is available for every step at no extra cost. The head is applied to the top
    layer's ``h`` at every step, which gives the intermediate predictions; the prediction
    for an empty input is the head applied to the zero initial state.

    Parameters
    ----------
    arch : {'lstm', 'gru', 'rnn'}
    vocab_size, n_classes : int
    embed, hidden : int
        Embedding and hidden sizes.
    layers : int
        Number of recurrent layers (1–3).
    dropout : float
        Dropout on embeddings and between layers (training only).
    state : {'h', 'c', 'hc'}
        Which LSTM state :meth:`trace` returns (``h`` for GRU/RNN).
    """

    def __init__(
        self,
        arch: str,
        vocab_size: int,
        n_classes: int,
        embed: int = 128,
        hidden: int = 128,
        layers: int = 1,
        dropout: float = 0.0,
        state: str = "h",
    ) -> None:
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"unknown arch {arch!r}; choose one of {', '.join(ARCHS)}")
        if not 1 <= layers <= 3:
            raise ValueError(f"layers must be 1, 2 or 3, not {layers}")
        if state not in STATES or (state != "h" and arch != "lstm"):
            raise ValueError(f"state {state!r} needs arch 'lstm'; GRU and RNN have only 'h'")
        self.arch, self.state = arch, state
        self.n_classes, self.n_layers, self.hidden_size = n_classes, layers, hidden
        self.embedding = nn.Embedding(vocab_size, embed, padding_idx=0)
        cls = ARCHS[arch]
        self.rnns = nn.ModuleList(
            [cls(embed if i == 0 else hidden, hidden, batch_first=True) for i in range(layers)]
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, n_classes)

    @property
    def state_size(self) -> int:
        return self.hidden_size * (2 if self.state == "hc" else 1)

    # -- core ---------------------------------------------------------------------------
    def _layer_index(self, layer: int) -> int:
        idx = layer + self.n_layers if layer < 0 else layer
        if not 0 <= idx < self.n_layers:
            raise ValueError(f"layer {layer} does not exist; the model has {self.n_layers}")
        return idx

    def _run(self, ids: Tensor, keep: int | None = None) -> tuple[Tensor, Tensor | None]:
        """Top-layer outputs (B, T, H) and, if ``keep`` is set, that layer's input."""
        x = self.dropout(self.embedding(ids))
        kept = None
        for i, rnn in enumerate(self.rnns):
            if i == keep:
                kept = x
            x, _ = rnn(x)
            if i == keep:
                kept = (kept, x)
            if i < self.n_layers - 1:
                x = self.dropout(x)
        return x, kept

    def step_logits(self, ids: Tensor) -> Tensor:
        """Head logits after every step, shape (batch, time, n_classes)."""
        top, _ = self._run(ids)
        return self.head(self.dropout(top))

    def initial_logits(self) -> Tensor:
        """Head logits for the empty input, ``head(h0)``, shape (n_classes,)."""
        return self.head.bias

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Final logits, shape (batch, n_classes); empty inputs get ``head(h0)``."""
        bias = self.head.bias.expand(len(ids), -1)
        if ids.shape[1] == 0:
            return bias
        logits = self.step_logits(ids)
        out = logits[torch.arange(len(ids)), (lengths - 1).clamp(min=0)]
        return torch.where((lengths == 0)[:, None], bias, out)

    def _lstm_cells(self, rnn: nn.LSTM, x: Tensor, h: Tensor) -> Tensor:
        """Recompute the LSTM cell state for every step from inputs and outputs."""
        h_prev = torch.cat([h.new_zeros(h[:, :1].shape), h[:, :-1]], dim=1)
        gates = (
            x @ rnn.weight_ih_l0.T + rnn.bias_ih_l0 + h_prev @ rnn.weight_hh_l0.T + rnn.bias_hh_l0
        )
        i, f, g, _ = gates.chunk(4, dim=-1)
        i, f, g = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g)
        ig = i * g
        c = torch.empty_like(h)
        c_t = h.new_zeros(h[:, 0].shape)
        for t in range(h.shape[1]):  # elementwise scan over time, vectorised over the batch
            c_t = f[:, t] * c_t + ig[:, t]
            c[:, t] = c_t
        return c

    def trace(self, ids: Tensor, lengths: Tensor, layer: int = -1) -> tuple[Tensor, Tensor]:
        """See :class:`Traceable`; dropout is off only if the module is in eval mode."""
        idx = self._layer_index(layer)
        top, (x_in, h) = self._run(ids, keep=idx)
        proba = torch.softmax(self.head(top), dim=-1)
        if self.state == "h":
            return h, proba
        c = self._lstm_cells(self.rnns[idx], x_in, h)
        return (c if self.state == "c" else torch.cat([h, c], dim=-1)), proba

    def initial(self, layer: int = -1) -> tuple[Tensor, Tensor]:
        self._layer_index(layer)
        return (
            torch.zeros(self.state_size),
            torch.softmax(self.head.bias.detach().clone(), dim=-1),
        )

    # -- embeddings (attribution) --------------------------------------------------------
    def embed(self, ids: Tensor) -> Tensor:
        """Embeddings, shape (batch, time, embed)."""
        return self.embedding(ids)

    def forward_from_embeddings(self, emb: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Final logits (batch, n_classes) of the recurrent layers and head run on ``emb``
        (no dropout)."""
        x = emb
        for rnn in self.rnns:
            x, _ = rnn(x)
        return self.head(_last(x, lengths))

    # -- stepping (forcing) ---------------------------------------------------------------
    def initial_state(self, batch_size: int) -> StackState:
        return StackState([None] * self.n_layers, [None] * self.n_layers)

    def step(self, state: StackState, ids: Tensor) -> StackState:
        """One token through every layer (eval mode: no dropout)."""
        x = self.embedding(ids[:, None])
        layers = []
        for rnn, st in zip(self.rnns, state.layers, strict=True):
            x, st = rnn(x, st)
            layers.append(st)
        return StackState(layers, state.layers)

    def _parts(self, st: Any) -> tuple[Tensor, Tensor | None]:
        return (st[0][0], st[1][0]) if self.arch == "lstm" else (st[0], None)

    def get_state(self, state: StackState, layer: int = -1) -> Tensor:
        h, c = self._parts(state.layers[self._layer_index(layer)])
        return h if self.state == "h" else c if self.state == "c" else torch.cat([h, c], -1)

    def set_state(self, state: StackState, layer: int, value: Tensor) -> StackState:
        """Replace the traced vector of ``layer``; the layers above redo the current step
        from the new ``h``."""
        idx = self._layer_index(layer)
        h, c = self._parts(state.layers[idx])
        size = self.hidden_size
        if self.state in ("h", "hc"):
            h = value[:, :size]
        if self.state in ("c", "hc"):
            c = value[:, -size:]
        layers = list(state.layers)
        layers[idx] = (h[None], c[None]) if c is not None else h[None]
        x = h[:, None]
        for j in range(idx + 1, self.n_layers):
            x, layers[j] = self.rnns[j](x, state.previous[j])
        return StackState(layers, state.previous)

    def state_proba(self, state: StackState) -> Tensor:
        h, _ = self._parts(state.layers[-1])
        return torch.softmax(self.head(h), dim=-1)
