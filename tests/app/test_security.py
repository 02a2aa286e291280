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


# -- #53: the server under junk --------------------------------------------------------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_anon_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status", encoding="ascii"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon")


@pytest.mark.slow
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="/proc")
def test_a_flood_of_junk_requests_keeps_the_log_small_and_memory_flat(explored_tomita,
                                                                      tmp_path):
    """Requests naming an unknown 1 MB output used to write ~2 MB each to the log (the
    name twice, with a traceback). Now each is one bounded line, at most 30 a minute, and
    the server's anonymous memory after a few seconds of them is where it was."""
    import json
    import subprocess
    import sys
    import threading
    import time
    import urllib.request

    from stateseer.app.security import ERRORS_PER_MINUTE, LOG_LINE

    port, log = _free_port(), tmp_path / "serve.log"
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as sink:
        server = subprocess.Popen([sys.executable, "-m", "stateseer.app.cli", "serve",
                                   str(explored_tomita), "--port", str(port)],
                                  stdout=sink, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        settled, last = 0, -1.0
        for _ in range(120):  # the first page warms the model in the background
            time.sleep(0.5)
            now = _rss_anon_mb(server.pid)
            settled = settled + 1 if abs(now - last) < 1 else 0
            last = now
            if settled >= 4:
                break
        before, size_before = _rss_anon_mb(server.pid), log.stat().st_size
        body = json.dumps({"output": "x" * 1_000_000 + ".children",
                           "outputs": {"id": "x", "property": "children"}, "inputs": [],
                           "changedPropIds": []}).encode()
        sent = []

        def flood() -> None:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 3:
                req = urllib.request.Request(url + "/_dash-update-component", data=body,
                                             headers={"Content-Type": "application/json"})
                try:
                    urllib.request.urlopen(req, timeout=10)
                except OSError as exc:  # the 500 the junk gets
                    assert getattr(exc, "code", None) == 500, exc
                sent.append(1)

        threads = [threading.Thread(target=flood) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1.5)
        after = _rss_anon_mb(server.pid)
    finally:
        server.kill()
        server.wait()
    written = log.read_bytes()[size_before:].decode("utf-8", "replace")
    assert len(sent) > 40  # a flood, not a trickle
    assert len(written) < 2 * ERRORS_PER_MINUTE * (LOG_LINE + 200), len(written)
    assert max(map(len, written.splitlines())) < LOG_LINE + 200
    assert "KeyError" in written and "Traceback" not in written and "\x1b" not in written
    assert after - before < 100, (before, after)


def test_serve_on_a_busy_port_says_so_before_any_ready(explored_tomita):
    import socket
    import subprocess
    import sys

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "stateseer.app.cli", "serve",
                               str(explored_tomita), "--port", str(port)],
                              capture_output=True, text=True, timeout=120)
    err = done.stderr.strip()
    assert done.returncode == 2 and err.count("\n") == 0, err
    assert f"port {port}" in err and f"--port {port + 1}" in err and "serving" not in err


def test_brief_errors_bounds_escapes_and_rate_limits(ctx):
    import logging

    from stateseer.app.main import create_app
    from stateseer.app.security import brief

    app = create_app(ctx.data.run.path)
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    app.server.logger.addHandler(keep := Keep())
    try:
        client = app.server.test_client()
        for _ in range(40):
            r = client.post("/_dash-update-component", json={
                "output": "\x1b[31m" + "y" * 5000 + ".children",
                "outputs": {"id": "y", "property": "children"}, "inputs": [],
                "changedPropIds": []})
            assert r.status_code == 500 and b"y" * 100 not in r.data
    finally:
        app.server.logger.removeHandler(keep)
    assert len(records) == 30  # ERRORS_PER_MINUTE
    assert all(len(m) < 400 and "\x1b" not in m and "KeyError" in m for m in records)
    assert brief("a" * 10, 4) == "aaaa… (10 characters)"


def test_the_access_log_keeps_werkzeugs_banner_lines_and_escapes_request_lines():
    import logging

    from stateseer.app.security import RateLimit, _BoundedAccessLog

    keep = _BoundedAccessLog(RateLimit(30))
    banner = logging.LogRecord("werkzeug", logging.INFO, __file__, 1,
                               "Use a production WSGI server instead.\n * Running on %s",
                               None, None)
    banner.args = ()
    banner.msg = banner.msg % "http://127.0.0.1:1"
    assert keep.filter(banner)
    assert banner.getMessage() == ("Use a production WSGI server instead.\n"
                                   " * Running on http://127.0.0.1:1")
    forged = logging.LogRecord("werkzeug", logging.INFO, __file__, 1, '%s - - "%s" %s',
                               ("127.0.0.1", "GET /x\n127.0.0.1 fake", "200"), None)
    assert keep.filter(forged)
    assert "\n" not in forged.getMessage()
