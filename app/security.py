"""HTTP hardening shared by ``stateseer serve`` and ``stateseer study`` (Flask only).

Three reusable pieces, each a function of the Flask server (``app.server`` of a Dash app):

- :func:`limit_request_bodies` sets ``MAX_CONTENT_LENGTH``: a body announced larger is
  refused with 413 before it is read, and a chunked body is cut off at the limit.
- :func:`secure_headers` answers only requests whose ``Host`` (and ``Origin``, when sent)
  is on an allow-list — loopback names, the bound host and ``--allowed-hosts`` — or is an
  IP address (a rebinding attack needs a name of the attacker's); this defeats DNS
  rebinding. It gives every response a Content-Security-Policy,
  ``X-Frame-Options: DENY`` (unless the policy lets named pages frame it: a notebook's
  explorer, :data:`NOTEBOOK_FRAME_ANCESTORS`), ``X-Content-Type-Options: nosniff`` and a
  same-origin ``Referrer-Policy``.
- :func:`bind_warning` is the one-line warning printed when a server binds beyond
  loopback (whatever it serves then crosses the network as plain HTTP).
- :func:`brief_errors` logs a request that fails as one bounded, escaped line (never the
  request's own megabytes, twice, with a traceback) and at most :data:`ERRORS_PER_MINUTE`
  of them a minute, then how many it left out; the access log's lines are bounded too.

Examples
--------
>>> from flask import Flask
>>> server = Flask("demo")
>>> limit_request_bodies(server, 1024)
>>> sorted(secure_headers(server, allowed_hosts=["lab-pc.example.org"]))
['127.0.0.1', '::1', 'lab-pc.example.org', 'localhost']
>>> client = server.test_client()
>>> client.get("/", headers={"Host": "evil.example"}).status_code
403
>>> r = client.get("/nothing-here", headers={"Host": "localhost:8050"})
>>> r.status_code, r.headers["X-Frame-Options"], r.headers["X-Content-Type-Options"]
(404, 'DENY', 'nosniff')
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from stateseer.core.heap import trim

__all__ = ["CSP", "ERRORS_PER_MINUTE", "LOG_LINE", "LOOPBACK_NAMES", "MAX_REQUEST_BYTES",
           "NOTEBOOK_FRAME_ANCESTORS", "RateLimit", "allowed_host_set", "bind_warning",
           "brief", "brief_errors", "framed_csp", "host_allowed", "is_loopback",
           "limit_request_bodies", "secure_headers"]

MAX_REQUEST_BYTES = 8 * 1024 * 1024
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
# Dash renders with inline scripts (its config, the renderer and clientside callbacks) and
# inline styles, so those stay allowed; everything is fetched from this origin only.
CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; "
       "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; "
       "connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'self'; "
       "form-action 'self'; frame-ancestors 'none'")
#: who may show a notebook's explorer (``stateseer.show``) in a frame: the notebook front
#: ends on this machine (Jupyter and JupyterLab on any loopback port, a hub's proxied page
#: on its own origin), VS Code's notebook webviews and Colab's output frames; no other page
#: can frame it (clickjacking)
NOTEBOOK_FRAME_ANCESTORS = ("'self' http://127.0.0.1:* http://localhost:* "
                            "https://127.0.0.1:* https://localhost:* http://[::1]:* "
                            "vscode-webview: https://*.vscode-cdn.net "
                            "https://colab.research.google.com https://*.googleusercontent.com")


def framed_csp(frame_ancestors: str) -> str:
    """:data:`CSP` with ``frame-ancestors`` replaced by ``frame_ancestors``.

    >>> framed_csp("'self'").endswith("frame-ancestors 'self'")
    True
    """
    return CSP.replace("frame-ancestors 'none'", f"frame-ancestors {frame_ancestors}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only.

    Examples
    --------
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_warning(host: str, what: str = "the server") -> str | None:
    """The warning to print when ``what`` binds to ``host`` beyond loopback, else None."""
    if is_loopback(host):
        return None
    return (f"stateseer: warning: {what} listens on {host or '0.0.0.0'}, beyond this machine, "
            "over plain HTTP: links, tokens and answers cross the network unencrypted — "
            "bind 127.0.0.1 behind an HTTPS reverse proxy, or use a trusted network only")


def _bare(host: str) -> str:
    """``host`` without port and brackets, lower case (``[::1]:80`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host


def allowed_host_set(bind_host: str | None = None,
                     allowed_hosts: Iterable[str] = ()) -> frozenset[str]:
    """Loopback names, the bound host (for a wildcard bind: this machine's names and
    addresses) and ``allowed_hosts`` (``*`` allows any host)."""
    names = set(LOOPBACK_NAMES) | {_bare(h) for h in allowed_hosts if h.strip()}
    if bind_host is not None:
        if bind_host.strip("[]") in WILDCARD_BINDS:
            name = socket.gethostname()
            names |= {name.lower(), socket.getfqdn(name).lower()}
            try:
                names |= set(socket.gethostbyname_ex(name)[2])
            except OSError:
                pass
        else:
            names.add(_bare(bind_host))
    return frozenset(names)


def host_allowed(host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a ``Host`` header value names an allowed host or is an IP address.

    Examples
    --------
    >>> ok = allowed_host_set("127.0.0.1")
    >>> host_allowed("localhost:8050", ok), host_allowed("attacker.example:8050", ok)
    (True, False)
    >>> host_allowed("192.168.1.20:8050", ok), host_allowed("[fe80::1]:8050", ok)
    (True, True)
    """
    if "*" in allowed:
        return True
    name = _bare(host or "")
    if not name:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return name in allowed


def limit_request_bodies(server: Flask, max_bytes: int = MAX_REQUEST_BYTES) -> None:
    """Refuse request bodies over ``max_bytes`` (413) on every route of ``server``."""
    server.config["MAX_CONTENT_LENGTH"] = int(max_bytes)


def _refuse(message: str) -> Response:
    return Response(message + "\n", status=403, mimetype="text/plain")


def secure_headers(server: Flask, allowed_hosts: Iterable[str] | None = None, *,
                   bind_host: str | None = None, csp: str = CSP) -> frozenset[str]:
    """Check ``Host``/``Origin`` against an allow-list and add security headers.

    Parameters
    ----------
    server : Flask
        The server (``app.server`` of a Dash app).
    allowed_hosts : iterable of str, optional
        Host names (or addresses) clients may use besides loopback and ``bind_host``;
        ``"*"`` turns the check off.
    bind_host : str, optional
        The interface the server binds (allowed as a host name too).
    csp : str
        The Content-Security-Policy of every response.

    Returns
    -------
    frozenset of str
        The allowed host names.
    """
    allowed = allowed_host_set(bind_host, allowed_hosts or ())

    @server.before_request
    def _check_host():
        if not host_allowed(request.host, allowed):
            return _refuse(f"forbidden: host {request.host[:80]!r} is not served here — "
                           "open the server by the name it was started with, or start it "
                           "with --allowed-hosts NAME")
        origin = request.headers.get("Origin")
        if origin is not None and not host_allowed(urlsplit(origin).netloc, allowed):
            return _refuse(f"forbidden: requests from origin {origin[:80]!r} are refused — "
                           "use the page this server serves")
        return None

    @server.after_request
    def _headers(resp: Response) -> Response:
        resp.headers.setdefault("Content-Security-Policy", csp)
        if "frame-ancestors 'none'" in csp:  # a page others may frame says so in the CSP
            resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers.setdefault("Referrer-Policy", "same-origin")
        return resp

    return allowed


#: the longest line a request writes to the server's log
LOG_LINE = 300
#: failed requests logged a minute (then one line says how many more there were)
ERRORS_PER_MINUTE = 30


def brief(text: object, limit: int = LOG_LINE) -> str:
    """``text`` as one bounded, printable log line (control characters escaped).

    >>> brief("x" * 1000, 20)
    'xxxxxxxxxxxxxxxxxxxx… (1,000 characters)'
    >>> brief("a\\nb\\x1b[31m")
    'a\\\\nb\\\\x1b[31m'
    """
    s = str(text)
    cut = s[:limit].encode("unicode_escape").decode("ascii", "replace")
    cut = "".join(ch if ch.isprintable() else "?" for ch in cut)
    return cut + (f"… ({len(s):,} characters)" if len(s) > limit else "")


class RateLimit:
    """At most ``per_minute`` events a minute pass; :meth:`allow` says whether this one
    does and how many were held back since the last that did (thread-safe)."""

    def __init__(self, per_minute: int = ERRORS_PER_MINUTE) -> None:
        self.per_minute = per_minute
        self._lock = threading.Lock()
        self._start, self._count, self._held = time.monotonic(), 0, 0

    def allow(self) -> tuple[bool, int]:
        with self._lock:
            now = time.monotonic()
            if now - self._start >= 60.0:
                self._start, self._count = now, 0
            self._count += 1
            if self._count > self.per_minute:
                self._held += 1
                return False, 0
            held, self._held = self._held, 0
            return True, held


#: werkzeug's own colours in its access lines (dropped before the line is escaped)
_SGR = re.compile(r"\x1b\[[0-9;]*m")


class _BoundedAccessLog(logging.Filter):
    """The access log (werkzeug's) as bounded lines; failed requests rate-limited."""

    def __init__(self, limit: RateLimit) -> None:
        super().__init__()
        self.limit = limit

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        code = str(args[1]) if len(args) > 1 else ""
        if code[:1] in ("4", "5"):
            ok, _held = self.limit.allow()
            if not ok:
                return False
        text = _SGR.sub("", record.getMessage())
        # werkzeug's own lines (the start-up banner) keep their line breaks; a line made
        # from a request (args given) is escaped whole, so a request cannot forge lines
        record.msg = brief(text) if args else "\n".join(map(brief, text.splitlines()))
        record.args = ()
        return True


class _Soon:
    """Call ``fn`` once, ``delay`` seconds after the last of a burst of :meth:`soon`
    calls started the wait (at most one timer at a time)."""

    def __init__(self, fn: Any, delay: float = 0.5) -> None:
        self.fn, self.delay = fn, delay
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def soon(self) -> None:
        with self._lock:
            if self._timer is None or not self._timer.is_alive():
                self._timer = threading.Timer(self.delay, self.fn)
                self._timer.daemon = True
                self._timer.start()


def brief_errors(server: Flask, *, per_minute: int = ERRORS_PER_MINUTE) -> None:
    """Log each request ``server`` fails on as one bounded line, rate-limited.

    Flask logs an unhandled exception with its traceback and message; a request naming an
    unknown megabyte-long output would write that megabyte twice per request. Here the
    line holds the method, the path, the exception's type and the start of its message,
    escaped; past ``per_minute`` lines a minute the rest are counted and the next line
    that is written says how many were left out. ``STATESEER_TRACEBACK=1`` keeps Flask's
    full log (for a developer chasing a callback's own bug). The response is a short
    500 that names nothing of the request. The access log's lines are bounded alike.
    """
    limit, later = RateLimit(per_minute), _Soon(trim)
    access = logging.getLogger("werkzeug")
    if not any(isinstance(f, _BoundedAccessLog) for f in access.filters):  # once a process
        access.addFilter(_BoundedAccessLog(RateLimit(per_minute)))
    if os.environ.get("STATESEER_TRACEBACK"):
        return
    log = server.logger

    @server.errorhandler(Exception)
    def _brief(exc: Exception):  # type: ignore[no-untyped-def]
        if isinstance(exc, HTTPException):
            return exc
        ok, held = limit.allow()
        if ok:
            where = exc.__traceback__
            while where is not None and where.tb_next is not None:
                where = where.tb_next
            at = (f" at {os.path.basename(where.tb_frame.f_code.co_filename)}:"
                  f"{where.tb_lineno}" if where is not None else "")
            more = f" ({held:,} more failed requests not logged)" if held else ""
            log.error("%s", brief(f"{request.method} {request.path}: "
                                  f"{type(exc).__name__}{at}: {exc}{more}"))
        later.soon()  # the heap the failed requests grew goes back once they stop
        return Response("the request failed; the server's log says why\n", status=500,
                        mimetype="text/plain")
