"""The explorer at scale: synthetic-but-structured runs, and what grows with them.

Usage::

    python benchmarks/explorer_scale.py index [--sizes 100000 1000000] [--queries 200]
    python benchmarks/explorer_scale.py server [--sizes 100000 1000000] [--work DIR] [--browser]
    python benchmarks/explorer_scale.py cluster-index [--sizes 100000 1000000] [--cluster local:2]

Runs are built the way a user of another framework brings them: a small numpy Elman RNN
(hidden 64, tanh) reads inputs of 20 token ids drawn from a Zipf distribution over 5,000
ids (exponent 1.1), a linear head gives the class probabilities after every token (3
classes), and the gold label is the head's class on the last state with 10 % of labels
resampled. :func:`synthetic_traces` returns the arrays of the ``import-traces`` format
(:mod:`stateseer.core.imported`), :func:`write_import` writes them.

``index``: the nearest-context index (:class:`~stateseer.abstraction.analysis.neighbors.
ContextIndex`) over the training steps of each size, for each index shape
(``--variants NAME=LISTS/PROBE``; PROBE 0 for the default; LISTS a number, ``auto``
(the default shape), ``old`` (the shape before round 4: n / 2,000 lists, at most 256)
or ``sqrtK``: K lists per square root of the steps), built out of core (``workdir``) in a
child process whose anonymous memory (``RssAnon`` in ``/proc``, sampled every 20 ms;
mapped file pages are not counted) is followed, then queried with states of held-out
inputs. Per size and shape: build seconds and peak anonymous memory above the child's
start, anonymous memory after the queries, query
p50/p95 ms, ``scanned_share`` (rows a query scans over all rows) and recall at 10 against
brute force on ``--brute`` queries (a returned row counts when it is no farther than the
true 10th neighbour). Ratios to the smallest size are printed beside every figure.

``server``: per size (inputs), a run made through ``stateseer import-traces`` (train 90 %,
test 10 %; the import folder is written block by block, its states in ``--dtype``, and
imported in a child process: seconds and peak anonymous memory) is abstracted into 40
states (``abstract_workflow``: the abstraction, then the nearest-context index; in a
child process: seconds and peak anonymous memory). Then a
second child stands in for the server: it loads the explorer's context and builds the app
(``create_app``), renders the first page (the table's first page and the diagram), then a
state click, a row click and a nearest-contexts query, each through the explorer's own
callbacks, reading its ``RssAnon`` after each step (after glibc's ``malloc_trim``, which
the served app runs soon after every request) and timing each (clicks: median of 6).

``cluster-index``: per size, the nearest-context index built afresh in a child process,
in that process and then on ``--cluster`` (Dask): seconds, the child's peak anonymous
memory above its start and the largest peak of any one worker process.

Last line: one JSON object, ``{"index": ..., "ratios": ...}``,
``{"server": {SIZE: figures}, "ratios": ...}`` or ``{"cluster_index": {SIZE: {"in_process":
figures, "cluster": figures}}, "ratios": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HIDDEN, LENGTH, VOCAB, CLASSES = 64, 20, 5000, 3


def _network(hidden: int, vocab: int, n_classes: int):
    rng = np.random.default_rng(1234)  # the network: the same at every size
    emb = rng.normal(0, 1.0, (vocab, hidden)).astype(np.float32)
    w_h = (rng.normal(0, 1.0, (hidden, hidden)) / np.sqrt(hidden) * 0.9).astype(np.float32)
    head = rng.normal(0, 1.0, (hidden, n_classes)).astype(np.float32)
    return emb, w_h, head


def _synthetic_blocks(n_inputs: int, seed: int, *, hidden: int, length: int, vocab: int,
                      n_classes: int, block: int):
    """The ids (n_inputs, length) and, block by block, ``(lo, H, proba, final_class)``;
    the labels' noise draws are taken after the last block by the caller."""
    emb, w_h, head = _network(hidden, vocab, n_classes)
    data = np.random.default_rng(seed)
    # ranks past the vocabulary wrap around (clipping them piled ~40 % of all tokens on
    # the last id)
    ids = ((data.zipf(1.1, (n_inputs, length)) - 1) % vocab).astype(np.int32)

    def blocks():
        for lo in range(0, n_inputs, block):
            n = min(block, n_inputs - lo)
            H = np.empty((n, length, hidden), np.float32)
            h = np.zeros((n, hidden), np.float32)
            for t in range(length):
                h = np.tanh(emb[ids[lo:lo + n, t]] + h @ w_h)
                H[:, t] = h
            H = H.reshape(-1, hidden)
            logits = H @ head
            proba = np.exp(logits - logits.max(1, keepdims=True))
            proba /= proba.sum(1, keepdims=True)
            yield lo, H, proba, proba.reshape(n, length, n_classes)[:, -1].argmax(1)

    return data, ids, blocks()


def _noisy(labels: np.ndarray, data: np.random.Generator, n_classes: int) -> np.ndarray:
    noisy = data.random(len(labels)) < 0.1
    labels[noisy] = data.integers(0, n_classes, int(noisy.sum()))
    return labels.astype(np.int64)


def synthetic_traces(n_inputs: int, seed: int = 0, *, hidden: int = HIDDEN,
                     length: int = LENGTH, vocab: int = VOCAB, n_classes: int = CLASSES,
                     block: int = 65_536) -> dict[str, np.ndarray]:
    """An Elman RNN's states over Zipf-distributed ids, ``block`` inputs at a time.

    Returns
    -------
    dict
        ``ids`` (n_inputs, length) int32, ``hidden`` (n_inputs * length, hidden) float32,
        ``proba`` (n_inputs * length, n_classes) float32, ``labels`` (n_inputs,) int64.
    """
    data, ids, blocks = _synthetic_blocks(n_inputs, seed, hidden=hidden, length=length,
                                          vocab=vocab, n_classes=n_classes, block=block)
    H = np.empty((n_inputs * length, hidden), np.float32)
    P = np.empty((n_inputs * length, n_classes), np.float32)
    labels = np.empty(n_inputs, np.int64)
    for lo, h, p, last in blocks:
        H[lo * length:lo * length + len(h)], P[lo * length:lo * length + len(h)] = h, p
        labels[lo:lo + len(last)] = last
    return {"ids": ids, "hidden": H, "proba": P, "labels": _noisy(labels, data, n_classes)}


def _manifest(folder: Path, splits: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({
        "format": "stateseer.import", "version": 1,
        "classes": [f"c{i}" for i in range(CLASSES)], "splits": splits,
        "dataset": "synthetic-zipf-rnn"}))


def _write_tokens(path: Path, ids: np.ndarray) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for lo in range(0, len(ids), 65_536):
            fh.write("".join(" ".join(f"w{i}" for i in row) + "\n"
                             for row in ids[lo:lo + 65_536].tolist()))


def write_import(folder: Path, splits: dict[str, dict[str, np.ndarray]]) -> Path:
    """Write arrays of :func:`synthetic_traces` per split in the ``import-traces`` format."""
    _manifest(folder, list(splits))
    for name, s in splits.items():
        d = folder / name
        d.mkdir(exist_ok=True)
        n, length = s["ids"].shape
        np.save(d / "hidden.npy", s["hidden"])
        np.save(d / "proba.npy", s["proba"])
        np.save(d / "labels.npy", s["labels"])
        np.save(d / "offsets.npy", np.arange(n + 1, dtype=np.int64) * length)
        _write_tokens(d / "tokens.txt", s["ids"])
    return folder


def write_synthetic_import(folder: Path, sizes: dict[str, tuple[int, int]],
                           dtype: str = "float32") -> Path:
    """The import folder of :func:`synthetic_traces` for ``sizes`` (split: (inputs, seed)),
    written block by block into memory-mapped ``.npy`` files (10M inputs' float32 states
    are 51 GB), the states in ``dtype``."""
    _manifest(folder, list(sizes))
    for name, (n, seed) in sizes.items():
        d = folder / name
        d.mkdir(exist_ok=True)
        data, ids, blocks = _synthetic_blocks(n, seed, hidden=HIDDEN, length=LENGTH,
                                              vocab=VOCAB, n_classes=CLASSES, block=65_536)
        H = np.lib.format.open_memmap(d / "hidden.npy", "w+", np.dtype(dtype),
                                      (n * LENGTH, HIDDEN))
        P = np.lib.format.open_memmap(d / "proba.npy", "w+", np.float32,
                                      (n * LENGTH, CLASSES))
        labels = np.empty(n, np.int64)
        for lo, h, p, last in blocks:
            H[lo * LENGTH:lo * LENGTH + len(h)] = h
            P[lo * LENGTH:lo * LENGTH + len(h)] = p
            labels[lo:lo + len(last)] = last
        H.flush()
        P.flush()
        del H, P
        np.save(d / "labels.npy", _noisy(labels, data, CLASSES))
        np.save(d / "offsets.npy", np.arange(n + 1, dtype=np.int64) * LENGTH)
        _write_tokens(d / "tokens.txt", ids)
    return folder


def _status_kib(key: str, pid: str = "self") -> int:
    """A ``/proc/PID/status`` figure in KiB (``RssAnon``, ``VmHWM`` ...)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


class AnonPeak:
    """The largest ``RssAnon`` of this process while the block runs (sampled every 20 ms):
    anonymous memory only; mapped file pages, which the kernel can drop, are not
    counted. ``worker_peak``: the largest of any one descendant process (Dask workers)."""

    def __enter__(self) -> AnonPeak:
        import threading

        import psutil

        self.peak, self._stop = _status_kib("RssAnon"), threading.Event()
        self.worker_peak = 0
        me = psutil.Process()

        def watch() -> None:
            while not self._stop.wait(0.02):
                self.peak = max(self.peak, _status_kib("RssAnon"))
                for child in me.children(recursive=True):
                    try:
                        kib = _status_kib("RssAnon", str(child.pid))
                    except (OSError, ValueError):  # it ended meanwhile
                        continue
                    self.worker_peak = max(self.worker_peak, kib)

        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _status_kib("RssAnon"))


def _n_lists(spec: str, n: int) -> int | None:
    if spec == "auto":
        return None
    if spec == "old":  # the shape before round 4: n / 2,000 lists, at most 256
        return int(np.clip(n // 2000, 1, 256))
    if spec.startswith("sqrt"):
        return max(1, int(float(spec[4:] or 1) * np.sqrt(n)))
    return int(spec)


def index_child(path: str, spec: str, probe: int, queries: str, brute: int) -> dict:
    """In a child process: build the index of the states in ``path`` out of core, query
    it; its peak memory is this process's."""
    from stateseer.abstraction.analysis.neighbors import ContextIndex, brute_force_neighbors

    X = np.load(path, mmap_mode="r")
    Q = np.load(queries)
    base = _status_kib("RssAnon")
    with tempfile.TemporaryDirectory(dir=Path(path).parent) as work, AnonPeak() as anon:
        t0 = time.perf_counter()
        ix = ContextIndex(n_lists=_n_lists(spec, len(X)), n_probe=probe,
                          workdir=Path(work) / "build").fit(X)
        ix.save(Path(work) / "ix.npz")
        ix = ContextIndex.load(Path(work) / "ix.npz")
        build_s = time.perf_counter() - t0
        for q in Q[:5]:
            ix.kneighbors(q, 10, X=X)
        times, found, scanned = [], [], []
        for q in Q:
            t0 = time.perf_counter()
            d, _ = ix.kneighbors(q, 10, X=X)
            times.append(time.perf_counter() - t0)
            found.append(d)
            scanned.append(ix.last_scanned_)
        n_lists = len(ix.centers_)
        after_queries = _status_kib("RssAnon")
    X_ram = np.asarray(X)
    norms = np.einsum("ij,ij->i", X_ram, X_ram)
    hits = []
    for j, q in enumerate(Q[:brute]):
        exact, _ = brute_force_neighbors(X_ram, q, 10, norms=norms)
        hits.append(float(np.mean(found[j] <= exact[-1] * (1 + 1e-4) + 1e-6)))
    ms = np.array(times) * 1e3
    return {"n_lists": n_lists, "n_probe": probe or ix.default_probe(),
            "build_s": round(build_s, 2),
            "build_peak_anon_mib": round((anon.peak - base) / 1024, 1),
            "anon_after_queries_mib": round((after_queries - base) / 1024, 1),
            "query_p50_ms": round(float(np.percentile(ms, 50)), 2),
            "query_p95_ms": round(float(np.percentile(ms, 95)), 2),
            "scanned_share": round(float(np.mean(scanned)) / len(X), 5),
            "recall_at_10": round(float(np.mean(hits)), 4)}


def bench_index(args: argparse.Namespace) -> dict:
    out: dict = {}
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        for n_steps in args.sizes:
            n = -(-n_steps // LENGTH)
            train = synthetic_traces(n, seed=0)
            held = synthetic_traces(max(args.queries // LENGTH + 1, 50), seed=1)
            path, qpath = Path(tmp) / f"h{n_steps}.npy", Path(tmp) / f"q{n_steps}.npy"
            np.save(path, train["hidden"])
            rng = np.random.default_rng(0)
            np.save(qpath, held["hidden"][rng.choice(len(held["hidden"]), args.queries,
                                                     replace=False)])
            del train
            out[str(n_steps)] = {}
            for spec in args.variants:
                name, shape = spec.split("=")
                lists, probe = shape.split("/")
                res = subprocess.run(
                    [sys.executable, __file__, "_index_child", str(path), lists, probe,
                     str(qpath), str(args.brute)], capture_output=True, text=True,
                    check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
                fig = json.loads(res.stdout.strip().splitlines()[-1])
                out[str(n_steps)][name] = fig
                print(f"{n_steps:>10,} {name:>8}: {fig}", flush=True)
            path.unlink()
    return out


INDEX_RATIOS = ("build_s", "build_peak_anon_mib", "query_p50_ms", "query_p95_ms",
                "scanned_share")


def ratios(result: dict, keys: tuple[str, ...] | None = None) -> dict:
    """Each size's figures over the smallest size's, per variant where the figures are
    nested (``keys``: only these figures); None where a figure is not a number or the
    smallest size's is 0."""
    sizes = sorted(result, key=int)

    def over(fig: dict, base: dict) -> dict:
        out = {}
        for k, v in fig.items():
            if isinstance(v, dict):
                out[k] = over(v, base[k])
            elif keys is None or k in keys:
                b = base.get(k)
                number = isinstance(v, (int, float)) and not isinstance(v, bool)
                out[k] = round(v / b, 2) if number and isinstance(b, (int, float)) and b \
                    else None
        return out

    return {s: over(result[s], result[sizes[0]]) for s in sizes[1:]}


def build_run(work: Path, n_inputs: int, seed: int = 0, dtype: str = "float32"
              ) -> tuple[Path, dict]:
    """An imported run of ``n_inputs`` synthetic inputs (reused when present), and the
    import's figures (``import_s``, ``import_peak_anon_mib``; empty when reused)."""
    run = work / (f"run-{n_inputs}" if dtype == "float32" else f"run-{n_inputs}-{dtype}")
    if (run / "traces" / "meta.json").exists():
        return run, {}
    n_test = max(n_inputs // 10, 100)
    src = write_synthetic_import(work / f"import-{n_inputs}", {
        "train": (n_inputs - n_test, seed), "test": (n_test, seed + 1)}, dtype)
    figures = _child("_import_child", str(src), str(run))
    import shutil

    shutil.rmtree(src)
    return run, figures


def import_child(src: str, run: str) -> dict:
    """In a child process: ``import-traces`` (seconds and peak anonymous memory)."""
    from stateseer.core.imported import import_traces

    base = _status_kib("RssAnon")
    with AnonPeak() as anon:
        t0 = time.perf_counter()
        import_traces(run, src, force=True)
        seconds = time.perf_counter() - t0
    return {"import_s": round(seconds, 1),
            "import_peak_anon_mib": round((anon.peak - base) / 1024, 1)}


def abstract_child(run: str) -> dict:
    """In a child process: ``abstract --states 40`` (abstraction, then the index)."""
    import shutil

    from stateseer.app.workflows.abstract import abstract_workflow

    shutil.rmtree(Path(run) / "index", ignore_errors=True)  # built afresh, not kept
    base = _status_kib("RssAnon")
    with AnonPeak() as anon:
        t0 = time.perf_counter()
        abstract_workflow(run, n_states=40, forcing=False, index=True)
        seconds = time.perf_counter() - t0
    return {"abstract_s": round(seconds, 1),
            "abstract_peak_anon_mib": round((anon.peak - base) / 1024, 1)}


def cluster_index_child(run: str, cluster: str) -> dict:
    """In a child process: the nearest-context index of ``run`` built afresh on
    ``cluster`` (``""``: in this process), with this process's and its workers' peaks."""
    import shutil

    from stateseer.app.workflows.contexts import context_index
    from stateseer.core.engine import engine_scope
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    shutil.rmtree(Path(run) / "index", ignore_errors=True)
    base = _status_kib("RssAnon")
    with AnonPeak() as anon:
        t0 = time.perf_counter()
        with engine_scope(cluster or None) as engine:
            r = ModelRun(run)
            context_index(r, Traces(r.traces_dir), cluster=engine)
        seconds = time.perf_counter() - t0
    return {"index_s": round(seconds, 1),
            "client_peak_anon_mib": round((anon.peak - base) / 1024, 1),
            "worker_peak_anon_mib": round(anon.worker_peak / 1024, 1)}


def bench_cluster_index(args: argparse.Namespace) -> dict:
    """``cluster-index``: per size, the index built in process and on ``--cluster``."""
    out: dict = {}
    args.work.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        run, _ = build_run(args.work, n, dtype=args.dtype)
        if not (run / "abstraction" / "meta.json").exists():
            _child("_abstract_child", str(run))
        out[str(n)] = {name: _child("_cluster_index_child", str(run), cluster)
                       for name, cluster in (("in_process", ""), ("cluster", args.cluster))}
        print(f"{n:>10,}: {out[str(n)]}", flush=True)
    return out


def server_child(run: str, repeats: int = 6, seed: int = 0) -> dict:
    """In a child process: the explorer's start-up and first page, then clicks, each
    followed by this process's ``RssAnon``."""
    t_start = time.perf_counter()
    from stateseer.app.explorer import ids
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.view import Trigger
    from stateseer.app.explorer.views import card, core, diagram, nearest, table
    from stateseer.app.main import create_app
    from stateseer.core.heap import trim

    def anon() -> float:
        trim()  # as the served app does soon after each request (app.security)
        return round(_status_kib("RssAnon") / 1024, 1)

    out: dict = {"anon_before_mib": anon(),
                 "imports_s": round(time.perf_counter() - t_start, 2)}
    t_start = time.perf_counter()  # the first page from here: the server has started
    ctx = ExplorerContext.load(run)
    create_app(context=ctx)
    sel0 = {"split": "train", "state": None, "row": None, "pattern": None}
    diag = (3, 5, [], "preset")
    page, *_ = table.update_table(ctx, sel0, "", [], None, None, None, 0, [])
    diagram.elements(ctx, Trigger(ids.ACTIVE_TRACE), *diag, None, "prediction")
    out["first_page_s"] = round(time.perf_counter() - t_start, 2)
    out["anon_first_page_mib"] = anon()
    rng = np.random.default_rng(seed)
    data = ctx.data
    n = data.traces["train"].n_inputs
    clicks: dict[str, list[float]] = {"state": [], "row": [], "nearest": []}
    for r in range(repeats):
        s = int(rng.integers(1, data.fsm.n_states))
        t0 = time.perf_counter()
        sel, _ = diagram.tap(ctx, {"state": s}, sel0)
        table.update_table(ctx, sel, "", [], None, None, None, 0, [])
        card.show_card(ctx, Trigger(ids.SELECTION), sel, "card")
        diagram.style(ctx, sel, None)
        clicks["state"].append(time.perf_counter() - t0)
        if r == 0:
            out["anon_state_click_mib"] = anon()
        i = int(rng.integers(0, n))
        rows = [{**page[0], "index": i}]
        t0 = time.perf_counter()
        sel, _ = table.select_row(ctx, {"row": 0, "column_id": "text"}, sel0, rows)
        act, _ = core.choose_trace(ctx, Trigger(ids.SELECTION), sel, 1, None, "", [], None)
        diagram.elements(ctx, Trigger(ids.ACTIVE_TRACE), *diag, act, "prediction")
        clicks["row"].append(time.perf_counter() - t0)
        if r == 0:
            out["anon_row_click_mib"] = anon()
        t0 = time.perf_counter()
        nearest.nearest(ctx, act, None, 8, 5)
        clicks["nearest"].append(time.perf_counter() - t0)
        if r == 0:
            out["anon_nearest_mib"] = anon()
    for k, v in clicks.items():
        out[f"{k}_median_ms"] = round(float(np.median(v)) * 1e3, 1)
    out["anon_end_mib"] = anon()
    out["n_inputs"] = n
    return out


def browser_figures(run: Path, clicks: int = 6, seed: int = 0) -> dict:
    """The explorer served over HTTP (``browser_latency.Session``: the app in a
    subprocess, headless chromium through selenium) on ``run``: the first render in a
    fresh browser, then ``clicks`` seeded state clicks each followed by a row click, every
    one timed in the page (``browser_latency``'s harness); whether each row click showed
    the row clicked (the trace title names its id); then the tab's memory: its JS heap
    (Chrome's ``Performance.getMetrics``) and the resident memory of chromium's renderer
    processes."""
    import psutil
    from browser_latency import Session, load
    from selenium.webdriver.common.by import By

    s = Session(Path(__file__).resolve().parents[1], run, "?split=train",
                list(range(1, 41)), [""], seed)
    try:
        first = load(s.driver, s.url, timeout=300)
        s.server.wait_idle(quiet=1.0, timeout=300)
        right = 0
        for _ in range(clicks):
            s.state_click()
            ids = [e.text for e in s.driver.find_elements(
                By.CSS_SELECTOR, '#table td[data-dash-column="id"]')]
            s.row_click()  # raises when the row's trace is not shown
            right += s.driver.find_element(By.ID, "trace-title").text.startswith(
                f"#{ids[s.last_row]} ")
        s.server.wait_idle()
        s.driver.execute_cdp_cmd("Performance.enable", {})
        metrics = {m["name"]: m["value"] for m in s.driver.execute_cdp_cmd(
            "Performance.getMetrics", {})["metrics"]}
        driver_pid = s.driver.service.process.pid
        renderers = [p for p in psutil.Process(driver_pid).children(recursive=True)
                     if "--type=renderer" in " ".join(p.cmdline())]
        rows = s.ms.get("row_click_first", []) + s.ms.get("row_click", [])
        return {"browser_first_render_ms": round(first),
                "browser_state_click_median_ms": round(float(np.median(s.ms["state_click"]))),
                "browser_row_click_median_ms": round(float(np.median(rows))),
                "browser_rows_right": f"{right}/{clicks}",
                "tab_js_heap_mib": round(metrics["JSHeapUsedSize"] / 2**20, 1),
                "tab_renderer_rss_mib": round(sum(p.memory_info().rss for p in renderers)
                                              / 2**20, 1)}
    finally:
        s.close()


def _child(*args: str) -> dict:
    res = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if res.returncode:
        raise RuntimeError(f"{args[0]} failed: {res.stderr.strip().splitlines()[-1:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_server(args: argparse.Namespace) -> dict:
    out: dict = {}
    args.work.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        t0 = time.perf_counter()
        run, fig = build_run(args.work, n, dtype=args.dtype)
        fig = {"build_import_s": round(time.perf_counter() - t0, 1), **fig,
               "dtype": args.dtype}
        fig.update(_child("_abstract_child", str(run)))
        fig.update(_child("_server_child", str(run)))
        if args.browser:
            fig.update(browser_figures(run))
        out[str(n)] = fig
        print(f"{n:>10,}: {fig}", flush=True)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("_abstract_child", "_server_child"):
        fn = abstract_child if sys.argv[1] == "_abstract_child" else server_child
        print(json.dumps(fn(sys.argv[2])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_import_child":
        print(json.dumps(import_child(sys.argv[2], sys.argv[3])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_cluster_index_child":
        print(json.dumps(cluster_index_child(sys.argv[2], sys.argv[3])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_index_child":
        path, lists, probe, queries, brute = sys.argv[2:7]
        print(json.dumps(index_child(path, lists, int(probe), queries, int(brute))))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["index", "server", "cluster-index"])
    p.add_argument("--sizes", nargs="+", type=int, default=[100_000, 1_000_000],
                   help="training steps")
    p.add_argument("--variants", nargs="+",
                   default=["default=auto/0", "old=old/64"])
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--brute", type=int, default=100)
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()))
    p.add_argument("--cluster", default="local:2",
                   help="cluster-index: the Dask cluster (default: %(default)s)")
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                   help="server, cluster-index: the imported hidden states' dtype (float16 "
                        "halves the disk a run takes: 10M inputs are 26 GB instead of 51)")
    p.add_argument("--browser", action="store_true",
                   help="server: also serve each run over HTTP and measure it in headless "
                        "chromium (first render, clicks, the tab's memory)")
    args = p.parse_args()
    if args.what == "server":
        result = bench_server(args)
        print(json.dumps({"server": result, "ratios": ratios(result)}))
        return
    if args.what == "cluster-index":
        result = bench_cluster_index(args)
        print(json.dumps({"cluster_index": result, "ratios": ratios(result)}))
        return
    result = bench_index(args)
    print(json.dumps({"index": result, "ratios": ratios(result, INDEX_RATIOS)}))


if __name__ == "__main__":
    main()
