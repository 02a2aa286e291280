"""Six recurrent architectures side by side: LSTM, GRU, Elman, minGRU, minLSTM and Mamba.

What is measured, in one run on the CPU, per architecture (``--archs``):

1. Rotten Tomatoes (``rotten_tomatoes``, one seed, the text defaults of
   :mod:`rnn_models.train`, training stopped after ``--train-seconds``, default 300 s):
   ``test_accuracy``; ``record_tok_s``, tokens per second of :func:`rnn_models.record.record_run`
   over every split at the arch's default ``--state`` (``state`` and ``state_size`` say
   which); ``simulation_fidelity`` of a ``--states`` (default 40) k-means abstraction
   (:func:`abstraction.pipeline.abstract_run`, test split); ``forcing_agreement``, the
   share of test inputs whose prediction survives forcing every step's state to its
   abstract state's centroid (the workflow behind ``stateseer force``).
2. Tomita 1–7 (the formal defaults): ``tomita_exact``, how many of the seven grammars
   ``extract-dfa`` gives exactly (agreement 1.0 with the grammar on every string up to
   length 12 and the minimal DFA size), with ``tomita`` listing them.

The last line of output is one JSON object with key ``archs``: a list of objects with
``arch``, ``test_accuracy``, ``record_tok_s``, ``simulation_fidelity``,
``forcing_agreement``, ``tomita_exact`` and details.

Run: ``python benchmarks/archs.py [--quick] [--archs lstm,mamba] [--threads 2]``.
``--quick`` is a smoke run (tiny models, one epoch or a few seconds, 8 states, Tomita 1–2):
its figures say nothing about the archs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rnn_models.models import ARCHITECTURES, build_model
from rnn_models.record import record_run
from rnn_models.train import TrainConfig, train_run

ARCHS = ("lstm", "gru", "rnn", "mingru", "minlstm", "mamba")


def _workflow(name: str):
    """A workflow function of :mod:`app.workflows` (forcing or DFA extraction)."""
    import importlib

    for module in ("app.workflows.forcing", "app.workflows.dfa"):
        try:
            fn = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if fn is not None:
            return fn
    raise ImportError(f"no workflow {name!r} found")


def _loaded(run) -> torch.nn.Module:
    """The run's model rebuilt through the architecture registry."""
    model = build_model(run.config["model"])
    model.load_state_dict(torch.load(run.model_path, map_location="cpu", weights_only=True))
    return model.eval()


def text_figures(arch: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Train on Rotten Tomatoes, record, abstract, force: the text columns of one arch."""
    from abstraction.pipeline import abstract_run

    small = dict(embed=16, hidden=16, epochs=1, d_state=4) if args.quick else {}
    cfg = TrainConfig(dataset="rotten_tomatoes", arch=arch, max_seconds=args.train_seconds,
                      **small)
    t0 = time.perf_counter()
    run = train_run(cfg, out, force=True, progress=False)
    train_s = time.perf_counter() - t0
    model = _loaded(run)
    t0 = time.perf_counter()
    traces = record_run(run, model=model)
    record_s = time.perf_counter() - t0
    n_tokens = sum(s["n_steps"] for s in traces.meta["splits"].values())
    ab = abstract_run(run, n_states=args.states, random_state=0)
    centroids = _workflow("load_centroids")(run, ab, traces)
    forcing = _workflow("forcing_figures")(model, ab, centroids, traces["test"],
                                           per_state=False)
    m = run.metrics()
    return {"test_accuracy": m["test_accuracy"], "record_tok_s": round(n_tokens / record_s),
            "simulation_fidelity": ab.metrics["simulation_fidelity"],
            "label_fidelity": ab.metrics["label_fidelity"],
            "forcing_agreement": forcing["forcing_agreement"],
            "state": model.state, "state_size": int(traces.meta["state_size"]),
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "train_seconds": round(train_s, 1), "epochs_run": m["epochs_run"],
            "recorded_tokens": n_tokens, "n_states": args.states}


def tomita_figures(arch: str, runs_dir: Path, grammars: list[str],
                   args: argparse.Namespace) -> dict[str, Any]:
    """Train each grammar, record, extract the DFA; which are exact and minimal."""
    extract = _workflow("extract_run_dfa")
    exact, detail = [], {}
    for name in grammars:
        out = runs_dir / f"{name}-{arch}"
        small = dict(epochs=3) if args.quick else {}
        run = train_run(TrainConfig(dataset=name, arch=arch, **small), out, force=True,
                        progress=False)
        record_run(run, model=_loaded(run), splits=("train", "test"))
        rep = extract(run).report
        ok = bool(rep.get("minimal_size_match")) and rep.get("grammar_agreement_le12") == 1.0
        detail[name] = {"test_accuracy": run.metrics()["test_accuracy"],
                        "dfa_states": rep.get("n_states"),
                        "grammar_agreement_le12": rep.get("grammar_agreement_le12"),
                        "exact": ok}
        if ok:
            exact.append(name)
    return {"tomita_exact": len(exact), "tomita_grammars": len(grammars), "tomita": exact,
            "tomita_detail": detail}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: tiny models and data")
    p.add_argument("--archs", default=",".join(ARCHS))
    p.add_argument("--runs-dir", type=Path, default=Path("/tmp/stateseer-archs"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--states", type=int, default=None, help="abstract states (default 40)")
    p.add_argument("--train-seconds", type=float, default=None,
                   help="training budget per arch on text (default 300, quick 20)")
    p.add_argument("--no-tomita", action="store_true", help="skip the Tomita columns")
    args = p.parse_args(argv)
    args.states = args.states or (8 if args.quick else 40)
    args.train_seconds = args.train_seconds or (20.0 if args.quick else 300.0)
    torch.set_num_threads(args.threads)
    archs = [a for a in args.archs.split(",") if a]
    unknown = sorted(set(archs) - set(ARCHITECTURES))
    if unknown:
        p.error(f"unknown arch {', '.join(unknown)}; choose from {', '.join(ARCHITECTURES)}")
    grammars = [f"tomita{i}" for i in ((1, 2) if args.quick else range(1, 8))]
    rows = []
    for arch in archs:
        t0 = time.perf_counter()
        row: dict[str, Any] = {"arch": arch}
        row.update(text_figures(arch, args.runs_dir / f"rt-{arch}", args))
        if not args.no_tomita:
            row.update(tomita_figures(arch, args.runs_dir, grammars, args))
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"  {arch}: " + ", ".join(f"{k}={row[k]}" for k in (
            "test_accuracy", "record_tok_s", "simulation_fidelity", "forcing_agreement",
            "tomita_exact") if k in row), flush=True)
        rows.append(row)
    result = {"archs": rows, "quick": args.quick, "threads": args.threads,
              "n_states": args.states, "train_seconds_budget": args.train_seconds,
              "torch": torch.__version__, "numpy": np.__version__}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
