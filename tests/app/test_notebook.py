"""``stateseer.show``: the explorer in a notebook kernel, replaced when the cell runs again,
gone (thread and port) when stopped. Run by nbclient in a real kernel."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CELLS = [
    """import socket, threading, urllib.request
import stateseer
RUN = {run!r}
first = stateseer.show(RUN)
port = first.port
view = stateseer.show(RUN, port=port)  # the cell again, on the same port: replaced
assert not first.running and view.running and view.port == port
reply = urllib.request.urlopen(view.url, timeout=60)
page = reply.read().decode()
assert "stateseer" in page and "_dash-config" in page
# the notebook's output frame (another loopback port) may show it: no X-Frame-Options
# DENY, and the policy names the notebook front ends instead of 'none'
csp = reply.headers["Content-Security-Policy"]
assert reply.headers.get("X-Frame-Options") is None, reply.headers["X-Frame-Options"]
assert "frame-ancestors 'self' http://127.0.0.1:* http://localhost:*" in csp, csp
view""",
    """view.stop()
with socket.socket() as s:
    s.bind(("127.0.0.1", port))  # the port is free again
assert stateseer.app.notebook.shown() == []
assert not [t for t in threading.enumerate() if t.name.startswith("stateseer-show")]
print("show checks passed")""",
]


def test_show_twice_in_one_kernel_then_stop_frees_the_port(explored_run, tmp_path,
                                                            monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.format(run=str(
        explored_run))) for c in CELLS])
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = nb.cells[0].outputs[-1]["data"]
    assert '<iframe src="http://127.0.0.1:' in shown["text/html"]  # the cell shows it
    assert "show checks passed" in nb.cells[1].outputs[-1]["text"]


def test_the_handle_escapes_the_run_name_and_stops_once(explored_run, tmp_path):
    import shutil

    from stateseer.app.notebook import show, shown

    run = tmp_path / "r<b>x</b>"  # a folder name is text, never markup
    shutil.copytree(explored_run, run)
    view = show(run)
    try:
        assert view in shown() and view.url.startswith("http://127.0.0.1:")
        page = view._repr_html_()
        assert "<b>" not in page and "r&lt;b&gt;x&lt;/b&gt;" in page
    finally:
        view.stop()
        view.stop()  # idempotent
    with socket.socket() as s:
        s.bind(("127.0.0.1", view.port))
    assert not view.running and shown() == []


@pytest.fixture(autouse=True)
def _no_leftover():
    yield
    from stateseer.app.notebook import shown

    for view in shown():
        view.stop()


RESULT_CELLS = [
    "import stateseer\nrun = stateseer.ModelRun({run!r})\nrun",
    "stateseer.Abstraction.load(run.abstraction_dir)",
    "from stateseer.app.workflows.runview import RunView\n"
    "RunView({run!r}).trace_instance('test', 0)",
]


def test_results_show_themselves_in_a_notebook(explored_run, tmp_path, monkeypatch):
    """A run, an abstraction and one input's trace, as the last line of a cell, render
    as HTML in a real kernel: the figures, the FSM drawn, the tokens with their states."""
    import nbformat
    from nbclient import NotebookClient

    from stateseer.app.workflows.runview import RunView

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.format(run=str(
        explored_run))) for c in RESULT_CELLS])
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    run_html, ab_html, trace_html = (c.outputs[-1]["data"]["text/html"] for c in nb.cells)
    rv = RunView(explored_run)
    acc = f"{rv.metrics['test_accuracy']:.3f}"
    assert f"<td>test accuracy</td><td>{acc}</td>" in run_html
    assert "<td>simulation fidelity</td>" in ab_html and "<svg" in ab_html
    # every state, and the invisible marker of the start arrow (AALpy's __start0)
    assert ab_html.count('class="node"') == rv.fsm.n_states + 1
    tr = rv.trace_instance("test", 0)
    assert trace_html.count("class='st'") == tr.n_tokens
    states = re.findall(r"<span class='st'>s(\d+)</span>", trace_html)
    assert [int(s) for s in states] == list(tr.states[1:])


def test_behind_a_notebook_proxy_the_page_asks_under_its_prefix(explored_run, monkeypatch):
    """JupyterHub reaches a kernel's port at /user/NAME/proxy/PORT/ and strips that
    prefix: the page must ask for its scripts, layout and callbacks under it, while the
    server answers at /."""
    import json
    import re
    import urllib.request

    from stateseer.app.notebook import show

    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/ann/")
    view = show(explored_run)
    try:
        prefix = f"/user/ann/proxy/{view.port}/"
        assert view.url == prefix and f'src="{prefix}"' in view._repr_html_()
        page = urllib.request.urlopen(f"http://127.0.0.1:{view.port}/", timeout=60).read()
        page = page.decode()
        config = json.loads(re.search(r'id="_dash-config"[^>]*>(.*?)</script>', page,
                                      re.S).group(1))
        assert config["requests_pathname_prefix"] == prefix
        assert f'src="{prefix}_dash-component-suites/dash/dash_table/async-table.js' in page
        layout = urllib.request.urlopen(f"http://127.0.0.1:{view.port}/_dash-layout",
                                        timeout=60)
        assert layout.status == 200
    finally:
        view.stop()
    monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX")
    direct = show(explored_run, proxy=None)
    try:
        assert direct.url == f"http://127.0.0.1:{direct.port}/"
    finally:
        direct.stop()


def test_in_colab_the_page_is_reached_through_colabs_proxy(explored_run, monkeypatch):
    """Colab's kernel runs on another machine than the browser: the handle's address is
    the one Colab proxies the port under (asked as Dash asks it), that host is let in,
    and the cell frames that address; a host nobody named is still refused."""
    import sys
    import types
    import urllib.request

    from stateseer.app.notebook import show

    asked = []

    def eval_js(code):
        asked.append(code)
        port = int(code.split("(")[1].rstrip(")"))
        return f"https://abc{port}-colab.googleusercontent.com/"

    colab = types.ModuleType("google.colab")
    colab.output = types.SimpleNamespace(eval_js=eval_js)
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab.output", colab.output)
    view = show(explored_run)
    try:
        host = f"abc{view.port}-colab.googleusercontent.com"
        assert asked == [f"google.colab.kernel.proxyPort({view.port})"]
        assert view.url == f"https://{host}/" and f'src="https://{host}/"' in view._repr_html_()
        local = f"http://127.0.0.1:{view.port}/"
        ok = urllib.request.urlopen(urllib.request.Request(local, headers={
            "Host": host, "Origin": f"https://{host}"}), timeout=60)
        assert ok.status == 200
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(local, headers={
                "Host": "evil.example"}), timeout=60)
        assert e.value.code == 403
    finally:
        view.stop()
