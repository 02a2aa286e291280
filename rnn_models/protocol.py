"""The model protocol: what stateseer needs from a model, and what it uses when offered.

stateseer never looks inside a model: like Captum's ``IntegratedGradients(forward_func)``
it calls a few methods. One set is required, two are optional capabilities; a model
that lacks an optional method still records, abstracts and explores, and the feature
that needs the method says which one is missing, in one line.

Required — recording, the explorer, occlusion (:class:`Traceable`)
    ``n_classes``, ``n_layers`` (attributes);
    ``trace(ids, lengths, layer=-1) -> (hidden, proba)`` — the traced state of a layer after
    every token, shape (batch, time, state_size), and the class probabilities there,
    (batch, time, n_classes);
    ``initial(layer=-1) -> (h0, p0)`` — the state before any token, (state_size,), and the
    prediction for the empty input, (n_classes,).

Embeddings — integrated gradients and gradient × input (:class:`Embeddable`)
    ``embed(ids) -> emb`` — (batch, time) → (batch, time, features);
    ``forward_from_embeddings(emb, lengths=None) -> logits`` — final class logits,
    (batch, n_classes), of the model run on ``emb`` (at ``lengths - 1``, or at the last
    step when ``lengths`` is None). Occlusion uses them when present (it replaces a token's
    embedding); without them it replaces the token id and reads ``trace``.

Own prediction — a check at ``stateseer create``
    ``predict(ids, lengths) -> logits`` — (batch, n_classes), the model classifying as you
    run it; ``create`` compares it with the head on the last traced state and warns when
    they disagree (a head that pools over all steps).

Stepping — state forcing (:class:`Steppable`)
    ``initial_state(batch_size) -> state`` — the model's whole recurrent state before any
    token, an opaque object (tensors, tuples, a dataclass: stateseer only passes it back);
    ``step(state, ids) -> state`` — advance every layer by one token, ``ids`` of shape
    (batch,);
    ``get_state(state, layer) -> vector`` — the traced vector of ``layer``,
    (batch, state_size), exactly what ``trace`` records at that step;
    ``set_state(state, layer, vector) -> state`` — the same state with that vector
    replaced; what is computed from it *within the same step* (layers above, a head input)
    is recomputed, what the traced vector does not cover is kept (an LSTM traced on ``h``
    keeps its ``c``);
    ``state_proba(state) -> proba`` — class probabilities the head gives for the current
    state, (batch, n_classes).

:class:`~stateseer.rnn_models.models.RNNClassifier`,
:class:`~stateseer.rnn_models.models.RecurrentAdapter`,
:class:`~stateseer.rnn_models.minrnn.MinRNNClassifier` and
:class:`~stateseer.rnn_models.mamba.MambaClassifier`
implement all three; :class:`TraceAdapter` (below) is a base for the required
part. :func:`require` is how the features check for a capability.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from stateseer.core.errors import StateseerError

__all__ = ["EMBEDDINGS", "STEPPING", "Embeddable", "ModelProtocolError", "Steppable",
           "TraceAdapter", "Traceable", "has", "model_device", "require"]


class ModelProtocolError(StateseerError):
    """A model lacks a method of the protocol that a feature needs."""


@runtime_checkable
class Traceable(Protocol):
    """What stateseer needs from every model (see the module docstring).

    Attributes
    ----------
    n_classes : int
    n_layers : int
    """

    n_classes: int
    n_layers: int

    def trace(self, ids: Tensor, lengths: Tensor, layer: int = -1) -> tuple[Tensor, Tensor]:
        """Per-step traced states and class probabilities.

        Parameters
        ----------
        ids : LongTensor of shape (batch, time)
            Token ids, right-padded with 0.
        lengths : LongTensor of shape (batch,)
            True lengths (≥ 1).
        layer : int
            Which recurrent layer's state to return (negative counts from the top).

        Returns
        -------
        hidden : Tensor of shape (batch, time, state_size)
        proba : Tensor of shape (batch, time, n_classes)
            Values at padded positions are ignored by the caller.
        """
        ...

    def initial(self, layer: int = -1) -> tuple[Tensor, Tensor]:
        """Initial state h0, shape (state_size,), and head(h0) probabilities, (n_classes,)."""
        ...


@runtime_checkable
class Embeddable(Protocol):
    """The optional embedding capability (attribution)."""

    def embed(self, ids: Tensor) -> Tensor:
        """Embeddings (batch, time, features) of ids (batch, time)."""
        ...

    def forward_from_embeddings(self, emb: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Final logits (batch, n_classes) of the model run on embeddings."""
        ...


@runtime_checkable
class Steppable(Protocol):
    """The optional stepping capability (state forcing)."""

    def initial_state(self, batch_size: int) -> Any:
        """The whole recurrent state before any token (opaque)."""
        ...

    def step(self, state: Any, ids: Tensor) -> Any:
        """Advance every layer by one token; ``ids`` of shape (batch,)."""
        ...

    def get_state(self, state: Any, layer: int = -1) -> Tensor:
        """The traced vector of ``layer``, shape (batch, state_size)."""
        ...

    def set_state(self, state: Any, layer: int, value: Tensor) -> Any:
        """``state`` with the traced vector of ``layer`` replaced by ``value``."""
        ...

    def state_proba(self, state: Any) -> Tensor:
        """Class probabilities (batch, n_classes) for the current state."""
        ...


#: method name → (how it is called, what it returns) for error messages
SIGNATURES = {
    "trace": "trace(ids, lengths, layer)",
    "initial": "initial(layer)",
    "embed": "embed(ids)",
    "forward_from_embeddings": "forward_from_embeddings(emb, lengths)",
    "initial_state": "initial_state(batch_size)",
    "step": "step(state, ids)",
    "get_state": "get_state(state, layer)",
    "set_state": "set_state(state, layer, value)",
    "state_proba": "state_proba(state)",
}
REQUIRED = ("trace", "initial")
EMBEDDINGS = ("embed", "forward_from_embeddings")
STEPPING = ("initial_state", "step", "get_state", "set_state", "state_proba")


def has(model: object, names: tuple[str, ...]) -> bool:
    """Whether ``model`` has every method in ``names``."""
    return all(callable(getattr(model, n, None)) for n in names)


def require(model: object, names: tuple[str, ...], purpose: str, fix: str = "") -> None:
    """Raise a one-line :class:`ModelProtocolError` naming the first missing method.

    Parameters
    ----------
    model : object
    names : tuple of str
        Method names, e.g. :data:`EMBEDDINGS`.
    purpose : str
        What needs them, e.g. ``"integrated gradients"``.
    fix : str
        Appended to "add it", e.g. ``" or use method='occlusion'"``.

    A model may say why a method cannot exist for it, in a ``cannot`` dict (method name →
    one clause); the error then gives that reason instead of "add it".

    Examples
    --------
    >>> try:
    ...     require(object(), EMBEDDINGS, "attribution", " or use occlusion")
    ... except ModelProtocolError as exc:
    ...     print(str(exc).split(" — ")[0])
    the model (object) has no `embed(ids)` method, which attribution needs
    """
    for name in names:
        if not callable(getattr(model, name, None)):
            why = getattr(model, "cannot", {}).get(name)
            if why:  # the method cannot exist for this kind of model: say why
                raise ModelProtocolError(f"{purpose} is not possible for this model: {why}")
            raise ModelProtocolError(
                f"the model ({type(model).__name__}) has no `{SIGNATURES.get(name, name)}` "
                f"method, which {purpose} needs — add it{fix} (see stateseer.rnn_models.protocol)")


def model_device(model: object) -> torch.device:
    """Where the model's first parameter lives (CPU for a model without parameters)."""
    params = getattr(model, "parameters", None)
    first = next(iter(params()), None) if callable(params) else None
    return first.device if first is not None else torch.device("cpu")


class TraceAdapter(nn.Module):
    """Base class for adapters: subclass it and implement :meth:`trace` and :meth:`initial`.

    That is the required part of the protocol (recording, the explorer, occlusion). Add
    ``embed`` and ``forward_from_embeddings`` for integrated gradients, and the stepping
    methods (``initial_state``, ``step``, ``get_state``, ``set_state``, ``state_proba``)
    for state forcing; see :mod:`stateseer.rnn_models.protocol` and :class:`RecurrentAdapter`.
    """

    n_classes: int
    n_layers: int = 1

    def trace(self, ids: Tensor, lengths: Tensor, layer: int = -1) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def initial(self, layer: int = -1) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Final class probabilities, shape (batch, n_classes)."""
        _, proba = self.trace(ids, lengths)
        return proba[torch.arange(len(ids)), (lengths - 1).clamp(min=0)]
