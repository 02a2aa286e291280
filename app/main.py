"""Build the explorer app for a run: ``create_app(RUN)``; ``server = app.server``.

For gunicorn: ``STATESEER_RUN=runs/rt gunicorn 'app.main:server_from_env()'``.
"""

from __future__ import annotations

import os
from pathlib import Path

import dash_cytoscape as cyto
from dash import Dash

from .callbacks import register_callbacks
from .data import RunData
from .layout import build_layout

__all__ = ["create_app", "server_from_env"]

ASSETS = Path(__file__).parent / "assets"


def create_app(run_dir: str | Path, *, data: RunData | None = None) -> Dash:
    """The Dash explorer for ``run_dir`` (a run with traces and an abstraction)."""
    data = data or RunData(run_dir)
    cyto.load_extra_layouts()  # dagre etc., bundled with dash-cytoscape (no network)
    app = Dash(__name__, assets_folder=str(ASSETS), title=f"stateseer · {data.name}",
               update_title=None, suppress_callback_exceptions=True)
    app.layout = build_layout(data)
    register_callbacks(app, data)
    app.stateseer_data = data  # read-only, for tests and benchmarks
    return app


def server_from_env():
    """WSGI server for the run named by ``$STATESEER_RUN`` (gunicorn entry point)."""
    run = os.environ.get("STATESEER_RUN", "runs/rt")
    return create_app(run).server
