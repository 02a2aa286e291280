"""Prepare a run end to end (the demo's "trains or reuses"): train, record, abstract,
force, index and diagnose, each step skipped when its output is already there and up to
date."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from stateseer.core import layout
from stateseer.core.defaults import N_STATES

__all__ = ["DEMO_MAX_SECONDS", "prepare_run"]

#: the demo's training budget: on an idle 2-core machine the default LSTM trains in about
#: half a minute (34 s measured; 146 s beside the test suite); on a busier one the demo
#: still opens within minutes (the best model the budget allowed, said so) instead of
#: waiting out every epoch
DEMO_MAX_SECONDS = 240.0


def _train_or_reuse(run, dataset: str, arch: str, log: Callable[[str], None],
                    max_seconds: float | None = DEMO_MAX_SECONDS) -> None:
    from stateseer.rnn_models.train import TrainConfig, default_drift, train_run

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
    cap = "" if max_seconds is None else \
        f"; at most {max_seconds:.0f} s, then the best model so far (--max-seconds)"
    log(f"training {article} {arch.upper()} on {dataset} into {run.path} (about half a "
        f"minute on an idle 2-core machine{cap})")
    train_run(TrainConfig(dataset=dataset, arch=arch, max_seconds=max_seconds), run.path,
              force=True)
    m = run.metrics()
    if max_seconds is not None and m.get("train_seconds", 0) >= max_seconds:
        log(f"the {max_seconds:.0f} s budget ended the training after {m.get('epochs_run')} "
            f"epoch(s) (test accuracy {m.get('test_accuracy', float('nan')):.3f}); a busy "
            "machine? `stateseer train --dataset rotten_tomatoes --arch lstm --out RUN` "
            "trains without a budget")


def _record_if_stale(run, log: Callable[[str], None]) -> bool:
    """Record the run unless its traces come from its current model; whether it did."""
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run

    fresh = (run.traces_dir / layout.META).exists() and \
        Traces(run.traces_dir).meta.get("model_sha256") == run.model_sha256()
    if not fresh:
        log("recording traces")
        record_run(run)
    return not fresh


def _diagnose_if_stale(run, log: Callable[[str], None]) -> None:
    """Diagnose the test split unless its findings come from the run's current model."""
    from stateseer.app.workflows.diagnose import diagnose_run, load_findings

    doc = load_findings(run.path)
    if doc is not None and doc.get("model_sha256") == run.model_sha256():
        return
    log("diagnosing the test split (the Findings tab)")
    doc = diagnose_run(run.path)
    n = doc["n_significant"]
    log(f"{n} significant finding{'' if n == 1 else 's'} on the test split")


def prepare_run(run_dir: str | Path, *, dataset: str = "rotten_tomatoes", arch: str = "lstm",
                n_states: int | str = N_STATES, log: Callable[[str], None] = print,
                max_seconds: float | None = DEMO_MAX_SECONDS) -> dict[str, Any]:
    """Train, record and abstract ``run_dir`` unless each step's output is already there
    and up to date; then the forcing figures (when the model allows) and the index
    (:func:`~stateseer.app.workflows.abstract.abstract_workflow` with ``reuse``); then the
    test split's findings (``stateseer diagnose``, the explorer's first tab) unless they
    are there for the run's current model.

    Parameters
    ----------
    run_dir : str or Path
    dataset, arch : str
        What to train when the run holds no model yet.
    n_states : int or 'auto'
        Abstract states.
    log : callable
        Receives one progress line per step.
    max_seconds : float, optional
        The training's time budget (:data:`DEMO_MAX_SECONDS`; ``None``: none).

    Returns
    -------
    dict
        The abstraction's summary (:func:`abstract_workflow`'s).
    """
    from stateseer.app.workflows.abstract import abstract_workflow
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(run_dir)
    _train_or_reuse(run, dataset, arch, log, max_seconds)
    recorded = _record_if_stale(run, log)
    out = abstract_workflow(run.path, n_states=n_states, reuse=not recorded, log=log,
                            progress=log)
    _diagnose_if_stale(run, log)
    m = run.metrics()
    log(f"test accuracy {m.get('test_accuracy', float('nan')):.3f}; label fidelity "
        f"{out.get('label_fidelity', float('nan')):.3f}; simulation fidelity "
        f"{out.get('simulation_fidelity', float('nan')):.3f} (by chance "
        f"{out.get('simulation_chance') or float('nan'):.3f}); forcing agreement "
        f"{out.get('forcing_agreement', float('nan')):.3f}")
    return out
