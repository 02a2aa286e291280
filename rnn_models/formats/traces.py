"""Recorded traces: hidden states, intermediate predictions and tokens of every input.

On-disk format (``runs/NAME/traces/``), plain ``.npy`` files so that every large array
can be memory-mapped (``np.load(mmap_mode="r")``) and nothing needs to fit in RAM::

    meta.json                 format, version, provenance (model hash, layer, state, dtype),
                              classes, per-split sizes; written last (its presence = complete)
    initial_hidden.npy        (state_size,)  h0, the state before any token
    initial_proba.npy         (n_classes,)   head(h0): the prediction for an empty input
    surface.json              list of distinct token strings as they appeared in the texts
    SPLIT/hidden.npy          (n_steps, state_size)  float32 or float16, state after each token
    SPLIT/proba.npy           (n_steps, n_classes)   float32, intermediate prediction per token
    SPLIT/token_ids.npy       (n_steps,)  int32, vocabulary id (meta's unk_id, default 1, = <unk>)
    SPLIT/surface_ids.npy     (n_steps,)  int32, index into surface.json
    SPLIT/offsets.npy         (n_inputs + 1,)  int64, steps of input i are offsets[i]:offsets[i+1]
    SPLIT/labels.npy          (n_inputs,)  int64, gold label
    SPLIT/final_proba.npy     (n_inputs, n_classes)  float32, the model's final prediction
    SPLIT/rows.npy            (n_inputs,)  int64, row index in the data set
    SPLIT/texts.json          the raw texts, for display

Steps are stored input after input in data-set order. The initial state is not stored per
input: it is the same for all of them (``initial_hidden``). This module needs numpy only
(part of the torch-free :mod:`rnn_models.formats` layer).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .errors import TraceError

__all__ = ["FORMAT", "VERSION", "SplitTraces", "Traces"]

FORMAT = "stateseer.traces"
VERSION = 1
ARRAYS = ("hidden", "proba", "token_ids", "surface_ids", "offsets", "labels", "final_proba",
          "rows")


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

    def steps(self, i: int) -> slice:
        """Slice of the step arrays that belongs to input ``i``."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def tokens(self, i: int) -> list[str]:
        """Token strings of input ``i`` as written in the text."""
        return [self.surface[j] for j in self.surface_ids[self.steps(i)]]

    def known(self, i: int) -> np.ndarray:
        """Boolean mask (len,) — False where the token was out of vocabulary
        (its id is ``unk_id``, the vocabulary's ``<unk>``)."""
        return np.asarray(self.token_ids[self.steps(i)]) != self.unk_id


class Traces:
    """All recorded splits of a run, memory-mapped.

    Parameters
    ----------
    path : str or Path
        A ``traces/`` directory written by :func:`rnn_models.record.record_run`.
    mmap : bool
        Memory-map the large arrays (default) instead of reading them into RAM.
    """

    def __init__(self, path: str | Path, mmap: bool = True) -> None:
        self.path = Path(path)
        meta_path = self.path / "meta.json"
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
    def provenance(self) -> dict[str, Any]:
        keys = ("model_sha256", "layer", "state", "dtype", "dataset", "created", "stateseer")
        return {k: self.meta.get(k) for k in keys}

    def __contains__(self, split: str) -> bool:
        return split in self.meta["splits"]

    def __getitem__(self, split: str) -> SplitTraces:
        if split not in self.meta["splits"]:
            raise TraceError(
                f"split {split!r} was not recorded; recorded: {', '.join(self.split_names)}"
            )
        if split not in self._splits:
            d = self.path / split
            try:
                arrays = {k: np.load(d / f"{k}.npy", mmap_mode=self._mmap,
                                     allow_pickle=False) for k in ARRAYS}
                texts = json.loads((d / "texts.json").read_text(encoding="utf-8"))
            except (OSError, ValueError, EOFError) as exc:
                raise TraceError(
                    f"traces of split {split!r} in {d} are damaged "
                    f"({' '.join(str(exc).split())[:120]}); {self._fix}"
                ) from None
            if not isinstance(texts, list):
                raise TraceError(f"{d / 'texts.json'} is corrupt (not a list); {self._fix}")
            _check_split(arrays, texts, len(self.classes), len(self.surface),
                         len(self.initial_hidden), d, self._fix)
            self._splits[split] = SplitTraces(name=split, surface=self.surface, texts=texts,
                                              unk_id=int(self.meta.get("unk_id", 1)),
                                              **arrays)
        return self._splits[split]

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={v['n_inputs']}/{v['n_steps']}"
                          for s, v in self.meta["splits"].items())
        return f"Traces({str(self.path)!r}, {sizes})"


def _read_json(path: Path, kind: type, fix: str) -> Any:
    """JSON file ``path`` holding a ``kind`` (dict or list), or a one-line TraceError."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceError(f"{path} is missing; {fix}") from None
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        raise TraceError(f"{path} is corrupt (not JSON); {fix}") from None
    if not isinstance(data, kind):
        what = "a JSON object" if kind is dict else "a JSON list"
        raise TraceError(f"{path} is corrupt (not {what}); {fix}")
    return data


def _read_npy(path: Path, fix: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise TraceError(f"{path} is missing; {fix}") from None
    except (OSError, ValueError, EOFError):
        raise TraceError(f"{path} is corrupt (not a .npy array); {fix}") from None


def _check_float(a: np.ndarray, path: Path, ndim: int, fix: str) -> None:
    if a.ndim != ndim or a.dtype.kind != "f":
        raise TraceError(f"{path} must be a {ndim}-d float array, not {a.ndim}-d {a.dtype}; "
                         f"{fix}")


def _check_split(arrays: dict[str, np.ndarray], texts: list, n_classes: int, n_surface: int,
                 state_size: int, d: Path, fix: str) -> None:
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
    if len(texts) != n_inputs:
        raise TraceError(f"{d / 'texts.json'} has {len(texts)} texts for {n_inputs} inputs; "
                         f"{fix}")
