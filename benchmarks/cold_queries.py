"""Nearest-contexts queries from a cold page cache: the reads asked for together
(``stateseer.abstraction.arrays.will_need``) against one page fault after another.

A run's traces and index outgrow the page cache long before they outgrow the disk (at 3M
inputs, 16 GB of states and 10 GB of index on a 24 GB machine), and then a query reads
what it scans from disk: the probed lists' codes, and the full states of its 1,024
candidates, which lie anywhere in the traces. This measures one query at a time, each in
a fresh child process started after the page cache was dropped (``/proc/sys/vm/
drop_caches``, so root only; pages a live process maps are not dropped, hence a process
per query), with the reads asked for ahead (``prefetch``) and without (``baseline``:
``will_need`` replaced by a no-op), alternating, on the same queries (states of held-out
inputs). Each child also returns the neighbours, which must be the same both ways.

Run: ``python benchmarks/cold_queries.py RUN [--queries 8]`` on a run with an index
(``stateseer abstract RUN``). Last line: one JSON object with the per-query milliseconds
of both, their medians, ``speedup`` (baseline median over prefetch median) and
``same_neighbours``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def child(run: str, qi: int, mode: str) -> dict:
    import numpy as np

    from stateseer.abstraction.analysis import neighbors
    from stateseer.core.traces import Traces

    traces = Traces(Path(run) / "traces")
    held = "test" if "test" in traces else traces.split_names[-1]
    X = traces["train"].hidden
    q = np.asarray(traces[held].hidden[(qi * 7919) % len(traces[held].hidden)])
    ix = neighbors.ContextIndex.load(Path(run) / "index" / "train.contexts.npz")
    if mode == "baseline":
        neighbors.will_need = lambda *a, **k: 0
    t0 = time.perf_counter()
    _, idx = ix.kneighbors(q, 10, X=X)
    return {"ms": (time.perf_counter() - t0) * 1000, "neighbours": idx.tolist()}


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?")
    p.add_argument("--queries", type=int, default=8)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        run, qi, mode = args.child
        print(json.dumps(child(run, int(qi), mode)))
        return
    if not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        sys.exit("cold_queries.py drops the page cache before each query: run it as root")
    out: dict[str, list] = {"prefetch": [], "baseline": []}
    same = True
    for qi in range(args.queries):
        got = {}
        for mode in ("baseline", "prefetch") if qi % 2 else ("prefetch", "baseline"):
            drop_caches()
            res = subprocess.run([sys.executable, __file__, "--child", args.run, str(qi), mode],
                                 capture_output=True, text=True, check=True)
            got[mode] = json.loads(res.stdout.strip().splitlines()[-1])
            out[mode].append(round(got[mode]["ms"], 1))
        same &= got["prefetch"]["neighbours"] == got["baseline"]["neighbours"]
        print(f"query {qi}: prefetch {got['prefetch']['ms']:.0f} ms, "
              f"baseline {got['baseline']['ms']:.0f} ms", flush=True)
    import numpy as np

    med = {m: float(np.median(v)) for m, v in out.items()}
    print(json.dumps({"run": args.run, "queries": args.queries, "prefetch_ms": out["prefetch"],
                      "baseline_ms": out["baseline"], "prefetch_median_ms": med["prefetch"],
                      "baseline_median_ms": med["baseline"],
                      "speedup": round(med["baseline"] / med["prefetch"], 2),
                      "same_neighbours": bool(same)}))


if __name__ == "__main__":
    main()
