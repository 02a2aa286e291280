"""Abstraction speed and memory on >= 1M recorded hidden states (dimension 256).

Builds (or reuses) a real run: a GRU (embed 128, hidden 256) trained for one epoch on a
CSV of Rotten Tomatoes snippets joined in random pairs (so that the training split holds
>= 1M steps of distinct trajectories; val/test are the original snippets), and records
its traces. Then, in two separate child processes so that peak memory is measured for
each alone:

* **stateseer**: the full abstraction (PCA-20 + k-means-40 on a sample, chunked
  assignment of every memory-mapped step, FSM, simulation, patterns, metrics) —
  ``stateseer.abstraction.pipeline.abstract_run`` without writing;
* **DeepSeer's pipeline**: PCA to 20 dimensions and a 39-component diagonal Gaussian
  mixture, both fitted on *all* states with scikit-learn (as DeepSeer's code does), the
  states then assigned with it; label fidelity measured the same way (FSM from the same
  code, so only the abstraction differs).

stateseer's child runs ``--repeats`` times (default 3) and the median run is reported
(``stateseer_runs_s`` lists them all); DeepSeer's, a minute long, runs once. Each child
imports its libraries before its clock starts, as DeepSeer's always did (stateseer's: the
pipeline, scikit-learn's k-means and numba's cached loops); ``stateseer_imports_s``,
``deepseer_imports_s`` and ``speedup_with_imports`` give that part too.

Prints human-readable lines, then one JSON object with ``n_points``, ``stateseer_s``,
``deepseer_s``, ``stateseer_label_fidelity``, ``deepseer_label_fidelity``,
``peak_rss_bytes`` (stateseer child), ``raw_state_bytes``, ``speedup`` and
``rss_over_raw``; and, from the median stateseer child once warm, ``stateseer_warm_s`` (the
abstraction again), ``assign_pass_s`` (the fitted abstractor's ``predict`` over every
training step) and the abstraction's time over that pass, cold and warm
(``abstract_over_assign_pass``, ``warm_abstract_over_assign_pass``).
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_run(run_dir: Path, steps: int, seed: int) -> None:
    import numpy as np

    from stateseer.core.rundir import RunDir
    from stateseer.rnn_models.datasets import load_dataset
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.train import TrainConfig, train_run

    run = RunDir(run_dir)
    if (run.traces_dir / "meta.json").exists():
        meta = json.loads((run.traces_dir / "meta.json").read_text())
        if meta["splits"]["train"]["n_steps"] >= steps:
            print(f"reusing {run_dir} ({meta['splits']['train']['n_steps']:,} train steps)")
            return
    ds = load_dataset("rotten_tomatoes")
    rng = np.random.default_rng(seed)
    train = ds.splits["train"]
    lengths = np.array([len(ds.tokens[i]) for i in train])
    n_pairs = int(steps / (2 * lengths.mean()) * 1.05) + 1
    a, b = rng.choice(train, n_pairs), rng.choice(train, n_pairs)
    csv_path = run_dir.parent / f"{run_dir.name}.csv"
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label", "split"])
        for i, j in zip(a, b, strict=True):
            w.writerow([ds.texts[i] + " " + ds.texts[j], ds.classes[ds.labels[i]], "train"])
        for split in ("val", "test"):
            for i in ds.splits[split]:
                w.writerow([ds.texts[i], ds.classes[ds.labels[i]], split])
    t0 = time.perf_counter()
    cfg = TrainConfig(dataset=f"csv:{csv_path}", arch="gru", embed=128, hidden=256, epochs=1,
                      seed=seed)
    train_run(cfg, run_dir, force=True, progress=False)
    print(f"trained {run_dir} in {time.perf_counter() - t0:.0f} s")
    t0 = time.perf_counter()
    tr = record_run(run_dir)
    print(f"recorded {tr.meta['splits']['train']['n_steps']:,} train steps in "
          f"{time.perf_counter() - t0:.0f} s")


def _peak_rss() -> int:
    """This process's peak RSS: ``VmHWM`` (exec starts it afresh; ``ru_maxrss`` keeps the
    parent's peak across fork + exec, so a parent that had just trained and recorded the
    run made both children report its 1.7 GB)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child_stateseer(run_dir: str) -> dict:
    """The abstraction in this fresh process (the figure), then, the process warm, the
    abstraction again and one assignment pass: the fitted abstractor's ``predict`` over
    every training step (the floor a whole abstraction is compared with)."""
    t0 = time.perf_counter()
    import stateseer.abstraction.abstractors.kmeans  # noqa: F401  (scikit-learn's k-means)
    from stateseer.abstraction.kernels import warm_up
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.core.traces import Traces

    warm_up()  # numba's compiled loops, loaded from its cache
    imports = time.perf_counter() - t0
    t0 = time.perf_counter()
    ab = abstract_run(run_dir, n_states=40, save=False)
    seconds = time.perf_counter() - t0
    peak = _peak_rss()
    t0 = time.perf_counter()
    abstract_run(run_dir, n_states=40, save=False)
    warm = time.perf_counter() - t0
    train = Traces(Path(run_dir) / "traces")["train"]
    t0 = time.perf_counter()
    ab.abstractor.predict(train.hidden, train.proba)
    assign = time.perf_counter() - t0
    return {"seconds": seconds, "imports_seconds": imports,
            "label_fidelity": ab.metrics["label_fidelity"],
            "simulation_fidelity": ab.metrics["simulation_fidelity"],
            "peak_rss": peak, "warm_seconds": warm, "assign_pass_seconds": assign}


def child_deepseer(run_dir: str) -> dict:
    t0 = time.perf_counter()
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    from stateseer.abstraction.analysis.metrics import fidelity
    from stateseer.abstraction.automata.fsm import FSM
    from stateseer.core.rundir import RunDir
    from stateseer.core.traces import Traces

    imports = time.perf_counter() - t0

    run = RunDir(run_dir)
    traces = Traces(run.traces_dir)
    train, test = traces["train"], traces["test"]
    alphabet = run.vocab_tokens()
    t0 = time.perf_counter()
    H = np.asarray(train.hidden)
    pca = PCA(n_components=20, random_state=0).fit(H)
    Z = pca.transform(H).astype(np.float64)  # float32 fits fail on collapsed states
    gmm = GaussianMixture(n_components=39, covariance_type="diag", random_state=0).fit(Z)
    states = gmm.predict(Z)
    fsm = FSM.from_paths(states, train.offsets, train.token_ids, train.proba,
                         traces.initial_proba, n_states=39, classes=traces.classes,
                         alphabet=alphabet, fallback="stay")
    test_states = gmm.predict(pca.transform(np.asarray(test.hidden))) + 1
    seconds = time.perf_counter() - t0
    lf = fidelity(fsm, fsm.final_states(test_states, test.offsets), test.predictions)
    sim = fsm.simulate(test.token_ids, test.offsets)
    sf = fidelity(fsm, fsm.final_states(sim, test.offsets), test.predictions)
    return {"seconds": seconds, "imports_seconds": imports, "label_fidelity": lf,
            "simulation_fidelity": sf, "peak_rss": _peak_rss()}


def warm_page_cache(traces_dir: Path) -> None:
    """Read every trace file once, so both children start from the page cache."""
    for f in sorted(traces_dir.rglob("*.npy")):
        with f.open("rb") as fh:
            while fh.read(1 << 24):
                pass


def run_child(kind: str, run_dir: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--run", str(run_dir)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1_000_000, help="training steps to abstract")
    p.add_argument("--run", type=Path, default=ROOT / "runs" / "bench-abstraction-256")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3,
                   help="stateseer children (the median is reported; DeepSeer's runs once)")
    p.add_argument("--child", choices=("stateseer", "deepseer"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        fn = child_stateseer if args.child == "stateseer" else child_deepseer
        print(json.dumps(fn(str(args.run))))
        return
    build_run(args.run, args.steps, args.seed)
    meta = json.loads((args.run / "traces" / "meta.json").read_text())
    n = meta["splits"]["train"]["n_steps"]
    raw = n * meta["state_size"] * 4
    warm_page_cache(args.run / "traces")  # the first child must not pay the disk read alone
    runs = sorted((run_child("stateseer", args.run) for _ in range(args.repeats)),
                  key=lambda r: r["seconds"])
    ours = runs[len(runs) // 2]  # the median run: one child is at the mercy of the machine
    each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
    print(f"stateseer: {ours['seconds']:.2f} s (median of {each}), label fidelity "
          f"{ours['label_fidelity']:.4f}, peak RSS {ours['peak_rss'] / 2**20:.0f} MiB")
    base = run_child("deepseer", args.run)
    print(f"DeepSeer pipeline: {base['seconds']:.1f} s, label fidelity "
          f"{base['label_fidelity']:.4f}, peak RSS {base['peak_rss'] / 2**20:.0f} MiB")
    result = {
        "n_points": n, "state_size": meta["state_size"],
        "stateseer_s": round(ours["seconds"], 3), "deepseer_s": round(base["seconds"], 3),
        "stateseer_runs_s": [round(r["seconds"], 3) for r in runs],
        # each child imports its libraries before its clock starts (stateseer's: the
        # pipeline, scikit-learn's k-means and numba's cached loops; DeepSeer's: PCA and
        # the mixture); what that took, and the figure with it
        "stateseer_imports_s": round(ours["imports_seconds"], 3),
        "deepseer_imports_s": round(base["imports_seconds"], 3),
        "speedup_with_imports": round((base["seconds"] + base["imports_seconds"])
                                      / (ours["seconds"] + ours["imports_seconds"]), 2),
        "speedup": round(base["seconds"] / ours["seconds"], 2),
        "stateseer_label_fidelity": ours["label_fidelity"],
        "deepseer_label_fidelity": base["label_fidelity"],
        "stateseer_simulation_fidelity": ours["simulation_fidelity"],
        "deepseer_simulation_fidelity": base["simulation_fidelity"],
        "peak_rss_bytes": ours["peak_rss"], "raw_state_bytes": raw,
        "rss_over_raw": round(ours["peak_rss"] / raw, 3),
        "deepseer_peak_rss_bytes": base["peak_rss"],
        # the median child's warm abstraction and one assignment pass over the training
        # split, in the same (warm) process
        "stateseer_warm_s": round(ours["warm_seconds"], 3),
        "assign_pass_s": round(ours["assign_pass_seconds"], 3),
        "abstract_over_assign_pass": round(ours["seconds"] / ours["assign_pass_seconds"], 2),
        "warm_abstract_over_assign_pass": round(
            ours["warm_seconds"] / ours["assign_pass_seconds"], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
