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
    SPLIT/token_ids.npy       (n_steps,)  int32, vocabulary id (1 = <unk>)
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
        """Boolean mask (len,) — False where the token was out of vocabulary."""
        return np.asarray(self.token_ids[self.steps(i)]) != 1


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
        try:
            self.meta: dict[str, Any] = json.loads(meta_path.read_text())
        except ValueError:
            raise TraceError(f"{meta_path} is corrupt; rerun `stateseer record`") from None
        if self.meta.get("format") != FORMAT or self.meta.get("version") != VERSION:
            raise TraceError(
                f"{self.path} holds traces of format {self.meta.get('format')!r} "
                f"v{self.meta.get('version')}, expected {FORMAT} v{VERSION}; rerun "
                "`stateseer record`"
            )
        self._mmap = "r" if mmap else None
        self.surface: list[str] = json.loads((self.path / "surface.json").read_text())
        self.initial_hidden = np.load(self.path / "initial_hidden.npy")
        self.initial_proba = np.load(self.path / "initial_proba.npy")
        self._splits: dict[str, SplitTraces] = {}

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
                arrays = {k: np.load(d / f"{k}.npy", mmap_mode=self._mmap) for k in ARRAYS}
                texts = json.loads((d / "texts.json").read_text())
            except (OSError, ValueError) as exc:
                raise TraceError(
                    f"traces of split {split!r} in {d} are damaged ({exc}); rerun "
                    "`stateseer record`"
                ) from None
            self._splits[split] = SplitTraces(name=split, surface=self.surface, texts=texts,
                                              **arrays)
        return self._splits[split]

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={v['n_inputs']}/{v['n_steps']}"
                          for s, v in self.meta["splits"].items())
        return f"Traces({str(self.path)!r}, {sizes})"
