"""Who is asking: a participant is the holder of their link's secret, never a claimed id.

Each participant has one study link, ``/p/SECRET/``, whose secret is 128 random bits
(:func:`stateseer.app.study.store.new_secret`). The server finds the participant of a request from
that secret only; a participant id sent by the page (its ``study-info`` store, a JSON
body) is never believed. A request carries the secret in one of three ways, tried in
this order:

1. the ``X-Study-Secret`` header (scripts and the test harness);
2. the path of the page that made the request, ``/p/SECRET/`` in ``Referer`` (the
   explorer's own callbacks; same-origin only, the pages send ``Referrer-Policy:
   same-origin``), so two tabs of two participants stay apart;
3. the ``stateseer-study`` cookie set when a link is opened (``HttpOnly``,
   ``SameSite=Strict``: a page of another site cannot use it).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from flask import Response, request

__all__ = ["COOKIE", "HEADER", "SECRET_PATTERN", "link_path", "request_secret",
           "secret_from_url", "set_secret_cookie"]

COOKIE = "stateseer-study"
HEADER = "X-Study-Secret"
SECRET_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,64}")
_PATH = re.compile(r"^/p/([^/]*)/?$")
COOKIE_AGE_S = 30 * 24 * 3600


def link_path(secret: str) -> str:
    """The path of a participant's page.

    Examples
    --------
    >>> link_path("Zq3v0bW1c2l0ZS1zZWNyZXQ")
    '/p/Zq3v0bW1c2l0ZS1zZWNyZXQ/'
    """
    return f"/p/{secret}/"


def _valid(secret: str | None) -> str | None:
    return secret if secret and SECRET_PATTERN.fullmatch(secret) else None


def secret_from_url(url: str | None) -> tuple[str | None, str, bool]:
    """``(secret or None, query, is_link)`` of a page URL ``/p/SECRET/?...``.

    ``is_link`` says the path has the shape of a participant link (valid or not).

    Examples
    --------
    >>> secret_from_url("http://127.0.0.1:8050/p/Zq3v0bW1c2l0ZS1zZWNyZXQ/?row=3")
    ('Zq3v0bW1c2l0ZS1zZWNyZXQ', 'row=3', True)
    >>> secret_from_url("http://127.0.0.1:8050/p/P01/")
    (None, '', True)
    >>> secret_from_url("http://127.0.0.1:8050/")
    (None, '', False)
    """
    parsed = urlsplit(url or "")
    m = _PATH.match(parsed.path)
    if not m:
        return None, parsed.query, False
    return _valid(unquote(m.group(1))), parsed.query, True


def request_secret() -> str | None:
    """The link secret the current request carries (see the module notes), or None."""
    header = _valid(request.headers.get(HEADER))
    if header:
        return header
    from_page, _, is_link = secret_from_url(request.referrer)
    if is_link:  # a page of a link: that link and no other
        return from_page
    return _valid(request.cookies.get(COOKIE))


def set_secret_cookie(resp: Response, secret: str) -> Response:
    """Remember ``secret`` in this browser (HttpOnly, SameSite=Strict)."""
    resp.set_cookie(COOKIE, secret, max_age=COOKIE_AGE_S, httponly=True, samesite="Strict",
                    secure=request.is_secure, path="/")
    return resp
