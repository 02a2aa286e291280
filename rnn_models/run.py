"""The run directory: everything one model produced, in one place.

::

    runs/NAME/config.json     data set, tokenizer, architecture, hyper-parameters, seed
    runs/NAME/model.pt        state_dict only (loaded with torch.load(weights_only=True))
    runs/NAME/vocab.json
    runs/NAME/metrics.json    train/val/test accuracy; "abstraction" figures below
    runs/NAME/traces/         recorded traces (see :mod:`rnn_models.traces`)
    runs/NAME/abstraction/    fitted abstraction and FSM

This module imports torch only inside :meth:`Run.load_model`, so ``abstraction`` and the
app can read configs, metrics and traces without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import CheckpointError, DataError, StateseerError

__all__ = ["Run", "atomic_write_text", "create_run", "data_section", "sha256_file"]


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (never half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Run:
    """A run directory.

    Parameters
    ----------
    path : str or Path
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    # paths ------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    @property
    def model_path(self) -> Path:
        return self.path / "model.pt"

    @property
    def vocab_path(self) -> Path:
        return self.path / "vocab.json"

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.json"

    @property
    def traces_dir(self) -> Path:
        return self.path / "traces"

    @property
    def abstraction_dir(self) -> Path:
        return self.path / "abstraction"

    # content ----------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.config_path.exists()

    @property
    def config(self) -> dict[str, Any]:
        if not self.config_path.exists():
            raise StateseerError(
                f"{self.path} is not a stateseer run (no config.json); "
                "create it with `stateseer train --dataset NAME --arch gru --out "
                f"{self.path}`"
            )
        try:
            return json.loads(self.config_path.read_text())
        except ValueError as exc:
            raise StateseerError(
                f"{self.config_path} is not valid JSON ({exc}); restore it or retrain"
            ) from None

    def metrics(self) -> dict[str, Any]:
        if not self.metrics_path.exists():
            return {}
        try:
            return json.loads(self.metrics_path.read_text())
        except ValueError:
            raise StateseerError(
                f"{self.metrics_path} is not valid JSON; delete it and rerun the step that wrote it"
            ) from None

    def update_metrics(self, **sections: Any) -> dict[str, Any]:
        """Merge top-level keys into ``metrics.json`` (atomically) and return the result."""
        m = self.metrics()
        m.update(sections)
        atomic_write_text(self.metrics_path, json.dumps(m, indent=2, sort_keys=True))
        return m

    def vocab(self):
        from .tokenizers import Vocab

        return Vocab.load(self.vocab_path)

    def dataset(self):
        """Reload the run's data set with the options recorded in ``config.json``."""
        from .datasets import load_dataset

        d = self.config["data"]
        return load_dataset(
            d["name"], text_col=d.get("text_col", "text"), label_col=d.get("label_col", "label"),
            tokenizer=d.get("tokenizer", "word"), seed=d.get("seed", 0),
            max_tokens=d.get("max_tokens"),
        )

    def model_sha256(self) -> str:
        if not self.model_path.exists():
            raise CheckpointError(
                f"{self.model_path} not found; train the run first with `stateseer train`"
            )
        return sha256_file(self.model_path)

    def load_model(self):
        """Build the model from ``config.json`` and load ``model.pt`` (eval mode).

        Raises
        ------
        CheckpointError
            Missing, corrupt, or not matching the architecture in ``config.json``.
        """
        import torch

        from .models import RNNClassifier

        cfg = self.config
        m = cfg.get("model")
        if not isinstance(m, dict):
            raise CheckpointError(f"{self.config_path} has no 'model' section; retrain the run")
        if not self.model_path.exists():
            raise CheckpointError(
                f"{self.model_path} not found; train the run first with `stateseer train`"
            )
        try:
            state = torch.load(self.model_path, map_location="cpu", weights_only=True)
        except Exception as exc:  # any failure to unpickle untrusted bytes means "corrupt"
            first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc)
            raise CheckpointError(
                f"{self.model_path} is corrupt or not a PyTorch state_dict ({first}); "
                "retrain the run with `stateseer train`"
            ) from None
        if not isinstance(state, dict) or not all(
            isinstance(v, torch.Tensor) for v in state.values()
        ):
            raise CheckpointError(
                f"{self.model_path} does not hold a state_dict of tensors; save "
                "model.state_dict(), not the model object"
            )
        try:
            model = RNNClassifier(
                m["arch"], m["vocab_size"], m["n_classes"], embed=m["embed"],
                hidden=m["hidden"], layers=m["layers"], dropout=0.0, state=m.get("state", "h"),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise CheckpointError(
                f"{self.config_path} has an invalid model section ({exc}); retrain the run"
            ) from None
        expected = model.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        wrong = sorted(
            k for k in set(expected) & set(state) if expected[k].shape != state[k].shape
        )
        if missing or unexpected or wrong:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing[:3])}")
            if unexpected:
                parts.append(f"unexpected {', '.join(unexpected[:3])}")
            for k in wrong[:2]:
                parts.append(
                    f"{k} is {tuple(state[k].shape)} but config.json needs "
                    f"{tuple(expected[k].shape)}"
                )
            raise CheckpointError(
                f"{self.model_path} does not match {self.config_path} ({'; '.join(parts)}); "
                "was model.pt copied from another run? retrain or restore the matching files"
            )
        model.load_state_dict(state)
        model.eval()
        return model

    def require_new(self, force: bool = False) -> None:
        """Refuse to overwrite an existing run unless ``force``."""
        if self.exists() and not force:
            raise DataError(
                f"{self.path} already holds a run; pass --force to overwrite it or choose "
                "another --out"
            )


def data_section(ds, *, text_col: str = "text", label_col: str = "label", seed: int = 0,
                 max_tokens: int | None = 2000) -> dict[str, Any]:
    """The ``"data"`` section of ``config.json``: how to reload ``ds`` and its splits.

    Parameters
    ----------
    ds : TextDataset
        As returned by :func:`rnn_models.datasets.load_dataset` with these options.
    """
    return {"name": ds.name, "tokenizer": ds.tokenizer, "classes": ds.classes,
            "text_col": text_col, "label_col": label_col, "seed": seed,
            "max_tokens": max_tokens, "grammar": ds.grammar, "source": ds.info,
            "split_sizes": {s: len(v) for s, v in ds.splits.items()}}


def create_run(path: str | Path, ds, vocab, *, model: dict[str, Any],
               text_col: str = "text", label_col: str = "label", seed: int = 0,
               max_tokens: int | None = 2000, metrics: dict[str, Any] | None = None,
               force: bool = False) -> Run:
    """A run directory for a model trained outside stateseer (bring your own model).

    Writes ``config.json`` (the data set, so every command can reload the same splits,
    and ``model``, a free description of your model) and ``vocab.json``, plus
    ``metrics.json`` when ``metrics`` is given. Then record it with
    ``record_run(run, model=your_adapter)``. ``model.pt`` is not written: it is reserved
    for the built-in classifiers that :meth:`Run.load_model` rebuilds; keep your weights
    under another name.

    Parameters
    ----------
    path : str or Path
    ds : TextDataset
        The data set the model was trained on, loaded with the options below.
    vocab : Vocab
        The token → id mapping the model reads.
    model : dict
        At least ``arch`` (e.g. ``"custom:MyNet"``); ``n_classes`` and ``vocab_size`` are
        filled in.
    text_col, label_col, seed, max_tokens
        The options ``ds`` was loaded with (``load_dataset``'s).
    metrics : dict, optional
        E.g. ``{"test_accuracy": 0.81}``.
    force : bool
        Overwrite an existing run.

    Returns
    -------
    Run
    """
    if not isinstance(model, dict) or not model.get("arch"):
        raise StateseerError("model must be a dict with at least an 'arch' name, e.g. "
                             "{'arch': 'custom:MyNet'}")
    run = Run(path)
    run.require_new(force)
    run.path.mkdir(parents=True, exist_ok=True)
    config = {"format": "stateseer.run", "version": 1,
              "data": data_section(ds, text_col=text_col, label_col=label_col, seed=seed,
                                   max_tokens=max_tokens),
              "model": {**model, "n_classes": len(ds.classes), "vocab_size": len(vocab)}}
    atomic_write_text(run.config_path, json.dumps(config, indent=2))
    vocab.save(run.vocab_path)
    if metrics:
        run.update_metrics(**metrics)
    return run
