"""Recorded traces: hidden states, intermediate predictions and tokens of every input.

On-disk format (``runs/NAME/traces/``), plain ``.npy`` files so that every large array
can be memory-mapped (``np.load(mmap_mode="r")``) and nothing needs to fit in RAM::

    meta.json                 format, version, provenance (model hash, layer, state, dtype),
                              classes, shard_size, per-split sizes and the shard manifest;
                              written last (its presence = complete)
    initial_hidden.npy        (state_size,)  h0, the state before any token
    initial_proba.npy         (n_classes,)   head(h0): the prediction for an empty input
    surface.json              list of distinct token strings as they appeared in the texts
    SPLIT/shards/00000/       shard 0 of the split: inputs [0, S), in the files below
    SPLIT/shards/00001/       shard 1: inputs [S, 2S), ... (S = meta's ``shard_size``)

Every shard directory holds the inputs of one consecutive range in data-set order, as::

    hidden.npy        (n_steps, state_size)  float32 or float16, state after each token
    proba.npy         (n_steps, n_classes)   float32, intermediate prediction per token
    token_ids.npy     (n_steps,)  int32, vocabulary id (meta's unk_id, default 1, = <unk>)
    surface_ids.npy   (n_steps,)  int32, index into the run's surface.json
    offsets.npy       (n_inputs + 1,)  int64, LOCAL: steps of the shard's input i are
                      offsets[i]:offsets[i+1], offsets[0] == 0
    labels.npy        (n_inputs,)  int64, gold label
    final_proba.npy   (n_inputs, n_classes)  float32, the model's final prediction
    rows.npy          (n_inputs,)  int64, row index in the data set
    texts.json        the raw texts, for display

**Shard layout.** Shard ``k`` of a split holds inputs ``[k*S, min((k+1)*S, n))``
(:func:`shard_layout`); it depends on the number of inputs and the shard size only,
never on how many processes recorded it. A split without inputs has one empty shard.

**Manifest.** ``meta.json["splits"][SPLIT]["shards"]`` lists, per shard in order, its
``input_start``, ``input_stop``, ``step_start`` and ``step_stop`` (global positions in the
split). ``meta.json`` is written last (atomically), after every shard directory is
complete, so its presence means the whole recording is. A shard is written under a
temporary name (``00003.tmp-<hex>``) and renamed to ``00003`` when complete, so a
shard directory with its final name is whole; temporary directories are never read.

**Reading.** ``Traces(path)[split]`` presents the whole split as one
:class:`SplitTraces`: with one shard its arrays are the shard's memory maps (no copy);
with several, ``hidden`` and ``proba`` are :class:`ShardedArray` views that read only the
shards a request touches, and the small arrays are concatenated (offsets made global).
:meth:`Traces.shards` and :meth:`Traces.open_shard` (or :func:`open_shard`, from paths
alone) read one shard without touching the others.

**Older runs.** Traces recorded before shards existed (and ``import-traces`` output)
keep the split's files directly in ``SPLIT/`` and have no ``"shards"`` entry in
``meta.json``; they read as one implicit shard whose path is ``SPLIT/``.

Steps are stored input after input in data-set order. The initial state is not stored per
input: it is the same for all of them (``initial_hidden``). This module needs numpy only
(part of the torch-free :mod:`stateseer.core` layer).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.core import layout
from stateseer.core.atomic import fsync_dir
from stateseer.core.errors import DAMAGED_NPY, DataError, TraceError
from stateseer.core.reading import load_json

__all__ = ["ARRAYS", "DEFAULT_SHARD_SIZE", "FORMAT", "VERSION", "ShardInfo", "ShardedArray",
           "SplitTraces", "Traces", "commit_shard", "new_shard_dir", "open_shard",
           "remove_tmp_shards", "shard_layout", "shard_name"]

FORMAT = "stateseer.traces"
VERSION = 1
ARRAYS = ("hidden", "proba", "token_ids", "surface_ids", "offsets", "labels", "final_proba",
          "rows")
DEFAULT_SHARD_SIZE = 65_536
"""Inputs per shard when none is asked for: ordinary runs have a single shard."""
SHARDS = "shards"

#: numpy parses an ``.npy`` header with ``ast.literal_eval``, which CPython 3.11.7 failed
#: here once from several threads at once ("SystemError: AST constructor recursion depth
#: mismatch", 8 threads opening shards), so shard headers are read one at a time: a few
#: microseconds each, the arrays themselves are memory-mapped
_NPY_HEADER_LOCK = threading.Lock()
TMP_MARK = ".tmp-"


# shard layout and shard directories ---------------------------------------------------
def shard_layout(n_inputs_or_lengths: int | Sequence[Any],
                 shard_size: int | None = None) -> list[tuple[int, int]]:
    """Input ranges of the shards of a split: ``[(input_start, input_stop), ...]``.

    Shard ``k`` holds inputs ``[k*S, min((k+1)*S, n))``; a split without inputs has one
    empty shard ``(0, 0)``. The layout depends on the data and ``shard_size`` only.

    Parameters
    ----------
    n_inputs_or_lengths : int or sequence
        The number of inputs ``n``, or a sequence with one item per input (its length).
    shard_size : int, optional
        Inputs per shard ``S`` (default :data:`DEFAULT_SHARD_SIZE`).

    Returns
    -------
    list of (int, int)

    Examples
    --------
    >>> shard_layout(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    >>> shard_layout(0, 4)
    [(0, 0)]
    """
    n = (int(n_inputs_or_lengths) if isinstance(n_inputs_or_lengths, (int, np.integer))
         else len(n_inputs_or_lengths))
    size = DEFAULT_SHARD_SIZE if shard_size is None else shard_size
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"shard size must be a positive integer, not {shard_size!r}")
    if n < 0:
        raise ValueError(f"a split cannot have {n} inputs")
    if n == 0:
        return [(0, 0)]
    size = int(size)
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def shard_name(k: int) -> str:
    """Directory name of shard ``k`` (``00003``)."""
    return f"{int(k):05d}"


def new_shard_dir(shards_dir: str | Path, k: int) -> Path:
    """Create and return a fresh temporary directory for shard ``k``
    (``shards_dir/00003.tmp-<hex>``); :func:`commit_shard` gives it its final name."""
    tmp = Path(shards_dir) / f"{shard_name(k)}{TMP_MARK}{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    return tmp


def commit_shard(tmp: str | Path, final: str | Path) -> Path:
    """Flush the files of a finished shard and rename ``tmp`` to ``final`` atomically.

    If ``final`` already exists (an earlier attempt of the same shard finished first;
    recording is deterministic, so it holds the same data), ``tmp`` is removed instead.

    Returns
    -------
    Path
        ``final``.
    """
    tmp, final = Path(tmp), Path(final)
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    fsync_dir(tmp)
    try:
        os.rename(tmp, final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    fsync_dir(final.parent)
    return final


def remove_tmp_shards(traces_dir: str | Path) -> int:
    """Delete leftover temporary shard directories (``*.tmp-*``) of every split, e.g.
    of a worker killed mid-shard. Returns how many were removed."""
    removed = 0
    for d in Path(traces_dir).glob(f"*/{SHARDS}/*{TMP_MARK}*"):
        shutil.rmtree(d, ignore_errors=True)
        removed += 1
    return removed


@dataclass(frozen=True)
class ShardInfo:
    """One shard of a split, as the manifest gives it.

    Attributes
    ----------
    index : int
    input_start, input_stop : int
        The shard's inputs ``[input_start, input_stop)`` in the split.
    step_start, step_stop : int
        Its steps ``[step_start, step_stop)`` in the split's step arrays.
    path : Path
        The shard directory (``SPLIT/`` itself for traces written before shards).
    """

    index: int
    input_start: int
    input_stop: int
    step_start: int
    step_stop: int
    path: Path

    @property
    def n_inputs(self) -> int:
        return self.input_stop - self.input_start

    @property
    def n_steps(self) -> int:
        return self.step_stop - self.step_start


# the virtual concatenation ------------------------------------------------------------
class ShardedArray:
    """The rows of several arrays presented as one: a lazy ``np.concatenate(parts)``.

    Indexing reads only the parts a request touches: an integer or a slice inside one
    part returns that part's own view (a memory map stays a memory map); slices across
    parts, integer arrays and boolean masks gather part by part. ``np.asarray`` (and
    every numpy function, through ``__array__``) materialises the whole array.

    Parameters
    ----------
    parts : sequence of ndarray
        Arrays of equal dtype and equal trailing shape, e.g. ``(n_k, state_size)``.

    Attributes
    ----------
    parts : list of ndarray
    starts : ndarray of shape (n_parts + 1,)
        Row where each part begins; ``starts[-1]`` is the number of rows.
    shape : tuple of int
    dtype : numpy.dtype
    """

    def __init__(self, parts: Sequence[np.ndarray]) -> None:
        parts = list(parts)
        if not parts:
            raise ValueError("a ShardedArray needs at least one part")
        first = parts[0]
        for p in parts:
            if p.shape[1:] != first.shape[1:] or p.dtype != first.dtype or p.ndim < 1:
                raise ValueError(f"parts differ: {p.shape} {p.dtype} vs {first.shape} "
                                 f"{first.dtype}")
        self.parts = parts
        self.starts = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(
            np.int64)
        self.shape: tuple[int, ...] = (int(self.starts[-1]), *first.shape[1:])
        self.dtype = first.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        for p in self.parts:
            yield from p

    def __repr__(self) -> str:
        return f"ShardedArray(shape={self.shape}, dtype={self.dtype}, parts={len(self.parts)})"

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a ShardedArray of several parts cannot be viewed without a copy")
        out = np.empty(self.shape, dtype=self.dtype if dtype is None else dtype)
        for p, a in zip(self.parts, self.starts[:-1].tolist(), strict=True):
            out[a:a + len(p)] = p
        return out

    def astype(self, dtype: Any, copy: bool = True) -> np.ndarray:
        """The whole array as ``dtype`` (always a new ndarray)."""
        return self.__array__(dtype)

    def _take(self, flat: np.ndarray) -> np.ndarray:
        """Rows ``flat`` (1-d, in range), gathered part by part."""
        out = np.empty((len(flat), *self.shape[1:]), self.dtype)
        if not len(flat):
            return out
        part = np.searchsorted(self.starts, flat, side="right") - 1
        order = None if (part[:-1] <= part[1:]).all() else np.argsort(part, kind="stable")
        if order is not None:
            part, flat = part[order], flat[order]
        cuts = np.searchsorted(part, np.arange(len(self.parts) + 1))
        for k in np.unique(part).tolist():
            lo, hi = int(cuts[k]), int(cuts[k + 1])
            rows = self.parts[k][flat[lo:hi] - self.starts[k]]
            if order is None:
                out[lo:hi] = rows
            else:
                out[order[lo:hi]] = rows
        return out

    def __getitem__(self, key: Any) -> Any:
        key = key if isinstance(key, tuple) else (key,)
        if not key or any(k is Ellipsis or k is None for k in key):
            return np.asarray(self)[key]  # rare forms: materialise
        row, rest, n = key[0], key[1:], self.shape[0]
        if isinstance(row, (int, np.integer)):
            i = int(row) + (n if int(row) < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"index {row} is out of bounds for axis 0 with size {n}")
            k = int(np.searchsorted(self.starts, i, side="right")) - 1
            return self.parts[k][(i - int(self.starts[k]), *rest)]
        if isinstance(row, slice):
            a, b, step = row.indices(n)
            if step == 1:
                s = self.starts
                ks = np.flatnonzero((s[:-1] < b) & (s[1:] > a)).tolist()
                if not ks:
                    return self.parts[0][(slice(0, 0), *rest)]
                pieces = [self.parts[k][(slice(max(a, s[k]) - s[k], min(b, s[k + 1]) - s[k]),
                                         *rest)] for k in ks]
                return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            row = np.arange(a, b, step)
        idx = np.asarray(row)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise IndexError(f"boolean index of shape {idx.shape} for {n} rows")
            idx = np.flatnonzero(idx)
        elif idx.size == 0:
            idx = idx.astype(np.int64)
        elif idx.dtype.kind not in "iu":
            raise IndexError("only integers, slices and integer or boolean arrays index rows")
        flat = idx.ravel().astype(np.int64)
        flat[flat < 0] += n
        if len(flat) and (flat.min() < 0 or flat.max() >= n):
            raise IndexError(f"index out of bounds for axis 0 with size {n}")
        rows = self._take(flat).reshape(idx.shape + self.shape[1:])
        if not rest:
            return rows
        if all(isinstance(r, (slice, int, np.integer)) for r in rest):
            return rows[(slice(None),) * idx.ndim + rest]
        if idx.ndim == 1:  # advanced indices on later axes pair with the rows
            return rows[(np.arange(len(flat)), *rest)]
        return np.asarray(self)[key]


# whole-split and per-shard views -----------------------------------------------------
@dataclass
class SplitTraces:
    """The traces of one split (or of a few new inputs, held in memory).

    Attributes
    ----------
    name : str
    hidden : ndarray of shape (n_steps, state_size)
    proba : ndarray of shape (n_steps, n_classes)
    token_ids, surface_ids : ndarray of shape (n_steps,)
    offsets : ndarray of shape (n_inputs + 1,)
    labels : ndarray of shape (n_inputs,)
        Gold labels (-1 where unknown, e.g. typed inputs).
    final_proba : ndarray of shape (n_inputs, n_classes)
    rows : ndarray of shape (n_inputs,)
    surface : list of str
        Token strings indexed by ``surface_ids``.
    texts : list of str
    """

    name: str
    hidden: np.ndarray
    proba: np.ndarray
    token_ids: np.ndarray
    surface_ids: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    final_proba: np.ndarray
    rows: np.ndarray
    surface: Sequence[str]
    texts: Sequence[str] = field(default_factory=list)
    unk_id: int = 1

    @property
    def n_inputs(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_steps(self) -> int:
        return int(self.offsets[-1])

    def __len__(self) -> int:
        return self.n_inputs

    @cached_property
    def lengths(self) -> np.ndarray:
        """Tokens per input, shape (n_inputs,)."""
        return np.diff(self.offsets)

    @cached_property
    def predictions(self) -> np.ndarray:
        """Final predicted class per input, shape (n_inputs,)."""
        return np.asarray(self.final_proba).argmax(axis=1)

    @cached_property
    def step_input(self) -> np.ndarray:
        """Input index of every step, shape (n_steps,)."""
        return np.repeat(np.arange(self.n_inputs), self.lengths)

    @cached_property
    def step_position(self) -> np.ndarray:
        """Position (0-based) of every step within its input, shape (n_steps,)."""
        return np.arange(self.n_steps) - np.repeat(self.offsets[:-1], self.lengths)

    def locate(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Input and position of some steps, each of shape (len(steps),): read from the
        offsets, without :attr:`step_input`'s array of every step (kept once built)."""
        off = np.asarray(self.offsets)
        inputs = np.searchsorted(off, steps, side="right") - 1
        return inputs, np.asarray(steps) - off[inputs]

    def steps(self, i: int) -> slice:
        """Slice of the step arrays that belongs to input ``i``."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def tokens(self, i: int) -> list[str]:
        """Token strings of input ``i`` as written in the text."""
        surface = self.surface
        return [surface[j] for j in np.asarray(self.surface_ids[self.steps(i)]).tolist()]

    def known(self, i: int) -> np.ndarray:
        """Boolean mask (len,) — False where the token was out of vocabulary
        (its id is ``unk_id``, the vocabulary's ``<unk>``)."""
        return np.asarray(self.token_ids[self.steps(i)]) != self.unk_id


class Traces:
    """All recorded splits of a run, memory-mapped.

    Parameters
    ----------
    path : str or Path
        A ``traces/`` directory written by :func:`stateseer.rnn_models.record.record_in_process`
        (sharded)
        or by an older stateseer / ``import-traces`` (one implicit shard per split).
    mmap : bool
        Memory-map the large arrays (default) instead of reading them into RAM.
    """

    def __init__(self, path: str | Path, mmap: bool = True) -> None:
        self.path = Path(path)
        meta_path = self.path / layout.META
        if not meta_path.exists():
            raise TraceError(
                f"no complete traces in {self.path}; record them with `stateseer record "
                f"{self.path.parent}`"
            )
        self.meta: dict[str, Any] = _read_json(meta_path, dict, self._fix)
        if self.meta.get("format") != FORMAT or self.meta.get("version") != VERSION:
            raise TraceError(
                f"{self.path} holds traces of format {self.meta.get('format')!r} "
                f"v{self.meta.get('version')}, expected {FORMAT} v{VERSION}; rerun "
                "`stateseer record`"
            )
        classes, splits = self.meta.get("classes"), self.meta.get("splits")
        if not (isinstance(classes, list) and len(classes) >= 1 and isinstance(splits, dict)):
            raise TraceError(f"{meta_path} is corrupt (no class list or split table); "
                             f"{self._fix}")
        self._mmap = "r" if mmap else None
        self.surface: list[str] = _read_json(self.path / "surface.json", list, self._fix)
        if not all(isinstance(t, str) for t in self.surface):
            raise TraceError(f"{self.path / 'surface.json'} is corrupt (not a list of "
                             f"strings); {self._fix}")
        self.initial_hidden = _read_npy(self.path / "initial_hidden.npy", self._fix)
        self.initial_proba = _read_npy(self.path / "initial_proba.npy", self._fix)
        _check_float(self.initial_hidden, self.path / "initial_hidden.npy", 1, self._fix)
        _check_float(self.initial_proba, self.path / "initial_proba.npy", 1, self._fix)
        if self.initial_proba.shape != (len(classes),):
            raise TraceError(f"{self.path / 'initial_proba.npy'} has shape "
                             f"{self.initial_proba.shape}, not ({len(classes)},) for the "
                             f"{len(classes)} classes; {self._fix}")
        self._splits: dict[str, SplitTraces] = {}
        self._shards: dict[str, list[ShardInfo]] = {}

    @property
    def _fix(self) -> str:
        return f"rerun `stateseer record {self.path.parent}`"

    @property
    def classes(self) -> list[str]:
        return list(self.meta["classes"])

    @property
    def split_names(self) -> list[str]:
        return list(self.meta["splits"])

    @property
    def shard_size(self) -> int | None:
        """Inputs per shard the traces were recorded with (None before shards)."""
        return self.meta.get("shard_size")

    @property
    def provenance(self) -> dict[str, Any]:
        keys = ("model_sha256", "layer", "state", "dtype", "dataset", "created", "stateseer")
        return {k: self.meta.get(k) for k in keys}

    def __contains__(self, split: str) -> bool:
        return split in self.meta["splits"]

    @property
    def measured_split(self) -> str:
        """The split figures are measured on by default: ``test`` where it has inputs,
        else ``val`` (a data set without a test split), as the abstraction's fidelity."""
        splits = self.meta["splits"]
        return "test" if (splits.get("test") or {}).get("n_inputs") else "val"

    def _check_recorded(self, split: str) -> None:
        if split not in self.meta["splits"]:
            raise TraceError(
                f"split {split!r} was not recorded; recorded: {', '.join(self.split_names)}"
            )

    def shards(self, split: str) -> list[ShardInfo]:
        """The shards of ``split`` in order, checked against the manifest.

        Traces written before shards existed give one shard whose path is ``SPLIT/``.

        Raises
        ------
        TraceError
            The split was not recorded, or its manifest is damaged.
        """
        self._check_recorded(split)
        if split not in self._shards:
            entry = self.meta["splits"][split]
            if isinstance(entry, dict) and SHARDS in entry:
                self._shards[split] = self._manifest(split, entry)
            else:
                self._shards[split] = [self._legacy_shard(split)]
        return list(self._shards[split])

    def _manifest(self, split: str, entry: dict[str, Any]) -> list[ShardInfo]:
        """Shard list of a sharded split, its ranges checked to tile the split."""
        def bad(what: str) -> TraceError:
            return TraceError(f"{self.path / layout.META} has a damaged shard manifest for "
                              f"split {split!r} ({what}); {self._fix}")

        rows = entry[SHARDS]
        keys = ("input_start", "input_stop", "step_start", "step_stop")
        if not isinstance(rows, list) or not rows:
            raise bad("no shard list")
        if not all(isinstance(r, dict) and all(type(r.get(k)) is int for k in keys)
                   for r in rows):
            raise bad("each shard needs integer input_start, input_stop, step_start, "
                      "step_stop")
        a = np.array([[r[k] for k in keys] for r in rows], dtype=np.int64)
        if a[0, 0] != 0 or a[0, 2] != 0 or (a[:, 1] < a[:, 0]).any() \
                or (a[:, 3] < a[:, 2]).any() or (a[1:, 0] != a[:-1, 1]).any() \
                or (a[1:, 2] != a[:-1, 3]).any():
            raise bad("shard ranges must start at 0 and follow one another")
        for k, total in (("n_inputs", a[-1, 1]), ("n_steps", a[-1, 3])):
            if type(entry.get(k)) is int and entry[k] != total:
                raise bad(f"its shards hold {total} but {k} is {entry[k]}")
        base = self.path / split / SHARDS
        return [ShardInfo(i, *map(int, a[i]), base / shard_name(i)) for i in range(len(a))]

    def _legacy_shard(self, split: str) -> ShardInfo:
        d = self.path / split
        try:
            off = np.load(d / "offsets.npy", mmap_mode="r", allow_pickle=False)
            n_in, n_st = len(off) - 1, int(off[-1]) if len(off) else 0
        except (*DAMAGED_NPY, TypeError, IndexError) as exc:
            raise TraceError(
                f"traces of split {split!r} in {d} are damaged "
                f"({' '.join(str(exc).split())[:120]}); {self._fix}"
            ) from None
        return ShardInfo(0, 0, max(n_in, 0), 0, n_st, d)

    def open_shard(self, split: str, k: int, *, texts: bool = True) -> SplitTraces:
        """Shard ``k`` of ``split`` as a :class:`SplitTraces` with LOCAL offsets (from 0).

        Only this shard's files are opened (memory-mapped); ``rows`` still give the
        inputs' rows in the data set, ``surface_ids`` index the run's ``surface``. Without
        ``texts`` the raw texts are read (and checked) only when first used: the per-shard
        steps of the abstraction never read them (3 of the 6 ms an open took).

        Raises
        ------
        TraceError
            The shard is missing or damaged, or disagrees with the manifest.
        """
        infos = self.shards(split)
        if not 0 <= k < len(infos):
            raise TraceError(f"split {split!r} has {len(infos)} shard(s); there is no "
                             f"shard {k}")
        info, d = infos[k], infos[k].path
        if not d.is_dir():
            raise TraceError(f"shard {shard_name(k)} of split {split!r} is missing ({d}); "
                             f"{self._fix}")
        try:
            with _NPY_HEADER_LOCK:  # see _NPY_HEADER_LOCK: headers only, the data is mapped
                arrays = {n: np.load(d / f"{n}.npy", mmap_mode=self._mmap,
                                     allow_pickle=False) for n in ARRAYS}
            loaded = _read_texts(d, self._fix) if texts else None
        except DAMAGED_NPY as exc:
            raise TraceError(
                f"traces of split {split!r} in {d} are damaged "
                f"({' '.join(str(exc).split())[:120]}); {self._fix}"
            ) from None
        _check_split(arrays, loaded, len(self.classes), len(self.surface),
                     len(self.initial_hidden), d, self._fix)
        n_in, n_st = len(arrays["offsets"]) - 1, int(arrays["offsets"][-1])
        if loaded is None:
            loaded = _LazyTexts(d, n_in, self._fix)
        if (n_in, n_st) != (info.n_inputs, info.n_steps):
            raise TraceError(f"{d} holds {n_in} inputs and {n_st} steps but the manifest in "
                             f"meta.json says {info.n_inputs} and {info.n_steps}; "
                             f"{self._fix}")
        return SplitTraces(name=split, surface=self.surface, texts=loaded,
                           unk_id=int(self.meta.get("unk_id", 1)), **arrays)

    def __getitem__(self, split: str) -> SplitTraces:
        """The whole split; with several shards ``hidden``/``proba`` are
        :class:`ShardedArray` views and the other arrays are concatenated."""
        self._check_recorded(split)
        if split not in self._splits:
            infos = self.shards(split)
            # one shard: its texts are read when first used (at 1M inputs, 144 MB that
            # the abstraction never reads); several: joined, so read and checked now
            parts = [self.open_shard(split, k, texts=len(infos) > 1)
                     for k in range(len(infos))]
            self._splits[split] = (parts[0] if len(parts) == 1
                                   else self._join(split, parts, infos))
        return self._splits[split]

    def _join(self, split: str, parts: list[SplitTraces], infos: list[ShardInfo]
              ) -> SplitTraces:
        dtypes = {p.hidden.dtype for p in parts}
        if len(dtypes) > 1:
            raise TraceError(f"the shards of split {split!r} hold hidden states of different "
                             f"types ({', '.join(sorted(map(str, dtypes)))}); {self._fix}")
        offsets = np.concatenate([*(np.asarray(p.offsets[:-1]) + i.step_start
                                    for p, i in zip(parts, infos, strict=True)),
                                  [infos[-1].step_stop]]).astype(np.int64)

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts])

        return SplitTraces(
            name=split, hidden=ShardedArray([p.hidden for p in parts]),
            proba=ShardedArray([p.proba for p in parts]), token_ids=cat("token_ids"),
            surface_ids=cat("surface_ids"), offsets=offsets, labels=cat("labels"),
            final_proba=cat("final_proba"), rows=cat("rows"), surface=self.surface,
            texts=[t for p in parts for t in p.texts], unk_id=parts[0].unk_id)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={v['n_inputs']}/{v['n_steps']}"
                          for s, v in self.meta["splits"].items())
        return f"Traces({str(self.path)!r}, {sizes})"


_OPENED: dict[tuple[str, int, int, int], Traces] = {}
_OPENED_MAX = 4
_OPENED_LOCK = threading.Lock()


def open_shard(traces_dir: str | Path, split: str, k: int) -> SplitTraces:
    """Shard ``k`` of ``split`` from the traces directory alone (for a worker process):
    ``Traces(traces_dir).open_shard(split, k)``, memory-mapped, LOCAL offsets.

    The directory's :class:`Traces` (its manifest, surface list and initial state, read
    and checked) is kept per process, keyed by ``meta.json``'s time stamp, size and inode
    (record writes it last, by rename), so a map over many shards reads and checks them
    once, not once per shard (5 of the 8 ms an open took on a 73-shard split;
    re-recorded traces are read anew).
    """
    path = Path(traces_dir)
    try:
        st = (path / layout.META).stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:  # no manifest: Traces says so in one line
        return Traces(path).open_shard(split, k, texts=False)
    with _OPENED_LOCK:
        traces = _OPENED.get(key)
    if traces is None:
        traces = Traces(path)
        with _OPENED_LOCK:
            _OPENED[key] = traces
            while len(_OPENED) > _OPENED_MAX:
                _OPENED.pop(next(iter(_OPENED)))
    return traces.open_shard(split, k, texts=False)


def _read_json(path: Path, kind: type, fix: str) -> Any:
    """JSON file ``path`` holding a ``kind`` (dict or list), or a one-line TraceError."""
    try:
        data = load_json(path)
    except FileNotFoundError:
        raise TraceError(f"{path} is missing; {fix}") from None
    except (OSError, DataError) as exc:  # not JSON, not a file, too large, too deep
        why = "not JSON" if "JSON" in str(exc) else str(exc).split(";")[0]
        raise TraceError(f"{path} is corrupt ({why}); {fix}") from None
    if not isinstance(data, kind):
        what = "a JSON object" if kind is dict else "a JSON list"
        raise TraceError(f"{path} is corrupt (not {what}); {fix}")
    return data


def _read_npy(path: Path, fix: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise TraceError(f"{path} is missing; {fix}") from None
    except DAMAGED_NPY:
        raise TraceError(f"{path} is corrupt (not a .npy array); {fix}") from None


def _check_float(a: np.ndarray, path: Path, ndim: int, fix: str) -> None:
    if a.ndim != ndim or a.dtype.kind != "f":
        raise TraceError(f"{path} must be a {ndim}-d float array, not {a.ndim}-d {a.dtype}; "
                         f"{fix}")


def _check_split(arrays: dict[str, np.ndarray], texts: list | None, n_classes: int,
                 n_surface: int, state_size: int, d: Path, fix: str) -> None:
    """Shapes, dtypes and index ranges of one split's arrays (one-line TraceError).

    Reads the offsets, labels and index arrays once (vectorised) and scans ``proba`` once
    for NaN; ``hidden`` is checked by dtype and shape only.
    """
    off = arrays["offsets"]
    if off.ndim != 1 or off.dtype.kind not in "iu" or len(off) < 1 or off[0] != 0 \
            or (np.diff(off) < 0).any():
        raise TraceError(f"{d / 'offsets.npy'} is corrupt (offsets must be integers rising "
                         f"from 0); {fix}")
    n_inputs, n_steps = len(off) - 1, int(off[-1])
    shapes = {"hidden": (n_steps, state_size), "proba": (n_steps, n_classes),
              "token_ids": (n_steps,), "surface_ids": (n_steps,), "labels": (n_inputs,),
              "final_proba": (n_inputs, n_classes), "rows": (n_inputs,)}
    for k, shape in shapes.items():
        if arrays[k].shape != shape:
            raise TraceError(f"{d / (k + '.npy')} has shape {arrays[k].shape}, expected "
                             f"{shape} from offsets.npy and meta.json; {fix}")
    for k in ("hidden", "proba", "final_proba"):
        if arrays[k].dtype.kind != "f":
            raise TraceError(f"{d / (k + '.npy')} holds {arrays[k].dtype}, not floats; {fix}")
    for k in ("token_ids", "surface_ids", "labels", "rows"):
        if arrays[k].dtype.kind not in "iu":
            raise TraceError(f"{d / (k + '.npy')} holds {arrays[k].dtype}, not integers; {fix}")
    ranges = {"token_ids": (0, None), "surface_ids": (0, n_surface), "labels": (-1, n_classes)}
    for k, (lo, hi) in ranges.items():
        a = arrays[k]
        if len(a) and (int(a.min()) < lo or (hi is not None and int(a.max()) >= hi)):
            top = "" if hi is None else f"..{hi - 1}"
            raise TraceError(f"{d / (k + '.npy')} holds values outside {lo}{top}; {fix}")
    if n_steps and np.isnan(np.asarray(arrays["proba"]).sum()):
        raise TraceError(f"{d / 'proba.npy'} holds NaN predictions; {fix}")
    if texts is not None:
        _check_texts(texts, n_inputs, d, fix)


def _check_texts(texts: list, n_inputs: int, d: Path, fix: str) -> None:
    if len(texts) != n_inputs:
        raise TraceError(f"{d / 'texts.json'} has {len(texts)} texts for {n_inputs} inputs; "
                         f"{fix}")


def _read_texts(d: Path, fix: str) -> list:
    """``d/texts.json``, a JSON list (one-line TraceError otherwise)."""
    try:
        texts = load_json(d / "texts.json")
    except (OSError, DataError):
        raise TraceError(f"{d / 'texts.json'} is corrupt (not JSON); {fix}") from None
    if not isinstance(texts, list):
        raise TraceError(f"{d / 'texts.json'} is corrupt (not a list); {fix}")
    return texts


#: bytes of ``texts.json`` scanned at a time when its strings are located (bounded memory)
TEXT_SCAN_BYTES = 1 << 26


def text_spans(path: Path, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each of the ``n`` strings of ``path`` lies, without parsing the whole list:
    (starts, ends) byte offsets, shape (n,), for a file in the form the recorder and the
    importer write (``json.dumps(list_of_str)``: ``["a", "b"]``); None for any other form
    (or a count that is not ``n``), which is then parsed whole.

    A boundary is a ``", "`` whose quote no odd run of backslashes escapes; the file is
    scanned :data:`TEXT_SCAN_BYTES` at a time from a memory map.
    """
    raw = _map_file(path)
    return None if raw is None else _spans_in(raw, n)


def _map_file(path: Path) -> Any:
    """``path`` memory-mapped for reading, or None (missing, empty, unreadable)."""
    import mmap

    try:
        with path.open("rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def _spans_in(raw: Any, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`text_spans` of the mapped bytes ``raw``."""
    size = len(raw)
    if n < 1 or size < 4:
        return None
    b = np.frombuffer(raw, np.uint8)
    if bytes(b[:2]) != b'["' or bytes(b[-2:]) != b'"]':
        return None
    hits = []
    for lo in range(0, size - 2, TEXT_SCAN_BYTES):
        w = b[lo:lo + TEXT_SCAN_BYTES + 2]
        hits.append(np.flatnonzero((w[:-2] == 34) & (w[1:-1] == 44) & (w[2:] == 32)) + lo)
    q = np.concatenate(hits)  # the closing quote of each string but the last
    keep = np.ones(len(q), bool)
    for j in np.flatnonzero(b[q - 1] == 92):  # rare: a quote after backslashes
        p = int(q[j]) - 1
        run = 0
        while b[p] == 92:
            run, p = run + 1, p - 1
        keep[j] = run % 2 == 0  # an odd run escapes the quote: inside a string
    q = q[keep]
    if len(q) != n - 1:
        return None
    return (np.concatenate([[1], q + 3]).astype(np.int64),
            np.concatenate([q + 1, [size - 1]]).astype(np.int64))


class _LazyTexts(Sequence):
    """A shard's raw texts from ``texts.json``: one text is read alone (the file's strings
    located once, :func:`text_spans`), the whole list, checked, only when it is used
    whole (a search, an export, a copy) or when the file is in another form.

    At 1M inputs parsing the list whole took 130 MB of the server's memory and 0.8 s of
    its first page, which shows 12 texts.
    """

    def __init__(self, d: Path, n_inputs: int, fix: str) -> None:
        self._d, self._n, self._fix, self._texts = d, n_inputs, fix, None
        self._spans: tuple[np.ndarray, np.ndarray] | bool | None = False  # False: not yet
        self._raw: Any = None

    def _load(self) -> list:
        if self._texts is None:
            try:
                texts = _read_texts(self._d, self._fix)
            except DAMAGED_NPY as exc:
                raise TraceError(f"{self._d / 'texts.json'} is damaged "
                                 f"({' '.join(str(exc).split())[:120]}); {self._fix}"
                                 ) from None
            _check_texts(texts, self._n, self._d, self._fix)
            self._texts = texts
        return self._texts

    def _located(self) -> bool:
        """Whether single texts can be read alone (the strings located)."""
        if self._texts is not None:
            return False
        if self._spans is False:  # the file mapped once: located, then read from
            self._raw = _map_file(self._d / "texts.json")
            self._spans = None if self._raw is None else _spans_in(self._raw, self._n)
        return self._spans is not None

    def _one(self, i: int) -> str:
        starts, ends = self._spans
        try:
            text = json.loads(self._raw[int(starts[i]):int(ends[i])])
        except ValueError:
            text = None
        if not isinstance(text, str):
            self._load()  # the whole list says what is wrong, or raises
            return self._texts[i]
        return text

    def __len__(self) -> int:
        return self._n if self._located() else len(self._load())

    def __getitem__(self, i):
        if isinstance(i, (int, np.integer)) and self._located():
            if not -self._n <= i < self._n:
                raise IndexError("text index out of range")
            return self._one(int(i) % self._n)
        if isinstance(i, slice) and self._located():
            return [self._one(k) for k in range(*i.indices(self._n))]
        return self._load()[i]

    def __setitem__(self, i, value) -> None:  # as the list the texts were before
        self._load()[i] = value

    def __iter__(self):
        return iter(self._load())
