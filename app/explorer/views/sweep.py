"""Fidelity against the number of states: the sweep curve with the run's count marked
(a tab of the side panel).

The curve is the one ``stateseer sweep RUN`` wrote (``RUN/sweep/sweep.json``: simulation
fidelity with its 95 % interval and forcing agreement, on the test split), else the
validation curve ``--states auto`` read (``metrics.json``), else just the run's own point;
the count the run's abstraction uses is marked. The curve belongs to the run, not to the
selection; where the explorer may run jobs (``stateseer serve``), a button measures it
again as a background ``stateseer sweep`` (:class:`~stateseer.app.workflows.jobs.
JobRunner`) with a progress bar and a cancel button, and the curve is redrawn when it ends;
another measures forcing per state (``stateseer force``) for the diagram's colouring.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dash import Input, Output, dcc, html, no_update

from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, Trigger, View
from stateseer.core import layout as run_layout

__all__ = ["SWEEP_GRAPH", "TAB_SWEEP", "VIEW", "expected_candidates", "sweep_curve",
           "sweep_figure", "sweep_panel"]

TAB_SWEEP = "sweep"
SWEEP_GRAPH = "sweep-graph"
GRAPH_CONFIG = {"displaylogo": False, "displayModeBar": "hover",
                "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _clean(points: Any, key: str) -> list[dict[str, Any]]:
    """Valid points of a curve (``n_states`` and a numeric ``key``), ascending by states;
    malformed entries are skipped (the file is the user's)."""
    out = []
    for p in points if isinstance(points, list) else []:
        if not (isinstance(p, Mapping) and _number(p.get("n_states")) and _number(p.get(key))):
            continue
        ci = p.get("simulation_fidelity_ci")
        fa = p.get("forcing_agreement")
        out.append({"n_states": int(p["n_states"]), "simulation_fidelity": float(p[key]),
                    "simulation_fidelity_ci": [float(ci[0]), float(ci[1])]
                    if isinstance(ci, (list, tuple)) and len(ci) == 2
                    and all(_number(v) for v in ci) else None,
                    "forcing_agreement": float(fa) if _number(fa) else None})
    return sorted(out, key=lambda p: p["n_states"])


def sweep_curve(run_dir: str | Path, metrics: Mapping[str, Any]
                ) -> tuple[list[dict[str, Any]], str]:
    """The curve to show and where it comes from.

    Parameters
    ----------
    run_dir : path
        The run (``RUN/sweep/sweep.json`` is read if present).
    metrics : dict
        The run's ``metrics.json``.

    Returns
    -------
    points : list of dict
        ``n_states``, ``simulation_fidelity``, ``simulation_fidelity_ci`` (or None),
        ``forcing_agreement`` (or None), ascending by states.
    source : str
        ``"sweep"`` (test split), ``"auto"`` (validation split), ``"run"`` (the run's own
        point only) or ``"none"``.
    """
    path = run_layout.RunLayout(run_dir).sweep_json
    try:
        points = _clean(json.loads(path.read_text(encoding="utf-8")), "simulation_fidelity")
    except (OSError, ValueError):
        points = []
    if points:
        return points, "sweep"
    a = metrics.get("abstraction") if isinstance(metrics, Mapping) else None
    a = a if isinstance(a, Mapping) else {}
    auto = a.get("auto") if isinstance(a.get("auto"), Mapping) else {}
    points = _clean(auto.get("curve"), "simulation_fidelity")
    if points:
        return points, "auto"
    own = _clean([{**a, "forcing_agreement": metrics.get("forcing_agreement",
                                                         a.get("forcing_agreement"))}],
                 "simulation_fidelity")
    return (own, "run") if own else ([], "none")


def sweep_figure(points: Sequence[Mapping[str, Any]], chosen: int | None) -> dict[str, Any]:
    """A plotly figure (a dict): simulation fidelity with its intervals, forcing agreement
    dashed, and a dotted vertical line at ``chosen`` states."""
    x = [p["n_states"] for p in points]
    y = [p["simulation_fidelity"] for p in points]
    trace: dict[str, Any] = {"type": "scatter", "mode": "lines+markers", "x": x, "y": y,
                             "name": "simulation fidelity"}
    if points and all(p.get("simulation_fidelity_ci") for p in points):
        trace["name"] += " (95% CI)"
        trace["error_y"] = {"type": "data", "symmetric": False,
                            "array": [p["simulation_fidelity_ci"][1] - p["simulation_fidelity"]
                                      for p in points],
                            "arrayminus": [p["simulation_fidelity"]
                                           - p["simulation_fidelity_ci"][0] for p in points]}
    data = [trace]
    fa = [(p["n_states"], p["forcing_agreement"]) for p in points
          if p.get("forcing_agreement") is not None]
    if fa:
        data.append({"type": "scatter", "mode": "lines+markers", "x": [k for k, _ in fa],
                     "y": [v for _, v in fa], "name": "forcing agreement",
                     "line": {"dash": "dash"}})
    layout: dict[str, Any] = {
        "xaxis": {"title": {"text": "abstract states"}},
        "yaxis": {"title": {"text": "agreement with the model"}},
        # the top margin holds the plotly toolbar and, under it, the run's count
        "margin": {"l": 50, "r": 10, "t": TOP_MARGIN, "b": 40}, "height": 300,
        "legend": {"orientation": "h", "y": -0.3}, "template": "plotly_white"}
    if chosen is not None:
        layout["shapes"] = [{"type": "line", "x0": chosen, "x1": chosen, "y0": 0, "y1": 1,
                             "yref": "paper", "line": {"dash": "dot", "color": "grey"}}]
        layout["annotations"] = [{"x": chosen, "y": 1, "yref": "paper", "showarrow": False,
                                  "text": f"this run: {chosen}", "yanchor": "bottom",
                                  "xanchor": _label_side(x, chosen)}]
    return {"data": data, "layout": layout}


TOP_MARGIN = 44
"""Pixels above the plot: the toolbar (about 25 px, shown on hover) and the label of the
run's count under it, clear of each other and of the plot."""


def _label_side(x: Sequence[int], chosen: int) -> str:
    """Which side of its line the run's label is anchored on: a count at the right end of
    the curve (or past it) is labelled leftwards, one at the left end rightwards, so that
    the label stays inside the figure.

    >>> _label_side([4, 8, 40], 40), _label_side([4, 8, 40], 4), _label_side([4, 40], 8)
    ('right', 'left', 'center')
    """
    if not x or chosen >= max(x):
        return "right"
    return "left" if chosen <= min(x) else "center"


_SOURCES = {
    "sweep": "From `stateseer sweep` (test split).",
    "auto": "The validation curve `--states auto` chose from; `stateseer sweep RUN` "
            "measures it on the test split.",
    "run": "Only this run's own figure: `stateseer sweep RUN` draws the whole curve.",
    "none": "No fidelity figures yet: run `stateseer sweep RUN`.",
}


def sweep_panel(run_dir: str | Path, metrics: Mapping[str, Any]) -> html.Div:
    """The tab's content: the curve (or a note) and where it comes from."""
    points, source = sweep_curve(run_dir, metrics)
    a = metrics.get("abstraction") if isinstance(metrics, Mapping) else None
    chosen = a.get("n_states") if isinstance(a, Mapping) else None
    chosen = int(chosen) if _number(chosen) else None
    parts: list[Any] = [dcc.Graph(id=SWEEP_GRAPH, figure=sweep_figure(points, chosen),
                                  config=GRAPH_CONFIG)]
    note = _SOURCES[source]
    if chosen is not None:
        note = f"This run uses {chosen} states. " + note
    parts.append(html.P(note, className="muted sweep-source"))
    return html.Div(parts, className="sweep-panel")


#: the tab's jobs: kind -> what the page calls it
JOBS = {"sweep": "the sweep", "forcing": "forcing per state"}


def expected_candidates(traces: Any, has_predictions: bool = True) -> int | None:
    """How many state counts ``stateseer sweep RUN`` measures (its default candidates
    less those too few for the classes the model predicts, as
    :func:`~stateseer.app.workflows.sweep.sweep_run` leaves them out), or None when that
    cannot be told.

    The sweep writes its own count once it has loaded the run; the tab shows this one
    until then, so the total is right from the start.
    """
    from stateseer.app.workflows.sweep import default_candidates
    from stateseer.core.errors import StateseerError

    try:
        return len(default_candidates(traces, has_predictions))
    except (StateseerError, OSError, KeyError, ValueError):
        return None


def _sweep_progress(status: Mapping[str, Any]) -> tuple[str, int | None, int | None]:
    """``(stage, done, total)`` of a running sweep: the sweep's own count, or, before it
    wrote one (the runner's ``starting`` stand-in), the count expected when it was started
    (``info["candidates"]``; None when not known)."""
    if status.get("stage") != "starting":
        return str(status.get("stage", "")), int(status["done"]), int(status["total"])
    total = (status.get("info") or {}).get("candidates")
    return "starting", (0 if total else None), (int(total) if total else None)


def job_status(status: Mapping[str, Any]) -> list[Any]:
    """The tab's job as it shows it (nothing when none of its jobs was started)."""
    state, kind = status.get("state", "idle"), status.get("kind")
    if state == "idle" or kind not in JOBS:
        return []
    if state == "running":
        if kind != "sweep":
            return [html.Div(f"stateseer force: forcing every test input, "
                             f"{status['seconds']:.0f} s", className="job-status"),
                    html.Progress(className="job-bar")]  # no count: indeterminate
        stage, done, total = _sweep_progress(status)
        count = f" ({done}/{total} candidates)" if total else ""
        return [html.Div(f"stateseer sweep: {stage}{count}, {status['seconds']:.0f} s",
                         className="job-status"),
                html.Progress(value=str(done), max=str(total), className="job-bar")
                if total else html.Progress(className="job-bar")]
    if state == "failed":
        return [html.Div(f"{JOBS[kind]} failed: {status.get('message', '')}",
                         className="job-status wrong")]
    done = "was cancelled" if state == "cancelled" else "is done"
    note = " — colour the diagram by forcing agreement to see it" \
        if kind == "forcing" and state == "done" else ""
    return [html.Div(f"{JOBS[kind]} {done} ({status['seconds']:.0f} s){note}",
                     className="job-status muted")]


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    d = ctx.data
    body = html.Div(sweep_panel(d.run.path, d.metrics), id=ids.SWEEP_BODY)
    jobs = []
    if ctx.jobs is not None:
        status = ctx.jobs.status()
        running = status.get("state") == "running" and status.get("kind") in JOBS
        jobs = [html.Div([
            html.Button("measure the curve", id=ids.SWEEP_START, n_clicks=0,
                        disabled=running, title="run `stateseer sweep` (4, 8, 16, 32, 40 "
                        "states, forcing included) in the background"),
            html.Button("measure forcing per state", id=ids.FORCE_START, n_clicks=0,
                        disabled=running, title="run `stateseer force` in the background: "
                        "how often each state's inputs keep their prediction when the "
                        "hidden state is replaced by the state's centroid"),
            html.Button("cancel", id=ids.SWEEP_CANCEL, n_clicks=0, disabled=not running),
            html.Div(job_status(status), id=ids.SWEEP_JOB),
            dcc.Interval(id=ids.SWEEP_POLL, interval=1000, disabled=not running)],
            className="jobs sweep-jobs")]
    return {"side": [dcc.Tab(label="Fidelity vs states", value=TAB_SWEEP,
                             children=html.Div([*jobs, body]))]}


def sweep_job(ctx, trigger: Trigger, _start, _force, _cancel, _poll):
    """Start, follow or cancel the tab's background job (the sweep, or forcing per
    state): the job's status, whether polling stops, whether cancel is off, whether the
    start buttons are off, and the curve (redrawn, and the run's figures read again, once
    a job is done)."""
    from stateseer.app.workflows.jobs import force_command, sweep_command
    from stateseer.core.errors import StateseerError

    note: list[Any] = []
    start = {ids.SWEEP_START: ("sweep", sweep_command),
             ids.FORCE_START: ("forcing", force_command)}.get(trigger.id)
    if start and trigger.value:
        info = {"candidates": expected_candidates(ctx.data.traces,
                                                  ctx.data.has_predictions)} \
            if start[0] == "sweep" else None
        try:
            ctx.jobs.start(start[0], start[1](ctx.data.run.path), info=info)
        except StateseerError as exc:
            note = [html.Div(str(exc), className="job-status wrong")]
    elif trigger.id == ids.SWEEP_CANCEL and trigger.value:
        ctx.jobs.cancel()
    status = ctx.jobs.status()
    ours = status.get("kind") in JOBS
    running = ours and status.get("state") == "running"
    body = no_update
    if ours and status.get("state") == "done":
        ctx.data.__dict__.pop("metrics", None)  # the job wrote new figures: read them again
        body = sweep_panel(ctx.data.run.path, ctx.data.metrics)
    return [*note, *job_status(status)], not running, not running, running, running, body


VIEW = View(name="sweep", layout=layout, ids=(SWEEP_GRAPH, ids.SWEEP_BODY),
            tabs=(TAB_SWEEP,),
            doc="simulation fidelity and forcing agreement against the number of states, "
                "the run's count marked; measured again in the background on request",
            callbacks=(
                Callback(sweep_job, [Output(ids.SWEEP_JOB, "children"),
                                     Output(ids.SWEEP_POLL, "disabled"),
                                     Output(ids.SWEEP_CANCEL, "disabled"),
                                     Output(ids.SWEEP_START, "disabled"),
                                     Output(ids.FORCE_START, "disabled"),
                                     Output(ids.SWEEP_BODY, "children")],
                         [Input(ids.SWEEP_START, "n_clicks"),
                          Input(ids.FORCE_START, "n_clicks"),
                          Input(ids.SWEEP_CANCEL, "n_clicks"),
                          Input(ids.SWEEP_POLL, "n_intervals")],
                         trigger=True, prevent_initial_call=True,
                         when=lambda ctx: ctx.jobs is not None),))
