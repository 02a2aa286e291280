"""Server-side latency of the explorer's callbacks on a run with >= 100k instances.

Builds (or reuses) a run whose training split holds >= 100,000 inputs (Rotten Tomatoes
snippets, cropped and paired at random; GRU, hidden 64, one epoch), records and
abstracts it into 40 states, then drives the real Dash app through Flask's test client
(``POST /_dash-update-component``, exactly what the browser sends) and times, per user
action, the callbacks the action triggers, one after another:

* state click: ``selection`` → ``table`` (filter 100k instances) → ``state-card`` →
  diagram ``stylesheet``
* row select: ``selection`` → ``active-trace`` → ``trace view`` → ``diagram``
* new input:  ``active-trace`` (run the GRU on the text) → ``trace view`` → ``diagram``
* the analysis views a row select also updates (each its own callback, run by the browser
  beside the ones above): integrated-gradients attribution strip, nearest training
  contexts with the projection, and (on its button) forcing every step

Baseline in the same run: a state filter the way DeepSeer's front end does it (scan every
instance's trace for the state), on the same 100k instances.

Also: seconds from ``create_app`` to a first complete render (diagram, table and trace)
in headless chromium, when it is installed.

Last line: JSON with ``n_instances``, ``state_click_p95_ms``, ``row_select_p95_ms``,
``new_input_p95_ms``, ``attribution_p95_ms``, ``nearest_p95_ms``, ``force_all_p95_ms``,
``baseline_state_filter_p95_ms`` and ``first_render_s``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def build_run(run_dir: Path, n_train: int, seed: int) -> None:
    from abstraction.pipeline import abstract_run
    from rnn_models.datasets import load_dataset
    from rnn_models.record import record_run
    from rnn_models.run import Run
    from rnn_models.train import TrainConfig, train_run

    run = Run(run_dir)
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
    record_run(run_dir, dtype="float16")
    abstract_run(run_dir, n_states=40)
    print(f"built {run_dir} in {time.perf_counter() - t0:.0f} s")


class Driver:
    """Calls the app's callbacks over HTTP, as dash-renderer does."""

    def __init__(self, app) -> None:
        self.app = app
        self.client = app.server.test_client()
        self.client.get("/")
        self.layout = {}

    def call(self, output: str, inputs: dict, state: dict | None = None,
             changed: list[str] | None = None) -> dict:
        cb = self.app.callback_map[output]

        def spec(items, values):
            out = []
            for it in items:
                key = f"{it['id']}.{it['property']}"
                out.append({"id": it["id"], "property": it["property"],
                            "value": values.get(key)})
            return out

        body = {"output": output,
                "outputs": [{"id": o.split(".")[0], "property": o.split(".")[1]}
                            for o in output.strip(".").split("...")] if "..." in output
                else {"id": output.split(".")[0], "property": output.split(".")[1]},
                "inputs": spec(cb["inputs"], inputs), "state": spec(cb.get("state", []),
                                                                     state or {}),
                "changedPropIds": changed or []}
        r = self.client.post("/_dash-update-component", json=body)
        if r.status_code == 204:
            return {}
        assert r.status_code == 200, (output, r.status_code, r.data[:300])
        return json.loads(r.data)["response"]


def _key(app, prefix: str) -> str:
    return next(k for k in app.callback_map if k.lstrip(".").startswith(prefix))


def measure(run_dir: Path, repeats: int, seed: int) -> dict:
    from app.main import create_app

    app = create_app(run_dir)
    data = app.stateseer_data
    d = Driver(app)
    k_sel, k_table = _key(app, "selection.data"), _key(app, "table.data")
    k_card, k_diag = _key(app, "state-card.children"), _key(app, "diagram.elements")
    k_style = _key(app, "diagram.stylesheet")
    k_active, k_view = _key(app, "active-trace.data"), _key(app, "trace-title.children")
    k_attr, k_nn = _key(app, "attr-strip.children"), _key(app, "nn-list.children")
    k_force = _key(app, "forced.data")
    split = "train"
    n = data.traces[split].n_inputs
    rng = np.random.default_rng(seed)
    sel0 = {"split": split, "state": None, "row": None, "pattern": None}
    base_diag = {"topk.value": 3, "mincount.value": 5, "loops.value": [],
                 "layout.value": "preset", "hover-state.data": None}
    # warm up the per-split indexes and the model once (first use), outside the timings
    data.index(split)
    data.trace_text("warm up")
    warm = data.trace_instance(split, 0)
    data.attribution(warm, "ig", "predicted")
    data.force(warm)
    data.nearest(warm, 0)
    _ = data.projection

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1000

    def show_trace(sel, clicks, text, trigger):
        """active-trace → trace view → diagram, as one user action triggers them."""
        act = d.call(k_active, {"selection.data": sel, "trace-btn.n_clicks": clicks},
                     {"new-text.value": text, "compare-mode.value": [],
                      "active-trace.data": None}, [trigger])
        act = act["active-trace"]["data"]
        d.call(k_view, {"active-trace.data": act, "selection.data": sel},
               changed=["active-trace.data"])
        d.call(k_diag, {**base_diag, "selection.data": sel, "active-trace.data": act},
               changed=["active-trace.data"])

    state_ms, row_ms, input_ms = [], [], []
    attr_ms, nn_ms, force_ms = [], [], []
    for _ in range(repeats):
        s = int(rng.integers(1, data.fsm.n_states))

        def click_state(s=s):
            sel = d.call(k_sel, {"diagram.tapNodeData": {"state": s}, "split.value": split},
                         {"selection.data": sel0}, ["diagram.tapNodeData"])
            sel = sel["selection"]["data"]
            d.call(k_table, {"selection.data": sel, "search.value": "", "regex.value": [],
                             "table.page_current": 0, "table.sort_by": []},
                   changed=["selection.data"])
            d.call(k_card, {"selection.data": sel}, {"side-tabs.value": "card"},
                   ["selection.data"])
            d.call(k_style, {"selection.data": sel, "hover-state.data": None},
                   changed=["selection.data"])

        state_ms.append(timed(click_state))
        i = int(rng.integers(0, n))

        def select_row(i=i):
            show_trace({**sel0, "row": i}, 0, "", "selection.data")

        row_ms.append(timed(select_row))
        act = {"main": data.trace_instance(split, i), "compare": None}
        attr_ms.append(timed(lambda act=act: d.call(k_attr, {
            "active-trace.data": act, "attr-method.value": "ig",
            "attr-target.value": "predicted", "attr-level.value": "token",
            "attr-regex.value": None, "attr-intensity.value": 1,
            "attr-baseline.value": "pad"},
            changed=["active-trace.data"])))
        nn_ms.append(timed(lambda act=act: d.call(k_nn, {
            "active-trace.data": act, "step.data": None, "nn-k.value": 8,
            "nn-window.value": 5}, changed=["active-trace.data"])))
        force_ms.append(timed(lambda act=act: d.call(k_force, {
            "force-all.n_clicks": 1, "force-step.n_clicks": 0, "force-clear.n_clicks": 0,
            "active-trace.data": act}, {"step.data": None}, ["force-all.n_clicks"])))
        text = data.traces[split].texts[int(rng.integers(0, n))] + " zorblaxian"

        def new_input(text=text):
            show_trace(sel0, 1, text, "trace-btn.n_clicks")

        input_ms.append(timed(new_input))

    # The state filter alone (what the baseline does), through the app's query function.
    from app.data import InstanceQuery, query_instances

    filter_ms = []
    for _ in range(max(5, repeats // 4)):
        s = int(rng.integers(1, data.fsm.n_states))
        filter_ms.append(timed(lambda s=s: query_instances(
            data, InstanceQuery(split=split, state=s))))

    # Baseline: DeepSeer's front end filters by scanning each instance's state trace.
    states = data.abstraction.states[split]
    tr = data.traces[split]
    traces_as_lists = [states[tr.steps(i)].tolist() for i in range(n)]
    base_ms = []
    for _ in range(max(5, repeats // 4)):
        s = int(rng.integers(1, data.fsm.n_states))
        base_ms.append(timed(lambda s=s: [i for i, t in enumerate(traces_as_lists) if s in t]))

    def p95(x):
        return round(float(np.percentile(x, 95)), 2)

    return {"n_instances": n, "n_states": data.fsm.n_states - 1, "repeats": repeats,
            "state_click_p95_ms": p95(state_ms), "row_select_p95_ms": p95(row_ms),
            "new_input_p95_ms": p95(input_ms), "attribution_p95_ms": p95(attr_ms),
            "nearest_p95_ms": p95(nn_ms), "force_all_p95_ms": p95(force_ms),
            "state_click_median_ms":
            round(float(np.median(state_ms)), 2),
            "state_filter_p95_ms": p95(filter_ms),
            "baseline_state_filter_p95_ms": p95(base_ms)}


def first_render(run_dir: Path, query: str = "?split=test&state=3&row=0") -> dict:
    """Seconds from ``create_app`` to a page whose diagram, table and trace are drawn, in
    headless Debian chromium (skipped when chromium is absent)."""
    import os
    import threading

    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        return {}
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from werkzeug.serving import make_server

    from app.main import create_app

    opts = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,1100"):
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        driver.get("about:blank")
        t0 = time.perf_counter()
        app = create_app(run_dir)
        t_app = time.perf_counter() - t0
        server = make_server("127.0.0.1", 0, app.server, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        driver.get(f"http://127.0.0.1:{server.server_port}/{query}")
        ready = ("const r = document.querySelector('#diagram');"
                 "const el = r && [r, ...r.querySelectorAll('*')].find(d => d._cyreg);"
                 "return !!(el && el._cyreg.cy.nodes().length"
                 " && document.querySelector('#table td')"
                 " && document.querySelector('#trace-tokens .chip'));")
        while not driver.execute_script(ready):
            if time.perf_counter() - t0 > 60:
                raise RuntimeError("the page did not render within 60 s")
            time.sleep(0.02)
        total = time.perf_counter() - t0
        server.shutdown()
        return {"first_render_s": round(total, 3), "create_app_s": round(t_app, 3)}
    finally:
        driver.quit()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, default=ROOT / "runs" / "bench-app-100k")
    p.add_argument("--instances", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    build_run(args.run, args.instances, args.seed)
    res = measure(args.run, args.repeats, args.seed)
    res.update(first_render(args.run))
    print(f"{res['n_instances']:,} instances: state click p95 {res['state_click_p95_ms']} ms "
          f"(its filter {res['state_filter_p95_ms']} ms; DeepSeer-style scan "
          f"{res['baseline_state_filter_p95_ms']} ms), row select p95 "
          f"{res['row_select_p95_ms']} ms, new input p95 {res['new_input_p95_ms']} ms")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
