"""Compatibility module: :class:`Run` and :func:`create_run`.

The run directory's file format is :class:`rnn_models.formats.RunDir` (torch-free) and
model loading is :func:`rnn_models.loading.load_model`. :class:`Run` is a compatibility
alias that adds the model-side conveniences (``load_model``, ``vocab``, ``dataset``) on
top of :class:`RunDir`; new code should use ``RunDir`` and ``load_model`` directly.
Importing this module does not import torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .formats.atomic import atomic_write_text
from .formats.errors import StateseerError
from .formats.rundir import RunDir, data_section, sha256_file

__all__ = ["Run", "RunDir", "atomic_write_text", "create_run", "data_section", "sha256_file"]


class Run(RunDir):
    """A run directory with model-side conveniences (compatibility alias of :class:`RunDir`).

    Parameters
    ----------
    path : str or Path
    """

    def load_model(self, **kwargs: Any):
        """Build the model from ``config.json`` and load ``model.pt`` (eval mode).

        Delegates to :func:`rnn_models.loading.load_model` (which imports torch).
        """
        from .loading import load_model

        return load_model(self, **kwargs)

    def vocab(self):
        """The run's :class:`rnn_models.tokenizers.Vocab`."""
        from .tokenizers import Vocab

        return Vocab.load(self.vocab_path)

    def dataset(self):
        """Reload the run's data set with the options recorded in ``config.json``."""
        from .datasets import load_dataset

        d = self.data
        return load_dataset(
            d["name"], text_col=d.get("text_col", "text"), label_col=d.get("label_col", "label"),
            tokenizer=d.get("tokenizer", "word"), seed=d.get("seed", 0),
            max_tokens=d.get("max_tokens"),
        )


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
