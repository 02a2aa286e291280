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
the same machine as the browser).
"""

from __future__ import annotations

import html
import threading
from pathlib import Path
from typing import Any

__all__ = ["Explorer", "show", "shown"]

_SHOWN: dict[str, Explorer] = {}
_LOCK = threading.Lock()


class Explorer:
    """A running explorer: its ``url``, :meth:`stop`, and its ``<iframe>`` when it is a
    cell's value (``_repr_html_``)."""

    def __init__(self, run: str, server: Any, thread: threading.Thread, height: int) -> None:
        self.run, self._server, self._thread, self.height = run, server, thread, height
        self.host, self.port = server.server_address[:2]
        self.url = f"http://{self.host}:{self.port}/"

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


def show(run: str | Path, *, port: int = 0, height: int = 820,
         display: bool = False, **create_app_kwargs: Any) -> Explorer:
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
    **create_app_kwargs
        Passed to :func:`stateseer.app.main.create_app` (``compare=``, ``model=`` ...).

    Returns
    -------
    Explorer
        ``.url``, ``.stop()``; shown as the page when it is the cell's value.
    """
    from werkzeug.serving import make_server

    from .main import create_app

    key = str(Path(run).resolve())
    with _LOCK:
        previous = _SHOWN.get(key)
    if previous is not None:  # the cell ran again: its explorer is replaced
        previous.stop()
    app = create_app(run, **create_app_kwargs)
    server = make_server("127.0.0.1", port, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name=f"stateseer-show-{key}",
                              daemon=True)
    thread.start()
    explorer = Explorer(key, server, thread, height)
    with _LOCK:
        _SHOWN[key] = explorer
    if display:
        from IPython.display import HTML
        from IPython.display import display as ipy_display

        ipy_display(HTML(explorer._repr_html_()))
    return explorer
