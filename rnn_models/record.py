"""Trace recording: one batched forward pass per padded batch, written to memory maps.

Inputs are sorted by length and cut into batches of similar length (little padding); each
batch is one call of :meth:`Traceable.trace`, and the valid steps are scattered straight
into preallocated ``.npy`` memory maps, so recording 1M steps × 256 floats never holds
more than one batch in RAM. Padding sits after the last token and a unidirectional RNN
never looks ahead, so padded steps cannot change the recorded ones.

A run is recorded shard by shard (:mod:`stateseer.core.traces` describes the layout):
:func:`record_in_process` writes the run-wide files (``initial_*.npy``, ``surface.json``), maps
:func:`record_job` over one :class:`ShardJob` per shard (in-process with the builtin
``map``, or any ``map``-like callable, e.g. one that submits to a Dask cluster), and
writes ``meta.json`` with the manifest last. A job needs only paths: a worker process
builds the model, vocabulary and data set once (:func:`worker_context`), takes its
inputs (:func:`shard_inputs`) and writes the shard under a temporary name renamed when
complete (:func:`record_shard`).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stateseer.core import layout
from stateseer.core.atomic import atomic_write_text, swap_dir
from stateseer.core.errors import DataError
from stateseer.core.rundir import claim, release
from stateseer.core.traces import (
    DEFAULT_SHARD_SIZE,
    FORMAT,
    SHARDS,
    VERSION,
    SplitTraces,
    Traces,
    commit_shard,
    new_shard_dir,
    remove_tmp_shards,
    shard_layout,
    shard_name,
)
from stateseer.core.version import __version__
from stateseer.rnn_models.batching import length_batches, pad_batch
from stateseer.rnn_models.datasets import MAX_INPUT_TOKENS, SPLITS
from stateseer.rnn_models.protocol import Traceable
from stateseer.rnn_models.run import ModelRun
from stateseer.rnn_models.tokenizers import Vocab, get_tokenizer

__all__ = ["DEFAULT_SHARD_SIZE", "ShardInputs", "ShardJob", "WorkerContext", "predict_ids",
           "record_in_process", "record_job", "record_shard", "record_texts", "record_traces",
           "shard_inputs", "worker_context"]

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

    from stateseer.rnn_models.threads import torch_threads

    batches.sort(key=lambda idx: -int(lengths[idx].max()) * len(idx))  # longest first
    with torch_threads(1), ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, batches))


def _surface_table(token_lists: Sequence[Sequence[str]], table: dict[str, int]) -> np.ndarray:
    flat = [t for toks in token_lists for t in toks]
    setdefault = table.setdefault
    return np.fromiter((setdefault(t, len(table)) for t in flat), dtype=np.int32,
                       count=len(flat))


@dataclass
class ShardInputs:
    """The inputs of one shard, ready to record.

    Attributes
    ----------
    tokens : list of list of str
        Token strings per input, as written in the text.
    seqs : list of ndarray of int64
        Vocabulary ids per input, shape (len_i,).
    labels : ndarray of shape (n_inputs,)
        Gold labels, int64.
    rows : ndarray of shape (n_inputs,)
        Rows in the data set, int64.
    texts : list of str
    """

    tokens: list[list[str]]
    seqs: list[np.ndarray]
    labels: np.ndarray
    rows: np.ndarray
    texts: list[str]


class WorkerContext:
    """The model, vocabulary and data set of one run, each built once, on first use.

    Parameters
    ----------
    run : ModelRun, str or Path
        A path is opened as a :class:`stateseer.rnn_models.run.ModelRun`.
    model : Traceable, optional
        An already loaded model (the driver's); otherwise loaded from the run.
    """

    def __init__(self, run: ModelRun | str | Path, model: Traceable | None = None) -> None:
        if not isinstance(run, ModelRun):
            run = ModelRun(run)
        self.run = run
        self._model, self._vocab, self._ds = model, None, None

    @property
    def model(self) -> Traceable:
        if self._model is None:
            self._model = self.run.load_model()
        return self._model

    @property
    def vocab(self) -> Vocab:
        if self._vocab is None:
            self._vocab = self.run.vocab()
        return self._vocab

    @property
    def dataset(self) -> Any:
        if self._ds is None:
            self._ds = self.run.dataset()
        return self._ds


_CONTEXTS: dict[tuple, WorkerContext] = {}
_SURFACES: dict[tuple, dict[str, int]] = {}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def worker_context(run: str | Path) -> WorkerContext:
    """The :class:`WorkerContext` of the run directory ``run``, cached per process (and
    rebuilt when the run's config, vocabulary or weights change on disk), so a worker
    loads the model once for all the shards it records."""
    path = Path(run).resolve()
    key = (str(path), *(_stamp(path / n) for n in (layout.CONFIG, layout.VOCAB,
                                                    layout.MODEL)))
    if key not in _CONTEXTS:
        if len(_CONTEXTS) >= 4:
            _CONTEXTS.pop(next(iter(_CONTEXTS)))
        _CONTEXTS[key] = WorkerContext(path)
    return _CONTEXTS[key]


def _surface_map(path: Path) -> dict[str, int]:
    """``surface.json`` of the traces being written, as token -> id (cached per file)."""
    key = (str(path), _stamp(path))
    if key not in _SURFACES:
        _SURFACES.clear()
        tokens = json.loads(path.read_text(encoding="utf-8"))
        _SURFACES[key] = {t: i for i, t in enumerate(tokens)}
    return _SURFACES[key]


def shard_inputs(run: WorkerContext | ModelRun | str | Path, split: str, start: int,
                 stop: int) -> ShardInputs:
    """Inputs ``[start, stop)`` of ``split`` (data-set order), tokenised and encoded.

    Parameters
    ----------
    run : WorkerContext, Run, str or Path
        A path uses the per-process cache of :func:`worker_context`.
    split : str
    start, stop : int
        A range from :func:`~stateseer.core.traces.shard_layout`.
    """
    ctx = run if isinstance(run, WorkerContext) else (
        WorkerContext(run) if isinstance(run, ModelRun) else worker_context(run))
    ds, vocab = ctx.dataset, ctx.vocab
    idx = np.asarray(ds._split_idx(split))[start:stop]
    toks = [ds.tokens[i] for i in idx]
    return ShardInputs(tokens=toks, seqs=[vocab.encode(t) for t in toks],
                       labels=np.asarray(ds.labels)[idx].astype(np.int64),
                       rows=idx.astype(np.int64), texts=[ds.texts[i] for i in idx])


def record_shard(
    model: Traceable,
    inputs: ShardInputs,
    surface: dict[str, int],
    shards_dir: str | Path,
    index: int,
    *,
    layer: int = -1,
    dtype: str = "float32",
    batch_size: int = 256,
) -> dict[str, int]:
    """Record one shard into ``shards_dir/00003`` (``index`` 3), crash-safely.

    Everything is written into a temporary ``00003.tmp-<hex>`` directory, flushed, and
    renamed to its final name only when complete; a failure removes it.

    Parameters
    ----------
    model : Traceable
    inputs : ShardInputs
    surface : dict of str to int
        Token string -> index in the run's ``surface.json`` (every token of the inputs).
    shards_dir : str or Path
        ``TRACES/SPLIT/shards``.
    index : int
    layer : int, default -1
    dtype : {'float32', 'float16'}
        Storage type of ``hidden.npy``.
    batch_size : int, default 256

    Returns
    -------
    dict
        ``index``, ``n_inputs``, ``n_steps``, ``n_correct`` (final prediction = label).
    """
    with torch.no_grad():
        h0, p0 = (t.detach() for t in model.initial(layer))
    n, C = len(inputs.seqs), int(p0.shape[0])
    lengths = np.fromiter(map(len, inputs.seqs), dtype=np.int64, count=n)
    n_steps = int(lengths.sum())
    flat = [t for toks in inputs.tokens for t in toks]
    try:
        surface_ids = np.fromiter(map(surface.__getitem__, flat), np.int32, len(flat))
    except KeyError as exc:
        raise DataError(f"token {exc.args[0]!r} is not in the traces' surface.json; "
                        "rerun `stateseer record`") from None
    tmp = new_shard_dir(shards_dir, index)
    try:
        open_mm = np.lib.format.open_memmap
        hidden = open_mm(tmp / "hidden.npy", "w+", DTYPES[dtype], (n_steps, h0.shape[0]))
        proba = open_mm(tmp / "proba.npy", "w+", np.float32, (n_steps, C))
        final = np.zeros((n, C), dtype=np.float32)
        record_traces(model, inputs.seqs, hidden, proba, final, layer=layer,
                      batch_size=batch_size)
        hidden.flush()
        proba.flush()
        del hidden, proba
        np.save(tmp / "final_proba.npy", final)
        np.save(tmp / "token_ids.npy", np.concatenate([np.zeros(0, np.int64), *inputs.seqs])
                .astype(np.int32))
        np.save(tmp / "surface_ids.npy", surface_ids)
        np.save(tmp / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        np.save(tmp / "labels.npy", inputs.labels.astype(np.int64))
        np.save(tmp / "rows.npy", inputs.rows.astype(np.int64))
        (tmp / "texts.json").write_text(json.dumps(inputs.texts, ensure_ascii=False),
                                        encoding="utf-8")
        commit_shard(tmp, Path(shards_dir) / shard_name(index))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"index": int(index), "n_inputs": n, "n_steps": n_steps,
            "n_correct": int((final.argmax(1) == inputs.labels).sum())}


@dataclass(frozen=True)
class ShardJob:
    """One shard to record, described by paths and numbers only (cheap to send to a
    worker process).

    Attributes
    ----------
    run : str
        The run directory.
    traces : str
        The traces directory being written (``RUN/traces.tmp``); its ``surface.json``
        exists before any job runs.
    split : str
    index : int
    input_start, input_stop : int
    layer : int
    dtype : str
    batch_size : int
    """

    run: str
    traces: str
    split: str
    index: int
    input_start: int
    input_stop: int
    layer: int = -1
    dtype: str = "float32"
    batch_size: int = 256

    @property
    def shards_dir(self) -> Path:
        return Path(self.traces) / self.split / SHARDS


def record_job(job: ShardJob, *, ctx: WorkerContext | None = None,
               surface: dict[str, int] | None = None) -> dict[str, Any]:
    """Record the shard ``job`` describes; runs anywhere the run directory is readable.

    Without ``ctx`` the model, vocabulary and data set come from :func:`worker_context`
    (built once per process); without ``surface`` the token table is read from
    ``job.traces/surface.json``.

    Returns
    -------
    dict
        ``split`` plus what :func:`record_shard` returns.
    """
    ctx = ctx if ctx is not None else worker_context(job.run)
    if surface is None:
        surface = _surface_map(Path(job.traces) / "surface.json")
    inputs = shard_inputs(ctx, job.split, job.input_start, job.input_stop)
    out = record_shard(ctx.model, inputs, surface, job.shards_dir, job.index,
                       layer=job.layer, dtype=job.dtype, batch_size=job.batch_size)
    return {"split": job.split, **out}


MapFn = Callable[[Callable[[ShardJob], dict[str, Any]], Iterable[ShardJob]],
                 Iterable[dict[str, Any]]]


def record_in_process(
    run: ModelRun | str | Path,
    *,
    splits: Sequence[str] = SPLITS,
    layer: int = -1,
    dtype: str = "float32",
    batch_size: int = 256,
    model: Traceable | None = None,
    shard_size: int | None = None,
    map_fn: MapFn | None = None,
) -> Traces:
    """Record traces of every split of a run into ``RUN/traces`` and return them.

    A path is opened as a :class:`stateseer.rnn_models.run.ModelRun`, so a run created for a
    user's model (``stateseer create``) records with the model's own tokeniser and class
    order; a built-in run records as before.

    The traces are written into ``traces.tmp/`` and moved into place at the end, so an
    interrupted recording never leaves half-written traces behind.

    Parameters
    ----------
    run : ModelRun, str or Path
    splits : sequence of str
    layer : int, default -1
    dtype : {'float32', 'float16'}
    batch_size : int, default 256
    model : Traceable, optional
        Use this model instead of loading the run's (in-process recording only: jobs
        handed to ``map_fn`` build theirs from the run directory).
    shard_size : int, optional
        Inputs per shard (default ``$STATESEER_SHARD_SIZE``, else
        :data:`~stateseer.core.traces.DEFAULT_SHARD_SIZE`, one shard for ordinary
        runs). The layout depends on this and the data only.
    map_fn : callable, optional
        ``map_fn(record_job, jobs)`` with the signature of the builtin :func:`map`; it
        must call :func:`record_job` once per :class:`ShardJob` (anywhere, in any order,
        retrying at will) and return the results in the order of ``jobs``, e.g. a
        function that submits to a Dask cluster and gathers. Jobs read the run directory
        and write into ``RUN/traces.tmp``, so workers on other machines need them on a
        shared file system. Default: the builtin ``map``, in this process, with the
        model already loaded.

    Raises
    ------
    DataError
        Unknown ``dtype``, bad ``layer`` or ``shard_size``.
    """
    if dtype not in DTYPES:
        raise DataError(f"unknown --dtype {dtype!r}; choose float32 or float16")
    if shard_size is None:
        shard_size = _env_shard_size()
    if shard_size is not None and (isinstance(shard_size, bool)
                                   or not isinstance(shard_size, (int, np.integer))
                                   or shard_size < 1):
        raise DataError(f"--shard-size must be a positive number of inputs, not "
                        f"{shard_size!r}")
    ctx = WorkerContext(run, model=model)
    run, model, vocab, ds = ctx.run, ctx.model, ctx.vocab, ctx.dataset
    try:
        with torch.no_grad():  # a user's adapter may build h0 from parameters
            h0, p0 = (t.detach() for t in model.initial(layer))
    except ValueError as exc:
        raise DataError(f"{exc}; pass --layer between 0 and {model.n_layers - 1}") from None
    run.clean_stray()
    tmp = claim(run.path / "traces.tmp")
    np.save(tmp / "initial_hidden.npy", h0.numpy().astype(np.float32))
    np.save(tmp / "initial_proba.npy", p0.numpy().astype(np.float32))
    surface: dict[str, int] = {}
    jobs = []
    for split in splits:
        idx = ds._split_idx(split)
        _extend_surface((ds.tokens[i] for i in idx), surface)
        (tmp / split / SHARDS).mkdir(parents=True)
        jobs += [ShardJob(str(run.path), str(tmp), split, k, a, b, layer, dtype, batch_size)
                 for k, (a, b) in enumerate(shard_layout(len(idx), shard_size))]
    # Written before any shard: a job on another machine reads its token table from it.
    atomic_write_text(tmp / "surface.json", json.dumps(list(surface), ensure_ascii=False))
    if map_fn is None:
        results = list(map(partial(record_job, ctx=ctx, surface=surface), jobs))
    else:
        results = list(map_fn(record_job, jobs))
    remove_tmp_shards(tmp)  # attempts of killed workers
    meta = {
        "format": FORMAT, "version": VERSION, "classes": ds.classes,
        "dataset": run.config["data"]["name"], "layer": layer,
        "state": getattr(model, "state", "h"), "dtype": dtype,
        "state_size": int(h0.shape[0]), "n_classes": len(ds.classes), "unk_id": vocab.unk_id,
        # a model read prefix by prefix: every K-th prefix (and the last) was read
        "prefix_stride": getattr(model, "prefix_stride", None),
        "model_sha256": run.model_sha256() if run.model_path.exists() else None,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "stateseer": __version__,
        "shard_size": int(shard_size or DEFAULT_SHARD_SIZE),
        "splits": _manifest(splits, jobs, results),
    }
    atomic_write_text(tmp / layout.META, json.dumps(meta, indent=2))  # written last
    release(tmp)
    swap_dir(tmp, run.traces_dir)  # old or new traces, whole, at every instant
    run.keep_fingerprints(model)  # a factory's model: what later builds compare with
    check_expected_accuracy(run.config.get("model", {}).get("expect_accuracy"),
                            meta["splits"])
    return Traces(run.traces_dir)


class AccuracyMismatchWarning(UserWarning):
    """The recorded accuracy is not the one the user measured on their own model."""


def check_expected_accuracy(expected: float | None, splits: dict[str, Any],
                            tolerance: float = 0.01) -> float | None:
    """Warn (one line) when the recorded test accuracy differs from ``expected`` (``create
    --expect-accuracy``) by more than ``tolerance``; returns the recorded accuracy."""
    entry = splits.get("test") or {}
    acc = entry.get("accuracy")
    if expected is None or acc is None:
        return acc
    if abs(acc - float(expected)) > tolerance:
        warnings.warn(f"the recorded test accuracy is {acc:.3f} where you measured "
                      f"{float(expected):.3f} (create --expect-accuracy): stateseer does not "
                      "read your model as you do; check the tokenizer, the vocabulary, the "
                      "class order and the head (it must classify from the last traced "
                      "state)", AccuracyMismatchWarning, stacklevel=3)
    return acc


def _env_shard_size() -> int | None:
    """``$STATESEER_SHARD_SIZE`` as a number of inputs (None when unset)."""
    text = os.environ.get("STATESEER_SHARD_SIZE", "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise DataError(f"STATESEER_SHARD_SIZE={text!r} is not a number of inputs; set a "
                        "positive integer or unset it") from None


def _extend_surface(token_lists: Iterable[Sequence[str]], table: dict[str, int]) -> None:
    """Add the tokens not yet in ``table`` in order of first appearance."""
    for t in dict.fromkeys(itertools.chain.from_iterable(token_lists)):
        if t not in table:
            table[t] = len(table)


def _manifest(splits: Sequence[str], jobs: list[ShardJob], results: list[dict[str, Any]]
              ) -> dict[str, Any]:
    """``meta.json["splits"]``: sizes, accuracy and the shard list of every split."""
    if len(results) != len(jobs):
        raise DataError(f"{len(results)} shard results for {len(jobs)} shards; the map "
                        "function must return one result per job, in order")
    out: dict[str, Any] = {s: {"n_inputs": 0, "n_steps": 0, "n_correct": 0, "shards": []}
                           for s in splits}
    for job, res in zip(jobs, results, strict=True):
        entry = out[job.split]
        if (res.get("split"), res.get("index"), res.get("n_inputs")) != \
                (job.split, job.index, job.input_stop - job.input_start) \
                or not (job.shards_dir / shard_name(job.index)).is_dir():
            raise DataError(f"shard {job.index} of split {job.split!r} was not recorded as "
                            "asked; rerun `stateseer record`")
        step = entry["n_steps"]
        entry["shards"].append({"input_start": job.input_start,
                                "input_stop": job.input_stop, "step_start": step,
                                "step_stop": step + int(res["n_steps"])})
        entry["n_inputs"] += int(res["n_inputs"])
        entry["n_steps"] += int(res["n_steps"])
        entry["n_correct"] += int(res["n_correct"])
    for entry in out.values():
        n_correct = entry.pop("n_correct")
        entry["accuracy"] = n_correct / entry["n_inputs"] if entry["n_inputs"] else None
    return {s: {k: out[s][k] for k in ("n_inputs", "n_steps", "accuracy", "shards")}
            for s in splits}



#: tokens up to which :func:`predict_ids` runs on one thread
SMALL_WORK = 20_000


def _traced(model: Traceable, seqs: Sequence[np.ndarray], layer: int = -1,
            parallel: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`record_traces` into new in-memory arrays: hidden, proba, final."""
    n_steps = int(sum(len(q) for q in seqs))
    with torch.no_grad():
        h0, p0 = model.initial(layer)
    hidden = np.zeros((n_steps, h0.shape[0]), np.float32)
    proba = np.zeros((n_steps, p0.shape[0]), np.float32)
    final = np.zeros((len(seqs), p0.shape[0]), np.float32)
    record_traces(model, seqs, hidden, proba, final, layer=layer, parallel=parallel)
    return hidden, proba, final


def predict_ids(model: Traceable, seqs: Sequence[np.ndarray], *, layer: int = -1
                ) -> np.ndarray:
    """The model's final class probabilities for token-id sequences, batched.

    Parameters
    ----------
    seqs : sequence of ndarray of int64
        Token ids per input (e.g. a recorded input with some tokens removed).

    Returns
    -------
    ndarray of shape (n_inputs, n_classes)

    A model that reads prefixes (``reads_prefixes``, a
    :class:`~stateseer.rnn_models.classifier.ClassifierAdapter`) is asked for the whole
    inputs only (its ``predict``): the last prefix is all a final prediction needs.
    """
    if getattr(model, "reads_prefixes", False):
        out = np.zeros((len(seqs), model.n_classes), np.float32)
        lengths = np.fromiter(map(len, seqs), np.int64, len(seqs))
        full = np.flatnonzero(lengths > 0)
        with torch.no_grad():
            if len(full) < len(seqs):
                out[lengths == 0] = model.initial(layer)[1].float().numpy()
            for b in length_batches(lengths[full], 256):
                ids, lens = pad_batch(seqs, full[b])
                out[full[b]] = model.predict(torch.from_numpy(ids),
                                             torch.from_numpy(lens)).float().numpy()
        return out
    if sum(map(len, seqs)) <= SMALL_WORK:  # a check's few inputs: one thread, no
        # barrier waits between threads (on a busy machine those cost more than the work)
        from stateseer.rnn_models.threads import torch_threads

        with torch_threads(1):
            return _traced(model, seqs, layer, parallel=False)[2]
    return _traced(model, seqs, layer)[2]


def record_texts(
    model: Traceable,
    vocab: Vocab,
    texts: Sequence[str],
    *,
    tokenizer: str | Callable[[str], Sequence[str]] = "word",
    layer: int = -1,
    max_tokens: int = MAX_INPUT_TOKENS,
    truncate: int | None = None,
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
    truncate : int, optional
        Show the model only each text's first ``truncate`` tokens (a run trained with
        ``--truncate``: :attr:`ModelRun.truncate`).

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
    if truncate is not None:
        toks = [t[:truncate] for t in toks]
    seqs = [vocab.encode(t) for t in toks]
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    hidden, proba, final = _traced(model, seqs, layer)
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
