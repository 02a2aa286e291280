"""minGRU and minLSTM (Feng et al. 2024, "Were RNNs all we needed?"), trained and recorded
with a log-space parallel scan.

Both drop the hidden state from the gates, so the recurrence of a layer is a diagonal
linear map whose coefficients depend on the input only::

    minGRU   z_t = σ(W_z x_t),  h̃_t = g(W_h x_t),   h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t
    minLSTM  f_t = σ(W_f x_t),  i_t = σ(W_i x_t),   f'_t, i'_t = f_t, i_t / (f_t + i_t)
             h_t = f'_t ⊙ h_{t−1} + i'_t ⊙ g(W_h x_t)

with ``g(v) = v + ½`` for ``v ≥ 0`` and ``σ(v)`` below (so ``h̃ > 0``) and ``h_0 = 0``. The
whole sequence is then one scan ``h_t = a_t h_{t−1} + b_t``, computed in log space as in the
paper's appendix B (Heinsen's ``log h = a* + logcumsumexp(log b − a*)``, ``a* = cumsum
log a``), in float64 so that long inputs lose no precision. :meth:`MinRNNClassifier.step`
runs the same recurrence one token at a time (state forcing); the tests check that both
agree.

With ``gate="signed"`` (minGRU only; Grazzi et al., ICLR 2025) the decay is ``1 − 2 z_t``,
in [−1, 1], and the candidate ``W_h x_t`` is used as it is::

    z_t = clamp(1.5 σ(W_z x_t) − 0.25, 0, 1)
    h_t = (1 − 2 z_t) ⊙ h_{t−1} + z_t ⊙ W_h x_t

The gate is stretched and clipped (:data:`STRETCH`): it reaches exactly 0 and 1, a decay of
exactly 1 or −1, at a finite pre-activation. With a plain sigmoid the decay nears −1 only in
the limit, and on a string of 100 flips the two parities' states drift toward each other
(a decay of −(1 − 2ε) shrinks their difference by (1 − 2ε) per flip): trained on strings of
up to 20 symbols, the model read parity right on 0.821 of strings of 51–100 symbols; with
the clipped gate on all of them (``benchmarks/archs.py``).

Signs rule out the log space; that scan is the Hillis–Steele one of
:func:`stateseer.rnn_models.mamba.linear_scan` (in float64). A decay near −1 flips the state
every step, which is what counting modulo 2 (parity) needs and what no non-negative decay
can do at finite precision.

The recorded state (``--state h``, the only one) is ``h_t`` of the traced layer: it is the
whole recurrent state of that layer. Layers are stacked plainly (layer ``l + 1`` reads
``h_t`` of layer ``l``); the head reads the top layer's ``h_t``.

Why in-house: ``mingru-pytorch`` 0.2.1 holds the same scan in ~30 lines, but it brings
``einops``, has no classifier head, scans in float32 and has no way to replace a layer's
state between steps; forcing through the model protocol needs that, so the ~100 lines live
here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stateseer.rnn_models.layered import LayeredClassifier
from stateseer.rnn_models.mamba import linear_scan
from stateseer.rnn_models.models import StackState

__all__ = ["KINDS", "MinRNNClassifier", "log_scan"]

KINDS = ("mingru", "minlstm")
#: the signed gate's stretch: ``z = clamp((1 + 2s) σ(k) − s, 0, 1)`` reaches 0 and 1 exactly
#: at finite ``k`` (a decay of exactly 1 or −1), so a flip learnt on short strings stays a
#: flip on long ones (Louizos et al.'s stretched and clipped gate)
STRETCH = 0.25


def _log_g(v: Tensor) -> Tensor:
    """``log g(v)``: ``log(v + ½)`` for ``v ≥ 0``, ``log σ(v)`` below."""
    return torch.where(v >= 0, (F.relu(v) + 0.5).log(), -F.softplus(-v))


def log_scan(log_a: Tensor, log_b: Tensor) -> Tensor:
    """All states of ``h_t = a_t h_{t−1} + b_t`` with ``h_0 = 0``, ``a, b > 0``, in log space.

    Parameters
    ----------
    log_a, log_b : Tensor of shape (batch, time, hidden)

    Returns
    -------
    Tensor of shape (batch, time, hidden)
        ``h_1 … h_T`` (in the input's dtype; computed in float64).

    Examples
    --------
    >>> a, b = torch.tensor([[[0.5], [0.5]]]), torch.tensor([[[1.0], [2.0]]])
    >>> log_scan(a.log(), b.log()).flatten().tolist()
    [1.0, 2.5]
    """
    a_star = log_a.double().cumsum(dim=1)
    log_h = a_star + (log_b.double() - a_star).logcumsumexp(dim=1)
    return log_h.exp().to(log_a.dtype)


class MinLayer(nn.Module):
    """One minGRU or minLSTM layer: the gates and candidate from the input alone."""

    def __init__(self, kind: str, inp: int, hidden: int, signed: bool = False) -> None:
        super().__init__()
        self.kind, self.signed = kind, signed
        self.proj = nn.Linear(inp, hidden * (2 if kind == "mingru" else 3))

    def linear(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``a`` and ``b`` of the scan (signed minGRU: ``a = 1 − 2z``, ``b = z ⊙ W_h x``)."""
        if not self.signed:
            return tuple(v.exp() for v in self.coefficients(x))
        k, v = self.proj(x).chunk(2, dim=-1)
        z = (torch.sigmoid(k) * (1 + 2 * STRETCH) - STRETCH).clamp(0.0, 1.0)
        return 1 - 2 * z, z * v

    def coefficients(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``log a`` and ``log b`` of the scan for inputs (..., inp), each (..., hidden)."""
        if self.kind == "mingru":
            k, v = self.proj(x).chunk(2, dim=-1)
            return -F.softplus(k), -F.softplus(-k) + _log_g(v)
        k_f, k_i, v = self.proj(x).chunk(3, dim=-1)
        diff = F.softplus(-k_f) - F.softplus(-k_i)  # log(i / f)
        return -F.softplus(diff), -F.softplus(-diff) + _log_g(v)

    def forward(self, x: Tensor) -> Tensor:
        """All states (batch, time, hidden) of the layer over inputs (batch, time, inp)."""
        if self.signed:
            a, b = self.linear(x)
            return linear_scan(a.double(), b.double()).to(x.dtype)
        return log_scan(*self.coefficients(x))

    def step(self, h: Tensor, x: Tensor) -> Tensor:
        """One step: ``h`` (batch, hidden), ``x`` (batch, inp) → the next ``h``."""
        a, b = self.linear(x)
        return a * h + b


class MinRNNClassifier(LayeredClassifier):
    """Embedding → 1–3 minGRU or minLSTM layers → linear head over the top layer's ``h``.

    Parameters
    ----------
    kind : {'mingru', 'minlstm'}
    vocab_size, n_classes : int
    embed, hidden : int
    layers : int
    dropout : float
        On the embeddings, between layers and before the head (training only).
    state : {'h'}
    gate : {'positive', 'signed'}
        minGRU's decay: ``1 − z`` in (0, 1) as published, or ``1 − 2z`` in (−1, 1) (see
        the module notes; minLSTM has only the first).

    Examples
    --------
    >>> model = MinRNNClassifier("mingru", 30, 2, embed=4, hidden=6).eval()
    >>> hidden, proba = model.trace(torch.tensor([[3, 4, 5]]), torch.tensor([3]))
    >>> tuple(hidden.shape), tuple(proba.shape)
    ((1, 3, 6), (1, 3, 2))
    """

    def __init__(self, kind: str, vocab_size: int, n_classes: int, *, embed: int = 128,
                 hidden: int = 128, layers: int = 1, dropout: float = 0.0,
                 state: str = "h", gate: str = "positive") -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
        if not 1 <= layers <= 3:
            raise ValueError(f"layers must be 1, 2 or 3, not {layers}")
        if gate not in ("positive", "signed") or (gate == "signed" and kind != "mingru"):
            raise ValueError(f"gate {gate!r} does not exist for {kind}; it has "
                             + ("'positive' and 'signed'" if kind == "mingru" else
                                "only 'positive'"))
        if state != "h":
            raise ValueError(f"state {state!r} does not exist for {kind}; it has only 'h'")
        self.arch, self.state = kind, state
        self.n_classes, self.n_layers = n_classes, layers
        self.hidden_size = self.head_size = self.state_size = hidden
        self.embedding = nn.Embedding(vocab_size, embed, padding_idx=0)
        self.layers = nn.ModuleList(
            [MinLayer(kind, embed if i == 0 else hidden, hidden, gate == "signed")
             for i in range(layers)])
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, n_classes)

    def scan(self, x: Tensor, keep: int | None = None) -> tuple[Tensor, Tensor | None]:
        kept = None
        for i, layer in enumerate(self.layers):
            if i:
                x = self.dropout(x)
            x = layer(x)
            if i == keep:
                kept = x
        return x, kept

    # -- stepping: the state is h of every layer (StackState) --------------------------------
    def initial_state(self, batch_size: int) -> StackState:
        zero = self._param().new_zeros(batch_size, self.hidden_size)
        return StackState([zero] * self.n_layers, [zero] * self.n_layers)

    def step(self, state: StackState, ids: Tensor) -> StackState:
        x, layers = self.embedding(ids), []
        for layer, h in zip(self.layers, state.layers, strict=True):
            x = layer.step(h, x)
            layers.append(x)
        return StackState(layers, state.layers)

    def get_state(self, state: StackState, layer: int = -1) -> Tensor:
        return state.layers[self._layer_index(layer)]

    def set_state(self, state: StackState, layer: int, value: Tensor) -> StackState:
        """Replace ``h`` of ``layer``; the layers above redo the current step from it."""
        idx = self._layer_index(layer)
        layers = list(state.layers)
        layers[idx] = value
        for j in range(idx + 1, self.n_layers):
            layers[j] = self.layers[j].step(state.previous[j], layers[j - 1])
        return StackState(layers, state.previous)

    def top_of(self, state: StackState) -> Tensor:
        return state.layers[-1]
