"""The explorer inside a notebook: :func:`show` serves it in this kernel and displays it.

::

    import stateseer
    view = stateseer.show("runs/rt")   # the explorer, in the cell's output
    view.url                           # http://127.0.0.1:PORT/ (open it in a tab too)
    view.stop()                        # the server is gone, its port free

Running the cell again replaces the explorer of the same run (its server is stopped
first: no "address already in use", no thread left behind); explorers of other runs stay
until stopped. The server is werkzeug's, threaded, on loopback, in a daemon thread of the
kernel; the page is shown in an ``<iframe>`` (Jupyter, JupyterLab, VS Code: a kernel on
the same machine as the browser). Behind a notebook server that reaches kernels' ports
through a proxy (JupyterHub with jupyter-server-proxy: ``/user/NAME/proxy/PORT/``), the
page is served under that prefix: ``proxy="auto"`` (the default) takes it from
``$JUPYTERHUB_SERVICE_PREFIX``, or pass the template yourself
(``proxy="/user/me/proxy/{port}/"``). In Colab, where the kernel runs on another machine
than the browser, ``proxy="auto"`` asks Colab for the port's proxied address
(``google.colab.kernel.proxyPort``, as Dash's ``jupyter_mode="colab"`` does) and lets that
host in.
"""

from __future__ import annotations

import html
import threading
from pathlib import Path
from typing import Any

__all__ = ["Explorer", "colab_url", "proxy_prefix", "show", "shown"]

_SHOWN: dict[str, Explorer] = {}
_LOCK = threading.Lock()


class Explorer:
    """A running explorer: its ``url``, :meth:`stop`, and its ``<iframe>`` when it is a
    cell's value (``_repr_html_``)."""

    def __init__(self, run: str, server: Any, thread: threading.Thread, height: int,
                 prefix: str | None = None, url: str | None = None) -> None:
        self.run, self._server, self._thread, self.height = run, server, thread, height
        self.host, self.port = server.server_address[:2]
        self.prefix = prefix
        # through the notebook server's proxy where there is one (relative to its page)
        self.url = url or prefix or f"http://{self.host}:{self.port}/"

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop the server, close its socket and wait for its thread (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(10)
        self._server.server_close()
        with _LOCK:
            if _SHOWN.get(self.run) is self:
                del _SHOWN[self.run]

    def _repr_html_(self) -> str:
        url = html.escape(self.url, quote=True)
        return (f'<iframe src="{url}" width="100%" height="{int(self.height)}" '
                f'style="border:1px solid #ddd" title="stateseer explorer"></iframe>'
                f'<div style="font-size:12px;color:#666">stateseer explorer of '
                f'{html.escape(self.run)} at <a href="{url}" target="_blank">{url}</a> · '
                f'<code>.stop()</code> ends it</div>')

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"Explorer({self.run!r}, url={self.url!r}, {state})"


def shown() -> list[Explorer]:
    """The explorers :func:`show` started in this process that still run."""
    with _LOCK:
        return [e for e in _SHOWN.values() if e.running]


class _Later:
    """A WSGI app set once the server's port is known (a proxied page's prefix names
    the port, and the app is built with its prefix)."""

    app: Any = None

    def __call__(self, environ: Any, start_response: Any) -> Any:
        return self.app(environ, start_response)


def proxy_prefix(proxy: str | None, port: int) -> str | None:
    """The path prefix the browser reaches ``port`` under, or None for a direct URL.

    Examples
    --------
    >>> proxy_prefix("/user/me/proxy/{port}/", 8051)
    '/user/me/proxy/8051/'
    >>> proxy_prefix(None, 8051) is None
    True
    """
    import os

    if proxy == "auto":
        base = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
        proxy = f"{base.rstrip('/')}/proxy/{{port}}/" if base else None
    if not proxy:
        return None
    return "/" + proxy.format(port=port).strip("/") + "/"


def colab_url(port: int) -> str | None:
    """The https address Colab proxies the kernel's ``port`` under, or None outside Colab.

    Examples
    --------
    >>> colab_url(8050) is None   # not in Colab
    True
    """
    import sys

    if "google.colab" not in sys.modules:
        return None
    from google.colab.output import eval_js

    return str(eval_js(f"google.colab.kernel.proxyPort({int(port)})"))


def show(run: str | Path, *, port: int = 0, height: int = 820,
         display: bool = False, proxy: str | None = "auto",
         **create_app_kwargs: Any) -> Explorer:
    """Serve the explorer of ``run`` from this process and return its handle.

    Parameters
    ----------
    run : str or Path
        A run directory (recorded and abstracted).
    port : int
        The port on 127.0.0.1 (default: a free one).
    height : int
        The ``<iframe>``'s height in pixels.
    display : bool
        Display the ``<iframe>`` now (``IPython.display``) instead of as the cell's value.
    proxy : str or None
        ``"auto"``: ``$JUPYTERHUB_SERVICE_PREFIX`` + ``proxy/{port}/`` when set (a
        JupyterHub with jupyter-server-proxy), else a direct URL; a template with
        ``{port}`` for another proxy; None for a direct URL.
    **create_app_kwargs
        Passed to :func:`stateseer.app.main.create_app` (``compare=``, ``model=`` ...;
        ``frame_ancestors`` defaults to the notebook front ends, which the page's
        Content-Security-Policy lets show it in their output frame).

    Returns
    -------
    Explorer
        ``.url``, ``.stop()``; shown as the page when it is the cell's value.
    """
    from werkzeug.serving import make_server

    from stateseer.app.main import create_app
    from stateseer.app.security import NOTEBOOK_FRAME_ANCESTORS

    key = str(Path(run).resolve())
    with _LOCK:
        previous = _SHOWN.get(key)
    if previous is not None:  # the cell ran again: its explorer is replaced
        previous.stop()
    later = _Later()
    server = make_server("127.0.0.1", port, later, threaded=True)  # binds: the port is known
    prefix = proxy_prefix(proxy, server.server_address[1])
    proxied = colab_url(server.server_address[1]) if proxy == "auto" else None
    if proxied:  # Colab's proxy reaches the server under its own host name
        from urllib.parse import urlsplit

        from stateseer.app.main import allowed_hosts_from_env

        hosts = create_app_kwargs.get("allowed_hosts") or allowed_hosts_from_env()
        create_app_kwargs["allowed_hosts"] = [*hosts, urlsplit(proxied).hostname or ""]
    try:
        create_app_kwargs.setdefault("frame_ancestors", NOTEBOOK_FRAME_ANCESTORS)
        later.app = create_app(run, url_prefix=prefix, **create_app_kwargs).server
    except BaseException:
        server.server_close()
        raise
    thread = threading.Thread(target=server.serve_forever, name=f"stateseer-show-{key}",
                              daemon=True)
    thread.start()
    explorer = Explorer(key, server, thread, height, prefix, url=proxied)
    with _LOCK:
        _SHOWN[key] = explorer
    if display:
        from IPython.display import HTML
        from IPython.display import display as ipy_display

        ipy_display(HTML(explorer._repr_html_()))
    return explorer
