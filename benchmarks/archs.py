"""Six recurrent architectures side by side: LSTM, GRU, Elman, minGRU, minLSTM and Mamba.

What is measured, in one run on the CPU, per architecture (``--archs``):

1. Rotten Tomatoes (``rotten_tomatoes``, one seed, the text defaults of
   :mod:`stateseer.rnn_models.train`, a fixed number of epochs per arch, :data:`TEXT_EPOCHS`, with
   the
   defaults' early stopping; ``--train-seconds`` is an optional cap, off by default, because
   a time budget makes the figures depend on the machine's load; ``train_seconds`` is
   measured):
   ``test_accuracy``; ``record_tok_s``, tokens per second of
   :func:`stateseer.rnn_models.record.record_in_process`
   over every split at the arch's default ``--state`` (``state`` and ``state_size`` say
   which); ``simulation_fidelity`` of a ``--states`` (default 40) k-means abstraction
   (:func:`stateseer.abstraction.pipeline.abstract_run`, test split); ``forcing_agreement``, the
   share of test inputs whose prediction survives forcing every step's state to its
   abstract state's centroid (the workflow behind ``stateseer force``).
2. Tomita 1–7 and ``parity`` (the formal defaults): ``tomita_exact``, how many of the seven
   grammars ``extract-dfa`` gives exactly (agreement 1.0 with the grammar on every string
   up to length 12 and the minimal DFA size), ``tomita`` (grammar number → exact, as
   DESIGN.md fixes it) and ``parity`` (exact); per language, ``long_agreement``: the
   model's agreement with the grammar on 1,000 strings of length 51–100, longer than any
   it was trained on (``tomita_detail``).

Variants are their own arch names: ``mamba-signed`` and ``mingru-signed`` are ``mamba``
and ``mingru`` trained with ``--gate signed`` (transition values in (−1, 1), Grazzi et al.
2025).

The last line of output is one JSON object with key ``archs``: a list of objects with
``arch``, ``test_accuracy``, ``record_tok_s``, ``simulation_fidelity``,
``forcing_agreement``, ``tomita_exact``, ``tomita``, ``parity`` and details.

Run: ``python benchmarks/archs.py [--quick] [--archs lstm,mamba,mamba-signed]
[--threads 2] [--no-text | --no-tomita] [--json PATH]``; ``--json`` rewrites PATH after
every arch, so a long run that is stopped keeps the rows it finished.
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

from stateseer.rnn_models.archs import ARCHITECTURES, build_model
from stateseer.rnn_models.engine import record_run
from stateseer.rnn_models.train import TrainConfig, train_run

ARCHS = ("lstm", "gru", "rnn", "mingru", "minlstm", "mamba")
#: variants: an arch name with train options of its own
VARIANTS = {"mamba-signed": ("mamba", {"gate": "signed"}),
            "mingru-signed": ("mingru", {"gate": "signed"})}


def _arch(name: str) -> tuple[str, dict[str, Any]]:
    """The registry's arch of ``name`` and the arch options the variant sets."""
    return VARIANTS.get(name, (name, {}))
#: Rotten Tomatoes epochs per arch (an upper bound: patience 3 may stop earlier). Chosen from
#: a short measurement (8 random training batches per arch, CPU time on one thread,
#: extrapolated to the epoch's tokens): 8 s/epoch LSTM, 10 GRU, 5 Elman, 14 minGRU,
#: 12 minLSTM, 18 Mamba, so 12 epochs train each arch in at most about 4 minutes on idle
#: cores (Mamba, the slowest, 12 × 18 s).
TEXT_EPOCHS = {"lstm": 12, "gru": 12, "rnn": 12, "mingru": 12, "minlstm": 12, "mamba": 12}


def _workflow(name: str):
    """A workflow function of :mod:`stateseer.app.workflows` (forcing or DFA extraction)."""
    from stateseer.app.workflows import dfa, forcing

    return getattr(forcing, name, None) or getattr(dfa, name)


def _loaded(run) -> torch.nn.Module:
    """The run's model rebuilt through the architecture registry."""
    model = build_model(run.config["model"])
    model.load_state_dict(torch.load(run.model_path, map_location="cpu", weights_only=True))
    return model.eval()


def text_figures(arch: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Train on Rotten Tomatoes, record, abstract, force: the text columns of one arch."""
    from stateseer.abstraction.pipeline import abstract_run

    arch, options = _arch(arch)
    small = dict(embed=16, hidden=16, epochs=1) if args.quick else {}
    if args.quick and "d_state" in ARCHITECTURES[arch].options:
        options = {**options, "d_state": 4}
    epochs = args.epochs or TEXT_EPOCHS.get(arch, 12)
    cfg = TrainConfig(dataset="rotten_tomatoes", arch=arch, max_seconds=args.train_seconds,
                      arch_options=options, **{"epochs": epochs, **small})
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
            "train_seconds": round(m["train_seconds"], 1), "epochs": cfg.epochs,
            "epochs_run": m["epochs_run"], "best_epoch": m["best_epoch"],
            "train_run_seconds": round(train_s, 1),
            "recorded_tokens": n_tokens, "n_states": args.states}


def tomita_figures(arch: str, runs_dir: Path, grammars: list[str],
                   args: argparse.Namespace) -> dict[str, Any]:
    """Train each grammar, record, extract the DFA; which are exact and minimal."""
    extract = _workflow("extract_run_dfa")
    variant, (arch, options) = arch, _arch(arch)
    detail = {}
    for name in grammars:
        out = runs_dir / f"{name}-{variant}"
        small = dict(epochs=3) if args.quick else {}
        run = train_run(TrainConfig(dataset=name, arch=arch, arch_options=options, **small),
                        out, force=True, progress=False)
        model = _loaded(run)
        record_run(run, model=model, splits=("train", "test"))
        rep = extract(run).report
        ok = bool(rep.get("minimal_size_match")) and rep.get("grammar_agreement_le12") == 1.0
        detail[name] = {"test_accuracy": run.metrics()["test_accuracy"],
                        "dfa_states": rep.get("n_states"),
                        "grammar_agreement_le12": rep.get("grammar_agreement_le12"),
                        "exact": ok, "long_agreement": _long_agreement(run, model, name),
                        "epochs_run": run.metrics()["epochs_run"],
                        "train_seconds": round(run.metrics()["train_seconds"], 1)}
        print(f"    {variant} {name}: {detail[name]}", flush=True)
    tomita = {n.removeprefix("tomita"): d["exact"] for n, d in detail.items()
              if n.startswith("tomita")}
    out = {"tomita_exact": sum(tomita.values()), "tomita_grammars": len(tomita),
           "tomita": tomita, "tomita_detail": detail}
    if "parity" in detail:
        out["parity"] = detail["parity"]["exact"]
    return out


def _long_agreement(run: Any, model: torch.nn.Module, grammar: str, n: int = 1000) -> float:
    """The model's agreement with the grammar on ``n`` strings of length 51–100 (half of
    them accepted where the language allows), longer than any it was trained on."""
    from stateseer.rnn_models.formal import GRAMMARS, sample_strings
    from stateseer.rnn_models.train import evaluate

    dfa = GRAMMARS[grammar].dfa
    strings = sample_strings(dfa, n, 51, 100, np.random.default_rng(0))
    vocab = run.vocab()
    acc, _ = evaluate(model, [vocab.encode(list(s)) for s in strings],
                      dfa.accepts(strings).astype(np.int64))
    return round(float(acc), 4)


def _result(rows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The benchmark's JSON object for the rows done so far."""
    return {"archs": rows, "quick": args.quick, "threads": args.threads,
            "n_states": args.states, "text_epochs": args.epochs or TEXT_EPOCHS,
            "train_seconds_cap": args.train_seconds, "torch": torch.__version__,
            "numpy": np.__version__}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run: tiny models and data")
    p.add_argument("--archs", default=",".join(ARCHS))
    p.add_argument("--runs-dir", type=Path, default=Path("/tmp/stateseer-archs"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--states", type=int, default=None, help="abstract states (default 40)")
    p.add_argument("--epochs", type=int, default=None,
                   help="Rotten Tomatoes epochs for every arch (default: TEXT_EPOCHS per arch)")
    p.add_argument("--train-seconds", type=float, default=None,
                   help="optional cap on each text training's seconds (default none; "
                        "quick 20)")
    p.add_argument("--no-tomita", action="store_true", help="skip the Tomita columns")
    p.add_argument("--no-text", action="store_true", help="skip the Rotten Tomatoes columns")
    p.add_argument("--json", type=Path, default=None,
                   help="also write the result here, rewritten after every arch")
    args = p.parse_args(argv)
    args.states = args.states or (8 if args.quick else 40)
    if args.quick and args.train_seconds is None:
        args.train_seconds = 20.0
    torch.set_num_threads(args.threads)
    archs = [a for a in args.archs.split(",") if a]
    unknown = sorted(set(archs) - set(ARCHITECTURES) - set(VARIANTS))
    if unknown:
        p.error(f"unknown arch {', '.join(unknown)}; choose from "
                f"{', '.join([*ARCHITECTURES, *VARIANTS])}")
    grammars = [f"tomita{i}" for i in ((1, 2) if args.quick else range(1, 8))] + \
        ([] if args.quick else ["parity"])
    rows = []
    for arch in archs:
        t0 = time.perf_counter()
        row: dict[str, Any] = {"arch": arch}
        if not args.no_text:
            row.update(text_figures(arch, args.runs_dir / f"rt-{arch}", args))
        if not args.no_tomita:
            row.update(tomita_figures(arch, args.runs_dir, grammars, args))
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"  {arch}: " + ", ".join(f"{k}={row[k]}" for k in (
            "test_accuracy", "record_tok_s", "simulation_fidelity", "forcing_agreement",
            "tomita_exact", "parity") if k in row), flush=True)
        rows.append(row)
        result = _result(rows, args)
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=1))
    result = _result(rows, args)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
