"""Abstract a run end to end: the abstraction (a count or ``auto``), then the forcing
figures, then the nearest-context index, on one engine.

The one road for ``stateseer abstract``, ``stateseer demo`` and :func:`prepare_run
<stateseer.app.workflows.prepare.prepare_run>`. The abstraction writes ``metrics.json``
(its figures, with ``auto`` when the count was chosen); forcing adds its own figures.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stateseer.core import layout
from stateseer.core.defaults import AUTO_CAP, N_STATES
from stateseer.core.errors import StateseerError

__all__ = ["SUMMARY_KEYS", "abstract_workflow", "has_predictions", "imported_params"]

#: the figures of :func:`abstract_workflow`'s summary, when the abstraction has them
SUMMARY_KEYS = ("n_states", "label_fidelity", "simulation_fidelity", "simulation_chance",
                "simulation_kappa", "state_purity",
                "state_coverage", "transition_coverage", "evaluated_on", "seconds")


def _traces_meta(run: str | Path) -> dict[str, Any]:
    """The run's traces ``meta.json``, or ``{}`` where it is missing or damaged (the
    abstraction itself reports that)."""
    try:
        doc = json.loads(layout.RunLayout(run).traces_meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def has_predictions(run: str | Path) -> bool:
    """False for a run imported without per-step probabilities (no predictions)."""
    return _traces_meta(run).get("proba", True) is not False


def imported_params(run: str | Path, params: dict[str, Any],
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``params`` for :func:`~stateseer.abstraction.pipeline.abstract_run`, changed for a
    run without predictions: nothing to split by or to weigh margins with."""
    if has_predictions(run) or (params.get("features", "margin") != "margin"
                                and not params.get("split_by_prediction", True)):
        return params
    if log:
        log("the imported traces have no probabilities (no proba.npy): clustering the "
            "hidden states (--features pca) without splitting by prediction; fidelity "
            "figures are not meaningful")
    return {**params, "features": "pca", "split_by_prediction": False}


def abstract_workflow(run: str | Path, *, n_states: int | str = N_STATES, cap: int = AUTO_CAP,
                      forcing: bool = True, index: bool = True, reuse: bool = False,
                      cluster: Any = None, log: Callable[[str], None] | None = None,
                      progress: Callable[[str], None] | None = None,
                      **params: Any) -> dict[str, Any]:
    """Abstract ``run``, measure forcing and index its training contexts.

    Parameters
    ----------
    run : str or Path
        A recorded run.
    n_states : int or 'auto'
        As for :func:`~stateseer.abstraction.pipeline.abstract_run` (``cap`` too).
    forcing, index : bool
        Also measure forcing agreement (skipped with a note when the model cannot be
        forced, e.g. imported traces) and build the nearest-context index (kept when it is
        up to date with the traces).
    reuse : bool
        Keep an abstraction (and forcing figures) that the run's current model produced,
        instead of fitting again (the demo's "trains or reuses").
    cluster : str or Engine, optional
        One engine for every step (``local``, ``tcp://…``; default: this process).
    log : callable, optional
        Receives the notes (the ``auto`` choice, a skipped step).
    progress : callable, optional
        Receives one line as each step starts (the demo narrates; the CLI does not).
    **params
        For ``abstract_run`` (``method``, ``features``, ``pca`` ...).

    Returns
    -------
    dict
        :data:`SUMMARY_KEYS` of the abstraction, ``auto`` (``cap``, ``reason``) when the
        count was chosen, ``forcing_agreement`` when measured, and ``predictions: False``
        (with the fidelity keys None) for a run without predictions.
    """
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.core.engine import engine_scope

    say = log or (lambda _line: None)
    step = progress or (lambda _line: None)
    params = imported_params(run, params, say)
    kept = _current_figures(run) if reuse else None
    with engine_scope(cluster) as engine:
        if kept is None:
            step(f"abstracting into {n_states} states")
            metrics = abstract_run(run, n_states=n_states, cap=cap, cluster=engine,
                                   **params).metrics
        else:
            step("reusing the abstraction of this model")
            metrics = kept
        out = {k: metrics[k] for k in SUMMARY_KEYS if k in metrics}
        _say_all(size_notes(metrics, _train_steps(run)) if kept is None else [], say)
        if not has_predictions(run):  # imported without proba: nothing to be faithful to
            out.update(dict.fromkeys(("label_fidelity", "simulation_fidelity",
                                      "simulation_chance", "simulation_kappa",
                                      "state_purity")), predictions=False)
        if "auto" in metrics:
            say(f"--states auto {metrics['auto']['reason']}")
            out["auto"] = {k: metrics["auto"][k] for k in ("cap", "reason")}
        if forcing and kept is not None and "forcing_agreement" in kept:
            out["forcing_agreement"] = kept["forcing_agreement"]
        elif forcing:
            step("forcing states to their centroids (interventional faithfulness)")
            from stateseer.app.workflows.forcing import measure_forcing

            try:
                out["forcing_agreement"] = measure_forcing(
                    run, cluster=engine)["forcing_agreement"]
            except StateseerError as exc:  # e.g. imported traces: the abstraction stays
                say(f"state forcing skipped ({exc})")
        if index:
            step("indexing training contexts")
            from stateseer.app.workflows.contexts import context_index
            from stateseer.core.traces import Traces
            from stateseer.rnn_models.run import ModelRun

            r = ModelRun(run)
            context_index(r, Traces(r.traces_dir), cluster=engine)
    return out


#: training steps per abstract state below which a count is too many for the data: most
#: (state, token) pairs are then seen once or twice, and the FSM's transitions are noise
MIN_STEPS_PER_STATE = 20


def size_notes(metrics: dict[str, Any], train_steps: int) -> list[str]:
    """One line each where the state count does not suit the data: fewer states fitted
    than asked (the training split has fewer distinct hidden states), or fewer than
    :data:`MIN_STEPS_PER_STATE` training steps per state.

    >>> size_notes({"n_states": 39, "n_states_requested": 40}, 120)[0][:40]
    'k-means found 39 distinct states of the '
    >>> size_notes({"n_states": 5000, "n_states_requested": 5000,
    ...             "state_coverage": 0.417}, 17249)[0][:46]
    '5000 states for 17,249 training steps (3.4 per'
    >>> size_notes({"n_states": 40, "n_states_requested": 40}, 10_000)
    []
    """
    out = []
    got, asked = metrics.get("n_states"), metrics.get("n_states_requested")
    if isinstance(got, int) and isinstance(asked, int) and got < asked:
        out.append(f"k-means found {got} distinct states of the {asked} asked: the training "
                   f"split holds fewer distinct hidden states; the abstraction has {got}")
    if isinstance(got, int) and got and train_steps and \
            train_steps / got < MIN_STEPS_PER_STATE:
        cover = metrics.get("state_coverage")
        seen = f"; state coverage {cover:.2f}" if isinstance(cover, float) else ""
        fewer = max(1, train_steps // MIN_STEPS_PER_STATE)
        out.append(f"{got} states for {train_steps:,} training steps "
                   f"({train_steps / got:.1f} per state): most transitions are seen once or "
                   f"twice{seen}; ask for at most {fewer} (--states auto chooses)")
    return out


def _say_all(lines: list[str], say: Callable[[str], None]) -> None:
    for line in lines:
        say(line)


def _train_steps(run: str | Path) -> int:
    """The training split's recorded steps (0 when unknown)."""
    try:
        return int(_traces_meta(run)["splits"]["train"]["n_steps"])
    except (KeyError, TypeError, ValueError):
        return 0


def _current_figures(run: str | Path) -> dict[str, Any] | None:
    """The run's abstraction figures when its saved abstraction came from the current
    model's current traces, else None."""
    from stateseer.rnn_models.run import ModelRun

    r = ModelRun(run)
    try:
        sha = r.model_sha256()
        traces = json.loads((r.traces_dir / layout.META).read_text())
        info = json.loads((r.abstraction_dir / layout.META).read_text())["info"]
        figures = r.metrics().get("abstraction")
    except (OSError, ValueError, KeyError, TypeError, StateseerError):
        return None
    if traces.get("model_sha256") != sha or info.get("model_sha256") != sha \
            or not isinstance(figures, dict):
        return None
    return figures
