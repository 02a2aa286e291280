"""The page: a header and fixed regions that the views fill, in registry order.

::

    stores   (hidden)             header (run figures)
    diagram  | side (tabs)
    table    | input (the input box), trace (the trace panel below it)
    below    (a third row of panels)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dash import dcc, html

from stateseer.app.explorer import ids
from stateseer.app.explorer.context import ExplorerContext

__all__ = ["REGIONS", "box", "header", "page"]

REGIONS = ("stores", "diagram", "side", "table", "input", "trace", "below")


def box(component: Any, width: int, height: int = 40) -> html.Div:
    """``component`` in a box of fixed width and minimum height: dropdowns and sliders are
    drawn only once their script has loaded, and without the box the page below them
    moved down by ~38 px then (a click aimed at the diagram landed beside a node)."""
    return html.Div(component, className="fixed-box",
                    style={"width": width, "minHeight": height})


def _figure(a: Mapping[str, Any], key: str, name: str) -> str | None:
    """``name 0.912 (95 % CI 0.90–0.93)``, or None when the run has no such figure."""
    v = a.get(key)
    if not isinstance(v, (int, float)):
        return None
    ci = a.get(f"{key}_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and \
            all(isinstance(x, (int, float)) for x in ci):
        return f"{name} {v:.3f} (95 % CI {ci[0]:.3f}–{ci[1]:.3f})"
    return f"{name} {v:.3f}"


#: said once, in the header, for a run imported without a model (the views that need the
#: model then say only :data:`NO_MODEL`)
NO_MODEL_NOTE = ("imported traces without a model: typed input, attribution and state "
                 "forcing are off (create the run with `stateseer create` to have them)")
NO_MODEL = "needs the model, which this run does not have (see the note at the top)"


def model_message(exc: Exception) -> str:
    """What a view shows for a model error: the short line for a run without a model (the
    header explains it once), the error itself otherwise."""
    from stateseer.core.imported import NoModelError

    return NO_MODEL if isinstance(exc, NoModelError) else str(exc)


def data_label(name: str) -> str:
    """A data set's name as the header shows it: a user file by its file name only (the
    run keeps the absolute path; the page, shared or screenshot, does not show it).

    >>> data_label("csv:/home/ana/private/reviews.csv"), data_label("rotten_tomatoes")
    ('csv:reviews.csv', 'rotten_tomatoes')
    """
    kind, sep, rest = str(name).partition(":")
    if sep and kind in ("csv", "jsonl") and rest:
        return f"{kind}:{rest.replace(chr(92), '/').rsplit('/', 1)[-1]}"
    return str(name)


def _test_accuracy(d: Any) -> str:
    """The test accuracy training measured, else the one recording measured (a run made
    with ``create`` or ``import-traces``), else ``n/a``."""
    acc = d.metrics.get("test_accuracy")
    if not isinstance(acc, (int, float)):
        acc = ((d.traces.meta.get("splits") or {}).get("test") or {}).get("accuracy")
    return f"{acc:.3f}" if isinstance(acc, (int, float)) else "n/a"


def repair_origin(run_dir: Any) -> str | None:
    """What a run made by ``stateseer repair`` repaired: ``repair of RUN: ACTION on
    finding K (CULPRIT)``, from its ``repair_edits.json``; None for any other run.

    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "repair_edits.json").write_text(json.dumps({"source_run": "runs/sc",
    ...     "action": "counterfactual", "finding": {"rank": 1, "tokens": ["zorblat"]}}))
    >>> repair_origin(d), repair_origin(d / "nowhere")
    ('repair of sc: counterfactual on finding 1 (zorblat)', None)
    """
    from pathlib import Path

    from stateseer.core import layout
    from stateseer.core.errors import StateseerError
    from stateseer.core.reading import load_json

    try:
        doc = load_json(Path(run_dir) / layout.REPAIR_EDITS)
    except (OSError, StateseerError):
        return None
    if not isinstance(doc, dict) or not doc.get("action"):
        return None
    f = doc.get("finding") if isinstance(doc.get("finding"), dict) else {}
    src = Path(str(doc.get("source_run", "?"))).name
    culprit = " ".join(map(str, f.get("tokens") or ()))
    return (f"repair of {src}: {doc['action']}"
            + (f" on finding {f['rank']}" if f.get("rank") is not None else "")
            + (f" ({culprit})" if culprit else ""))


def header(ctx: ExplorerContext) -> html.Div:
    """The run's name, model and data, then the abstraction's figures: simulation fidelity
    and forcing agreement first (with 95 % intervals when the run has them), label
    fidelity marked "by construction" when the states were split by prediction."""
    d = ctx.data
    m = d.metrics
    a = m.get("abstraction", {})
    label = _figure(a, "label_fidelity", "label fidelity")
    if label and "label_fidelity" in (a.get("by_construction") or ()):
        label += " (by construction)"
    sim = _figure(a, "simulation_fidelity", "simulation fidelity")
    if sim and isinstance(a.get("simulation_chance"), (int, float)):
        kappa = a.get("simulation_kappa")
        sim += (f" against {a['simulation_chance']:.3f} by chance"
                + (f", κ {kappa:.2f}" if isinstance(kappa, (int, float)) else ""))
    figures = [f for f in (sim, _figure(a, "forcing_agreement", "forcing agreement"), label)
               if f]
    return html.Div([
        html.H2("stateseer"),
        html.Span(f"{d.name} · {d.config['model']['arch'].upper()} on "
                  f"{data_label(d.config['data']['name'])} · test acc "
                  f"{_test_accuracy(d)}"
                  f" · {a.get('n_states', '?')} states", className="runinfo"),
        *([html.Span(NO_MODEL_NOTE, className="runinfo muted")]
          if (d.config.get("model") or {}).get("kind") == "imported" else []),
        *([html.Span(note, className="runinfo muted")] if (note := repair_origin(d.run.path))
          else []),
        html.Span(" · ".join(figures), className="runinfo fidelity",
                  title="simulation fidelity: how often the FSM alone predicts what the "
                        "model predicts (chance: an FSM that always answers the model's "
                        "most frequent prediction; κ: Cohen's kappa); forcing agreement: "
                        "how often the model's prediction survives replacing its hidden "
                        "state by its abstract state's centroid"),
    ], className="header")


def page(ctx: ExplorerContext, regions: Mapping[str, Sequence[Any]]) -> html.Div:
    """The page from the views' components per region."""
    side = list(regions.get("side", ()))
    tabs = dcc.Tabs(id=ids.SIDE_TABS, value=side[0].value if side else None, children=side)
    top = html.Div([*regions.get("diagram", ()),
                    html.Div([tabs], className="panel side-panel")], className="row top-row")
    trace = html.Div([html.Div(list(regions.get("input", ())), className="input-box",
                               id=ids.INPUT_BOX), *regions.get("trace", ())],
                     className="panel trace-panel", id=ids.TRACE_PANEL)
    bottom = html.Div([*regions.get("table", ()), trace], className="row bottom-row")
    third = html.Div(list(regions.get("below", ())), className="row third-row")
    return html.Div([*regions.get("stores", ()), header(ctx), top, bottom, third],
                    className="page")
