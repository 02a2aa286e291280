"""Mamba (Gu & Dao 2023): a selective state-space classifier whose recurrent state is recorded.

One layer is the residual block of the Mamba paper, for inputs ``x_t`` of width
``d_model`` (the embedding size) and ``d_inner`` channels (``hidden``)::

    (x̂, z)  = in_proj(x_t)                           x̂, z: d_inner
    u_t     = SiLU(causal depthwise conv(x̂)_t)        kernel d_conv over x̂_{t−d_conv+1..t}
    Δ, B, C = softplus(dt_proj(·)), ·, ·  of x_proj(u_t)   Δ: d_inner; B, C: d_state
    S_t     = exp(Δ_t A) ⊙ S_{t−1} + (Δ_t u_t) B_tᵀ      A = −exp(A_log): d_inner × d_state
    y_t     = S_t C_t + D ⊙ u_t
    x_{t+1 layer} = x_t + out_proj(y_t ⊙ SiLU(z_t))

and the head reads ``x`` after the top layer. The *recurrent state* of a layer
after step ``t`` is what the next step needs: the SSM state ``S_t`` (d_inner × d_state)
and the conv buffer, the last ``d_conv − 1`` values of ``x̂`` (d_inner × (d_conv − 1)).
The block output depends on the current token too, so it is not what is abstracted.

Unlike the paper's deep stacks, the blocks have no RMSNorm: with at most three layers
training is stable without it, and RMSNorm is a step function at the zero vector, which
breaks integrated gradients from the ``<pad>`` (zero) embedding baseline (completeness
failed by a factor of 8 with it).

``--state`` chooses what :meth:`MambaClassifier.trace` records for the traced layer:

``full``
    ``S_t`` flattened (channel-major), then the conv buffer flattened (channel-major,
    oldest first): d_inner · (d_state + d_conv − 1) floats per step.
``ssm``
    ``S_t`` alone: d_inner · d_state floats.
``summary``
    ``S_t`` averaged over its d_state columns: d_inner floats (the cheap one). Forcing a
    summary shifts every column of ``S_t`` by the same amount so that the average becomes
    the centroid (the smallest change with that average); the rest of the state is kept.

Recording runs the whole sequence at once: the selective scan is a Hillis–Steele parallel
prefix scan over ``(exp(Δ A), Δ u B)`` pairs (log₂ T vectorised rounds, every step's
state kept); :meth:`MambaClassifier.step` runs the same recurrence one token at a time
(state forcing), and the tests check that both agree. When a state is replaced, the
layer's output at that step is recomputed from the new ``S_t`` and the layers above
redo the step, so the head sees the forced state at once.

Why in-house: ``mambapy`` 1.2.0 (pure PyTorch, CPU-capable) computes every step's SSM
state inside ``selective_scan`` but returns only ``y``, and its conv buffer exists only in
its step cache; ``minimamba`` 1.0.1 is alike. Recording needs both per step, and forcing
needs to replace them between steps, so the ~200 lines live here (the parameterisation
and initialisation follow the paper and ``mambapy``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from stateseer.rnn_models.layered import LayeredClassifier

__all__ = ["STATES", "MambaClassifier", "MambaLayer", "MambaState", "linear_scan"]

STATES = ("full", "ssm", "summary")


def linear_scan(a: Tensor, b: Tensor) -> Tensor:
    """All states of ``S_t = a_t ⊙ S_{t−1} + b_t`` (``S_0 = 0``) along dim 1, in parallel.

    Hillis–Steele inclusive scan with the associative operator
    ``(a₁, b₁) ∘ (a₂, b₂) = (a₁ a₂, a₂ b₁ + b₂)``: ⌈log₂ T⌉ vectorised rounds.

    Parameters
    ----------
    a, b : Tensor of shape (batch, time, ...)

    Returns
    -------
    Tensor of shape (batch, time, ...)

    Examples
    --------
    >>> a = torch.tensor([[0.5, 0.5, 2.0]]); b = torch.tensor([[1.0, 1.0, 1.0]])
    >>> linear_scan(a, b).tolist()
    [[1.0, 1.5, 4.0]]
    """
    T, k = a.shape[1], 1
    while k < T:
        b = torch.cat([b[:, :k], a[:, k:] * b[:, :-k] + b[:, k:]], dim=1)
        a = torch.cat([a[:, :k], a[:, k:] * a[:, :-k]], dim=1)
        k *= 2
    return b


@dataclass
class LayerState:
    """One layer's recurrent state after a step, and what that step's output was made of.

    Attributes
    ----------
    ssm : Tensor of shape (batch, d_inner, d_state)
    conv : Tensor of shape (batch, d_inner, d_conv − 1)
        The last inputs of the causal convolution, oldest first.
    out : Tensor of shape (batch, d_model) or None
        The layer's output at this step (None before the first step).
    parts : tuple or None
        ``(x_in, u, z, C)`` of this step, to recompute ``out`` from a replaced ``ssm``.
    """

    ssm: Tensor
    conv: Tensor
    out: Tensor | None = None
    parts: tuple | None = None


@dataclass
class MambaState:
    """The recurrent state of every layer (:class:`LayerState`), now and one step before."""

    layers: list[LayerState] = field(default_factory=list)
    previous: list[LayerState] = field(default_factory=list)


class MambaLayer(nn.Module):
    """One Mamba residual block (see the module docstring).

    Parameters
    ----------
    d_model, d_inner, d_state, d_conv : int
    """

    def __init__(self, d_model: int, d_inner: int, d_state: int = 16, d_conv: int = 4,
                 gate: str = "positive") -> None:
        super().__init__()
        self.d_inner, self.d_state, self.d_conv = d_inner, d_state, d_conv
        self.signed = gate == "signed"
        self.dt_rank = max(1, math.ceil(d_model / 16))
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner)
        self.x_proj = nn.Linear(d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, d_inner)
        with torch.no_grad():  # Δ between 1e-3 and 1e-1 at the start, as in the paper
            nn.init.uniform_(self.dt_proj.weight, -self.dt_rank ** -0.5, self.dt_rank ** -0.5)
            dt = torch.exp(torch.rand(d_inner) * (math.log(0.1) - math.log(1e-3))
                           + math.log(1e-3)).clamp(min=1e-4)
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1.0)).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(x̂, z)``, the SSM's input and the gate, each (..., d_inner)."""
        return self.in_proj(x).chunk(2, dim=-1)

    def _ssm_inputs(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``exp(Δ A)``, ``Δ u B`` (..., d_inner, d_state) and ``C`` (..., d_state)."""
        dt, B, C = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))
        A = -torch.exp(self.A_log)
        decay = torch.exp(delta[..., None] * A)
        if self.signed:  # Grazzi et al. 2025: 2 exp(ΔA) − 1 in (−1, 1)
            decay = 2 * decay - 1
        return decay, (delta * u)[..., None] * B[..., None, :], C, delta

    def _output(self, x: Tensor, S: Tensor, u: Tensor, z: Tensor, C: Tensor) -> Tensor:
        y = (S @ C[..., None])[..., 0] + self.D * u
        return x + self.out_proj(y * F.silu(z))

    def forward(self, x: Tensor, keep: bool = False) -> tuple[Tensor, Tensor | None,
                                                              Tensor | None]:
        """Outputs (batch, time, d_model) and, with ``keep``, every step's SSM state
        (batch, time, d_inner, d_state) and conv buffer (batch, time, d_inner, d_conv − 1)."""
        T = x.shape[1]
        xi, z = self._project(x)
        padded = F.pad(xi.transpose(1, 2), (self.d_conv - 1, 0))  # (B, d_inner, T + k − 1)
        u = F.silu(F.conv1d(padded, self.conv.weight, self.conv.bias,
                            groups=self.d_inner).transpose(1, 2))
        dA, dBu, C, _ = self._ssm_inputs(u)
        S = linear_scan(dA, dBu)
        out = self._output(x, S, u, z, C)
        if not keep:
            return out, None, None
        conv = padded.unfold(2, self.d_conv - 1, 1)[:, :, 1 : T + 1].transpose(1, 2)
        return out, S, conv

    def step(self, st: LayerState, x: Tensor) -> LayerState:
        """One token: ``x`` (batch, d_model) → the layer's state and output after it."""
        xi, z = self._project(x)
        window = torch.cat([st.conv, xi[..., None]], dim=-1)  # (B, d_inner, d_conv)
        bias = self.conv.bias
        u = F.silu((window * self.conv.weight[:, 0]).sum(-1) + (0 if bias is None else bias))
        dA, dBu, C, _ = self._ssm_inputs(u)
        S = dA * st.ssm + dBu
        return LayerState(S, window[..., 1:], self._output(x, S, u, z, C), (x, u, z, C))

    def redo(self, st: LayerState, ssm: Tensor, conv: Tensor) -> LayerState:
        """The same step with its state replaced: the output is recomputed from ``ssm``."""
        x, u, z, C = st.parts
        return LayerState(ssm, conv, self._output(x, ssm, u, z, C), st.parts)


class MambaClassifier(LayeredClassifier):
    """Embedding → 1–3 Mamba layers → linear head, at every step.

    Parameters
    ----------
    vocab_size, n_classes : int
    embed : int
        ``d_model``, the width of the residual stream.
    hidden : int
        ``d_inner``, the number of SSM channels (the paper's ``expand · d_model``).
    layers : int
    dropout : float
        On the embeddings and before the head (training only).
    state : {'full', 'ssm', 'summary'}
        What :meth:`trace` records (see the module docstring).
    d_state, d_conv : int
        SSM state size per channel, and the convolution's width.
    gate : {'positive', 'signed'}
        The SSM's transition values: ``exp(Δ A)`` in (0, 1) as published, or
        ``2 exp(Δ A) − 1`` in (−1, 1) (Grazzi et al., ICLR 2025), which can flip a state's
        sign and so count modulo 2.

    Examples
    --------
    >>> model = MambaClassifier(30, 2, embed=8, hidden=16, d_state=4).eval()
    >>> hidden, proba = model.trace(torch.tensor([[3, 4, 5]]), torch.tensor([3]))
    >>> tuple(hidden.shape), tuple(proba.shape)        # 16 · (4 + 3) floats per step
    ((1, 3, 112), (1, 3, 2))
    """

    def __init__(self, vocab_size: int, n_classes: int, *, embed: int = 64, hidden: int = 128,
                 layers: int = 1, dropout: float = 0.0, state: str = "full",
                 d_state: int = 16, d_conv: int = 4, gate: str = "positive") -> None:
        super().__init__()
        if not 1 <= layers <= 3:
            raise ValueError(f"layers must be 1, 2 or 3, not {layers}")
        if state not in STATES:
            raise ValueError(f"state {state!r} does not exist for mamba; choose one of "
                             f"{', '.join(STATES)}")
        if gate not in ("positive", "signed"):
            raise ValueError(f"gate must be 'positive' or 'signed', not {gate!r}")
        if d_state < 1 or d_conv < 2:
            raise ValueError(f"d_state must be ≥ 1 and d_conv ≥ 2, not {d_state}, {d_conv}")
        self.arch, self.state = "mamba", state
        self.n_classes, self.n_layers = n_classes, layers
        self.hidden_size, self.head_size = hidden, embed
        self.d_state, self.d_conv = d_state, d_conv
        ssm, conv = hidden * d_state, hidden * (d_conv - 1)
        self.state_size = {"full": ssm + conv, "ssm": ssm, "summary": hidden}[state]
        self.embedding = nn.Embedding(vocab_size, embed, padding_idx=0)
        self.layers = nn.ModuleList(
            [MambaLayer(embed, hidden, d_state, d_conv, gate) for _ in range(layers)])
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(embed, n_classes)

    def _vector(self, S: Tensor, conv: Tensor) -> Tensor:
        """The traced vector of SSM states (..., d_inner, d_state) and buffers."""
        if self.state == "summary":
            return S.mean(-1)
        flat = S.flatten(-2)
        return flat if self.state == "ssm" else torch.cat([flat, conv.flatten(-2)], dim=-1)

    def scan(self, x: Tensor, keep: int | None = None) -> tuple[Tensor, Tensor | None]:
        kept = None
        for i, layer in enumerate(self.layers):
            x, S, conv = layer(x, keep=i == keep)
            if i == keep:
                kept = self._vector(S, conv)
        return x, kept

    # -- stepping: MambaState ---------------------------------------------------------------
    def initial_state(self, batch_size: int) -> MambaState:
        p = self._param()
        zero = LayerState(p.new_zeros(batch_size, self.hidden_size, self.d_state),
                          p.new_zeros(batch_size, self.hidden_size, self.d_conv - 1))
        return MambaState([zero] * self.n_layers, [zero] * self.n_layers)

    def step(self, state: MambaState, ids: Tensor) -> MambaState:
        x, layers = self.embedding(ids), []
        for layer, st in zip(self.layers, state.layers, strict=True):
            st = layer.step(st, x)
            layers.append(st)
            x = st.out
        return MambaState(layers, state.layers)

    def get_state(self, state: MambaState, layer: int = -1) -> Tensor:
        st = state.layers[self._layer_index(layer)]
        return self._vector(st.ssm, st.conv)

    def set_state(self, state: MambaState, layer: int, value: Tensor) -> MambaState:
        """Replace the traced part of ``layer``'s state; its output and the layers above
        are recomputed for the current step."""
        idx = self._layer_index(layer)
        st = state.layers[idx]
        B, D, N = st.ssm.shape
        if self.state == "summary":
            ssm, conv = st.ssm + (value - st.ssm.mean(-1))[..., None], st.conv
        else:
            ssm = value[:, : D * N].reshape(B, D, N)
            conv = value[:, D * N :].reshape(st.conv.shape) if self.state == "full" else st.conv
        layers = list(state.layers)
        layers[idx] = self.layers[idx].redo(st, ssm, conv)
        for j in range(idx + 1, self.n_layers):
            layers[j] = self.layers[j].step(state.previous[j], layers[j - 1].out)
        return MambaState(layers, state.previous)

    def top_of(self, state: MambaState) -> Tensor:
        return state.layers[-1].out
