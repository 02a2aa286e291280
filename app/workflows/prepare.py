"""Prepare a run end to end (the demo's "trains or reuses"): train, record, abstract,
force and index, each step skipped when its output is already there and up to date."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ...rnn_models.formats.errors import StateseerError

__all__ = ["prepare_run"]


def _train_or_reuse(run, dataset: str, arch: str, log: Callable[[str], None]) -> None:
    from ...rnn_models.train import TrainConfig, default_drift, train_run

    if run.exists() and run.model_path.exists():
        log(f"reusing the model in {run.path}")
        drift = default_drift(run.config)
        if drift:
            was = ", ".join(f"{k} {a}" for k, (a, _) in sorted(drift.items()))
            now = ", ".join(f"{k} {b}" for k, (_, b) in sorted(drift.items()))
            log(f"note: {run.path} was trained with {was}; today's default is {now} "
                f"(move it away, or delete it, to train today's default model)")
        return
    article = "a" if arch == "gru" else "an"  # "an LSTM", "an RNN"
    log(f"training {article} {arch.upper()} on {dataset} into {run.path} (a minute or two)")
    train_run(TrainConfig(dataset=dataset, arch=arch), run.path, force=True)


def _record_and_abstract(run, n_states: int, log: Callable[[str], None]) -> None:
    from ...abstraction.pipeline import abstract_run
    from ...rnn_models.formats.traces import Traces
    from ...rnn_models.record import record_run

    sha = run.model_sha256()
    fresh = (run.traces_dir / "meta.json").exists() and \
        Traces(run.traces_dir).meta.get("model_sha256") == sha
    if not fresh:
        log("recording traces")
        record_run(run)
    meta = run.abstraction_dir / "meta.json"
    if not fresh or not meta.exists() or \
            json.loads(meta.read_text())["info"].get("model_sha256") != sha:
        log(f"abstracting into {n_states} states")
        abstract_run(run, n_states=n_states)


def prepare_run(run_dir: str | Path, *, dataset: str = "rotten_tomatoes", arch: str = "lstm",
                n_states: int = 40, log: Callable[[str], None] = print) -> None:
    """Train, record and abstract ``run_dir`` unless each step's output is already there
    and up to date; then the forcing figures (when the model allows) and the index.

    Parameters
    ----------
    run_dir : str or Path
    dataset, arch : str
        What to train when the run holds no model yet.
    n_states : int
        Abstract states.
    log : callable
        Receives one progress line per step.
    """
    from ...rnn_models.formats.traces import Traces
    from ...rnn_models.run import ModelRun
    from .contexts import context_index
    from .forcing import measure_forcing

    run = ModelRun(run_dir)
    _train_or_reuse(run, dataset, arch, log)
    _record_and_abstract(run, n_states, log)
    if "forcing_agreement" not in run.metrics().get("abstraction", {}):
        log("forcing states to their centroids (interventional faithfulness)")
        try:
            measure_forcing(run.path)
        except StateseerError as exc:
            log(f"state forcing skipped ({exc})")
    log("indexing training contexts")
    context_index(run, Traces(run.traces_dir))
    m = run.metrics()
    a = m.get("abstraction", {})
    log(f"test accuracy {m.get('test_accuracy', float('nan')):.3f}; label fidelity "
        f"{a.get('label_fidelity', float('nan')):.3f}; simulation fidelity "
        f"{a.get('simulation_fidelity', float('nan')):.3f}; forcing agreement "
        f"{a.get('forcing_agreement', float('nan')):.3f}")
