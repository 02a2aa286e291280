"""A run directory with its model: :class:`ModelRun`, and the two ways to create one
for a model trained outside stateseer.

The run directory's file format is :class:`~stateseer.core.rundir.RunDir`
(torch-free; ``abstraction`` reads it). :class:`ModelRun` adds what needs the model side:
the model itself (built in, a user's factory, or an object), the vocabulary, and the data
set as the model reads it (its class order, its own tokeniser). Importing this module does
not import torch; :meth:`ModelRun.load_model` does.

``create_model_run`` (``stateseer create``)
    your own model from a factory or an object: vocabulary, classes and tokeniser are
    taken from the model;
``create_run``
    a free description of a model you will pass to each command yourself.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stateseer.core.atomic import atomic_write_text
from stateseer.core.errors import StateseerError
from stateseer.core.rundir import MODEL_PATHS, RunDir, data_section, portable_path
from stateseer.rnn_models.factory import (
    FactoryError,
    check_model_sizes,
    fingerprints,
    model_classes,
    model_tokenizer,
    obtain_model,
    reorder_classes,
    vocabulary_of,
)

if TYPE_CHECKING:
    from stateseer.rnn_models.datasets import TextDataset
    from stateseer.rnn_models.tokenizers import Vocab

__all__ = ["ModelRun", "create_model_run", "create_run"]


class ModelRun(RunDir):
    """A run directory with its model, vocabulary and data set.

    ``dataset()`` applies the class order of ``config.json`` (the model's) and, for
    ``data.tokenizer == "model"``, tokenises with the model's own ``tokenize``; the model
    is loaded once and cached. Pass it to :func:`stateseer.rnn_models.record.record_in_process`.

    Parameters
    ----------
    path : str or Path
        The run directory.
    """

    _model: Any = None
    _model_key: Any = None

    def load_model(self, **kwargs: Any) -> Any:
        """The run's model in eval mode (:func:`~stateseer.rnn_models.loading.load_model`),
        loaded again only when ``model.pt`` or ``config.json`` changed on disk.

        Raises
        ------
        CheckpointError
            Missing, corrupt or mismatching model files (one line).
        """
        key = (self._stamp(), tuple(sorted(kwargs.items())))
        if self._model is None or (self._model_key is not None and key != self._model_key):
            from stateseer.rnn_models.loading import load_model

            self._model, self._model_key = load_model(self, **kwargs), key
        return self._model

    def _stamp(self) -> tuple:
        out = []
        for p in (self.model_path, self.config_path):
            try:
                st = p.stat()
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return tuple(out)

    def keep_fingerprints(self, model: Any) -> dict[str, str]:
        """Keep in ``config.json`` the fingerprints of ``model``, the model the run's traces
        were just recorded with (``stateseer record`` calls it once they are in place).

        A factory run's ``model`` section holds the SHA-256 of the factory's module file and
        of the built model's weights (:func:`~stateseer.rnn_models.factory.fingerprints`);
        every later build is compared with them, and a difference warns that the traces
        may not match the model. Recording again renews them, so the warning stops.

        Parameters
        ----------
        model : object
            The model that recorded the traces.

        Returns
        -------
        dict
            The fingerprints kept; empty for a run whose model is not a factory's.
        """
        section = self.config.get("model")
        if not isinstance(section, dict) or section.get("kind") != "factory":
            return {}
        new = fingerprints(section, model, self.path)
        if any(section.get(k) != v for k, v in new.items()):
            self.update_config(model={**section, **new})
        return new

    def vocab(self) -> Vocab:
        """The run's vocabulary (``vocab.json``)."""
        from stateseer.rnn_models.tokenizers import Vocab

        return Vocab.load(self.vocab_path)

    def dataset(self) -> TextDataset:
        """The run's data set as the model reads it (the options of ``config.json``)."""
        from stateseer.rnn_models.datasets import load_dataset, truncated

        d = self.data
        model_tok = d.get("tokenizer") == "model"
        ds = load_dataset(d["name"], text_col=d.get("text_col", "text"),
                          label_col=d.get("label_col", "label"),
                          tokenizer=d.get("load_tokenizer", "space") if model_tok
                          else d.get("tokenizer", "word"),
                          seed=d.get("seed", 0),
                          max_tokens=None if model_tok else d.get("max_tokens"))
        if model_tok:
            fn = model_tokenizer(self.load_model())
            if fn is None:
                raise FactoryError(f"{self.config_path} says the model tokenises "
                                   "(tokenizer 'model') but the model has no `tokenize`; "
                                   "add it or re-create the run with --tokenizer word")
            ds = dataclasses.replace(ds, tokenizer="model",
                                     _tokens=[list(fn(t)) for t in ds.texts])
        if d.get("truncate"):
            ds = truncated(ds, int(d["truncate"]))
        classes = d.get("classes")
        return reorder_classes(ds, classes) if classes else ds


def _load_data(dataset: Any, text_col: str, label_col: str, tokenizer: str, seed: int,
               max_tokens: int | None) -> Any:
    if not isinstance(dataset, str):
        return dataset
    from stateseer.rnn_models.datasets import load_dataset

    kind, sep, rest = dataset.partition(":")
    if sep and kind in ("csv", "jsonl") and rest:  # later commands may run elsewhere
        dataset = f"{kind}:{Path(rest).expanduser().resolve()}"

    return load_dataset(dataset, text_col=text_col, label_col=label_col,
                        tokenizer=tokenizer, seed=seed, max_tokens=max_tokens)


def create_model_run(path: str | Path, dataset: Any, model: Any, *, vocab: Any = None,
                     text_col: str = "text", label_col: str = "label",
                     tokenizer: str | None = None, seed: int = 0,
                     max_tokens: int | None = 2000, force: bool = False,
                     base_dir: str | Path | None = None,
                     expect_accuracy: float | None = None,
                     prefix_stride: int | None = None) -> ModelRun:
    """Create a run directory for your own model (``stateseer create``'s Python API).

    Parameters
    ----------
    path : str or Path
        The run directory to create.
    dataset : str or TextDataset
        A data-set name for :func:`stateseer.rnn_models.datasets.load_dataset` (``csv:PATH`` ...)
        or a loaded data set.
    model : str or callable or object
        ``"MODULE:FACTORY"``, an importable factory function, or a model object (then
        later commands need the object again: ``record_run(run, model=obj)``).
    vocab : list of str or Vocab, optional
        The model's vocabulary when the model declares none (``vocab`` attribute).
    text_col, label_col, seed, max_tokens
        Passed to ``load_dataset``.
    tokenizer : str, optional
        ``word``/``char``/``space``; default: the model's ``tokenize`` when it has one
        (``"model"``), else ``word``.
    force : bool
        Overwrite an existing run.
    base_dir : str or Path, optional
        Where a module name is found later (default: the current directory).
    expect_accuracy : float, optional
        The test accuracy you measured on your model; ``record`` warns when it records
        another (stateseer would then explain a model that is not yours).
    prefix_stride : int, optional
        For a model read prefix by prefix (a
        :class:`~stateseer.rnn_models.classifier.ClassifierAdapter`): read every K-th
        prefix and the last (kept in ``config.json``; every command reads it so).

    The model is run once on a two-token probe first: an embedding with fewer rows than
    the vocabulary has tokens, or a head that gives another number of class scores than
    there are classes, is refused in one line before anything is written.

    When the model offers ``predict(ids, lengths) -> logits`` (its own classification, as
    you run it: ``RecurrentAdapter(..., model=net)`` or a ``ClassifierAdapter``), its
    answers on up to 256 test inputs are compared with the prediction the adapter reads at
    the last token; a disagreement above 1 % (a head that pools over all steps, say) is
    refused in one line with its rate, naming ``ClassifierAdapter``; the agreement is kept
    in ``config.json``.

    Returns
    -------
    ModelRun
    """
    run = ModelRun(path)
    run.require_new(force)
    base = Path(base_dir or os.getcwd()).resolve()
    obj, section = obtain_model(model, base)
    if prefix_stride is not None:
        if not hasattr(obj, "prefix_stride"):
            raise FactoryError(f"--prefix-stride {prefix_stride} applies to a model read "
                               f"prefix by prefix (ClassifierAdapter); {type(obj).__name__} "
                               "reads every step in one pass already")
        if isinstance(prefix_stride, bool) or int(prefix_stride) < 1:
            raise FactoryError(f"--prefix-stride {prefix_stride}: give a whole number >= 1")
        obj.prefix_stride = section["prefix_stride"] = int(prefix_stride)
    tok_fn = model_tokenizer(obj)
    use_model_tok = tokenizer in (None, "model") and tok_fn is not None
    if tokenizer == "model" and tok_fn is None:
        raise FactoryError("--tokenizer model needs a `tokenize(text)` method on the model; "
                           "add it or choose word, char or space")
    load_tok = "space" if use_model_tok else (tokenizer or "word")
    ds = _load_data(dataset, text_col, label_col, load_tok, seed,
                    None if use_model_tok else max_tokens)
    declared = model_classes(obj)
    if declared is None and len(ds.classes) != obj.n_classes:
        raise FactoryError(f"the model has n_classes={obj.n_classes} but the data set has "
                           f"{len(ds.classes)} classes {ds.classes}; declare `classes` on the "
                           "model or use matching data")
    if declared is not None:
        ds = reorder_classes(ds, declared)
    tokens = vocabulary_of(obj, vocab, ds)
    check_model_sizes(obj, tokens, ds.classes, declared=declared is not None)
    data = data_section(ds, text_col=text_col, label_col=label_col, seed=seed,
                        max_tokens=max_tokens, base=run.path)
    if use_model_tok:
        data.update(tokenizer="model", load_tokenizer=load_tok)
    section.setdefault("arch", type(obj).__name__)  # what the run header shows
    section.update({k: portable_path(section[k], run.path) for k in MODEL_PATHS
                    if isinstance(section.get(k), str)})
    section.update(n_classes=int(obj.n_classes), vocab_size=len(tokens),
                   classes=list(ds.classes),
                   tokenizer="model" if use_model_tok else load_tok)
    if expect_accuracy is not None:
        section["expect_accuracy"] = float(expect_accuracy)
    agreement = own_agreement(obj, tokens, ds)
    if agreement is not None:
        section["own_agreement"] = agreement
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run.vocab_path, json.dumps({"tokens": tokens}, ensure_ascii=False))
    config = {"format": "stateseer.run", "version": 1, "data": data, "model": section}
    atomic_write_text(run.config_path, json.dumps(config, indent=2))
    if section["kind"] == "object":
        run._model = obj
    return run


def own_agreement(obj: Any, tokens: list[str], ds: Any, n: int = 256
                  ) -> dict[str, Any] | None:
    """How often the model's own ``predict(ids, lengths)`` agrees with the prediction its
    head gives the last traced state, on up to ``n`` test (else validation) inputs; None
    when the model has no ``predict``. Warns (one line) below 99 %."""

    import numpy as np
    import torch

    from stateseer.rnn_models.batching import pad_batch
    from stateseer.rnn_models.tokenizers import Vocab

    predict = getattr(obj, "predict", None)
    if not callable(predict):
        return None
    split = "test" if len(ds.splits.get("test", ())) else "val"
    rows = np.asarray(ds.splits.get(split, ()))[:n]
    vocab = Vocab(list(tokens))
    seqs = [vocab.encode(ds.tokens[i]) for i in rows.tolist()]
    seqs = [q for q in seqs if len(q)]
    if not seqs:
        return None
    ids, lengths = pad_batch(seqs, np.arange(len(seqs)), pad=vocab.pad_id or 0)
    ids_t, len_t = torch.from_numpy(ids), torch.from_numpy(lengths)
    with torch.no_grad():
        _, proba = obj.trace(ids_t, len_t)  # the head after every token
        last = proba[torch.arange(len(seqs)), len_t - 1].argmax(1).cpu().numpy()
        own = predict(ids_t, len_t)
    own = np.asarray(own.detach().cpu() if hasattr(own, "detach") else own).argmax(1)
    agree = float((own == last).mean())
    if agree < 0.99:
        raise FactoryError(
            f"your model's own predictions differ from what the adapter reads at the last "
            f"token on {1 - agree:.0%} of {len(seqs)} {split} inputs: the head reads more "
            "than the last state (mean-pooling, a bidirectional net, an END token ...), so "
            "stateseer would explain another classifier; wrap the whole network instead: "
            "ClassifierAdapter(net, vocab=..., tokenize=..., classes=...) reads its own "
            "prediction of every prefix (stateseer.ClassifierAdapter)")
    return {"split": split, "n_inputs": len(seqs), "agreement": round(agree, 4)}


def create_run(path: str | Path, ds, vocab, *, model: dict[str, Any],
               text_col: str = "text", label_col: str = "label", seed: int = 0,
               max_tokens: int | None = 2000, metrics: dict[str, Any] | None = None,
               force: bool = False) -> ModelRun:
    """A run directory for a model trained outside stateseer (bring your own model).

    Writes ``config.json`` (the data set, so every command can reload the same splits,
    and ``model``, a free description of your model) and ``vocab.json``, plus
    ``metrics.json`` when ``metrics`` is given. Then record it with
    ``record_run(run, model=your_adapter)``. ``model.pt`` is not written: it is reserved
    for the built-in classifiers that :meth:`ModelRun.load_model` rebuilds; keep your weights
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
    ModelRun
    """
    if not isinstance(model, dict) or not model.get("arch"):
        raise StateseerError("model must be a dict with at least an 'arch' name, e.g. "
                             "{'arch': 'custom:MyNet'}")
    run = ModelRun(path)
    run.require_new(force)
    run.path.mkdir(parents=True, exist_ok=True)
    config = {"format": "stateseer.run", "version": 1,
              "data": data_section(ds, text_col=text_col, label_col=label_col, seed=seed,
                                   max_tokens=max_tokens, base=run.path),
              "model": {**model, "n_classes": len(ds.classes), "vocab_size": len(vocab)}}
    atomic_write_text(run.config_path, json.dumps(config, indent=2))
    vocab.save(run.vocab_path)
    if metrics:
        run.update_metrics(**metrics)
    return run
