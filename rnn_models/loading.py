"""Model loading: the one function that turns a run directory into its model.

:func:`load_model` dispatches on the ``model`` section of ``config.json``:

- a built-in architecture (``arch``, written by ``stateseer train``): the classifier is
  rebuilt and ``model.pt`` loaded;
- ``kind: "factory"`` (``stateseer create --model MODULE:FACTORY``): the factory is called
  again (:func:`stateseer.rnn_models.factory.load_factory`);
- ``kind: "imported"`` (``stateseer import-traces``): there is no model; a one-line
  :class:`~stateseer.core.imported.NoModelError` says which features need one;
- any other custom description (``create_run(..., model={"arch": "custom:..."})``): the
  model object must be passed to each feature; a one-line error says how.

This is the only place that turns a run directory (:class:`stateseer.core.rundir.RunDir`)
into a torch model; the run directory itself is a torch-free file format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from stateseer.core.errors import CheckpointError, DataError
from stateseer.core.imported import NoModelError
from stateseer.core.reading import regular_size
from stateseer.core.rundir import MODEL_PATHS, RunDir, located_path

__all__ = ["load_model", "model_kind"]


def model_kind(run: RunDir) -> str:
    """``"builtin"``, ``"factory"``, ``"imported"`` or ``"custom"`` (see the module doc)."""
    m = run.config.get("model")
    if not isinstance(m, dict):
        return "builtin"
    kind = m.get("kind")
    if kind in ("factory", "imported"):
        return str(kind)
    if kind == "object" or str(m.get("arch", "")).startswith("custom"):
        return "custom"
    return "builtin"


#: the largest ``model.pt`` loaded (64 GiB; a recurrent classifier is far smaller)
MODEL_LIMIT = 64 << 30


def _state_dict(run: RunDir) -> dict[str, Any]:
    """``model.pt`` as a state_dict of tensors, loaded with ``weights_only=True``."""
    if not run.model_path.exists():
        raise CheckpointError(
            f"{run.model_path} not found; train the run first with `stateseer train`"
        )
    try:
        regular_size(run.model_path, MODEL_LIMIT)
    except DataError as exc:
        raise CheckpointError(f"{exc}; restore the run's model.pt") from None
    try:
        state = torch.load(run.model_path, map_location="cpu", weights_only=True)
    except Exception:  # any failure to unpickle untrusted bytes means "corrupt"
        raise CheckpointError(
            f"{run.model_path} is corrupt or not a PyTorch state_dict "
            f"({_why_unreadable(run.model_path)}); retrain the run with `stateseer train`"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise CheckpointError(
            f"{run.model_path} does not hold a state_dict of tensors; save "
            "model.state_dict(), not the model object"
        )
    bad = next((k for k, v in state.items()
                if v.is_floating_point() and not bool(torch.isfinite(v).all())), None)
    if bad is not None:
        raise CheckpointError(
            f"{run.model_path} holds NaN or infinite values in {bad}: the training "
            "diverged; retrain the run (e.g. with a lower --lr)")
    return state


def _why_unreadable(path: Path) -> str:
    """What a checkpoint that ``torch.load`` refused looks like, from its first bytes:
    torch's own messages are internal ("internal miniz error", a bare number)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    if not head:
        return "it is empty"
    if head.startswith(b"PK"):
        import zipfile

        try:
            with zipfile.ZipFile(path) as zf:
                whole = zf.testzip() is None
        except (OSError, zipfile.BadZipFile):
            whole = False
        return ("it holds objects other than tensors, which loading with weights_only "
                "refuses: save model.state_dict(), not the model" if whole
                else "its zip archive is truncated or damaged")
    if head[:1] == b"\x80":
        return "its pickle is truncated or damaged"
    return f"it is not a PyTorch file: it starts with {head[:8]!r}"


def _check_vocab(run: RunDir) -> None:
    """Refuse a ``vocab.json`` other than the one ``config.json`` was trained with."""
    want = run.config.get("vocab_sha256")
    if not want or not run.vocab_path.exists():
        return  # runs trained before the hash was stored; a missing file is reported later
    from stateseer.core.rundir import sha256_file

    if sha256_file(run.vocab_path) != want:
        raise CheckpointError(
            f"{run.vocab_path} is not the vocabulary {run.config_path} was trained with "
            "(sha256 differs; an interrupted `train --force` or a copied file?); retrain "
            "the run or restore the matching vocab.json"
        )


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


def load_model(run: RunDir | str | Path, *, device: str | torch.device = "cpu") -> Any:
    """The run's model in eval mode: built-in, from its factory, or refused in one line.

    Parameters
    ----------
    run : RunDir or str or Path
        The run directory.
    device : str or torch.device, default 'cpu'
        Where the returned model lives.

    Returns
    -------
    torch.nn.Module or object
        In eval mode (any architecture of :data:`stateseer.rnn_models.archs.ARCHITECTURES`); a
        factory run's model is whatever its factory returns.

    Raises
    ------
    CheckpointError
        Missing, corrupt, or not matching the architecture in ``config.json``; a factory
        that cannot be imported or called (:class:`stateseer.rnn_models.factory.FactoryError`); an
        imported run (:class:`~stateseer.core.imported.NoModelError`); a custom run
        whose model object was not passed.
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    kind = model_kind(run)
    if kind == "imported":
        raise NoModelError.for_run(run.path)
    if kind == "factory":
        from stateseer.rnn_models.factory import load_factory

        spec = dict(run.config["model"])  # its paths kept relative to the run
        spec.update({k: located_path(spec[k], run.path) for k in MODEL_PATHS
                     if isinstance(spec.get(k), str)})
        model = load_factory(spec)
        if spec.get("prefix_stride"):  # `create --prefix-stride K`: what the run recorded
            model.prefix_stride = int(spec["prefix_stride"])
        return model.to(device) if callable(getattr(model, "to", None)) else model
    if kind == "custom":
        m = run.config["model"]
        name = m.get("class") or m.get("arch")
        raise CheckpointError(
            f"{run.path} was created for your own model ({name}) without a factory, so "
            "stateseer cannot rebuild it; pass the model object (e.g. record_run(run, "
            "model=obj)) or re-create the run with `stateseer create RUN --model "
            "MODULE:FACTORY`")
    return _builtin(run, device)


def _builtin(run: RunDir, device: str | torch.device) -> Any:
    """Any registered architecture (:data:`stateseer.rnn_models.archs.ARCHITECTURES`) from
    ``config.json``'s model section and ``model.pt``, in eval mode."""
    m = run.config.get("model")
    if not isinstance(m, dict):
        raise CheckpointError(f"{run.config_path} has no 'model' section; retrain the run")
    _check_vocab(run)
    state = _state_dict(run)
    from stateseer.rnn_models.archs import build_model

    try:
        model = build_model(m, run.path)
    except (KeyError, ValueError, TypeError) as exc:
        raise CheckpointError(
            f"{run.config_path} has an invalid model section ({exc}); retrain the run"
        ) from None
    _check_match(run, model.state_dict(), state)
    _check_vocab_size(run, m)
    model.load_state_dict(state)
    model.eval()
    return model.to(device)


def _check_vocab_size(run: RunDir, m: dict[str, Any]) -> None:
    """Refuse a ``vocab.json`` whose token count is not the embedding's row count (a run
    trained before the vocabulary hash was stored has only this check)."""
    n = m.get("vocab_size")
    if not isinstance(n, int) or not run.vocab_path.exists():
        return
    have = len(run.vocab_tokens())
    if have != n:
        raise CheckpointError(
            f"{run.vocab_path} holds {have:,} tokens but the model in {run.model_path} "
            f"embeds {n:,}; it is not this model's vocabulary — restore the matching "
            "vocab.json or retrain the run")
