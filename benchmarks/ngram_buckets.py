"""n-gram lists of a long split: counted bucket by bucket, one pass over every step per
bucket (before; still the cluster path), against one pass that partitions each piece's
counts by bucket into files (now, in process).

``abstract`` counts a split's n-grams one hash bucket at a time, one bucket per
``NGRAM_BUCKET_STEPS`` (2M) steps, so that memory stays bounded as distinct n-grams grow.
With a pass over every step per bucket, the work grew with the square of the steps: at 10M
inputs (180M steps, 86 buckets) the count was still running after 34 minutes. Here one
synthetic imported run (``explorer_scale.py``'s Zipf RNN, ``--inputs``) is abstracted
once, then its n-gram lists are mined both ways with ``NGRAM_BUCKET_STEPS`` set so that
the split has each of ``--buckets`` buckets (more buckets stand for a longer split at the
real bucket size), and the lists are checked equal.

Run: ``python benchmarks/ngram_buckets.py [--inputs 100000] [--buckets 4 16 64]``. Last
line: one JSON object, per bucket count the seconds both ways, their ratio and
``same_lists``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inputs", type=int, default=100_000)
    p.add_argument("--buckets", type=int, nargs="+", default=[4, 16, 64])
    args = p.parse_args()
    from explorer_scale import build_run

    from stateseer.abstraction import sharded
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.core.engine import SerialEngine
    from stateseer.core.traces import Traces

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        run, _ = build_run(Path(tmp), args.inputs)
        ab = abstract_run(run, n_states=40, save=False)
        traces = Traces(run / "traces")
        refs = sharded.shard_refs(traces, "train")
        n = sum(r.n_steps for r in refs)
        st, S = ab.states["train"], ab.fsm.n_states
        for b in args.buckets:
            sharded.NGRAM_BUCKET_STEPS = -(-n // b)
            got = {}
            for way, flag in (("per_bucket_passes", False), ("partitioned", True)):
                sharded.NGRAM_PARTITION = flag
                t0 = time.perf_counter()
                lists = sharded.mine_patterns(SerialEngine(), refs, st, traces.surface,
                                              traces.initial_proba, S, ("ngrams",))
                got[way] = (time.perf_counter() - t0, json.dumps(lists))
            out[str(b)] = {"steps": n, "per_bucket_passes_s": round(got["per_bucket_passes"][0], 2),
                           "partitioned_s": round(got["partitioned"][0], 2),
                           "speedup": round(got["per_bucket_passes"][0] / got["partitioned"][0], 2),
                           "same_lists": got["per_bucket_passes"][1] == got["partitioned"][1]}
            print(b, out[str(b)], flush=True)
    print(json.dumps({"inputs": args.inputs, "buckets": out}))


if __name__ == "__main__":
    main()
