"""Nearest-context index codes: int8 (now) against float32 (before), on one run.

The index stores every training step's projection (48 coordinates) in list order, and a
query scans the probed lists' codes. Since this round the codes are int8, each
coordinate in steps of its largest magnitude in the fitting sample / 127; before, they
were float32. Both indexes are built here on the same run, the float32 one by the module
as it was (``git show BASE:abstraction/analysis/neighbors.py``, loaded beside the current
one), and measured on the same queries (states of held-out inputs):

* ``build_s`` and ``bytes`` (the saved ``.npz``);
* ``recall``: recall at 10 against brute force on ``--brute`` queries (a returned row
  counts when it is no farther than the true 10th neighbour);
* ``warm_p50_ms``: query latency with the index and traces in the page cache;
* ``cold_median_ms`` (root only): one query per fresh child process after dropping the
  page cache (as ``cold_queries.py``).

Run: ``python benchmarks/index_codes.py RUN [--base 5078397] [--queries 100]``. Last line:
one JSON object with both, and ``bytes_ratio`` (int8 over float32).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODULE = "abstraction/analysis/neighbors.py"


def module(kind: str, base: str):
    """The current neighbours module, or the one at commit ``base``."""
    if kind == "int8":
        from stateseer.abstraction.analysis import neighbors

        return neighbors
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{base}:{MODULE}"],
                         capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.gettempdir()) / f"neighbors_{base}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"neighbors_{base}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def queries(run: Path, n: int) -> np.ndarray:
    from stateseer.core.traces import Traces

    tr = Traces(run / "traces")
    held = tr["test"] if "test" in tr else tr[tr.split_names[-1]]
    rows = np.random.default_rng(0).choice(len(held.hidden), n, replace=False)
    return np.asarray(held.hidden[np.sort(rows)], np.float32)


def cold_child(run: str, path: str, kind: str, base: str, qi: int) -> dict:
    from stateseer.core.traces import Traces

    X = Traces(Path(run) / "traces")["train"].hidden
    q = queries(Path(run), qi + 1)[qi]
    ix = module(kind, base).ContextIndex.load(path)
    t0 = time.perf_counter()
    ix.kneighbors(q, 10, X=X)
    return {"ms": (time.perf_counter() - t0) * 1000}


def measure(run: Path, kind: str, base: str, work: Path, n_queries: int, n_brute: int,
            n_cold: int) -> dict:
    from stateseer.abstraction.analysis.neighbors import brute_force_neighbors
    from stateseer.core.traces import Traces

    X = Traces(run / "traces")["train"].hidden
    mod = module(kind, base)
    t0 = time.perf_counter()
    ix = mod.ContextIndex(workdir=work / f"build-{kind}").fit(X)
    path = work / f"{kind}.npz"
    ix.save(path)
    build = time.perf_counter() - t0
    ix = mod.ContextIndex.load(path)
    Q = queries(run, n_queries)
    ms, hits = [], []
    for i, q in enumerate(Q):
        t = time.perf_counter()
        d, _ = ix.kneighbors(q, 10, X=X)
        ms.append((time.perf_counter() - t) * 1000)
        if i < n_brute:
            want, _ = brute_force_neighbors(X, q, 10)
            hits.append(float(np.mean(d <= want[-1] * (1 + 1e-4) + 1e-6)))
    out = {"build_s": round(build, 1), "bytes": path.stat().st_size,
           "recall": round(float(np.mean(hits)), 4), "warm_p50_ms": round(float(np.median(ms)), 1),
           "codes_dtype": str(ix.codes_.dtype)}
    if n_cold and os.access("/proc/sys/vm/drop_caches", os.W_OK):
        cold = []
        for qi in range(n_cold):
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            res = subprocess.run([sys.executable, __file__, "--child", str(run), str(path), kind,
                                  base, str(qi)], capture_output=True, text=True, check=True)
            cold.append(json.loads(res.stdout.strip().splitlines()[-1])["ms"])
        out["cold_median_ms"] = round(float(np.median(cold)), 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", type=Path)
    p.add_argument("--base", default="5078397", help="a commit with float32 codes")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--brute", type=int, default=50)
    p.add_argument("--cold", type=int, default=8)
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        run, path, kind, base, qi = args.child
        print(json.dumps(cold_child(run, path, kind, base, int(qi))))
        return
    with tempfile.TemporaryDirectory(dir=args.run) as tmp:
        res = {kind: measure(args.run, kind, args.base, Path(tmp), args.queries, args.brute,
                             args.cold) for kind in ("float32", "int8")}
        for kind, r in res.items():
            print(kind, r, flush=True)
    res["bytes_ratio"] = round(res["int8"]["bytes"] / res["float32"]["bytes"], 3)
    res["run"] = str(args.run)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
