"""Which training labels did a confusion bug change? Scorers against the ground truth.

``stateseer repair`` ranks the training inputs labelled B by how likely a model that never
saw them finds them A's (a confusion of A called B), then relabels or leaves out the top
of that ranking. This script injects the ``confusion`` bug of
:mod:`stateseer.rnn_models.injection` (a third of one class's training labels turned into
another's), so the changed rows are known, and scores the B-labelled training inputs with

``bag``     :func:`stateseer.app.workflows.suspects.held_out_bag_proba`: a bag-of-n-grams
            logistic regression cross-fitted over ten folds (what ``repair`` uses)
``truth``   the same logistic regression fitted on the labels *before* the bug (known
            only here): how well any scorer over these features could rank the changed
            rows, so ``bag``'s distance to it is what a better noise-robust fit could gain
``run``     the run's own model (an LSTM with the text defaults) cross-fitted over two
            folds, each trained through the measured noise (forward correction): what
            ``repair`` used before, via :func:`stateseer.rnn_models.train.held_out_proba`

Per seed and scorer: the ROC AUC of the changed rows against the rest, the precision at
the count the noise rate implies (what ``relabel`` takes) and at 1.5 times it (``drop``),
and the seconds. Usage: ``python benchmarks/suspect_scorers.py [--dataset
rotten_tomatoes3] [--seeds 0,1,2] [--train-rows N] [--scorers bag,truth,run]``; last
line: JSON with ``rows`` and ``summary`` (the means per scorer, and
``run_over_bag_seconds``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
from diagnosis import _subset  # the sibling benchmark script
from sklearn.metrics import roc_auc_score

from stateseer import TrainConfig, load_dataset
from stateseer.app.workflows.repair_edits import DROP_SHARE, _flip_rate, _noise, expected_flips
from stateseer.app.workflows.suspects import held_out_bag_proba
from stateseer.rnn_models.injection import inject
from stateseer.rnn_models.train import held_out_proba


def _noisy(ds, seed: int, train_rows: int | None, tmp: Path):
    """The data set with the confusion bug, as the run would read it (``jsonl:``), the
    two classes and which rows' labels the bug changed."""
    ds = _subset(ds, train_rows, seed)
    bug = inject("confusion", ds, np.random.default_rng(seed))
    noisy = load_dataset(f"jsonl:{bug.write(tmp / 'data.jsonl')}")
    right = dataclasses.replace(bug, labels=ds.labels).write(tmp / "clean.jsonl")
    truth = load_dataset(f"jsonl:{right}")
    named = np.asarray(noisy.classes, object)
    changed = named[noisy.labels] != np.asarray(truth.classes, object)[truth.labels]
    a, b = (list(noisy.classes).index(c) for c in bug.culprit["classes"])
    return noisy, a, b, changed, tmp / "data.jsonl"


def _before_bug(ds, a: int, changed: np.ndarray) -> np.ndarray:
    """Every row's label before the bug (the changed rows were all ``a``'s)."""
    labels = np.asarray(ds.labels).copy()
    labels[changed] = a
    return labels


def _scores(name: str, ds, a: int, b: int, rho: float, seed: int, path: Path,
            changed: np.ndarray) -> np.ndarray:
    """P(a) of every training row, from a model that never saw it (``rho``: the rate at
    which ``a`` was labelled ``b``, read through by the run's model; ``changed``: the rows
    the bug changed, read by ``truth`` only)."""
    labels, train = np.asarray(ds.labels), np.asarray(ds.splits["train"])
    if name in ("bag", "truth"):
        fit = labels if name == "bag" else _before_bug(ds, a, changed)
        return held_out_bag_proba([ds.tokens[i] for i in train.tolist()], fit[train],
                                  len(ds.classes), seed=seed)[:, a]
    cfg = TrainConfig(dataset=f"jsonl:{path}", arch="lstm", seed=seed,
                      label_noise=_noise(len(ds.classes), a, b, rho))
    folds = np.array_split(np.random.default_rng(seed).permutation(train), 2)
    proba, _ = held_out_proba(cfg, ds, folds)
    out = np.empty(len(train))
    out[np.searchsorted(train, np.concatenate(folds))] = proba[:, a]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="rotten_tomatoes3")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--train-rows", type=int, default=None)
    p.add_argument("--scorers", default="bag,truth,run",
                   help="comma-separated, of bag, truth, run (run: about a minute a seed)")
    args = p.parse_args(argv)
    scorers = args.scorers.split(",")
    if unknown := set(scorers) - {"bag", "truth", "run"}:
        p.error(f"unknown scorers {sorted(unknown)}; choose from bag, truth, run")
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        tmp = TemporaryDirectory()
        ds, a, b, changed, path = _noisy(load_dataset(args.dataset, seed=seed), seed,
                                         args.train_rows, Path(tmp.name))
        labels, train = np.asarray(ds.labels), np.asarray(ds.splits["train"])
        given_b = labels[train] == b
        truth = changed[train][given_b]
        rho, _, _ = _flip_rate(ds, a, "scoring")
        expected = expected_flips(ds, a, rho)
        for name in scorers:
            t0 = time.perf_counter()
            score = _scores(name, ds, a, b, rho, seed, path, changed)[given_b]
            seconds = time.perf_counter() - t0
            order = np.argsort(-score, kind="stable")
            at = {k: round(float(truth[order[:n]].mean()), 3) for k, n in (
                ("precision_relabel", expected), ("precision_drop",
                                                  round(DROP_SHARE * expected)))}
            rows.append({"seed": seed, "scorer": name, "auc": round(float(
                roc_auc_score(truth, score)), 3), **at, "changed": int(truth.sum()),
                "candidates": int(given_b.sum()), "base_rate": round(float(truth.mean()), 3),
                "seconds": round(seconds, 1)})
            print(json.dumps(rows[-1]), flush=True)
        tmp.cleanup()
    summary = {name: {k: round(float(np.mean([r[k] for r in rows if r["scorer"] == name])), 3)
                      for k in ("auc", "precision_relabel", "precision_drop", "seconds")}
               for name in scorers}
    if {"run", "bag"} <= set(scorers):
        summary["run_over_bag_seconds"] = round(summary["run"]["seconds"] /
                                                summary["bag"]["seconds"], 1)
    print(json.dumps({"rows": rows, "summary": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
