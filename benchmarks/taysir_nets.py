"""TAYSIR 2023 track-1 nets as a user loads them: their own pickled module and code, read
through :class:`stateseer.ClassifierAdapter` with the net's START and END symbols.

A net is an MLflow PyTorch model folder (``models/1.N.taysir.model``): ``data/model.pth``
is the pickled ``TNetwork`` and ``code/`` its source. It is unpickled with its own code on
``sys.path`` and a stand-in for ``mlflow.pytorch.pickle_module`` (plain ``pickle``), as
MLflow does; this runs the benchmark's own code, so only load nets you trust.

``TNetwork.forward`` reads one word at a time (a Python loop); :class:`Batched` runs the
same recurrent modules and dense head over a whole block at once, and :func:`adapter`
checks it against the net's own ``predict`` on words before using it (the net's own
forward, word by word, otherwise).
"""

from __future__ import annotations

import pickle
import sys
import types
from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = ["Batched", "adapter", "load_net", "read_words"]


def load_net(folder: str | Path) -> nn.Module:
    """The pickled ``TNetwork`` of an MLflow model folder, in eval mode."""
    folder = Path(folder)
    for name in ("mlflow", "mlflow.pytorch"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules.setdefault("mlflow.pytorch.pickle_module", pickle)
    code = str(folder / "code")
    for mod in ("tnetwork", "lstmx"):  # each net brings its own copy
        sys.modules.pop(mod, None)
    sys.path.insert(0, code)
    try:
        # a pickled module (the net's own class): weights_only cannot read it
        net = torch.load(folder / "data" / "model.pth", weights_only=False,
                         pickle_module=pickle)
    except AttributeError as exc:  # 1.7: a DistilBERT of an older transformers
        if "transformers" not in str(exc):
            raise
        import taysir_distilbert

        net = taysir_distilbert.load(folder / "data" / "model.pth")
    finally:
        sys.path.remove(code)
    return net.eval()


def is_transformer(net: nn.Module) -> bool:
    """Whether ``net`` is TAYSIR's transformer (a DistilBERT classifier over symbol ids
    + 2, read after a leading 1), not a ``TNetwork``."""
    return hasattr(net, "distilbert")


def read_words(path: str | Path) -> tuple[list[list[str]], str, str]:
    """The words of a ``*.valid.words`` file without their START and END symbols, and those
    two symbols (first and last of every line after the header)."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    rows = [line.split() for line in lines[1:] if line.strip()]
    start, end = rows[0][1], rows[0][-1]
    return [r[2:-1] for r in rows], start, end


def vocab_of(net: nn.Module) -> list[str]:
    """``<pad>``, ``<unk>`` and the net's symbols ``0 .. input_size - 2`` (ids 2 ..; a
    transformer's ``0 .. vocab_size - 3``, its own ids)."""
    n = net.distilbert.config.vocab_size - 2 if is_transformer(net) else net.input_size - 1
    return ["<pad>", "<unk>", *map(str, range(n))]


class Batched(nn.Module):
    """The net on a block of equal-length words of symbol ids (vocab ids minus 2): its
    recurrent modules and dense head, batched."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def _onehot(self, ids: torch.Tensor) -> torch.Tensor:
        net = self.net
        return nn.functional.one_hot((ids - 2).clamp(min=0), net.input_size - 1).to(net.dtype)

    def _head(self, final: torch.Tensor) -> torch.Tensor:
        """The dense head on the modules' final states (directions, batch, hidden)."""
        return self.net.feed_dense(final.transpose(0, 1).reshape(final.shape[1], -1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        net = self.net
        out = (self._onehot(ids),)
        extra = {"full_ret": True} if hasattr(net.cell_type, "forward_x") else {}
        for machine in net.mach:
            out = machine(out[0], None, **extra)
        if net.hides_pairs:  # LSTMx: its final (h, c) come out scrambled across a batch,
            # its every-step states do not: the last step forward, the first backward
            every, size = out[2][0][-1], out[1][0].shape[-1]  # (batch, time, D * hidden)
            parts = [every[:, -1, :size]]
            if every.shape[-1] == 2 * size:
                parts.append(every[:, 0, size:])
            return net.feed_dense(torch.cat(parts, -1))
        return self._head(out[1])


class Packed(Batched):
    """:class:`Batched` on a right-padded block of words of any lengths (``lengths``
    counts each word's ids): the recurrent modules (torch's own RNN, GRU, LSTM, batch
    first, stacked or bidirectional) read packed sequences, so padding never reaches a
    state. One call per block instead of one per word length."""

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        from torch.nn.utils.rnn import pack_padded_sequence

        out = (pack_padded_sequence(self._onehot(ids), lengths.cpu(), batch_first=True,
                                    enforce_sorted=False),)
        for machine in self.net.mach:
            out = machine(out[0], None)
        return self._head(out[1])  # final states in the block's order


def _packable(net: nn.Module) -> bool:
    return not net.hides_pairs and all(isinstance(m, nn.RNNBase) and m.batch_first
                                       and m.num_layers == 1 for m in net.mach)


class PerWord(nn.Module):
    """The net's own forward, one word at a time (what ``predict`` runs)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        net = self.net
        x = torch.zeros(*ids.shape, net.input_size, dtype=net.dtype)
        x.scatter_(-1, ((ids - 2).clamp(min=0) + 1)[..., None], 1.0)
        return torch.stack([net(w)[0] for w in x])


class Encoder(nn.Module):
    """TAYSIR's transformer on a right-padded block of words (vocab ids: its own symbol
    ids + 2): each word led by id 1, as the competition reads it, padding masked out of
    the attention; the class is read from the first position, so it never sees the
    padding."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = torch.cat([torch.ones(len(ids), 1, dtype=ids.dtype), ids], 1)
        mask = (torch.arange(x.shape[1])[None] <= lengths[:, None]).long()
        return self.net(x, attention_mask=mask)


def _own(net: nn.Module, ids: list[list[int]]) -> np.ndarray:
    """The net's own class of each word (symbol ids with START and END), one word at a
    time: ``predict`` of a ``TNetwork``; the transformer on ``[1] + (ids + 2)``, as the
    competition's harness calls it."""
    if is_transformer(net):
        return np.array([int(net(torch.tensor([[1] + [i + 2 for i in w]])).argmax())
                         for w in ids])
    return np.array([float(net.predict(net.one_hot_encode(w))) for w in ids])


def _in_blocks(body: nn.Module, ids: list[list[int]]) -> np.ndarray:
    """``body``'s class of each word, asked in blocks as the adapter asks: every word in
    one padded block (:class:`Packed`), or one block per word length (a net that cannot
    batch its words shows here, not one word at a time)."""
    lens = np.array([len(w) for w in ids])
    got = np.zeros(len(ids), np.int64)
    groups = [np.arange(len(ids))] if isinstance(body, Packed | Encoder) else \
        [np.flatnonzero(lens == n) for n in np.unique(lens)]
    for rows in groups:
        block = torch.zeros(len(rows), int(lens[rows].max()), dtype=torch.int64)
        for b, r in enumerate(rows.tolist()):
            block[b, :lens[r]] = torch.tensor(ids[r]) + 2
        out = body(block, torch.from_numpy(lens[rows])) if isinstance(body, Packed | Encoder) \
            else body(block)
        got[rows] = out.argmax(1).numpy()
    return got


def adapter(folder: str | Path, start: str, end: str, *, check: list[list[str]] = (),
            batched: bool = True):
    """The net as a :class:`~stateseer.ClassifierAdapter` (classes reject, accept; the
    class read after ``end``), batched when that agrees with the net's own ``predict`` on
    ``check`` (words of symbols, without START/END)."""
    from stateseer import ClassifierAdapter

    net = load_net(folder)
    vocab = vocab_of(net)
    if is_transformer(net):
        body: nn.Module = Encoder(net)
    else:
        body = (Packed(net) if _packable(net) else Batched(net)) if batched else PerWord(net)
    if (batched or is_transformer(net)) and check:
        ids = [[int(start)] + [int(s) for s in w] + [int(end)] for w in check]
        with torch.no_grad():
            agree = np.array_equal(_own(net, ids), _in_blocks(body, ids))
        if not agree and is_transformer(net):
            raise RuntimeError("the transformer's padded blocks disagree with its own "
                               "per-word classes")
        if not agree:
            body = PerWord(net)
    padded = isinstance(body, Packed | Encoder)
    return ClassifierAdapter(body, vocab=vocab, tokenize=str.split,
                             classes=["reject", "accept"], bos=start, eos=end,
                             outputs="logits" if is_transformer(net) else "proba",
                             **({"pad": "<pad>"} if padded else {}))
