"""Model loading: build a run's built-in classifier from ``config.json`` and ``model.pt``.

This is the only place that turns a run directory (:class:`rnn_models.formats.RunDir`)
into a torch model; the run directory itself is a torch-free file format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .formats.errors import CheckpointError
from .formats.rundir import RunDir
from .models import RNNClassifier

__all__ = ["load_model"]


def _state_dict(run: RunDir) -> dict[str, Any]:
    """``model.pt`` as a state_dict of tensors, loaded with ``weights_only=True``."""
    if not run.model_path.exists():
        raise CheckpointError(
            f"{run.model_path} not found; train the run first with `stateseer train`"
        )
    try:
        state = torch.load(run.model_path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any failure to unpickle untrusted bytes means "corrupt"
        first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc)
        raise CheckpointError(
            f"{run.model_path} is corrupt or not a PyTorch state_dict ({first}); "
            "retrain the run with `stateseer train`"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise CheckpointError(
            f"{run.model_path} does not hold a state_dict of tensors; save "
            "model.state_dict(), not the model object"
        )
    return state


def _check_match(run: RunDir, expected: dict[str, Any], state: dict[str, Any]) -> None:
    """Refuse a state_dict whose keys or shapes differ from the architecture's."""
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(expected) & set(state) if expected[k].shape != state[k].shape)
    if not (missing or unexpected or wrong):
        return
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing[:3])}")
    if unexpected:
        parts.append(f"unexpected {', '.join(unexpected[:3])}")
    for k in wrong[:2]:
        parts.append(f"{k} is {tuple(state[k].shape)} but config.json needs "
                     f"{tuple(expected[k].shape)}")
    raise CheckpointError(
        f"{run.model_path} does not match {run.config_path} ({'; '.join(parts)}); "
        "was model.pt copied from another run? retrain or restore the matching files"
    )


def load_model(run: RunDir | str | Path, *, device: str | torch.device = "cpu"
               ) -> RNNClassifier:
    """Build the model from ``config.json`` and load ``model.pt`` (eval mode).

    Parameters
    ----------
    run : RunDir or str or Path
        The run directory.
    device : str or torch.device, default 'cpu'
        Where the returned model lives.

    Returns
    -------
    RNNClassifier
        In eval mode.

    Raises
    ------
    CheckpointError
        Missing, corrupt, or not matching the architecture in ``config.json``.
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    m = run.config.get("model")
    if not isinstance(m, dict):
        raise CheckpointError(f"{run.config_path} has no 'model' section; retrain the run")
    state = _state_dict(run)
    try:
        model = RNNClassifier(
            m["arch"], m["vocab_size"], m["n_classes"], embed=m["embed"], hidden=m["hidden"],
            layers=m["layers"], dropout=0.0, state=m.get("state", "h"),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise CheckpointError(
            f"{run.config_path} has an invalid model section ({exc}); retrain the run"
        ) from None
    _check_match(run, model.state_dict(), state)
    model.load_state_dict(state)
    model.eval()
    return model.to(device)
