"""How a run is trained again by `stateseer repair`: the settings it was trained with,
its configuration moved to a new run, its data set whole and written for retraining."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.core.errors import StateseerError
from stateseer.core.rundir import RELATIVE, located, located_path, portable, portable_path

__all__ = ["training_settings"]


def training_settings(run: Any) -> dict[str, Any] | None:
    """The ``stateseer train`` settings ``run`` was trained with (``config.json``'s
    ``config``), or None for a run stateseer cannot retrain (``create``,
    ``import-traces``)."""
    cfg = run.config.get("config")
    if not (isinstance(cfg, dict) and cfg.get("arch")):
        return None
    if cfg.get("init"):  # the checkpoint, kept relative to the run
        cfg = {**cfg, "init": f"hf:{located_path(cfg['init'][3:], run.path)}"}
    if (run.config.get("data") or {}).get("paths") == RELATIVE:
        return {**cfg, "dataset": located(cfg.get("dataset", ""), run.path)}
    return cfg


def _retrainable(src: Any) -> dict[str, Any]:
    """:func:`training_settings`, or the one-line refusal of a run stateseer cannot
    retrain."""
    cfg = training_settings(src)
    if cfg is None:
        raise StateseerError(f"{src.path} was not trained by stateseer (a run of `stateseer "
                             "create` or `import-traces`): repair retrains the model, so it "
                             "needs a run of `stateseer train`; retrain your own model on "
                             "the edited data yourself")
    return cfg


def _train_config(src: Any, data: Path, settings: dict[str, list] | None = None) -> Any:
    from stateseer.rnn_models.train import TrainConfig, reproducing_prefix_loss

    cfg = _retrainable(src)
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    kept = {k: v for k, v in cfg.items() if k in names}
    kept["prefix_loss"] = reproducing_prefix_loss(src.config)  # the run's own objective
    changed = {k: new for k, (_old, new) in (settings or {}).items()}
    return TrainConfig(**{**kept, **changed, "dataset": f"jsonl:{data}", "tokenizer": "word",
                          "text_col": "text", "label_col": "label"})


def _whole(src: Any) -> Any:
    """The run's data set with each input's tokens whole (a truncating run's cut is a
    training setting, kept in the config, not an edit of the data)."""
    ds = src.dataset()
    return dataclasses.replace(ds, _tokens=None) if src.truncate else ds


def _moved_config(src: Any, dest: Path) -> dict[str, Any]:
    """RUN's ``config.json`` for a run at ``dest``: the paths it keeps relative to the run
    (its data file, a checkpoint) made relative to ``dest``."""
    cfg = src.config
    data, settings = cfg.get("data") or {}, cfg.get("config") or {}
    if data.get("paths") == RELATIVE and isinstance(data.get("name"), str):
        data["name"] = portable(located(data["name"], src.path), dest)
        if isinstance(data.get("source"), dict) and "source" in data["source"]:
            data["source"]["source"] = data["name"].partition(":")[2]
        if isinstance(settings.get("dataset"), str):
            settings["dataset"] = portable(located(settings["dataset"], src.path), dest)
    if isinstance(settings.get("init"), str):
        settings["init"] = f"hf:{portable_path(located_path(settings['init'][3:], src.path), dest)}"
    return cfg


def _write_data(ds: Any, path: Path) -> Path:
    from stateseer.rnn_models.injection import Injected

    return Injected("repair", list(ds.texts), np.asarray(ds.labels), list(ds.classes),
                    dict(ds.splits)).write(path)


def _encoded(src: Any, ds: Any, rows: np.ndarray) -> list[np.ndarray]:
    """Rows ``rows`` of ``ds`` as RUN's model reads them: cut as the run cuts its inputs,
    encoded with its vocabulary."""
    vocab, limit = src.vocab(), src.truncate
    return [vocab.encode(ds.tokens[i][:limit]) for i in rows.tolist()]
