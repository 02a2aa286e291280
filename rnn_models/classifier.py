"""Any classifier, read exactly: the prediction and the state of every prefix.

:class:`ClassifierAdapter` takes a model as a user wrote it — a mean-pooled head, a
bidirectional net, a stack of separate recurrent modules, a class read after an END
token, a last layer that is already a softmax — and reads it by the definition itself:

* the **intermediate prediction after token t** is what the model says when it has read
  the text up to t: the model on ``bos + x[:t] + eos``;
* the **state after token t** is what the model's head reads at that point: the input of
  the ``state`` submodule (by default the model's last ``nn.Linear``) on that same call,
  taken with a forward hook.

Both are exact by construction, for any model: the prediction after the last token is the
model's own prediction. The price is reading every prefix, ``sum(T^2) / 2`` token steps
for inputs of ``T`` tokens instead of ``sum(T)``; the prefixes of a whole batch of inputs
are read together, grouped by length (``model(ids)`` on equal-length blocks, or right-
padded blocks when the model's ``forward`` takes ``(ids, lengths)``), with no Python loop
over tokens or prefixes. :class:`~stateseer.rnn_models.models.RecurrentAdapter` stays the
fast path where it is exact (Embedding → one unidirectional RNN → a head on the last
state).

Examples
--------
A mean-pooled LSTM, which a last-state reading would get wrong:

>>> import torch
>>> from torch import nn
>>> class MeanPooled(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.emb, self.lstm = nn.Embedding(20, 8), nn.LSTM(8, 16, batch_first=True)
...         self.out = nn.Linear(16, 3)
...     def forward(self, ids):
...         h, _ = self.lstm(self.emb(ids))
...         return self.out(h.mean(1))
>>> torch.manual_seed(0) and None
>>> net = MeanPooled().eval()
>>> vocab = ["<pad>", "<unk>"] + [f"w{i}" for i in range(18)]
>>> model = ClassifierAdapter(net, vocab=vocab, tokenize=str.split, classes=["a", "b", "c"])
>>> ids = torch.tensor([[4, 5, 6, 7]])
>>> hidden, proba = model.trace(ids, torch.tensor([4]))
>>> tuple(hidden.shape), tuple(proba.shape)
((1, 4, 16), (1, 4, 3))
>>> bool(torch.allclose(proba[0, -1], torch.softmax(net(ids)[0], -1), atol=1e-6))
True
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from stateseer.rnn_models.protocol import TraceAdapter

__all__ = ["PREFIX_TOKENS", "ClassifierAdapter"]

#: token ids read in one call of the model (a block of prefixes): bounds the memory
PREFIX_TOKENS = 1 << 16


class ClassifierAdapter(TraceAdapter):
    """Any classifier from token ids to class scores, read prefix by prefix (see the
    module notes).

    Use it for a model :class:`~stateseer.rnn_models.models.RecurrentAdapter` cannot read
    exactly: a head that pools over the steps (mean, max, attention), a bidirectional
    net, stacked separate recurrent modules, a class read after an END symbol, a
    transformer encoder. It is slower (every prefix is read) but never wrong about what
    the model says.

    Parameters
    ----------
    model : nn.Module or callable
        Maps token ids to class scores ``(batch, n_classes)``. If its ``forward`` takes
        two arguments it is called as ``model(ids, lengths)`` on right-padded blocks
        (``pad`` fills them); otherwise as ``model(ids)`` on blocks of equal length, so it
        never sees padding.
    vocab : list of str
        Token strings indexed by id (with ``'<unk>'``); the run's ``vocab.json``.
    tokenize : callable
        ``tokenize(text) -> list[str]``, the model's own tokeniser.
    classes : list of str
        Class names in the order of the model's outputs.
    pad, bos, eos : str, optional
        Tokens of ``vocab``: the padding token (needed when ``forward`` takes lengths),
        and a start and an end token put around every prefix (a class read after an END
        symbol: ``eos="</s>"``).
    state : nn.Module or str, optional
        The submodule whose *input* is the state after each token (a module or its name
        in ``model.named_modules()``). Default: the model's last ``nn.Linear``; without
        one, the class scores themselves.
    outputs : {'logits', 'proba'}
        What the model returns: logits (a softmax is applied) or probabilities already.
    prefix_stride : int
        Read every ``prefix_stride``-th prefix and the last one (long texts: the cost falls
        by about that factor). A step between two read prefixes carries the state and the
        prediction of the last one read before it (the initial ones before the first), so
        the last step is still the model's own prediction; the run records the stride
        (``stateseer create --prefix-stride K``). Default 1: every prefix, exact.

    Attributes
    ----------
    n_classes : int
    vocab, tokenize, classes
        As given (what :mod:`stateseer.rnn_models.factory` reads).
    takes_lengths : bool
        Whether the model is called with ``(ids, lengths)``.
    """

    n_layers = 1
    #: a final prediction needs only the whole input (``predict_ids`` asks ``predict``)
    reads_prefixes = True

    def __init__(self, model: Any, *, vocab: Sequence[str], tokenize: Callable[[str], list[str]],
                 classes: Sequence[str], pad: str | None = None, bos: str | None = None,
                 eos: str | None = None, state: nn.Module | str | None = None,
                 outputs: str = "logits", prefix_stride: int = 1) -> None:
        super().__init__()
        if outputs not in ("logits", "proba"):
            raise ValueError(f"outputs={outputs!r}: give 'logits' or 'proba' (a model whose "
                             "last layer is a softmax)")
        if not callable(model):
            raise TypeError("ClassifierAdapter needs a model: an nn.Module or a callable "
                            "from token ids to class scores")
        self.vocab, self.tokenize = list(vocab), tokenize
        self.classes, self.n_classes = list(classes), len(classes)
        self.outputs = outputs
        if isinstance(prefix_stride, bool) or not isinstance(prefix_stride, int) \
                or prefix_stride < 1:
            raise ValueError(f"prefix_stride={prefix_stride!r}: give a whole number >= 1 (1: "
                             "every prefix)")
        self.prefix_stride = prefix_stride
        index = {w: i for i, w in enumerate(self.vocab)}

        def token(name: str, value: str | None) -> int | None:
            if value is None:
                return None
            if value not in index:
                raise ValueError(f"{name}={value!r} is not a token of vocab; give a token the "
                                 "model knows (its id is what is put in)")
            return index[value]

        self.pad_id, self.bos_id, self.eos_id = (token("pad", pad), token("bos", bos),
                                                 token("eos", eos))
        # an nn.Module is registered once (its weights are the run's); a plain callable
        # and the state module (a submodule of the model) are kept unregistered
        self.model = model if isinstance(model, nn.Module) else None
        self._fn = None if isinstance(model, nn.Module) else model
        self.takes_lengths = _takes_lengths(model)
        if self.takes_lengths and self.pad_id is None:
            raise ValueError("the model's forward takes (ids, lengths), so ClassifierAdapter "
                             "right-pads its input: give pad='<pad>' (a token of vocab)")
        self._state_box = [_state_module(model, state)]
        self._emb_box = [_embedding(model)]
        #: why the protocol's optional methods cannot exist here (``require`` says it)
        self.cannot = dict.fromkeys(
            ("initial_state", "step", "get_state", "set_state", "state_proba"),
            "ClassifierAdapter reads whole prefixes, so there is no state to replace "
            "between steps (state forcing needs the model's own step function)")
        if self._emb_box[0] is None:  # no embedding layer: no integrated gradients
            self.embed = self.forward_from_embeddings = None  # type: ignore[assignment]
            self.cannot.update(dict.fromkeys(
                ("embed", "forward_from_embeddings"),
                "the model has no nn.Embedding layer to attribute through (occlusion "
                "needs none)"))

    @property
    def _state(self) -> nn.Module | None:
        return self._state_box[0]

    def _call(self, *args: Tensor) -> Any:
        return self.model(*args) if self.model is not None else self._fn(*args)

    # -- the required protocol -----------------------------------------------------------
    def trace(self, ids: Tensor, lengths: Tensor, layer: int = -1) -> tuple[Tensor, Tensor]:
        """The state and the class probabilities after every token: the model on every
        prefix ``bos + ids[b, :t] + eos``. Shapes (batch, time, state_size) and
        (batch, time, n_classes); steps past ``lengths`` are zeros."""
        self._check_layer(layer)
        ids, lengths = torch.as_tensor(ids), torch.as_tensor(lengths).to(torch.int64)
        B, T = ids.shape
        n = lengths.clamp(min=0, max=T)
        which = torch.repeat_interleave(torch.arange(B), n)  # (P,): the input of a prefix
        start = torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
        upto = torch.arange(int(n.sum())) - start + 1  # (P,): the prefix's length
        k = self.prefix_stride
        read = (upto % k == 0) | (upto == n[which]) if k > 1 else torch.ones_like(upto, dtype=bool)
        states, proba = self._prefixes(ids, which[read], upto[read])
        if k > 1:  # each step takes the last prefix read at or before it (causal)
            h0, p0 = self.initial()
            src = torch.where(read, torch.arange(len(upto)), torch.full_like(upto, -1))
            src = torch.cummax(src, 0).values  # the last read prefix so far ...
            first = src < start  # ... unless it belongs to an earlier input: the initial
            slot = torch.cumsum(read.long(), 0) - 1  # its row among the read ones
            rows = slot[src.clamp(min=0)]
            states = torch.where(first[:, None], h0.to(states.dtype)[None], states[rows])
            proba = torch.where(first[:, None], p0.to(proba.dtype)[None], proba[rows])
        hidden = torch.zeros(B, T, states.shape[-1], dtype=states.dtype)
        probs = torch.zeros(B, T, self.n_classes, dtype=proba.dtype)
        hidden[which, upto - 1] = states
        probs[which, upto - 1] = proba
        return hidden, probs

    def initial(self, layer: int = -1) -> tuple[Tensor, Tensor]:
        """The state and the prediction for the empty input: the model on ``bos + eos``
        (zeros and the head on them when the model cannot read an empty input)."""
        self._check_layer(layer)
        empty = torch.zeros(1, 0, dtype=torch.int64)
        try:
            states, proba = self._prefixes(empty, torch.zeros(1, dtype=torch.int64),
                                           torch.zeros(1, dtype=torch.int64))
            return states[0], proba[0]
        except Exception:  # an RNN cannot run on no token: the head on zeros
            size = self.state_size()
            head = self._state if self._state is not None else None
            h0 = torch.zeros(size)
            if head is None:
                return h0, torch.full((self.n_classes,), 1.0 / self.n_classes)
            with torch.no_grad():
                return h0, self._proba(head(h0[None]))[0]

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Final class probabilities, (batch, n_classes): the model on each whole input."""
        return self.predict(ids, lengths)

    def predict(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """The model's own class scores for each whole input, (batch, n_classes) (what
        ``stateseer create`` compares the trace's last step with)."""
        ids, lengths = torch.as_tensor(ids), torch.as_tensor(lengths).to(torch.int64)
        which = torch.arange(len(ids))
        return self._prefixes(ids, which, lengths.clamp(min=0))[1]

    # -- embeddings: integrated gradients through the model's first nn.Embedding ------------
    def embed(self, ids: Tensor) -> Tensor:
        """The model's token embeddings of ``ids``, (batch, time, features)."""
        return self._emb_box[0](ids)

    def forward_from_embeddings(self, emb: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Class logits (batch, n_classes) of the model on the whole inputs whose token
        embeddings are ``emb`` (bos/eos embedded as the model embeds them): the embedding
        layer's output is replaced by ``emb`` on that call (a forward hook)."""
        B, T = emb.shape[:2]
        if lengths is not None and bool((torch.as_tensor(lengths) != T).any()) \
                and not self.takes_lengths:
            raise ValueError("forward_from_embeddings takes inputs of one length for a model "
                             "called as model(ids); give them one at a time")
        lengths = torch.full((B,), T, dtype=torch.int64) if lengths is None \
            else torch.as_tensor(lengths).to(torch.int64)
        block, full = self._block(torch.zeros(B, T, dtype=torch.int64),
                                  torch.arange(B), lengths)
        off = int(self.bos_id is not None)

        me = threading.get_ident()

        def swap(_m: nn.Module, _args: Any, out: Tensor) -> Tensor | None:
            if threading.get_ident() != me:  # another thread's call: left alone
                return None
            out = out.clone()
            out[:, off:off + T] = emb.to(out.dtype)
            return out

        hook = self._emb_box[0].register_forward_hook(swap)
        try:
            scores = _scores(self._call(block, full) if self.takes_lengths else self._call(block))
        finally:
            hook.remove()
        return scores if self.outputs == "logits" else torch.log(scores.clamp(min=1e-12))

    # -- the work ------------------------------------------------------------------------
    def state_size(self) -> int:
        """The size of the state the head reads (a call on one token tells)."""
        one = torch.full((1, 1), 1, dtype=torch.int64)
        states, _ = self._prefixes(one, torch.zeros(1, dtype=torch.int64),
                                   torch.ones(1, dtype=torch.int64))
        return int(states.shape[-1])

    def _prefixes(self, ids: Tensor, which: Tensor, upto: Tensor) -> tuple[Tensor, Tensor]:
        """States (P, S) and probabilities (P, C) of the prefixes ``ids[which[p], :upto[p]]``,
        read in blocks of similar length."""
        extra = (self.bos_id is not None) + (self.eos_id is not None)
        order = torch.argsort(upto, stable=True)
        out_s: list[Tensor] = []
        out_p: list[Tensor] = []
        sizes = (upto[order] + extra).clamp(min=1)
        at = 0
        P = len(order)
        while at < P:
            if self.takes_lengths:  # padded blocks: as many as the token budget holds
                longest = int(sizes[min(P - 1, at + max(1, PREFIX_TOKENS // int(sizes[at])) - 1)])
                k = max(1, min(P - at, PREFIX_TOKENS // max(longest, 1)))
            else:  # equal lengths: the block of this prefix length, cut to the budget
                same = int((upto[order][at:] == upto[order][at]).sum())
                k = max(1, min(same, PREFIX_TOKENS // int(sizes[at])))
            sel = order[at:at + k]
            block, lengths = self._block(ids, which[sel], upto[sel])
            s, p = self._run(block, lengths)
            out_s.append(s)
            out_p.append(p)
            at += k
        states = torch.cat(out_s) if out_s else torch.zeros(0, 0)
        proba = torch.cat(out_p) if out_p else torch.zeros(0, self.n_classes)
        back = torch.empty_like(order)
        back[order] = torch.arange(P)
        return states[back], proba[back]

    def _block(self, ids: Tensor, which: Tensor, upto: Tensor) -> tuple[Tensor, Tensor]:
        """The prefixes as one (k, L) id tensor with bos/eos, right-padded, and lengths."""
        T = int(upto.max()) if len(upto) else 0
        body = ids[which, :T] if T else torch.zeros(len(which), 0, dtype=torch.int64)
        keep = torch.arange(T)[None, :] < upto[:, None]
        pad = self.pad_id if self.pad_id is not None else 0
        body = torch.where(keep, body, torch.full_like(body, pad))
        parts, lengths = [], upto.clone()
        if self.bos_id is not None:
            parts.append(torch.full((len(which), 1), self.bos_id, dtype=torch.int64))
            lengths = lengths + 1
        parts.append(body)
        if self.eos_id is not None:  # right after each prefix, not after the padding
            parts.append(torch.full((len(which), 1), pad, dtype=torch.int64))
        block = torch.cat(parts, 1)
        if self.eos_id is not None:
            block[torch.arange(len(which)), lengths] = self.eos_id
            lengths = lengths + 1
        return block, lengths

    def _run(self, block: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """One call of the model: the head's input (the state) and the probabilities."""
        seen: list[Tensor] = []
        hook = None
        me = threading.get_ident()  # recorders read batches in several threads at once:
        if self._state is not None:  # a hook hears only the calls of its own thread
            hook = self._state.register_forward_hook(
                lambda _m, args, _out: seen.append(args[0])
                if threading.get_ident() == me else None)
        try:
            if self.takes_lengths:
                scores = self._call(block, lengths)
            else:
                scores = self._call(block)
        finally:
            if hook is not None:
                hook.remove()
        scores = _scores(scores)
        if not seen:
            return scores.detach().float(), self._proba(scores)
        state = seen[-1]
        if len(seen) > 1 and sum(len(x) for x in seen) == len(block) \
                and len(state) < len(block):  # a model that runs its head input by input
            state = torch.cat(seen)
        if state.dim() == 3:  # a head applied to every step: the one at the last token
            state = state[torch.arange(len(state)), (lengths - 1).clamp(min=0)]
        return state.reshape(len(block), -1), self._proba(scores)

    def _proba(self, scores: Tensor) -> Tensor:
        return torch.softmax(scores, -1) if self.outputs == "logits" else scores

    def _check_layer(self, layer: int) -> None:
        if layer not in (-1, 0):
            raise ValueError(f"layer {layer} is not exposed by ClassifierAdapter: it reads "
                             "the state its head reads; use -1")


def _scores(out: Any) -> Tensor:
    """The class scores of what a model returned (a tensor, a tuple's first, or an output
    object's ``logits``)."""
    if isinstance(out, Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        return out[0]
    raise TypeError(f"the model returned a {type(out).__name__}; ClassifierAdapter needs "
                    "class scores (a tensor of shape (batch, n_classes))")


def _takes_lengths(model: Any) -> bool:
    """Whether ``model``'s forward takes two positional arguments (ids, lengths)."""
    fn = model.forward if isinstance(model, nn.Module) else model
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2


def _embedding(model: Any) -> nn.Module | None:
    """The model's token embedding: its first ``nn.Embedding`` (None without one)."""
    if not isinstance(model, nn.Module):
        return None
    return next((m for m in model.modules() if isinstance(m, nn.Embedding)), None)


def _state_module(model: Any, state: nn.Module | str | None) -> nn.Module | None:
    """The submodule whose input is the state: ``state`` (a module or a name), or the
    model's last ``nn.Linear``; None where there is none (the scores are the state)."""
    if isinstance(state, nn.Module):
        return state
    if not isinstance(model, nn.Module):
        if state is not None:
            raise ValueError(f"state={state!r} names a submodule, but the model is not an "
                             "nn.Module; pass the module itself")
        return None
    named = dict(model.named_modules())
    if isinstance(state, str):
        if state not in named:
            raise ValueError(f"state={state!r} is not a submodule of the model; choose one "
                             f"of: {', '.join(n for n in named if n)[:300]}")
        return named[state]
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return linears[-1] if linears else None
