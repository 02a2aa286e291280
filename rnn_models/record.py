"""Trace recording: one batched forward pass per padded batch, written to memory maps.

Inputs are sorted by length and cut into batches of similar length (little padding); each
batch is one call of :meth:`Traceable.trace`, and the valid steps are scattered straight
into preallocated ``.npy`` memory maps, so recording 1M steps × 256 floats never holds
more than one batch in RAM. Padding sits after the last token and a unidirectional RNN
never looks ahead, so padded steps cannot change the recorded ones.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from . import __version__
from .batching import length_batches, pad_batch
from .datasets import SPLITS
from .errors import DataError
from .formats.atomic import atomic_write_text, fsync_dir
from .models import Traceable
from .run import Run
from .tokenizers import Vocab, get_tokenizer
from .traces import FORMAT, VERSION, SplitTraces, Traces

__all__ = ["record_run", "record_texts", "record_traces"]

DTYPES = {"float32": np.float32, "float16": np.float16}


@torch.no_grad()
def record_traces(
    model: Traceable,
    seqs: Sequence[np.ndarray],
    hidden_out: np.ndarray,
    proba_out: np.ndarray,
    final_out: np.ndarray,
    *,
    layer: int = -1,
    batch_size: int = 256,
    batch_tokens: int = 65536,
    parallel: bool = True,
) -> None:
    """Run ``model`` over ``seqs`` and write every step into the output arrays.

    Parameters
    ----------
    model : Traceable
    seqs : sequence of ndarray of int64
        Token ids per input (empty arrays allowed).
    hidden_out : ndarray of shape (n_steps, state_size)
        Written in place (may be a memory map); steps input after input.
    proba_out : ndarray of shape (n_steps, n_classes)
    final_out : ndarray of shape (n_inputs, n_classes)
        Final prediction; ``head(h0)`` for empty inputs.
    layer : int
    batch_size, batch_tokens : int
        Most inputs, and most padded tokens, per forward pass.
    parallel : bool
        Run batches on one thread per core (``torch.get_num_threads()``), each with a
        single intra-op thread, when there are many batches. Note that
        ``torch.set_num_threads`` is process-wide while this runs.
    """
    if isinstance(model, torch.nn.Module):
        model.eval()
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    with torch.no_grad():
        _, p0 = model.initial(layer)
    p0 = p0.detach()
    empty = lengths == 0
    final_out[empty] = p0.numpy()
    nonempty = np.flatnonzero(~empty)
    batches = [nonempty[b] for b in
               length_batches(lengths[nonempty], batch_size, max_tokens=batch_tokens)]

    def one(idx: np.ndarray) -> None:
        with torch.inference_mode():  # grad mode is per thread
            ids, lens = pad_batch(seqs, idx)
            hidden, proba = model.trace(torch.from_numpy(ids), torch.from_numpy(lens), layer)
            mask_np = np.arange(ids.shape[1]) < lens[:, None]
            mask = torch.from_numpy(mask_np)
            dest = (offsets[idx][:, None] + np.arange(ids.shape[1]))[mask_np]
            hidden_out[dest] = hidden[mask].numpy()
            p = proba[mask].numpy()
            proba_out[dest] = p
            final_out[idx] = p[np.cumsum(lens) - 1]

    workers = torch.get_num_threads() if parallel else 1
    if workers < 2 or len(batches) < 4 * workers:
        for idx in batches:  # few batches (typed inputs): intra-op threads serve better
            one(idx)
        return
    # Many batches: one batch per core, each on one thread, instead of splitting every
    # small per-step op of the recurrence across threads (measured ~1.2x faster on 2
    # cores, and far steadier on a busy machine). Batches write disjoint rows.
    from concurrent.futures import ThreadPoolExecutor

    batches.sort(key=lambda idx: -int(lengths[idx].max()) * len(idx))  # longest first
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, batches))
    finally:
        torch.set_num_threads(previous)


def _surface_table(token_lists: Sequence[Sequence[str]], table: dict[str, int]) -> np.ndarray:
    flat = [t for toks in token_lists for t in toks]
    setdefault = table.setdefault
    return np.fromiter((setdefault(t, len(table)) for t in flat), dtype=np.int32,
                       count=len(flat))


def record_run(
    run: Run | str | Path,
    *,
    splits: Sequence[str] = SPLITS,
    layer: int = -1,
    dtype: str = "float32",
    batch_size: int = 256,
    model: Traceable | None = None,
) -> Traces:
    """Record traces of every split of a run into ``RUN/traces`` and return them.

    A path is opened as a :class:`rnn_models.factory.ModelRun`, so a run created for a
    user's model (``stateseer create``) records with the model's own tokeniser and class
    order; a built-in run records as before.

    The traces are written into ``traces.tmp/`` and moved into place at the end, so an
    interrupted recording never leaves half-written traces behind.
    """
    if not isinstance(run, Run):
        from .factory import ModelRun

        run = ModelRun(run)
    if dtype not in DTYPES:
        raise DataError(f"unknown --dtype {dtype!r}; choose float32 or float16")
    cfg = run.config
    model = model if model is not None else run.load_model()
    vocab = run.vocab()
    ds = run.dataset()
    try:
        with torch.no_grad():  # a user's adapter may build h0 from parameters
            h0, p0 = (t.detach() for t in model.initial(layer))
    except ValueError as exc:
        raise DataError(f"{exc}; pass --layer between 0 and {model.n_layers - 1}") from None
    tmp = run.path / "traces.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    np.save(tmp / "initial_hidden.npy", h0.numpy().astype(np.float32))
    np.save(tmp / "initial_proba.npy", p0.numpy().astype(np.float32))
    surface: dict[str, int] = {}
    meta_splits = {}
    C = len(ds.classes)
    for split in splits:
        idx = ds._split_idx(split)
        toks = [ds.tokens[i] for i in idx]
        seqs = [vocab.encode(t) for t in toks]
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        n_steps = int(lengths.sum())
        d = tmp / split
        d.mkdir()
        open_mm = np.lib.format.open_memmap
        hidden = open_mm(d / "hidden.npy", "w+", DTYPES[dtype], (n_steps, h0.shape[0]))
        proba = open_mm(d / "proba.npy", "w+", np.float32, (n_steps, C))
        final = np.zeros((len(idx), C), dtype=np.float32)
        record_traces(model, seqs, hidden, proba, final, layer=layer, batch_size=batch_size)
        hidden.flush()
        proba.flush()
        del hidden, proba
        np.save(d / "final_proba.npy", final)
        np.save(d / "token_ids.npy", np.concatenate([np.zeros(0, np.int64), *seqs])
                .astype(np.int32))
        np.save(d / "surface_ids.npy", _surface_table(toks, surface))
        np.save(d / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        np.save(d / "labels.npy", ds.labels[idx].astype(np.int64))
        np.save(d / "rows.npy", idx.astype(np.int64))
        (d / "texts.json").write_text(json.dumps([ds.texts[i] for i in idx], ensure_ascii=False))
        acc = float((final.argmax(1) == ds.labels[idx]).mean()) if len(idx) else None
        meta_splits[split] = {"n_inputs": len(idx), "n_steps": n_steps, "accuracy": acc}
    (tmp / "surface.json").write_text(json.dumps(list(surface), ensure_ascii=False))
    meta = {
        "format": FORMAT, "version": VERSION, "classes": ds.classes,
        "dataset": cfg["data"]["name"], "layer": layer,
        "state": getattr(model, "state", "h"), "dtype": dtype,
        "state_size": int(h0.shape[0]), "n_classes": C, "unk_id": vocab.unk_id,
        "model_sha256": run.model_sha256() if run.model_path.exists() else None,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "stateseer": __version__, "splits": meta_splits,
    }
    atomic_write_text(tmp / "meta.json", json.dumps(meta, indent=2))  # written last
    _swap_in(tmp, run.traces_dir)
    return Traces(run.traces_dir)


def _swap_in(new: Path, target: Path) -> None:
    """Replace the directory ``target`` by ``new`` crash-safely.

    The old traces lose their ``meta.json`` first (a reader then refuses them instead of
    mixing files), are moved aside, the new directory is renamed in, and only then is the
    old one deleted; each rename is flushed (:func:`~rnn_models.formats.atomic.fsync_dir`).
    A crash leaves either no traces (re-record) or complete ones.
    """
    aside = target.with_name(target.name + ".old")
    if aside.exists():
        shutil.rmtree(aside)
    if target.exists():
        (target / "meta.json").unlink(missing_ok=True)
        fsync_dir(target)
        target.rename(aside)
    new.rename(target)
    fsync_dir(target.parent)
    if aside.exists():
        shutil.rmtree(aside)


MAX_INPUT_TOKENS = 5000


def record_texts(
    model: Traceable,
    vocab: Vocab,
    texts: Sequence[str],
    *,
    tokenizer: str | Callable[[str], Sequence[str]] = "word",
    layer: int = -1,
    max_tokens: int = MAX_INPUT_TOKENS,
) -> SplitTraces:
    """Trace a few new texts in memory (the app's input box, notebooks).

    Unknown words are kept as written (``surface``) and map to ``<unk>``
    (``token_ids`` ``vocab.unk_id``, 1 for built-in runs).

    Parameters
    ----------
    model : Traceable
    vocab : Vocab
    texts : sequence of str
    tokenizer : str or callable, default 'word'
        ``word``/``char``/``space``, ``"model"`` for the model's own ``model.tokenize``
        (a run created with ``stateseer create`` whose config says tokenizer ``model``),
        or a function ``text -> list of tokens``.
    layer : int, default -1
    max_tokens : int

    Raises
    ------
    DataError
        A text longer than ``max_tokens`` tokens.
    """
    if callable(tokenizer):
        tok = tokenizer
    elif tokenizer == "model":
        tok = getattr(model, "tokenize", None)
        if not callable(tok):
            raise DataError("tokenizer 'model' needs the model's own `tokenize(text)`; add it "
                            "to the model or choose word, char or space")
    else:
        tok = get_tokenizer(tokenizer)
    toks = [list(tok(t)) for t in texts]
    for i, t in enumerate(toks):
        if len(t) > max_tokens:
            raise DataError(
                f"text {i} has {len(t):,} tokens; the limit is {max_tokens:,} — shorten it"
            )
    seqs = [vocab.encode(t) for t in toks]
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    n_steps = int(lengths.sum())
    with torch.no_grad():
        h0, p0 = model.initial(layer)
    hidden = np.zeros((n_steps, h0.shape[0]), np.float32)
    proba = np.zeros((n_steps, p0.shape[0]), np.float32)
    final = np.zeros((len(seqs), p0.shape[0]), np.float32)
    record_traces(model, seqs, hidden, proba, final, layer=layer)
    table: dict[str, int] = {}
    surface_ids = _surface_table(toks, table)
    return SplitTraces(
        name="input", hidden=hidden, proba=proba,
        token_ids=np.concatenate([np.zeros(0, np.int64), *seqs]).astype(np.int32),
        surface_ids=surface_ids, offsets=np.concatenate([[0], np.cumsum(lengths)]),
        labels=np.full(len(seqs), -1, np.int64), final_proba=final,
        rows=np.arange(len(seqs)), surface=list(table), texts=list(texts),
        unk_id=vocab.unk_id,
    )
