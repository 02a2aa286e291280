"""The explorer server's request limits and headers (issue 14 M3, Low): a huge body is
refused before it is read, a foreign Host or Origin is refused, security headers are set,
and binding beyond loopback warns."""

from __future__ import annotations

import io

import pytest


class _Unreadable(io.RawIOBase):
    """A request body that fails the test if the server reads any of it."""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return 0

    def seek(self, pos: int, whence: int = 0) -> int:
        return 0

    def readinto(self, b) -> int:
        raise AssertionError("the server read a body it should have refused")


@pytest.fixture(scope="module")
def app(ctx):
    from stateseer.app.main import create_app

    return create_app(context=ctx, allowed_hosts=["explorer.example"])


def test_a_500_mb_body_is_refused_unread(app):
    client = app.server.test_client()
    r = client.post("/_dash-update-component", input_stream=_Unreadable(),
                    content_type="application/json",
                    environ_overrides={"CONTENT_LENGTH": str(500 * 1024 * 1024)})
    assert r.status_code == 413


def test_foreign_hosts_and_origins_are_refused(app):
    client = app.server.test_client()
    assert client.get("/", headers={"Host": "rebound.example"}).status_code == 403
    r = client.post("/_dash-update-component", json={},
                    headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    for host in ("127.0.0.1:8050", "localhost", "explorer.example:8050", "10.1.2.3"):
        assert client.get("/_dash-layout", headers={"Host": host}).status_code == 200, host


def test_security_headers_are_set(app):
    r = app.server.test_client().get("/_dash-layout")
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]


def test_allowed_hosts_come_from_the_environment(ctx, monkeypatch):
    from stateseer.app.main import allowed_hosts_from_env, create_app

    monkeypatch.setenv("STATESEER_ALLOWED_HOSTS", " a.example, b.example ,")
    assert allowed_hosts_from_env() == ["a.example", "b.example"]
    client = create_app(context=ctx).server.test_client()
    assert client.get("/_dash-layout", headers={"Host": "b.example"}).status_code == 200
    assert client.get("/_dash-layout", headers={"Host": "c.example"}).status_code == 403


def test_serve_warns_beyond_loopback(ctx, monkeypatch, capsys, explored_run):
    from dash import Dash

    import stateseer.app.main as main

    monkeypatch.setattr(Dash, "run", lambda self, **kw: None)
    monkeypatch.setattr(main, "create_app", lambda *a, **kw: main.Dash(__name__))
    assert main.serve(explored_run, "0.0.0.0", 8050) == 0
    assert "warning: the explorer listens on 0.0.0.0" in capsys.readouterr().err
    assert main.serve(explored_run, "127.0.0.1", 8050) == 0
    assert "warning" not in capsys.readouterr().err
