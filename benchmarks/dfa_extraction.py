"""Exact DFA extraction on the Tomita grammars: time, states, exactness, budget curves.

What is measured, in one run on the CPU:

1. For each of ``tomita1`` … ``tomita7``: an LSTM trained with the project defaults
   (``TrainConfig(dataset=NAME, arch='lstm')``) is trained, or reused from ``--runs-dir``,
   and its train and test splits are recorded. :func:`abstraction.dfa.extract_dfa` (default
   parameters) then gives ``seconds`` (wall time of the whole call, evaluation included),
   ``n_states``, ``minimal_size_match`` (equal to the grammar's minimal DFA size) and
   ``grammar_agreement_le12`` (share of all strings of length <= 12 that the DFA classifies
   as the grammar does).
2. For ``tomita3`` and ``tomita6`` also an *imperfect* LSTM (``epochs=1``), extracted under
   budgets of 10, 20, 50, 100, 200 and 400 states (before minimisation): per budget
   ``seconds``, ``n_states_before_minimisation``, ``n_states``, ``budget_exhausted`` and
   ``agreement_le12`` / ``agreement`` / ``prefix_agreement`` with the RNN's own recorded
   predictions on the test split.
3. Baseline, same run: the DeepSeer-style abstraction without refinement — k-means with
   ``k`` states split by predicted class, majority transitions, minimised
   (``extract_dfa(traces, initial_states=k, max_states=k)``) — for k = 10 and 40: its
   states and agreement beside the refined DFA's (``baseline`` per grammar).

For context, not measured here (AALpy is not a dependency): the issue reports AALpy's
black-box L* at 0.04-0.26 s on perfect Tomita RNNs, but 2,903 states in 235 s (Tomita 3)
and 1,004 states in 87 s (Tomita 6) on imperfect ones; those figures are repeated under
``aalpy_reported`` in the JSON.

The last line of output is one JSON object with keys ``tomita`` (per grammar),
``budget_curve`` (per imperfect grammar, a list over budgets), ``max_seconds`` (slowest
extraction of all) and ``all_exact`` (every perfect-RNN DFA exact and minimal).

Run: ``python benchmarks/dfa_extraction.py [--runs-dir /tmp/stateseer-dfa-bench] [--arch lstm]``
(quick smoke: ``--grammars tomita1 --imperfect``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from abstraction.dfa import ExtractedDFA, extract_dfa
from rnn_models.formal import GRAMMARS, all_strings
from rnn_models.formats.traces import Traces

GRAMMAR_NAMES = [f"tomita{i}" for i in range(1, 8)]
IMPERFECT = ["tomita3", "tomita6"]
BUDGETS = [10, 20, 50, 100, 200, 400]
BASELINE_K = [10, 40]
AALPY_REPORTED = {
    "perfect_seconds": [0.04, 0.26],
    "tomita3_imperfect": {"n_states": 2903, "seconds": 235},
    "tomita6_imperfect": {"n_states": 1004, "seconds": 87},
}


def get_traces(runs_dir: Path, name: str, arch: str, epochs: int | None,
               threads: int) -> Traces:
    """Train and record a run (or reuse one with the same data set, arch and epochs)."""
    out = runs_dir / (f"{name}-{arch}" if epochs is None else f"{name}-{arch}-ep{epochs}")
    meta, config = out / "traces" / "meta.json", out / "config.json"
    if meta.exists() and config.exists():
        cfg = json.loads(config.read_text())["config"]
        if (cfg["dataset"], cfg["arch"], cfg["epochs"]) == (name, arch, epochs):
            return Traces(out / "traces")
    import torch

    from rnn_models.record import record_run
    from rnn_models.train import TrainConfig, train_run

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    train_run(TrainConfig(dataset=name, arch=arch, epochs=epochs), out, progress=False,
              force=True)
    traces = record_run(out, splits=("train", "test"))
    print(f"  trained and recorded {out.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return traces


def grammar_agreement(dfa: ExtractedDFA, name: str, max_len: int = 12) -> float:
    """Share of all strings of length <= max_len that ``dfa`` classifies as the grammar."""
    grammar = GRAMMARS[name]
    strings = all_strings(grammar.dfa.alphabet, max_len)
    return float((dfa.accepts(strings) == grammar.dfa.accepts(strings)).mean())


def timed(traces: Traces, name: str, **kw: Any) -> tuple[ExtractedDFA, float]:
    """Extraction with the grammar check inside (as ``stateseer extract-dfa`` runs it)."""
    t0 = time.perf_counter()
    dfa = extract_dfa(traces, grammar=GRAMMARS[name], **kw)
    return dfa, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/stateseer-dfa-bench"))
    ap.add_argument("--arch", default="lstm", choices=["lstm", "gru", "rnn"])
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads for training (small models train fastest on one)")
    ap.add_argument("--grammars", nargs="+", default=GRAMMAR_NAMES,
                    help="perfect-RNN grammars to measure (a quick smoke: --grammars tomita1)")
    ap.add_argument("--imperfect", nargs="*", default=IMPERFECT,
                    help="grammars of the imperfect-RNN budget curves (none: skip them)")
    args = ap.parse_args()
    args.runs_dir.mkdir(parents=True, exist_ok=True)

    tomita: dict[str, Any] = {}
    print(f"{'grammar':10} {'seconds':>8} {'states':>6} {'minimal':>7} {'exact<=12':>9} "
          f"{'rnn_agree':>9}   baseline k-means (k: states, agreement)")
    for name in args.grammars:
        traces = get_traces(args.runs_dir, name, args.arch, None, args.threads)
        dfa, seconds = timed(traces, name)
        r = dfa.report
        baseline = {}
        for k in BASELINE_K:
            b, b_s = timed(traces, name, initial_states=k, max_states=k)
            baseline[str(k)] = {"n_states": b.n_states, "seconds": round(b_s, 4),
                                "agreement": b.report["agreement"],
                                "grammar_agreement_le12": grammar_agreement(b, name)}
        tomita[name] = {
            "seconds": round(seconds, 4), "n_states": dfa.n_states,
            "minimal_states": GRAMMARS[name].dfa.n_states,
            "minimal_size_match": dfa.n_states == GRAMMARS[name].dfa.n_states,
            "grammar_agreement_le12": grammar_agreement(dfa, name),
            "n_states_before_minimisation": r["n_states_before_minimisation"],
            "refinement_rounds": r["refinement_rounds"], "deterministic": r["deterministic"],
            "agreement": r["agreement"], "agreement_le12": r["agreement_le12"],
            "baseline": baseline,
        }
        t = tomita[name]
        base = "  ".join(f"k={k}: {v['n_states']}, {v['agreement']:.4f}"
                         for k, v in baseline.items())
        print(f"{name:10} {seconds:8.3f} {t['n_states']:6d} {t['minimal_size_match']!s:>7} "
              f"{t['grammar_agreement_le12']:9.4f} {r['agreement']:9.4f}   {base}", flush=True)

    budget_curve: dict[str, Any] = {}
    for name in args.imperfect:
        traces = get_traces(args.runs_dir, name, args.arch, 1, args.threads)
        test = traces["test"]
        rnn_acc = float((test.predictions == np.asarray(test.labels)).mean())
        print(f"\n{name}, imperfect {args.arch} (1 epoch, test accuracy {rnn_acc:.4f})")
        print(f"{'budget':>6} {'seconds':>8} {'before':>6} {'states':>6} {'exhausted':>9} "
              f"{'agree<=12':>9} {'agree':>7} {'prefix':>7} {'grammar<=12':>11}")
        rows = []
        for budget in BUDGETS:
            dfa, seconds = timed(traces, name, max_states=budget)
            r = dfa.report
            row = {"budget": budget, "seconds": round(seconds, 4),
                   "n_states_before_minimisation": r["n_states_before_minimisation"],
                   "n_states": dfa.n_states, "budget_exhausted": r["budget_exhausted"],
                   "agreement_le12": r["agreement_le12"], "agreement": r["agreement"],
                   "prefix_agreement": r["prefix_agreement"],
                   "grammar_agreement_le12": grammar_agreement(dfa, name)}
            rows.append(row)
            print(f"{budget:6d} {seconds:8.3f} {row['n_states_before_minimisation']:6d} "
                  f"{row['n_states']:6d} {row['budget_exhausted']!s:>9} "
                  f"{row['agreement_le12']:9.4f} {row['agreement']:7.4f} "
                  f"{row['prefix_agreement']:7.4f} {row['grammar_agreement_le12']:11.4f}",
                  flush=True)
        budget_curve[name] = {"rnn_test_accuracy": rnn_acc, "curve": rows}

    seconds_all = [t["seconds"] for t in tomita.values()] + [
        row["seconds"] for c in budget_curve.values() for row in c["curve"]]
    result = {
        "arch": args.arch,
        "tomita": tomita,
        "budget_curve": budget_curve,
        "max_seconds": max(seconds_all),
        "all_exact": all(t["minimal_size_match"] and t["grammar_agreement_le12"] == 1.0
                         for t in tomita.values()),
        "aalpy_reported": AALPY_REPORTED,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
