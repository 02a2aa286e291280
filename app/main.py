"""Build the explorer app for a run: ``create_app(RUN)``; ``server = app.server``.

For gunicorn: ``STATESEER_RUN=runs/rt gunicorn 'app.main:server_from_env()'``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import urlparse

import dash_cytoscape as cyto
from dash import Dash
from flask import has_request_context, request

from .callbacks import register_callbacks
from .data import RunData
from .layout import build_layout
from .selection import from_query

__all__ = ["create_app", "server_from_env"]

ASSETS = Path(__file__).parent / "assets"


def create_app(run_dir: str | Path, *, data: RunData | None = None,
               compare: str | Path | None = None, model=None) -> Dash:
    """The Dash explorer for ``run_dir`` (a run with traces and an abstraction).

    ``compare`` names a second run on the same data (e.g. the model after a fix): its
    states are matched to this run's and the inputs whose path changed are listed.
    ``model`` is your own model (a :class:`rnn_models.models.Traceable`) when the run's
    ``model.pt`` is not one of the built-in classifiers.
    """
    data = data or RunData(run_dir, model=model)
    if compare is not None:
        data.other = RunData(compare)
        data.comparison(data.splits[0] if "test" not in data.splits else "test")
    cyto.load_extra_layouts()  # dagre etc., bundled with dash-cytoscape (no network)
    app = Dash(__name__, assets_folder=str(ASSETS), title=f"stateseer · {data.name}",
               update_title=None, suppress_callback_exceptions=True)
    def serve_layout():
        # Each page load is built with the selection in its URL, so a shared link shows
        # its view from the first render (no wait for the URL to reach the callbacks).
        # dash-renderer fetches the layout with its own request (/_dash-layout); the page's
        # URL, and so its query string, comes with it as the referrer.
        query = ""
        if has_request_context():
            query = (urlparse(request.referrer).query if request.referrer
                     else request.query_string.decode(errors="replace"))
        return build_layout(data, initial=initial_selection(data, query))

    app.layout = serve_layout
    register_callbacks(app, data)
    app.stateseer_data = data  # read-only, for tests and benchmarks
    # Do once at start-up what the first page would otherwise wait for.
    _ = data.positions
    data.index("test" if "test" in data.splits else data.splits[0])
    # The nearest-context index (built once per run, saved in RUN/index), the model, Captum
    # and the centroids load in the background, started by the first request of each
    # process (not here: under ``gunicorn --preload`` this runs before the workers fork).
    started = threading.Event()

    @app.server.before_request
    def _warm_once():
        if not started.is_set():
            started.set()
            threading.Thread(target=_warm, args=(data,), daemon=True).start()
    return app


def _warm(data: RunData) -> None:
    """Load what the first trace's analyses need (model, Captum, centroids) off the
    request path; a failure here only means the first click pays for it."""
    try:
        data.context_index()
        import captum.attr  # noqa: F401

        data._load_model()
        _ = data.centroids
        _ = data.projection
    except Exception:
        pass


def initial_selection(data: RunData, query: str) -> dict:
    """The selection a page starts with, read from its URL query string."""
    return from_query(query, data.splits, data.fsm.n_states,
                      {s: data.traces[s].n_inputs for s in data.splits},
                      data.abstraction.patterns)


def server_from_env():
    """WSGI server for the run named by ``$STATESEER_RUN`` (gunicorn entry point)."""
    run = os.environ.get("STATESEER_RUN", "runs/rt")
    return create_app(run).server
