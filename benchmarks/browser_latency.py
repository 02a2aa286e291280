"""Latency of the explorer as a user feels it: headless chromium on a 100k-instance run.

Builds (or reuses) a run whose training split holds ~100,000 inputs (Rotten Tomatoes
snippets, cropped and paired at random, as ``app_latency.py`` builds its run; GRU, hidden
64, one epoch, 40 states), serves ``stateseer.app.main.create_app(run)`` from a subprocess
(werkzeug,
threaded, 127.0.0.1, a free port) and drives headless Debian chromium through selenium.

Every interaction is timed *in the page*: a capturing ``mousedown`` listener records
``performance.now()`` and a ``requestAnimationFrame`` loop checks, frame by frame, whether
the result is in the DOM; the time is taken at the first frame that shows it (that frame
is painted right after). The results, on ``/?split=train`` (the 100k-row table):

* state click: a physical click on a diagram node (canvas position from cytoscape's
  ``renderedPosition``) → the table shows "through state S" with its rows
* row click: a click on a table cell → the trace title names the row, its token strip
  is new and the probability chart holds new data and is drawn
* typed input: text in the box, a click on "trace" → new token strip and chart
* first render: navigation start → diagram nodes and table rows drawn; cold = a fresh
  chromium profile (empty cache) each time, warm = a reload in the same browser
* first click: a state click right after a (warm) reload, once the diagram is drawn

A click whose result is not on screen within 3 s is a *lost click* (it is counted, then
clicked again; the latency reported is the one of the click that worked).

Beside the browser, a WSGI middleware in the server subprocess times every
``POST /_dash-update-component`` (request in → response out) by its output; per
interaction the JSON gives the sum of the server time of its callbacks, the number of
callback requests it caused and their sequential depth ("rounds": a callback whose
request starts after another one's response ended is one round deeper).

``--app-root DIR`` (repeatable; default: the checkout holding this script) names the
checkouts of the project whose apps to measure, e.g. a pristine git worktree and one
with a prototype fix: they are measured in the same run, taking turns step by step, and
the figures of the second and later ones, with their ratios to the first (the baseline),
go under ``variants``. Timings on a loaded machine are inflated: compare ratios, and see
``load_avg`` (``os.getloadavg()`` at the start and at the end of each app's run).

Last line: one JSON object: ``n_instances``, ``repetitions``, ``state_click_median_ms``,
``state_click_max_ms``, ``row_click_median_ms``, ``row_click_max_ms``,
``typed_input_median_ms``, ``typed_input_max_ms``, ``first_click_median_ms``,
``first_render_cold_ms`` and ``first_render_warm_ms`` (medians, with ``_max_ms``),
``lost_clicks``, ``server_state_click_ms``, ``server_row_click_ms``,
``server_typed_input_ms`` (medians of the per-interaction sums), their
``*_requests`` and ``*_rounds``, and ``server_callbacks_ms`` (median per callback).
With ``--background-load``: ``{"idle": {...}, "loaded": {...}}``, the same figures on the
idle machine and then while another process keeps one core busy.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def build_run(run_dir: Path, n_train: int, seed: int) -> None:
    """Build (or reuse) a run whose training split holds ``n_train`` inputs.

    Rotten Tomatoes snippets, cropped and paired at random (as ``app_latency.py`` does);
    GRU, hidden 64, one epoch; recorded in float16 and abstracted into 40 states.
    """
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.rnn_models.datasets import load_dataset
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.train import TrainConfig, train_run

    run = ModelRun(run_dir)
    if (run.abstraction_dir / "meta.json").exists():
        meta = json.loads((run.traces_dir / "meta.json").read_text())
        if meta["splits"]["train"]["n_inputs"] >= n_train:
            return
    ds = load_dataset("rotten_tomatoes")
    rng = np.random.default_rng(seed)
    tr = ds.splits["train"]
    csv_path = run_dir.parent / f"{run_dir.name}.csv"
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label", "split"])
        for _ in range(n_train):
            i = int(rng.choice(tr))
            toks = ds.texts[i].split()
            cut = int(rng.integers(max(1, len(toks) // 2), len(toks) + 1))
            text = " ".join(toks[:cut])
            if rng.random() < 0.3:
                text += " " + ds.texts[int(rng.choice(tr))]
            w.writerow([text, ds.classes[ds.labels[i]], "train"])
        for split in ("val", "test"):
            for i in ds.splits[split]:
                w.writerow([ds.texts[i], ds.classes[ds.labels[i]], split])
    t0 = time.perf_counter()
    train_run(TrainConfig(dataset=f"csv:{csv_path}", arch="gru", hidden=64, embed=64,
                          epochs=1, seed=seed), run_dir, force=True, progress=False)
    print(f"trained in {time.perf_counter() - t0:.0f} s", flush=True)
    record_run(run_dir, dtype="float16")
    print(f"recorded in {time.perf_counter() - t0:.0f} s", flush=True)
    abstract_run(run_dir, n_states=40)
    print(f"built {run_dir} in {time.perf_counter() - t0:.0f} s", flush=True)


# -- the server: the app of one checkout, timed per callback ---------------------------------

SERVER = r"""
import importlib.util, io, json, logging, os, sys, threading, time
# the checkout in the working directory provides stateseer and its three layers (an
# editable install maps stateseer.app & co. to the installed checkout otherwise)
for _name in ("stateseer", "stateseer.rnn_models", "stateseer.abstraction", "stateseer.app"):
    _dir = os.path.join(os.getcwd(), *(["stateseer"] if _name == "stateseer"
                                      else [_name.split(".")[1]]))
    _spec = importlib.util.spec_from_file_location(
        _name, os.path.join(_dir, "__init__.py"), submodule_search_locations=[_dir])
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _mod
    _spec.loader.exec_module(_mod)
from werkzeug.serving import make_server
from stateseer import app as app_pkg
from stateseer.app.main import create_app

logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = create_app(sys.argv[1]).server
log, inflight, lock = [], [0], threading.Lock()
inner = server.wsgi_app


def timed(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/_bench/timings":
        with lock:
            body = json.dumps({"log": log, "inflight": inflight[0],
                               "now": time.perf_counter()}).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]
    if not (path.endswith("/_dash-update-component") and environ["REQUEST_METHOD"] == "POST"):
        return inner(environ, start_response)
    raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.input"] = io.BytesIO(raw)
    try:
        out = json.loads(raw).get("output", "?")
    except ValueError:
        out = "?"
    with lock:
        inflight[0] += 1
    t0 = time.perf_counter()
    try:
        return list(inner(environ, start_response))
    finally:
        t1 = time.perf_counter()
        with lock:
            inflight[0] -= 1
            log.append((out, t0, t1))


server.wsgi_app = timed
srv = make_server("127.0.0.1", 0, server, threaded=True)
print(json.dumps({"port": srv.server_port, "app_file": app_pkg.__file__}), flush=True)
srv.serve_forever()
"""


class Server:
    """``create_app(run)`` of the checkout ``root``, served by a subprocess."""

    def __init__(self, root: Path, run_dir: Path) -> None:
        import os
        import subprocess
        import sys
        import tempfile

        self.root = root
        self.err = tempfile.NamedTemporaryFile("w+", prefix="browser_latency_", suffix=".log")
        env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS":
               os.environ.get("OMP_NUM_THREADS", "1")}
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(run_dir)], cwd=root,
                                     env=env, stdout=subprocess.PIPE, stderr=self.err,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.err.seek(0)
            raise RuntimeError(f"the app of {root} did not start:\n{self.err.read()[-3000:]}")
        info = json.loads(line)
        self.port, self.app_file = info["port"], info["app_file"]
        if not Path(self.app_file).resolve().is_relative_to(root.resolve()):
            raise RuntimeError(f"{root}: the server imported app from {self.app_file}")
        self.url = f"http://127.0.0.1:{self.port}/"

    def timings(self) -> dict:
        from urllib.request import urlopen

        with urlopen(self.url + "_bench/timings", timeout=30) as r:
            return json.loads(r.read())

    def wait_idle(self, quiet: float = 0.5, timeout: float = 60) -> float:
        """Wait until no callback has run for ``quiet`` s; the server clock then."""
        deadline = time.time() + timeout
        while True:
            t = self.timings()
            last = max((e[2] for e in t["log"]), default=0.0)
            if t["inflight"] == 0 and t["now"] - last >= quiet:
                return t["now"]
            if time.time() > deadline:
                return t["now"]
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
        self.err.close()


def server_summary(log: list, since: float) -> dict:
    """Sum, count and sequential depth of the callback requests that began after ``since``."""
    ev = sorted((e for e in log if e[1] >= since), key=lambda e: e[1])
    depth: list[int] = []
    for i, (_, t0, _) in enumerate(ev):
        depth.append(1 + max((depth[j] for j in range(i) if ev[j][2] <= t0), default=0))
    return {"ms": sum((e[2] - e[1]) * 1000 for e in ev), "requests": len(ev),
            "rounds": max(depth, default=0),
            "callbacks": [(_short(e[0]), (e[2] - e[1]) * 1000) for e in ev]}


def _short(output: str) -> str:
    return output.strip(".").split("...")[0]


# -- the browser ------------------------------------------------------------------------------

HARNESS = r"""
(() => {
  const h = window.__bench = {down: null, pred: null, result: null, firstRender: null};
  addEventListener('mousedown', () => { h.down = performance.now(); }, true);
  h.cy = () => {
    const r = document.getElementById('diagram');
    const el = r && [r, ...r.querySelectorAll('*')].find(d => d._cyreg);
    return el ? el._cyreg.cy : null;
  };
  h.rendered = () => {
    const cy = h.cy();
    return !!(cy && cy.nodes().length && document.querySelector('#table td'));
  };
  h.log = [];  // every callback request: {out, t0, t1} (performance.now(), response in)
  const fetch0 = window.fetch;
  window.fetch = function (url, opts) {
    if (!String((url && url.url) || url).includes('_dash-update-component'))
      return fetch0.apply(this, arguments);
    let out = '?';
    try { out = JSON.parse(opts.body).output; } catch (e) { /* not JSON */ }
    const e = {out, t0: performance.now(), t1: null};
    h.log.push(e);
    return fetch0.apply(this, arguments).then(r => { e.t1 = performance.now(); return r; });
  };
  h.timeline = () => h.log.filter(e => h.down !== null && e.t0 >= h.down)
    .map(e => [e.out, e.t0 - h.down, e.t1 === null ? null : e.t1 - h.down]);
  h.chart = () => document.querySelector(
    '#trace-chart.js-plotly-plot, #trace-chart .js-plotly-plot');
  const first = () => {
    if (h.rendered()) h.firstRender = performance.now(); else requestAnimationFrame(first);
  };
  requestAnimationFrame(first);
  h.snapshot = () => {
    const k = document.getElementById('trace-tokens'), gd = h.chart();
    h.old = {tokens: k ? k.textContent : '', data: gd ? gd.data : null};
  };
  h.traceShown = (title) => {
    const t = document.getElementById('trace-title'), k = document.getElementById('trace-tokens');
    if (!t || !t.textContent.startsWith(title)) return false;
    if (!k || !k.querySelector('.chip') || k.textContent === h.old.tokens) return false;
    const gd = h.chart();
    return !!(gd && gd.data && gd.data !== h.old.data && gd.querySelector('.scatterlayer .trace'));
  };
  h.arm = (pred) => {
    h.down = null; h.result = null; h.pred = pred;
    const loop = () => {
      if (!h.pred) return;
      if (h.down !== null && h.pred()) {
        h.result = performance.now() - h.down; h.pred = null; return;
      }
      requestAnimationFrame(loop);
    };
    requestAnimationFrame(loop);
  };
})();
"""


def new_browser():
    """Headless chromium with a fresh profile (an empty cache) and the timing harness."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1500,1100"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": HARNESS})
    return driver


def load(driver, url: str, timeout: float = 60) -> float:
    """Open ``url``; ms from navigation start to diagram and table drawn."""
    driver.get(url)
    deadline = time.time() + timeout
    while time.time() < deadline:
        t = driver.execute_script("return window.__bench && window.__bench.firstRender")
        if t is not None:
            return float(t)
        time.sleep(0.02)
    raise RuntimeError(f"{url} did not render within {timeout} s")


def node_xy(driver, state: int) -> list[float] | None:
    """Viewport position of ``state``'s node, when it is drawn inside the visible canvas."""
    return driver.execute_script(
        "const cy = window.__bench.cy(); if (!cy) return null;"
        f"const n = cy.$('#s{state}'); if (n.empty()) return null;"
        "const c = cy.container(); const r = c.getBoundingClientRect();"
        "if (r.top < 0 || r.bottom > innerHeight) { c.scrollIntoView({block: 'center'});"
        "  return null; }"
        "const p = n.renderedPosition(), x = r.left + p.x, y = r.top + p.y;"
        "if (x < r.left || x > r.right || y < r.top || y > r.bottom) return null;"
        "return [x, y];")


def click_at(driver, xy) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    a = ActionChains(driver)
    a.w3c_actions.pointer_action.move_to_location(int(xy[0]), int(xy[1]))
    a.w3c_actions.pointer_action.click()
    a.perform()


def wait_result(driver, timeout: float) -> float | None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = driver.execute_script("return window.__bench.result")
        if r is not None:
            return float(r)
        time.sleep(0.02)
    return None


# -- one app under test: its server, its browser, its figures --------------------------------

LOST_AFTER_S = 3.0

STATE_SHOWN = ("() => {{ const c = document.querySelector('#filter-chips .chip-f');"
               " return !!(c && c.textContent === 'through state {s}'"
               " && document.querySelector('#table td')); }}")


class Session:
    """The app of one checkout, served and driven in its own browser."""

    def __init__(self, root: Path, run_dir: Path, query: str, states: list[int],
                 texts: list[str], seed: int) -> None:
        import os

        self.root, self.query, self.states, self.texts = root, query, states, texts
        self.rng = np.random.default_rng(seed)
        self.load_avg = [round(os.getloadavg()[0], 2)]
        self.server = Server(root, run_dir)
        self.url = self.server.url + query
        self.driver = new_browser()
        self.ms: dict[str, list[float]] = {}
        self.srv: dict[str, list[dict]] = {}
        self.lost: dict[str, int] = {}
        self.errors: list[str] = []
        self.selected: int | None = None
        self.last_row: int | None = None

    # the steps, each measured once per call
    def warm_up(self) -> None:
        """Load the page, show a row and a typed input: the server loads its model and
        indexes, the browser caches the scripts (nothing here is measured)."""
        load(self.driver, self.url)
        self.row_click(record=False)
        self.typed_input(record=False)
        self.server.wait_idle(quiet=2.0, timeout=300)

    def cold_render(self) -> None:
        d = new_browser()
        try:
            self._add("first_render_cold", load(d, self.url))
        finally:
            d.quit()

    def reload_and_click(self) -> None:
        """A warm reload, then a state click as soon as the diagram is drawn."""
        self.server.wait_idle()
        self.errors += [e["message"][:300] for e in self.driver.get_log("browser")
                        if e["level"] == "SEVERE"]
        self._add("first_render_warm", load(self.driver, self.url))
        self.selected, self.last_row = None, None
        self.state_click("first_click")

    def state_click(self, kind: str = "state_click", record: bool = True) -> None:
        s = int(self.rng.choice([x for x in self.states if x != self.selected]))

        def click():
            xy, deadline = None, time.time() + 20
            while xy is None and time.time() < deadline:
                xy = node_xy(self.driver, s)
                if xy is None:
                    time.sleep(0.05)
            if xy is None:
                raise RuntimeError(f"state {s} is not drawn on the diagram")
            click_at(self.driver, xy)

        self._interact(kind, STATE_SHOWN.format(s=s), click, record)
        self.selected = s

    def row_click(self, record: bool = True) -> None:
        from selenium.webdriver.common.by import By

        d = self.driver
        ids = [e.text for e in d.find_elements(By.CSS_SELECTOR, '#table td[data-dash-column="id"]')]
        choices = [r for r in range(len(ids)) if r != self.last_row] or [0]
        r = int(self.rng.choice(choices))
        cell = d.find_elements(By.CSS_SELECTOR, '#table td[data-dash-column="text"]')[r]
        kind = "row_click" if self.ms.get("row_click") or self.ms.get("row_click_first") \
            or not record else "row_click_first"
        self._interact(kind, f"() => window.__bench.traceShown('#{ids[r]} ')", cell.click,
                       record)
        self.last_row = r

    def typed_input(self, record: bool = True) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        d = self.driver
        text = self.texts[int(self.rng.integers(len(self.texts)))]
        box = d.find_element(By.ID, "new-text")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(text)
        btn = d.find_element(By.ID, "trace-btn")
        self._interact("typed_input", "() => window.__bench.traceShown('typed input')",
                       btn.click, record)

    def _interact(self, kind: str, pred: str, click, record: bool) -> None:
        """Click, and time the result; a click that shows nothing within 3 s is lost.

        A lost click that sent no callback request at all (the page dropped it) is
        clicked again, up to twice; one that did is waited for (up to 60 s).
        """
        since = self.server.wait_idle()
        self.driver.execute_script("window.__bench.snapshot()")
        result = None
        for _ in range(3):
            self.driver.execute_script(f"window.__bench.arm({pred});")
            click()
            result = wait_result(self.driver, LOST_AFTER_S)
            if result is not None:
                break
            if record:
                self.lost[kind] = self.lost.get(kind, 0) + 1
            if self.driver.execute_script(  # mouse moves over edges only update edge-info
                    "return window.__bench.timeline().filter("
                    "e => !e[0].includes('edge-info')).length"):
                result = wait_result(self.driver, 60)
                break
        if result is None:
            raise RuntimeError(f"{self.root}: {kind} showed no result")
        if record:
            self._add(kind, result)
            self.server.wait_idle()
            summary = server_summary(self.server.timings()["log"], since)
            tl = [(_short(o), round(a, 1), None if b is None else round(b, 1)) for o, a, b
                  in self.driver.execute_script("return window.__bench.timeline()")]
            ends = [b for _, _, b in tl if b is not None and b <= result]
            summary.update(latency=result, timeline=tl,
                           after_last_response=result - max(ends, default=0.0))
            self.srv.setdefault(kind, []).append(summary)

    def _add(self, kind: str, ms: float) -> None:
        self.ms.setdefault(kind, []).append(float(ms))

    def close(self) -> None:
        import os

        self.load_avg.append(round(os.getloadavg()[0], 2))
        try:
            self.errors += [e["message"][:300] for e in self.driver.get_log("browser")
                            if e["level"] == "SEVERE"]
        except Exception:  # a driver that died has no log to give
            pass
        self.driver.quit()
        self.server.close()

    def figures(self) -> dict:
        """Median and max per interaction; server sums, requests and rounds."""
        out: dict = {}
        row = self.ms.get("row_click_first", []) + self.ms.get("row_click", [])
        ms = {**self.ms, "row_click": row}
        for k, v in ms.items():
            if k == "row_click_first" or not v:
                continue
            out[f"{k}_median_ms"] = round(float(np.median(v)), 1)
            out[f"{k}_max_ms"] = round(float(np.max(v)), 1)
        if self.ms.get("row_click_first"):
            out["row_click_first_ms"] = round(self.ms["row_click_first"][0], 1)
        for k in ("first_render_cold", "first_render_warm"):
            if k in ms:
                out[f"{k}_ms"] = out[f"{k}_median_ms"]
        out["lost_clicks"] = sum(v for k, v in self.lost.items()
                                 if k in ("state_click", "first_click"))
        out["lost_by_kind"] = dict(self.lost)
        per_cb: dict[str, list[float]] = {}
        srv = {**self.srv, "row_click": self.srv.get("row_click_first", [])
               + self.srv.get("row_click", [])}
        srv.pop("row_click_first", None)
        for k, v in srv.items():
            if not v:
                continue
            out[f"server_{k}_ms"] = round(float(np.median([s["ms"] for s in v])), 1)
            out[f"server_{k}_requests"] = float(np.median([s["requests"] for s in v]))
            out[f"server_{k}_rounds"] = float(np.median([s["rounds"] for s in v]))
            out[f"{k}_render_after_response_ms"] = round(float(np.median(
                [s["after_last_response"] for s in v])), 1)
            mid = sorted(v, key=lambda s: s["latency"])[(len(v) - 1) // 2]
            out[f"{k}_timeline"] = mid["timeline"]
            for name, t in (c for s in v for c in s["callbacks"]):
                per_cb.setdefault(name, []).append(t)
        out["server_callbacks_ms"] = {k: round(float(np.median(v)), 1)
                                      for k, v in sorted(per_cb.items())}
        out["browser_errors"] = self.errors
        out["load_avg"] = self.load_avg
        out["app"] = str(self.root)
        return out


def run_inputs(run_dir: Path, n: int, seed: int) -> tuple[int, list[int], list[str]]:
    """Instances in the train split, the most visited states and a few texts to type."""
    meta = json.loads((run_dir / "traces" / "meta.json").read_text())
    fsm = json.loads((run_dir / "abstraction" / "fsm.json").read_text())
    states = sorted(fsm["states"][1:], key=lambda s: -s["visits"])[:max(n, 12)]
    rng = np.random.default_rng(seed)
    with (run_dir.parent / f"{run_dir.name}.csv").open(encoding="utf-8") as fh:
        rows = [r["text"] for r in csv.DictReader(fh) if r["split"] == "test"]
    texts = [rows[int(i)] + f" zorblaxian{j}" for j, i in
             enumerate(rng.choice(len(rows), size=4 * n + 4, replace=False))]
    return meta["splits"]["train"]["n_inputs"], [int(s["id"]) for s in states], texts


STEPS = ("cold", "reload", "clicks")


def measure(roots: list[Path], run_dir: Path, repetitions: int, query: str,
            seed: int, steps: tuple[str, ...] = STEPS) -> dict:
    """Every interaction ``repetitions`` times for each app, the apps taking turns.

    ``steps``: ``cold`` (first render, fresh profile), ``reload`` (warm first render and
    the first click after it), ``clicks`` (state click, row click, typed input)."""
    n, states, texts = run_inputs(run_dir, repetitions, seed)
    sessions: list[Session] = []
    try:
        for root in roots:  # one after the other: the first one may build the run's index
            s = Session(root, run_dir, query, states, texts, seed)
            sessions.append(s)
            s.warm_up()
        for _ in range(repetitions if "cold" in steps else 0):
            for s in sessions:
                s.cold_render()
        for _ in range(repetitions if "reload" in steps else 0):
            for s in sessions:
                s.reload_and_click()
        for _ in range(repetitions if "clicks" in steps else 0):
            for s in sessions:
                s.state_click()
                s.row_click()
                s.typed_input()
    finally:
        for s in sessions:
            s.close()
    figs = [s.figures() for s in sessions]
    res = {"n_instances": n, "repetitions": repetitions, "query": query, **figs[0]}
    if len(figs) > 1:
        res["variants"] = {}
        for f in figs[1:]:
            ratios = {k: round(v / figs[0][k], 3) for k, v in f.items()
                      if k.endswith("_ms") and isinstance(v, float) and figs[0].get(k)}
            res["variants"][f["app"]] = {**f, "ratio_to_baseline": ratios}
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=ROOT / "runs" / "bench100k",
                   help="the run to build or reuse (default: runs/bench100k)")
    p.add_argument("--n-instances", type=int, default=100_000)
    p.add_argument("--repetitions", type=int, default=6)
    p.add_argument("--query", default="?split=train", help="the page's URL query")
    p.add_argument("--app-root", type=Path, action="append", default=[],
                   help="a checkout of the project whose app to measure (repeatable; "
                        "default: this one); the first is the baseline of the ratios")
    p.add_argument("--steps", default=",".join(STEPS),
                   help="what to measure, comma-separated: cold, reload, clicks (default all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--background-load", action="store_true",
                   help="measure twice: on the idle machine, then while another process "
                        "keeps one core busy (a pure-Python busy loop); the JSON then holds "
                        "both under 'idle' and 'loaded'")
    args = p.parse_args()
    build_run(args.run, args.n_instances, args.seed)
    steps = tuple(x.strip() for x in args.steps.split(",") if x.strip())
    if not set(steps) <= set(STEPS):
        p.error(f"--steps takes {', '.join(STEPS)}; got {args.steps!r}")

    def run() -> dict:
        return measure(args.app_root or [ROOT], args.run.resolve(), args.repetitions,
                       args.query, args.seed, steps)

    if not args.background_load:
        res = run()
        summary(res)
        print(json.dumps(res))
        return
    idle = run()
    with busy_core():
        loaded = run()
    for name, r in (("idle", idle), ("one core busy", loaded)):
        summary(r, name)
    print(json.dumps({"idle": idle, "loaded": loaded}))


def summary(res: dict, label: str = "") -> None:
    print(f"{label + ': ' if label else ''}{res['n_instances']:,} instances, "
          f"{res['repetitions']} repetitions: state click "
          f"median {res.get('state_click_median_ms')} ms, row click "
          f"{res.get('row_click_median_ms')} ms, typed input "
          f"{res.get('typed_input_median_ms')} ms, first render cold "
          f"{res.get('first_render_cold_ms')} ms, lost clicks {res['lost_clicks']}")


@contextmanager
def busy_core():
    """Another process keeping one core busy for the length of the block."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
