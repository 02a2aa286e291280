"""Traces from another framework: the ``import-traces`` format, checked and converted.

A TensorFlow, JAX or any other user writes, with numpy and json alone::

    DIR/manifest.json        {"format": "stateseer.import", "version": 1,
                              "classes": ["neg", "pos"],          # head output order
                              "splits": ["train", "val", "test"], # "train" is required
                              "layer": -1, "tokenizer": "word",   # optional, informative
                              "dataset": "my-data", "description": "..."}  # optional
    DIR/initial.npy          optional (d,) state before any token (default: zeros)
    DIR/initial_proba.npy    optional (n_classes,) prediction for an empty input
    DIR/vocab.json           optional list of tokens (the model's vocabulary); tokens
                             outside it are unknown ('<unk>'); default: every token of
                             the training split
    DIR/SPLIT/hidden.npy     (n_steps, d) float16/float32/float64: the state after every
                             token, inputs one after another
    DIR/SPLIT/offsets.npy    (n_inputs + 1,) integer: input i owns steps
                             offsets[i]:offsets[i+1]; offsets[0] == 0, non-decreasing,
                             offsets[-1] == n_steps
    DIR/SPLIT/tokens.json    list (one per input) of lists of token strings, or
    DIR/SPLIT/tokens.txt     one input per line, tokens separated by single spaces
    DIR/SPLIT/labels.npy     (n_inputs,) integer gold labels in [0, n_classes)
    DIR/SPLIT/proba.npy      optional (n_steps, n_classes): the class probabilities after
                             every token (rows sum to 1); in every split or in none
    DIR/SPLIT/texts.json     optional list of the original texts (default: tokens joined)
    DIR/SPLIT/rows.npy       optional (n_inputs,) integer: each input's id in your data
                             (its row in the data file; distinct, not negative), so that
                             an imported run and a run ``stateseer create`` made of the same
                             data name inputs alike (default: a count over the splits in
                             manifest order); in every split or in none

Without ``proba.npy`` the run has **no predictions**: the traces hold a uniform
distribution in their place (``meta.json``: ``"proba": false``), the abstraction must
cluster the hidden states themselves (``--features pca``) without splitting states by
predicted class, and accuracy, fidelity and prediction colours mean nothing.

:func:`import_traces` checks everything (one-line :class:`TraceError`\\ s naming the file
and the fix) and writes a run directory (``config.json`` with ``"model": {"kind":
"imported"}``, ``vocab.json``, ``metrics.json`` when probabilities exist, and
``traces/`` in the format of :mod:`stateseer.core.traces`). It needs numpy only.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.core import layout
from stateseer.core.atomic import (
    atomic_save_npy,
    atomic_save_npy_rows,
    atomic_write,
    atomic_write_text,
    swap_dir,
)
from stateseer.core.errors import DAMAGED_NPY, CheckpointError, TraceError
from stateseer.core.reading import load_json, regular_size
from stateseer.core.rundir import RunDir, claim, portable_path, release
from stateseer.core.traces import FORMAT as TRACES_FORMAT
from stateseer.core.traces import VERSION as TRACES_VERSION
from stateseer.core.traces import Traces

__all__ = ["FORMAT", "VERSION", "NoModelError", "import_traces", "read_import"]

FORMAT = "stateseer.import"
VERSION = 1
SPLITS = ("train", "val", "test")
PAD, UNK = "<pad>", "<unk>"
CHUNK = 1 << 16  # rows checked at a time (hidden states may be memory-mapped and large)


class NoModelError(CheckpointError):
    """A feature needs the model, and the run has none (imported traces)."""

    @classmethod
    def for_run(cls, path: Any) -> NoModelError:
        return cls(f"{path} was imported from traces without a model (`stateseer "
                   "import-traces`): typed input, attribution and state forcing need a "
                   "model — create the run with `stateseer create` instead")


@dataclass
class ImportedSplit:
    """One checked split. Arrays as in :class:`~stateseer.core.traces.SplitTraces`.

    The tokens are held as ids, not strings: ``surface`` (n_steps,) int32 indexes the
    import's table of distinct token strings (:class:`Surface`, first seen first, over
    the splits in the manifest's order). ``texts`` is None where the texts are the token
    lines of ``tokens.txt`` (``tokens_txt``), written from the file when the run is
    written: 10M inputs' tokens as Python lists held about 12 GB.
    """

    hidden: np.ndarray
    offsets: np.ndarray
    surface: np.ndarray
    labels: np.ndarray
    proba: np.ndarray | None
    texts: list[str] | None
    rows: np.ndarray | None = None
    tokens_txt: Path | None = None


class Surface:
    """The distinct token strings of an import, numbered as first seen."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    @property
    def words(self) -> list[str]:
        return list(self.ids)

    def encode(self, tokens: list[str]) -> np.ndarray:
        ids = self.ids
        return np.fromiter((ids.setdefault(t, len(ids)) for t in tokens), np.int32,
                           len(tokens))


#: lines of ``tokens.txt`` read at a time
TOKEN_LINES = 1 << 16


def _err(where: Path | str, problem: str, fix: str) -> TraceError:
    return TraceError(f"{where}: {problem}; {fix}")


def _load_npy(path: Path, required: bool = True) -> np.ndarray | None:
    if not path.exists():
        if required:
            raise _err(path, "not found", "write it with np.save (see `stateseer import-traces "
                       "--help` for the format)")
        return None
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except DAMAGED_NPY as exc:
        first = (str(exc).splitlines() or [""])[0][:100]
        raise _err(path, f"is not a readable .npy array ({first})",
                   "write it with np.save from a numeric array") from None


def _load_json(path: Path, what: str) -> Any:
    try:
        return load_json(path)
    except FileNotFoundError:
        raise _err(path, "not found", f"write {what}") from None
    except OSError as exc:
        raise _err(path, f"cannot be read ({str(exc)[:80]})", f"write {what}") from None


def _check_float(path: Path, a: np.ndarray, ndim: int) -> None:
    if a.dtype.kind != "f":
        raise _err(path, f"has dtype {a.dtype}", "save floating-point values (float32 or "
                   "float16)")
    if a.ndim != ndim:
        raise _err(path, f"has {a.ndim} dimension(s) {tuple(a.shape)}, expected {ndim}",
                   "reshape it" + (" to (n_steps, size)" if ndim == 2 else ""))
    for start in range(0, len(a), CHUNK):
        block = np.asarray(a[start:start + CHUNK])
        bad = ~np.isfinite(block)
        if bad.any():
            row = start + int(np.argwhere(bad)[0][0])
            raise _err(path, f"holds NaN or infinite values (first at row {row})",
                       "fix or drop those inputs")


def _check_int(path: Path, a: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    if a.dtype.kind not in "iu":
        raise _err(path, f"has dtype {a.dtype}", "save integers (e.g. np.int64)")
    if a.ndim != 1 or (shape is not None and a.shape != shape):
        want = f"{shape}" if shape is not None else "one dimension"
        raise _err(path, f"has shape {tuple(a.shape)}, expected {want}", "fix its length")
    return np.asarray(a, dtype=np.int64)


def _check_offsets(path: Path, raw: np.ndarray, n_steps: int) -> np.ndarray:
    off = _check_int(path, raw)
    if len(off) < 1 or off[0] != 0:
        raise _err(path, "must start with 0", "offsets are [0, len(input 0), ...] cumulative")
    d = np.diff(off)
    if (d < 0).any():
        i = int(np.flatnonzero(d < 0)[0])
        raise _err(path, f"decreases at index {i + 1} ({off[i]} → {off[i + 1]})",
                   "offsets must be non-decreasing (np.cumsum of the input lengths)")
    if off[-1] != n_steps:
        raise _err(path, f"ends at {off[-1]} but hidden.npy has {n_steps} steps",
                   "the last offset is the total number of steps")
    return off


def _read_tokens(d: Path, lengths: np.ndarray, table: Surface
                 ) -> tuple[np.ndarray, list[str] | None, Path | None]:
    """The split's tokens as ids of ``table`` (n_steps,), checked against ``lengths``;
    with them the texts they join to (``tokens.json``), or None and the ``tokens.txt``
    they are read from (its lines are the texts: written from the file)."""
    js, txt = d / "tokens.json", d / "tokens.txt"
    if js.exists():
        toks = _load_json(js, "a list of lists of token strings")
        if not isinstance(toks, list) or not all(
                isinstance(t, list) and all(isinstance(s, str) for s in t) for t in toks):
            raise _err(js, "is not a list of lists of strings", "write one list of token "
                       "strings per input")
        _check_counts(js, np.fromiter(map(len, toks), np.int64, len(toks)), lengths)
        return (table.encode([t for line in toks for t in line]),
                [" ".join(t) for t in toks], None)
    if not txt.exists():
        raise _err(d, "has neither tokens.json nor tokens.txt", "write the tokens of every "
                   "input")
    regular_size(txt)  # a link to a device is refused before it is read
    ids, counts = [], []
    for lines in _token_lines(txt):
        toks = [line.split(" ") if line else [] for line in lines]
        counts.append(np.fromiter(map(len, toks), np.int64, len(toks)))
        ids.append(table.encode([t for line in toks for t in line]))
    _check_counts(txt, np.concatenate(counts) if counts else np.zeros(0, np.int64), lengths)
    return (np.concatenate(ids) if ids else np.zeros(0, np.int32)), None, txt


def _token_lines(txt: Path):
    """The lines of ``tokens.txt`` (split at ``\\n`` only, the last one's end optional),
    :data:`TOKEN_LINES` at a time."""
    with open(txt, "rb") as fh:
        while True:
            block = list(itertools.islice(fh, TOKEN_LINES))
            if not block:
                return
            try:
                yield [b.decode("utf-8").removesuffix("\n") for b in block]
            except UnicodeDecodeError:
                raise _err(txt, "is not UTF-8 text", "write one input per line") from None


def _check_counts(where: Path, counts: np.ndarray, lengths: np.ndarray) -> None:
    """Refuse token lists whose number or lengths differ from the offsets'."""
    if len(counts) != len(lengths):
        raise _err(where, f"holds {len(counts)} inputs but offsets.npy describes "
                   f"{len(lengths)}", "write one token list per input")
    bad = np.flatnonzero(counts != lengths)
    if len(bad):
        i = int(bad[0])
        raise _err(where, f"input {i} has {int(counts[i])} tokens but offsets.npy gives it "
                   f"{int(lengths[i])} steps", "one hidden state per token")


def _read_split(d: Path, n_classes: int, state_size: int | None, table: Surface
                ) -> ImportedSplit:
    if not d.is_dir():
        raise _err(d, "not found", "write one folder per split named in manifest.json")
    hidden = _load_npy(d / "hidden.npy")
    _check_float(d / "hidden.npy", hidden, 2)
    if state_size is not None and hidden.shape[1] != state_size:
        raise _err(d / "hidden.npy", f"has states of size {hidden.shape[1]}, the other "
                   f"splits {state_size}", "record every split from the same layer")
    off = _check_offsets(d / "offsets.npy", _load_npy(d / "offsets.npy"), len(hidden))
    lengths = np.diff(off)
    surface, joined, txt = _read_tokens(d, lengths, table)
    labels = _check_int(d / "labels.npy", _load_npy(d / "labels.npy"), (len(lengths),))
    out = np.flatnonzero((labels < 0) | (labels >= n_classes))
    if len(out):
        raise _err(d / "labels.npy", f"holds label {labels[out[0]]} (input {out[0]}) "
                   f"outside 0..{n_classes - 1}", "labels index manifest.json's classes")
    proba = _load_npy(d / "proba.npy", required=False)
    if proba is not None:
        _check_proba(d / "proba.npy", proba, (len(hidden), n_classes))
    texts_path = d / "texts.json"
    if texts_path.exists():
        texts = _load_json(texts_path, "a list of strings, one per input")
        if not isinstance(texts, list) or len(texts) != len(lengths) or \
                not all(isinstance(t, str) for t in texts):
            raise _err(texts_path, f"is not a list of {len(lengths)} strings",
                       "write one text per input or leave the file out")
    else:
        texts = joined
    rows = _load_npy(d / "rows.npy", required=False)
    if rows is not None:
        rows = _check_int(d / "rows.npy", rows, (len(lengths),))
        if (rows < 0).any():
            raise _err(d / "rows.npy", "holds a negative id", "ids are rows of your data")
    return ImportedSplit(hidden, off, surface, labels, proba, texts, rows,
                         None if texts is not None else txt)


def _check_proba(path: Path, p: np.ndarray, shape: tuple[int, int]) -> None:
    _check_float(path, p, 2)
    if p.shape != shape:
        raise _err(path, f"has shape {tuple(p.shape)}, expected {shape} (n_steps, "
                   "n_classes)", "one row of class probabilities per step")
    for start in range(0, len(p), CHUNK):
        block = np.asarray(p[start:start + CHUNK], np.float64)
        bad = (block < -1e-6).any(1) | (np.abs(block.sum(1) - 1) > 1e-3)
        if bad.any():
            row = start + int(np.flatnonzero(bad)[0])
            raise _err(path, f"row {row} is not a probability distribution (sum "
                       f"{block[row - start].sum():.4g})", "apply softmax to the logits")


def _read_manifest(src: Path) -> dict[str, Any]:
    if not src.is_dir():
        raise TraceError(f"--from {src} is not a folder; give the folder that holds "
                         "manifest.json")
    man = _load_json(src / "manifest.json", 'a JSON object {"classes": [...], "splits": '
                     '[...]}')
    where = src / "manifest.json"
    if not isinstance(man, dict):
        raise _err(where, "is not a JSON object", 'write {"classes": [...], "splits": [...]}')
    if man.get("format", FORMAT) != FORMAT or man.get("version", VERSION) != VERSION:
        raise _err(where, f"has format {man.get('format')!r} v{man.get('version')}",
                   f'write "format": "{FORMAT}", "version": {VERSION} or leave them out')
    classes = man.get("classes")
    if not isinstance(classes, list) or len(classes) < 2 or \
            not all(isinstance(c, str) and c for c in classes) or \
            len(set(classes)) != len(classes):
        raise _err(where, f"'classes' is {classes!r}", "give at least two distinct class "
                   "names in the order of the classifier's outputs")
    splits = man.get("splits")
    if not isinstance(splits, list) or "train" not in splits or \
            not set(splits) <= set(SPLITS) or len(set(splits)) != len(splits):
        raise _err(where, f"'splits' is {splits!r}", "list the splits you wrote, among "
                   "train, val, test; train is required (the abstraction is fitted on it)")
    layer = man.get("layer", -1)
    if not isinstance(layer, int) or isinstance(layer, bool):
        raise _err(where, f"'layer' is {layer!r}", "give an integer or leave it out")
    return man


def _vector(path: Path, size: int, default: np.ndarray, what: str) -> np.ndarray:
    a = _load_npy(path, required=False)
    if a is None:
        return default
    _check_float(path, a, 1)
    if a.shape != (size,):
        raise _err(path, f"has shape {tuple(a.shape)}, expected ({size},)", f"save {what}")
    return np.asarray(a, np.float32)


def _vocabulary(src: Path, splits: dict[str, ImportedSplit], table: Surface) -> list[str]:
    path = src / layout.VOCAB
    if path.exists():
        v = _load_json(path, "a list of token strings")
        v = v.get("tokens") if isinstance(v, dict) else v
        if not isinstance(v, list) or not all(isinstance(t, str) for t in v):
            raise _err(path, "is not a list of token strings", "write the vocabulary as a "
                       "JSON list or leave the file out")
        rest = [t for t in dict.fromkeys(v) if t not in (PAD, UNK)]
    else:
        n = np.bincount(splits["train"].surface, minlength=len(table.ids)).tolist()
        words = table.words
        rest = [words[j] for j in sorted((j for j, c in enumerate(n) if c),
                                         key=lambda j: (-n[j], words[j]))]
        rest = [t for t in rest if t not in (PAD, UNK)]
    return [PAD, UNK, *rest]


def read_import(src: str | Path) -> tuple[dict[str, Any], dict[str, ImportedSplit],
                                          np.ndarray, np.ndarray, list[str], Surface]:
    """Read and check an import folder.

    Returns
    -------
    manifest : dict
    splits : dict of str to ImportedSplit
    initial_hidden : ndarray of shape (d,)
    initial_proba : ndarray of shape (n_classes,)
    vocab : list of str
        ``'<pad>'``, ``'<unk>'``, then the tokens.
    surface : Surface
        The distinct token strings the splits' ``surface`` ids number.

    Raises
    ------
    TraceError
        One line naming the file, what is wrong and the fix.
    """
    src = Path(src)
    man = _read_manifest(src)
    C = len(man["classes"])
    splits: dict[str, ImportedSplit] = {}
    size = None
    table = Surface()
    for name in man["splits"]:
        splits[name] = _read_split(src / name, C, size, table)
        size = splits[name].hidden.shape[1]
    with_p = [n for n, s in splits.items() if s.proba is not None]
    if with_p and len(with_p) != len(splits):
        missing = next(n for n in splits if n not in with_p)
        raise _err(src / missing, "has no proba.npy but other splits do", "write proba.npy "
                   "in every split or in none")
    _check_rows(src, splits)
    h0 = _vector(src / "initial.npy", int(size), np.zeros(int(size), np.float32),
                 "the state before any token")
    p0 = _vector(src / "initial_proba.npy", C, np.full(C, 1.0 / C, np.float32),
                 "the prediction for an empty input")
    if with_p:
        _check_proba(src / "initial_proba.npy", p0[None], (1, C))
    if splits["train"].offsets[-1] == 0:
        raise _err(src / "train", "has no steps (every input is empty)", "the abstraction "
                   "needs hidden states of the training split")
    return man, splits, h0, p0, _vocabulary(src, splits, table), table


def _check_rows(src: Path, splits: dict[str, ImportedSplit]) -> None:
    """``rows.npy`` in every split or none, and no id twice across the splits."""
    given = [n for n, sp in splits.items() if sp.rows is not None]
    if not given:
        return
    if len(given) != len(splits):
        missing = next(n for n in splits if n not in given)
        raise _err(src / missing, "has no rows.npy but other splits do", "write rows.npy "
                   "in every split or in none")
    ids = np.concatenate([sp.rows for sp in splits.values()])
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        dup = int(uniq[counts > 1][0])
        where = next(n for n, sp in splits.items() if (sp.rows == dup).any())
        raise _err(src / where / "rows.npy", f"names input {dup} more than once (across "
                   "the splits)", "give every input its own id")


def _write_split(d: Path, sp: ImportedSplit, p0: np.ndarray, to_vocab: np.ndarray,
                 first_row: int, C: int) -> dict[str, Any]:
    """Write one split's traces into ``d``, a block of rows at a time (``to_vocab``: the
    vocabulary id of every surface id)."""
    d.mkdir(parents=True)
    dtype = np.float16 if sp.hidden.dtype == np.float16 else np.float32
    atomic_save_npy_rows(d / "hidden.npy", sp.hidden, dtype)
    n, lengths = len(sp.labels), np.diff(sp.offsets)
    if sp.proba is not None:
        final = np.tile(p0, (n, 1)).astype(np.float32)
        ne = lengths > 0
        final[ne] = sp.proba[sp.offsets[1:][ne] - 1]
        atomic_save_npy_rows(d / "proba.npy", sp.proba, np.float32)
    else:
        final = np.full((n, C), 1.0 / C, np.float32)
        atomic_save_npy_rows(d / "proba.npy", np.broadcast_to(
            np.float32(1.0 / C), (len(sp.hidden), C)))
    atomic_save_npy(d / "final_proba.npy", final)
    atomic_save_npy(d / "token_ids.npy", to_vocab[sp.surface])
    atomic_save_npy(d / "surface_ids.npy", sp.surface)
    atomic_save_npy(d / "offsets.npy", sp.offsets.astype(np.int64))
    atomic_save_npy(d / "labels.npy", sp.labels.astype(np.int64))
    atomic_save_npy(d / "rows.npy", sp.rows.astype(np.int64) if sp.rows is not None
                    else np.arange(first_row, first_row + n, dtype=np.int64))
    _write_texts(d / "texts.json", sp)
    acc = float((final.argmax(1) == sp.labels).mean()) if n and sp.proba is not None \
        else None
    return {"n_inputs": n, "n_steps": int(sp.offsets[-1]), "accuracy": acc}


def _write_texts(path: Path, sp: ImportedSplit) -> None:
    """``texts.json``: the split's texts, or the lines of its ``tokens.txt`` read again
    block by block."""
    if sp.tokens_txt is None:
        atomic_write_text(path, json.dumps(sp.texts, ensure_ascii=False))
        return

    def write(fh: Any) -> None:
        fh.write(b"[")
        sep, n = b"", 0
        for lines in _token_lines(sp.tokens_txt):
            fh.write(sep + ", ".join(json.dumps(t, ensure_ascii=False)
                                     for t in lines).encode("utf-8"))
            sep, n = b", ", n + len(lines)
        fh.write(b"]")
        if n != len(sp.labels):  # the file changed since it was checked
            raise _err(sp.tokens_txt, f"now holds {n} inputs, not the {len(sp.labels)} it "
                       "held when checked", "leave it alone while it is imported")

    atomic_write(path, write)


def _version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("stateseer")
    except metadata.PackageNotFoundError:
        return None


def import_traces(run: str | Path | RunDir, src: str | Path, *, force: bool = False
                  ) -> Traces:
    """Check the folder ``src`` (format in the module docstring) and write a run from it.

    Parameters
    ----------
    run : str or Path or RunDir
        The run directory to create.
    src : str or Path
        The import folder.
    force : bool
        Overwrite an existing run.

    Returns
    -------
    Traces
        The run's traces.
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    run.require_new(force)
    src = Path(src).resolve()
    man, splits, h0, p0, vocab, table = read_import(src)
    has_p = splits["train"].proba is not None
    C = len(man["classes"])
    run.path.mkdir(parents=True, exist_ok=True)
    run.clean_stray()
    tmp = claim(run.path / "traces.tmp")
    atomic_save_npy(tmp / "initial_hidden.npy", h0)
    atomic_save_npy(tmp / "initial_proba.npy", p0)
    index = {t: i for i, t in enumerate(vocab)}
    to_vocab = np.fromiter((index.get(t, 1) for t in table.ids), np.int32, len(table.ids))
    meta_splits, row = {}, 0
    for name, sp in splits.items():
        meta_splits[name] = _write_split(tmp / name, sp, p0, to_vocab, row, C)
        row += len(sp.labels)
    atomic_write_text(tmp / "surface.json", json.dumps(table.words, ensure_ascii=False))
    dataset = str(man.get("dataset") or f"imported:{src.name}")
    meta = {"format": TRACES_FORMAT, "version": TRACES_VERSION, "classes": man["classes"],
            "dataset": dataset, "layer": man.get("layer", -1), "state": "h",
            "dtype": "float16" if splits["train"].hidden.dtype == np.float16 else "float32",
            "state_size": int(h0.shape[0]), "n_classes": C, "model_sha256": None,
            "proba": has_p, "imported_from": portable_path(str(src), run.path),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "stateseer": _version(), "splits": meta_splits}
    atomic_write_text(tmp / layout.META, json.dumps(meta, indent=2))
    if run.abstraction_dir.exists():
        shutil.rmtree(run.abstraction_dir)  # fitted on other traces
    release(tmp)
    swap_dir(tmp, run.traces_dir)  # old or new traces, whole, at every instant
    _write_run_files(run, man, src, dataset, vocab, meta_splits, has_p)
    return Traces(run.traces_dir)


def _write_run_files(run: RunDir, man: dict[str, Any], src: Path, dataset: str,
                     vocab: list[str], meta_splits: dict[str, Any], has_p: bool) -> None:
    tok = man.get("tokenizer") if man.get("tokenizer") in ("word", "char", "space") \
        else "space"
    origin = portable_path(str(src), run.path)  # relative to the run, as data paths are
    config = {"format": "stateseer.run", "version": 1,
              "data": {"name": dataset, "tokenizer": tok, "classes": man["classes"],
                       "grammar": man.get("grammar"), "source": {"imported_from": origin},
                       "split_sizes": {s: v["n_inputs"] for s, v in meta_splits.items()}},
              "model": {"kind": "imported", "arch": "imported",
                        "from": origin,
                        "proba": has_p,
                        "n_classes": len(man["classes"]), "vocab_size": len(vocab),
                        "description": str(man.get("description", ""))}}
    atomic_write_text(run.vocab_path, json.dumps({"tokens": vocab}, ensure_ascii=False))
    if run.metrics_path.exists():
        run.metrics_path.unlink()
    if has_p:
        run.update_metrics(**{f"{s}_accuracy": v["accuracy"] for s, v in meta_splits.items()})
    atomic_write_text(run.config_path, json.dumps(config, indent=2))
