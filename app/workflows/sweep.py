"""Fidelity against the number of abstract states, and the ``--states auto`` choice.

For every candidate count the abstraction is fitted on the training split and measured
on one split (the test split by default) with the two figures that discriminate. The
candidates share one feature fit (the projection is fitted once,
:func:`stateseer.abstraction.abstractors.features.shared_projections`); the clustering runs per
candidate.

* **simulation fidelity** — the FSM alone, run on the tokens, ends in a state whose
  label is the RNN's final prediction — with a 95 % bootstrap interval over inputs;
* **forcing agreement** — the prediction survives when every hidden state is replaced by
  its abstract state's centroid (needs the model; ``None`` without one).

``auto`` picks the *knee* of the simulation-fidelity curve (Kneedle: the point furthest
above the chord of the normalised curve) among the candidates under a readability cap,
measured on the validation split so the test figures stay unbiased.

Files written by :func:`write_sweep`::

    DIR/sweep.json   list of {n_states, simulation_fidelity, simulation_fidelity_ci,
                     simulation_chance, simulation_kappa, forcing_agreement, seconds,
                     forcing_seconds} (``seconds``: fitting; the table adds forcing's)
    DIR/sweep.png    the curve with its intervals (matplotlib)
    DIR/sweep.html   the same, interactive (plotly, self-contained)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.abstractors.features import shared_projections
from stateseer.abstraction.analysis.metrics import (
    agreement_baseline,
    bootstrap_ci,
    choose_knee,
)
from stateseer.core import layout
from stateseer.core.defaults import AUTO_CAP
from stateseer.core.errors import StateseerError

__all__ = [
    "AUTO_CAP",
    "DEFAULT_STATES",
    "SweepPoints",
    "bootstrap_ci",
    "choose_knee",
    "default_candidates",
    "simulated_predictions",
    "simulation_agreement",
    "sweep_run",
    "sweep_table",
    "write_sweep",
]

DEFAULT_STATES = (4, 8, 16, 32, 40)


def simulation_agreement(ab: Any, tr: Any) -> np.ndarray:
    """Whether the FSM run on the tokens alone predicts what the RNN predicted.

    The FSM's own prediction is the abstraction's (probabilistic by default, as
    ``metrics.json`` reports it); an abstraction without one falls back to the label of
    the last state of the argmax path.

    Parameters
    ----------
    ab : Abstraction
        Holding ``simulated`` paths (and ``sim_predictions``) for ``tr``'s split.
    tr : SplitTraces

    Returns
    -------
    ndarray of bool of shape (n_inputs,)
    """
    return np.asarray(simulated_predictions(ab, tr) == np.asarray(tr.predictions), bool)


def simulated_predictions(ab: Any, tr: Any) -> np.ndarray:
    """The FSM's prediction for each of ``tr``'s inputs (see :func:`simulation_agreement`)."""
    if tr.name in getattr(ab, "sim_predictions", {}):
        return np.asarray(ab.sim_predictions[tr.name])
    fsm = ab.fsm
    return fsm.labels[fsm.final_states(ab.simulated[tr.name], tr.offsets)]


def _forcing_agreement(model: Any, ab: Any, traces: Any, split: str) -> float:
    from stateseer.abstraction.abstractors.centroids import state_centroids
    from stateseer.app.workflows.forcing import forcing_survival

    cent, _ = state_centroids(traces["train"].hidden, ab.states["train"], ab.fsm.n_states,
                              initial=traces.initial_hidden)
    ok = forcing_survival(model, ab, cent, traces[split],
                          layer=traces.meta.get("layer", -1))
    return float(ok.mean()) if len(ok) else 1.0


def _load(run: Any, split: str | None) -> tuple[Any, Any, list[str], str]:
    from stateseer.abstraction.pipeline import fresh_traces
    from stateseer.rnn_models.run import ModelRun

    run = run if isinstance(run, ModelRun) else ModelRun(run)
    if not run.exists():
        raise StateseerError(f"{run.path} is not a stateseer run (no config.json); create "
                             "one with `stateseer train`, `stateseer create` (your own model) "
                             "or `stateseer import-traces`")
    traces = fresh_traces(run)
    if traces.meta.get("proba") is False:
        raise StateseerError("a sweep measures how faithful each abstraction is to the "
                             "model's predictions, which traces imported without "
                             "probabilities (no proba.npy) do not have; import them with "
                             "proba.npy to sweep")
    split = split or traces.measured_split
    if split not in traces:
        raise StateseerError(f"the run has no recorded {split} inputs to measure on; record "
                             f"them with `stateseer record {run.path}`")
    if traces[split].n_inputs == 0:
        raise StateseerError(f"the run's data has no {split} inputs to measure on; choose "
                             f"another with --split")
    try:
        alphabet = list(json.loads(run.vocab_path.read_text(encoding="utf-8"))["tokens"])
    except (OSError, ValueError, KeyError, TypeError):
        raise StateseerError(f"{run.vocab_path} is missing or damaged; retrain the run") \
            from None
    return run, traces, alphabet, split


class SweepPoints(list):
    """The points of a sweep (a list of dicts, as :func:`sweep_run` documents), shown in a
    notebook as a table: states, simulation fidelity with its interval, chance agreement,
    Cohen's kappa, forcing agreement and seconds."""

    def _repr_html_(self) -> str:
        import html

        def cell(x: Any) -> str:
            if isinstance(x, list):
                return "[" + ", ".join(cell(v) for v in x) + "]"
            if isinstance(x, float):
                return f"{x:.3f}"
            return "—" if x is None else html.escape(str(x))
        keys = ("n_states", "simulation_fidelity", "simulation_fidelity_ci",
                "simulation_chance", "simulation_kappa", "forcing_agreement", "seconds")
        head = "".join(f"<th>{k.replace('_', ' ')}</th>" for k in keys)
        rows = "".join("<tr>" + "".join(f"<td>{cell(p.get(k))}</td>" for k in keys) + "</tr>"
                       for p in self)
        return f"<table style='font:13px sans-serif'><tr>{head}</tr>{rows}</table>"


def default_candidates(traces: Any, split_by_prediction: bool = True) -> list[int]:
    """The state counts a sweep measures by default: :data:`DEFAULT_STATES` less those too
    few to keep each state to one predicted class (at least that many, alone)."""
    from stateseer.abstraction.pipeline import min_states

    need = min_states(traces) if split_by_prediction else 1
    return [k for k in DEFAULT_STATES if k >= need] or [need]


def sweep_run(run: Any, states: Sequence[int] | None = None, *, split: str | None = None,
              forcing: bool = True, method: str = "kmeans", features: str = "margin",
              pca: int = 20, fallback: str = "displacement", split_by_prediction: bool = True,
              random_state: int = 0, simulation: str = "probabilistic",
              log: Callable[[str], None] | None = None,
              report: Callable[[str, int, int], None] | None = None) -> list[dict[str, Any]]:
    """Fit an abstraction per candidate state count and measure it on ``split``.

    Parameters
    ----------
    run : ModelRun or path
        A recorded run.
    states : sequence of int, optional
        Candidate numbers of abstract states (default :data:`DEFAULT_STATES`, less those
        too few to keep each state to one predicted class; candidates you name that are
        too few are refused before any work).
    split : str, optional
        Where the figures are measured (default: ``test``, or ``val`` where the data has
        no test inputs).
    forcing : bool
        Also measure forcing agreement (skipped, ``None``, when the model cannot be
        loaded or forced; the reason goes to ``log``).
    method, features, pca, fallback, split_by_prediction, random_state, simulation
        As for :func:`stateseer.abstraction.pipeline.abstract_run`.
    report : callable, optional
        ``report(stage, done, total)`` before each candidate and once at the end (the
        explorer's background job shows it).

    Returns
    -------
    list of dict
        One per candidate, ascending: ``n_states``, ``simulation_fidelity``,
        ``simulation_fidelity_ci`` [low, high], ``forcing_agreement``, ``seconds`` (fitting
        and simulating the abstraction) and ``forcing_seconds``.
    """
    from stateseer.abstraction.pipeline import fit_abstraction, min_states

    counts = sorted({int(k) for k in (DEFAULT_STATES if states is None else states)})
    if not counts or counts[0] < 1:
        raise StateseerError("--states needs positive state counts, e.g. 4,8,16,32,40")
    run, traces, alphabet, split = _load(run, split)
    if states is None:  # named candidates that are too few: fit_abstraction refuses them
        need = min_states(traces) if split_by_prediction else 1
        if log and counts[0] < need:
            log(f"left out {', '.join(str(k) for k in counts if k < need)} states: too few "
                f"for the {need} classes the model predicts")
        counts = default_candidates(traces, split_by_prediction)
    model = None
    if forcing:

        try:
            model = run.load_model()
        except StateseerError as exc:
            if log:
                log(f"forcing agreement skipped ({exc})")
    points = SweepPoints()
    with shared_projections():  # one feature fit for every candidate
        for n, k in enumerate(counts):
            if report:
                report(f"{k} states", n, len(counts))
            t0 = time.perf_counter()
            ab = fit_abstraction(traces, alphabet, n_states=k, method=method, pca=pca,
                                 features=features, fallback=fallback,
                                 simulation=simulation,
                                 split_by_prediction=split_by_prediction,
                                 splits=("train", split), random_state=random_state)
            points.append(_point(ab, k, traces, split, time.perf_counter() - t0,
                                 random_state))
            if model is not None:
                model = _add_forcing(points[-1], model, ab, traces, split, log)
            if log:
                log(f"{k} states: simulation fidelity {points[-1]['simulation_fidelity']:.3f}")
    if report:
        report("done", len(counts), len(counts))
    return points


def _point(ab: Any, k: int, traces: Any, split: str, seconds: float, seed: int
           ) -> dict[str, Any]:
    """One row of the sweep (forcing agreement still ``None``)."""
    tr = traces[split]
    sim = simulated_predictions(ab, tr)
    agree = sim == np.asarray(tr.predictions)
    lo, hi = bootstrap_ci(agree, seed=seed)
    base = agreement_baseline(sim, tr.predictions, len(traces.classes))
    return {"n_states": k, "simulation_fidelity": round(float(agree.mean()), 4),
            "simulation_fidelity_ci": [round(lo, 4), round(hi, 4)],
            "simulation_chance": base["chance"], "simulation_kappa": base["kappa"],
            "forcing_agreement": None, "seconds": round(seconds, 2), "forcing_seconds": 0.0}


def _add_forcing(point: dict[str, Any], model: Any, ab: Any, traces: Any, split: str,
                 log: Callable[[str], None] | None) -> Any:
    """Fill ``point``'s forcing agreement; the model, or None once it cannot be forced."""
    t1 = time.perf_counter()
    try:
        point["forcing_agreement"] = round(_forcing_agreement(model, ab, traces, split), 4)
    except StateseerError as exc:  # a model without the forcing methods
        if log:
            log(f"forcing agreement skipped ({exc})")
        return None
    point["forcing_seconds"] = round(time.perf_counter() - t1, 2)
    return model


def sweep_table(points: Sequence[dict[str, Any]]) -> str:
    """The sweep as a plain-text table (one row per candidate)."""
    head = (f"{'states':>6}  {'simulation fidelity (95% CI)':<30}{'chance':>7}{'kappa':>7}"
            f"{'forcing':>9}  {'seconds':>7}")
    rows = [head]
    for p in points:
        lo, hi = p["simulation_fidelity_ci"]
        fa = "—" if p["forcing_agreement"] is None else f"{p['forcing_agreement']:.3f}"
        sf = f"{p['simulation_fidelity']:.3f} [{lo:.3f}, {hi:.3f}]"
        ch, ka = p.get("simulation_chance"), p.get("simulation_kappa")
        ch = "—" if ch is None else f"{ch:.3f}"
        ka = "—" if ka is None else f"{ka:.3f}"
        total = p["seconds"] + p.get("forcing_seconds", 0.0)  # fitting and forcing
        rows.append(f"{p['n_states']:>6}  {sf:<30}{ch:>7}{ka:>7}{fa:>9}  {total:>7.2f}")
    return "\n".join(rows)


def _png(points: Sequence[dict[str, Any]], path: Path, chosen: int | None) -> bool:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return False
    x = [p["n_states"] for p in points]
    y = np.array([p["simulation_fidelity"] for p in points])
    ci = np.array([p["simulation_fidelity_ci"] for p in points]).reshape(-1, 2)
    fig = Figure(figsize=(6, 3.6), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.errorbar(x, y, yerr=[y - ci[:, 0], ci[:, 1] - y], marker="o", capsize=3,
                label="simulation fidelity (95% CI)")
    fa = [(p["n_states"], p["forcing_agreement"]) for p in points
          if p["forcing_agreement"] is not None]
    if fa:
        ax.plot(*zip(*fa, strict=True), marker="s", linestyle="--", label="forcing agreement")
    if chosen is not None:
        ax.axvline(chosen, color="grey", linestyle=":", label=f"chosen: {chosen}")
    ax.set(xlabel="abstract states", ylabel="agreement with the RNN")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    return True


def _html(points: Sequence[dict[str, Any]], path: Path, chosen: int | None) -> None:
    import plotly.graph_objects as go

    x = [p["n_states"] for p in points]
    y = [p["simulation_fidelity"] for p in points]
    ci = [p["simulation_fidelity_ci"] for p in points]
    fig = go.Figure(go.Scatter(
        x=x, y=y, mode="lines+markers", name="simulation fidelity (95% CI)",
        error_y={"type": "data", "symmetric": False,
                 "array": [h - v for v, (_, h) in zip(y, ci, strict=True)],
                 "arrayminus": [v - lo for v, (lo, _) in zip(y, ci, strict=True)]}))
    fa = [(p["n_states"], p["forcing_agreement"]) for p in points
          if p["forcing_agreement"] is not None]
    if fa:
        fx, fy = zip(*fa, strict=True)
        fig.add_trace(go.Scatter(x=fx, y=fy, mode="lines+markers", name="forcing agreement",
                                 line={"dash": "dash"}))
    if chosen is not None:
        fig.add_vline(x=chosen, line_dash="dot", annotation_text=f"chosen: {chosen}")
    fig.update_layout(xaxis_title="abstract states", yaxis_title="agreement with the RNN",
                      template="plotly_white")
    fig.write_html(path, include_plotlyjs=True, full_html=True)


def write_sweep(points: Sequence[dict[str, Any]], out_dir: str | Path, *,
                chosen: int | None = None) -> dict[str, str]:
    """Write ``sweep.json``, ``sweep.png`` (when matplotlib is installed) and
    ``sweep.html`` into ``out_dir``.

    Returns
    -------
    dict
        ``json``, ``html`` and ``png`` (``None`` without matplotlib) paths.
    """
    from stateseer.core.atomic import atomic_write_text

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateseerError(f"cannot create {out} ({exc.strerror}); choose another --out") \
            from None
    atomic_write_text(out / layout.SWEEP_JSON, json.dumps(list(points), indent=1))
    png = out / layout.SWEEP_PNG
    has_png = _png(points, png, chosen)
    _html(points, out / layout.SWEEP_HTML, chosen)
    return {"json": str(out / layout.SWEEP_JSON), "png": str(png) if has_png else None,
            "html": str(out / layout.SWEEP_HTML)}
