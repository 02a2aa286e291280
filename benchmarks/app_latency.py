"""Server-side latency of the explorer's callbacks on a run with >= 100k instances.

Builds (or reuses) a run whose training split holds >= 100,000 inputs (Rotten Tomatoes
snippets, cropped and paired at random; GRU, hidden 64, one epoch), records and
abstracts it into 40 states, then calls the explorer's callbacks (the module-level
functions of :mod:`stateseer.app.explorer.views`, on the context the app is built with), each
result serialised to JSON as Dash sends it, and times, per user action, the callbacks
the action triggers, one after another:

* state click: diagram ``tap`` → ``update_table`` (filter 100k instances) → ``show_card``
  → diagram ``style``
* row select: table ``select_row`` → core ``choose_trace`` → ``show_trace`` (tokens) →
  ``show_chart`` → diagram ``elements``
* new input:  ``choose_trace`` (run the GRU on the text) → ``show_trace`` → ``show_chart``
  → diagram ``elements``
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
    record_run(run_dir, dtype="float16")
    abstract_run(run_dir, n_states=40)
    print(f"built {run_dir} in {time.perf_counter() - t0:.0f} s")


def _sent(value):
    """A callback's result serialised as Dash serialises its response."""
    from plotly.io.json import to_json_plotly

    return to_json_plotly(value)


def measure(run_dir: Path, repeats: int, seed: int) -> dict:
    from stateseer.app.explorer import ids
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.view import Trigger
    from stateseer.app.explorer.views import (
        attribution,
        card,
        chart,
        core,
        diagram,
        forcing,
        nearest,
        table,
        trace,
    )
    from stateseer.app.main import create_app
    from stateseer.app.workflows.query import InstanceQuery, query_instances

    ctx = ExplorerContext.load(run_dir)
    create_app(context=ctx)  # the app these callbacks serve (start-up work included)
    data = ctx.data
    split = "train"
    n = data.traces[split].n_inputs
    rng = np.random.default_rng(seed)
    sel0 = {"split": split, "state": None, "row": None, "pattern": None}
    diag = (3, 5, [], "preset")  # top-k, min count, self-loops, layout
    # warm up the per-split indexes and the model once (first use), outside the timings
    data.index(split)
    ctx.models.trace_text("warm up")
    warm = data.trace_instance(split, 0)
    ctx.models.attribution(warm, "ig", "predicted")
    ctx.models.force(warm)
    ctx.contexts.nearest(warm, 0)
    _ = ctx.contexts.projection

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1000

    def call(fn, *args):
        out = fn(ctx, *args)
        _sent(out)
        return out

    def show(sel, trigger, text):
        """active trace → token strip, chart → diagram, as one user action runs them."""
        act, _ = call(core.choose_trace, trigger, sel, 1, None, text, [], None)
        call(trace.show_trace, act, sel)
        call(chart.show_chart, act, None)
        call(diagram.elements, Trigger(ids.ACTIVE_TRACE), *diag, act, "prediction")
        return act

    page, *_ = table.update_table(ctx, sel0, "", [], None, None, None, 0, [])
    state_ms, row_ms, input_ms = [], [], []
    attr_ms, nn_ms, force_ms = [], [], []
    for _ in range(repeats):
        s = int(rng.integers(1, data.fsm.n_states))

        def click_state(s=s):
            sel, _ = call(diagram.tap, {"state": s}, sel0)
            call(table.update_table, sel, "", [], None, None, None, 0, [])
            call(card.show_card, Trigger(ids.SELECTION), sel, "card")
            call(diagram.style, sel, None)

        state_ms.append(timed(click_state))
        i = int(rng.integers(0, n))
        rows = [{**page[0], "index": i}]  # the clicked row (any page): input i

        def select_row(rows=rows):
            sel, _ = call(table.select_row, {"row": 0, "column_id": "text"}, sel0, rows)
            return show(sel, Trigger(ids.SELECTION), "")

        row_ms.append(timed(select_row))
        act = core.active_store(data.trace_instance(split, i))
        attr_ms.append(timed(lambda act=act: call(
            attribution.attribution, act, "ig", "predicted", "token", None, 1, "pad")))
        nn_ms.append(timed(lambda act=act: call(nearest.nearest, act, None, 8, 5)))
        force_ms.append(timed(lambda act=act: call(
            forcing.force, Trigger(ids.FORCE_ALL, 1), 1, 0, 0, act, None)))
        text = data.traces[split].texts[int(rng.integers(0, n))] + " zorblaxian"
        input_ms.append(timed(lambda text=text: show(sel0, Trigger(ids.TRACE_BTN, 1), text)))

    # The state filter alone (what the baseline does), through the table's query function.
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

    from stateseer.app.main import create_app

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
    p.add_argument("--no-browser", action="store_true", help="skip the first-render timing")
    args = p.parse_args()
    build_run(args.run, args.instances, args.seed)
    res = measure(args.run, args.repeats, args.seed)
    if not args.no_browser:
        res.update(first_render(args.run))
    print(f"{res['n_instances']:,} instances: state click p95 {res['state_click_p95_ms']} ms "
          f"(its filter {res['state_filter_p95_ms']} ms; DeepSeer-style scan "
          f"{res['baseline_state_filter_p95_ms']} ms), row select p95 "
          f"{res['row_select_p95_ms']} ms, new input p95 {res['new_input_p95_ms']} ms")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
