"""Build the explorer app for a run: ``create_app(RUN)``; ``server = app.server``;
``serve(RUN, host, port)`` runs it (what ``stateseer serve`` does).

For gunicorn: ``STATESEER_RUN=runs/rt gunicorn 'stateseer.app.main:server_from_env()'``.

Every app refuses request bodies over :data:`stateseer.app.security.MAX_REQUEST_BYTES` (413, before
reading them), answers only requests whose ``Host`` (and ``Origin``) names loopback, the
bound host, an IP address or a name of ``allowed_hosts`` / ``$STATESEER_ALLOWED_HOSTS``
(comma-separated), and sends CSP, ``X-Frame-Options`` and ``nosniff`` headers
(:mod:`stateseer.app.security`).
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dash import Dash
from flask import has_request_context, request

from stateseer.app.explorer.context import ExplorerContext
from stateseer.app.explorer.registry import REGISTRY, Registry
from stateseer.app.security import (
    CSP,
    MAX_REQUEST_BYTES,
    bind_warning,
    brief_errors,
    framed_csp,
    limit_request_bodies,
    secure_headers,
)
from stateseer.app.selection import from_query
from stateseer.app.workflows.runview import RunView
from stateseer.core.errors import StateseerError

__all__ = ["allowed_hosts_from_env", "check_port", "create_app", "initial_selection", "serve",
           "server_from_env"]

ASSETS = Path(__file__).parent / "assets"


def create_app(run_dir: str | Path | None = None, *,
               compare: str | Path | None = None, model: Any = None,
               context: ExplorerContext | None = None,
               registry: Registry = REGISTRY, allowed_hosts: list[str] | None = None,
               bind_host: str | None = None,
               max_request_bytes: int = MAX_REQUEST_BYTES,
               url_prefix: str | None = None,
               frame_ancestors: str | None = None) -> Dash:
    """The Dash explorer for ``run_dir`` (a run with traces and an abstraction).

    Parameters
    ----------
    run_dir : str or Path
    compare : str or Path, optional
        A second run on the same data (e.g. the model after a fix): its states are
        matched to this run's and the inputs whose path changed are listed.
    model : Traceable, optional
        Your own model (a :class:`stateseer.rnn_models.protocol.Traceable`) when the run's
        ``model.pt`` is not one of the built-in classifiers.
    context : ExplorerContext, optional
        An already loaded run (instead of ``run_dir``; tests, study mode).
    registry : Registry
        The views (default: every view of :data:`stateseer.app.explorer.registry.VIEWS`).
    allowed_hosts : list of str, optional
        Host names clients may use besides loopback, IP addresses and ``bind_host``
        (default: ``$STATESEER_ALLOWED_HOSTS``, comma-separated; ``*`` allows any).
    bind_host : str, optional
        The interface the server will bind (its names are allowed).
    max_request_bytes : int
        The largest request body accepted (413 beyond, before reading it).
    url_prefix : str, optional
        The path the browser reaches the server under when a proxy strips it (Dash's
        ``requests_pathname_prefix``, e.g. JupyterHub's ``/user/NAME/proxy/8050/``); the
        server itself still serves from ``/``.
    frame_ancestors : str, optional
        The pages that may show the explorer in a frame (CSP ``frame-ancestors``
        sources); default none (``X-Frame-Options: DENY``). :func:`stateseer.show` lets
        the notebook front ends frame it
        (:data:`stateseer.app.security.NOTEBOOK_FRAME_ANCESTORS`).
    """
    if context is None:
        context = ExplorerContext.load(run_dir, model=model, compare=compare, jobs=True)
    if context.comparison is not None:  # fail at start-up, not on the first click
        context.comparison.compare(context.data.default_split)
    inner = (url_prefix or "").strip("/")
    prefix = f"/{inner}/" if inner else "/"
    app = Dash(__name__, assets_folder=str(ASSETS), title=f"stateseer · {context.data.name}",
               update_title=None, suppress_callback_exceptions=True,
               external_scripts=[{"src": prefix + c["src"].lstrip("/")} for c in FIRST_CHUNKS],
               requests_pathname_prefix=prefix, routes_pathname_prefix="/")

    def serve_layout():
        # Each page load is built with the selection in its URL, so a shared link shows
        # its view from the first render (no wait for the URL to reach the callbacks).
        # dash-renderer fetches the layout with its own request (/_dash-layout); the page's
        # URL, and so its query string, comes with it as the referrer.
        query = ""
        if has_request_context():
            query = (urlparse(request.referrer).query if request.referrer
                     else request.query_string.decode(errors="replace"))
        return registry.layout(context, initial_selection(context, query))

    app.layout = serve_layout
    registry.register(app, context)
    limit_request_bodies(app.server, max_request_bytes)
    brief_errors(app.server)
    secure_headers(app.server, allowed_hosts_from_env() if allowed_hosts is None
                   else allowed_hosts, bind_host=bind_host,
                   csp=framed_csp(frame_ancestors) if frame_ancestors else CSP)
    _prepare(app, context)
    return app


FIRST_CHUNKS = [{"src": f"/_dash-component-suites/dash/{c}.js"}
                for c in ("dash_table/async-table", "dash_table/async-highlight",
                          "dcc/async-dropdown")]
"""The lazily loaded parts of Dash's components that the first render needs (the table,
the filters' dropdowns): loaded with the page's other scripts, not fetched one after the
other once the layout has arrived (webpack finds them already registered)."""


def _prepare(app: Dash, context: ExplorerContext) -> None:
    """Do once at start-up what the first page would otherwise wait for; load the rest in
    the background on the first request of each process (not at import: under
    ``gunicorn --preload`` that runs before the workers fork)."""
    _ = context.data.positions
    context.data.index(context.data.default_split)
    started = threading.Event()

    @app.server.before_request
    def _warm_once():
        if not started.is_set():
            started.set()
            threading.Thread(target=warm, args=(context,), daemon=True).start()


def warm(context: ExplorerContext) -> None:
    """Load what the first trace's analyses need (the nearest-context index, the model,
    Captum, the centroids, the projection) off the request path; a failure here only
    means the first click pays for it."""
    try:
        context.contexts.index()
        context.models.warm()
        _ = context.contexts.projection
    except Exception:
        pass


def initial_selection(data: ExplorerContext | RunView | Any, query: str) -> dict:
    """The selection a page starts with, read from its URL query string."""
    view = data.data if isinstance(data, ExplorerContext) else data
    return from_query(query, view.splits, view.fsm.n_states,
                      {s: view.traces[s].n_inputs for s in view.splits},
                      view.abstraction.patterns)


def allowed_hosts_from_env() -> list[str]:
    """``$STATESEER_ALLOWED_HOSTS`` as a list (comma-separated; empty: none)."""
    return [h.strip() for h in os.environ.get("STATESEER_ALLOWED_HOSTS", "").split(",")
            if h.strip()]


def serve(run_dir: str | Path, host: str = "127.0.0.1", port: int = 8050, *,
          compare: str | Path | None = None, allowed_hosts: list[str] | None = None,
          debug: bool = False) -> int:
    """``stateseer serve``: build the explorer for ``run_dir`` and serve it until
    interrupted; warns on stderr when ``host`` is beyond loopback."""
    import time

    warning = bind_warning(host, "the explorer")
    if warning:
        print(warning, file=sys.stderr)
    t0 = time.perf_counter()
    check_port(host, port)
    app = create_app(run_dir, compare=compare, allowed_hosts=allowed_hosts, bind_host=host)
    check_port(host, port)  # still free once the app is built: only now is it "ready"
    print(f"stateseer: serving {run_dir} on http://{host}:{port}/ (ready in "
          f"{time.perf_counter() - t0:.1f} s; Ctrl+C to stop)", file=sys.stderr)
    app.run(host=host, port=port, debug=debug)
    return 0


def check_port(host: str, port: int) -> None:
    """Refuse, in one line, a ``host:port`` this process cannot listen on (another server
    holds it, or the interface is not this machine's), before anything says "ready".

    Raises
    ------
    StateseerError
        The port is in use (naming it and suggesting ``--port``), or the bind fails.
    """
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
            s.bind(addr)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StateseerError(f"port {port} on {host} is in use (another server holds "
                                 f"it); stop that server or pass --port {port + 1}"
                                 ) from None
        raise StateseerError(f"cannot serve on {host}:{port} ({exc.strerror or exc}); pass "
                             "another --host or --port") from None


def server_from_env():
    """WSGI server for the run named by ``$STATESEER_RUN`` (gunicorn entry point)."""
    run = os.environ.get("STATESEER_RUN", "runs/rt")
    return create_app(run).server
