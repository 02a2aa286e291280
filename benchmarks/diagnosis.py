"""Does ``stateseer diagnose`` find what is wrong with a model? Injected bugs, known culprits.

For each data set, model seed and bug family of :mod:`stateseer.rnn_models.injection`
(and a clean control per data set and seed) a model is trained on the edited data with
the default settings, recorded, abstracted and diagnosed on the test split. A method
*hits* when one of its top K answers names the culprit (:func:`injection.hit`). Methods,
all on the same model in the same run:

``stateseer``   ``stateseer diagnose``: findings ranked significant first
``buggy``       the buggy patterns as the explorer lists them (a pattern names the
                culprit when one of its phrases holds the culprit's tokens)
``ig``          Captum integrated gradients averaged over the misclassified test inputs:
                tokens by mean attribution towards the wrong prediction
``hypergeom``   tokens over-represented in misclassified inputs (hypergeometric tail)

On the clean controls it counts the findings reported significant, how many of those found
on the validation split are significant on the test split too, the candidates that pass
the q-value gate when the misclassification flags are shuffled (``permutation_null``, 20
shuffles: the target is at most one per 20), and times ``diagnose`` against ``abstract``
on the same run. The summary gives the hit rates over all runs and over the runs whose bug
the model learnt (it cost at least ``LEARNT`` test accuracy). Where stateseer's
finding is significant it repairs with the finding's first action (``--all-actions``: with
each action the finding offers, on the same buggy model; ``--actions relabel,...``: with
those it offers) and reports how much of the
accuracy the bug cost is recovered: ``(repaired - buggy) / (clean - buggy)``. Two
references read those figures in the same run: ``--oracle`` retrains each label bug
without exactly the rows it changed (what a repair that knew them would recover), and
``--spread`` retrains each clean control without a random 1 % of its training inputs
(how far retraining alone moves the accuracy and single classes), and ``--repeats R``
trains the clean, buggy, repaired and oracle data R times each (other seeds) and reports
the recovery of the mean accuracies too. On every injected run too, the findings
significant on the validation split are checked on the test split.

Usage: ``python benchmarks/diagnosis.py [--datasets rotten_tomatoes,...] [--families ...]
[--seeds 0,1,2] [--epochs N] [--train-rows N] [--out DIR]``. Last line: JSON with ``runs``
(``dataset``, ``family``, ``seed``, ``method``, ``rank``, ``hit1``, ``hit5``, ``bug_cost``:
the test accuracy the bug cost against the clean control, ``seconds``; stateseer's rows
``val_significant``, ``replicated_on_test``),
``clean`` (``dataset``, ``seed``, ``method``, ``significant``; ``spread`` with
``--spread``; ``repair`` for the data sets
of ``--repair-clean``: the top finding's first action, significant or not, with the change in
test accuracy and its interval) and ``repairs``
(``dataset``, ``family``, ``seed``, ``action``, ``first`` (the finding's first action),
``clean_accuracy``, ``buggy_accuracy``,
``repaired_accuracy``, ``recovered``, ``per_class_delta`` against the buggy model and
``per_class_vs_clean`` against the clean one; ``suspects``: of the training rows the
repair relabelled or left out, how many the bug had relabelled, against all it had;
``oracle-drop`` rows with ``--oracle``; with ``--repeats``, ``repeats``,
``recovered_mean_of_seeds`` and ``per_class_vs_clean_mean_of_seeds``); ``summary`` adds
``repairs`` (per family and action: mean and pooled recovery, runs at 0.8 or more, the
suspects' pooled precision and recall, ``mean_of_seeds`` with each run's worst class
against the clean data over the seeds and how many runs lose no class more than a
point), ``spread`` and ``replication``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from stateseer import TrainConfig, abstract_run, load_dataset, record_run, train_run
from stateseer.abstraction.analysis.diagnosis import token_candidates
from stateseer.app.workflows.diagnose import diagnose_run, permutation_null
from stateseer.app.workflows.repair import SEED_STEP, repair_run
from stateseer.core.errors import DataError, StateseerError
from stateseer.core.traces import Traces
from stateseer.rnn_models.injection import BUGS, clean, hit, inject

TOP = 10
#: test accuracy a bug must cost (against the same model and seed on clean data) to count
#: as learnt: a bug that changed nothing leaves no errors for any method to explain
LEARNT = 0.01


def _subset(ds: Any, train_rows: int | None, seed: int) -> Any:
    """The data set with at most ``train_rows`` training inputs (for quick runs)."""
    if not train_rows or len(ds.splits["train"]) <= train_rows:
        return ds
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(ds.splits["train"], train_rows, replace=False))
    return dataclasses.replace(ds, splits={**ds.splits, "train": keep})


def _rank(answers: list[dict[str, Any]], culprit: dict[str, Any]) -> int | None:
    return next((k for k, a in enumerate(answers, 1) if hit(a, culprit)), None)


def _buggy_answers(run: Path) -> list[dict[str, Any]]:
    pats = json.loads((run / "abstraction" / "patterns.json").read_text())["buggy"]["test"]
    return [{"kind": "window", "tokens": sorted({w for ph in p.get("phrases", ())
                                                 for w in ph["phrase"].split()})}
            for p in pats]


def _ig_answers(run: Path, limit: int = 150) -> list[dict[str, Any]]:
    from stateseer.rnn_models.attribution import attribute
    from stateseer.rnn_models.run import ModelRun

    r = ModelRun(run)
    model, tr = r.load_model(), Traces(r.traces_dir)["test"]
    wrong = np.flatnonzero(np.asarray(tr.predictions) != np.asarray(tr.labels))[:limit]
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for i in wrong.tolist():
        ids = np.asarray(tr.token_ids[tr.steps(i)])
        if not len(ids):
            continue
        att = attribute(model, ids, tr.tokens(i), method="ig", n_steps=16)
        for tok, s in zip(att.tokens, np.asarray(att.scores), strict=True):
            total[tok] = total.get(tok, 0.0) + float(s)
            count[tok] = count.get(tok, 0) + 1
    score = {t: total[t] / count[t] for t in total if count[t] >= 3}
    return [{"kind": "shortcut", "tokens": [t]} for t in sorted(score, key=score.get,
                                                              reverse=True)]


def _hypergeom_answers(run: Path) -> list[dict[str, Any]]:
    tr = Traces(Path(run) / "traces")["test"]
    wrong = np.asarray(tr.predictions) != np.asarray(tr.labels)
    cands = token_candidates([tr.tokens(i) for i in range(tr.n_inputs)], wrong)
    return [{"kind": "shortcut", "tokens": list(c.tokens)} for c in cands]


def _train(data: Any, where: Path, seed: int, epochs: int | None, *,
           abstract: bool = True) -> tuple[Path, float]:
    path = data.write(where / "data.jsonl")
    run = train_run(TrainConfig(dataset=f"jsonl:{path}", arch="lstm", seed=seed, epochs=epochs,
                                **data.train_options),
                    where / "run", force=True, progress=False)
    record_run(run)
    if abstract:
        abstract_run(run, n_states=40)
    return run.path, float(run.metrics()["test_accuracy"])


def _without(data: Any, rows: np.ndarray) -> Any:
    """``data`` with training rows ``rows`` left out."""
    return dataclasses.replace(data, splits={**data.splits, "train": np.setdiff1d(
        data.splits["train"], rows)})


def spread(ds: Any, where: Path, seed: int, args: argparse.Namespace, clean_acc: float,
           clean_run: Path) -> dict[str, Any]:
    """The spread of retraining, against which a repair's figures are read: the clean
    data with a random 1 % of the training inputs left out (an edit as small as a repair's,
    with no bug), trained with the same seed. Its change in test accuracy, overall and per
    class, is what retraining alone moves."""
    rng = np.random.default_rng(1000 + seed)
    train = np.asarray(ds.splits["train"])
    gone = rng.choice(train, max(1, len(train) // 100), replace=False)
    (where / "spread").mkdir(parents=True, exist_ok=True)
    run, acc = _train(_without(clean(ds), gone), where / "spread", seed, args.epochs,
                      abstract=False)
    return {"left_out": len(gone), "accuracy_delta": round(acc - clean_acc, 4),
            "per_class_delta": against_clean(run, clean_run)}


def oracle_rows(bug: Any, ds: Any) -> np.ndarray:
    """Training rows whose label the bug changed (none for bugs that edit texts)."""
    train = np.asarray(bug.splits["train"])
    return train[np.asarray(bug.labels)[train] != np.asarray(ds.labels)[train]]


def edits_against_truth(new: Path, data: Path, bug: Any, wrong: np.ndarray
                        ) -> dict[str, int] | None:
    """Ground truth for a repair's suspects: of the training rows it relabelled or left
    out (``new/repair_edits.json``, rows of the run's data file ``data``), how many are
    rows whose label the bug changed (``wrong``, rows of ``bug``; matched by text and
    label, since the run's data file orders its rows by itself). None where the repair
    edited no rows by their label or the bug changed none."""
    edits = json.loads((new / "repair_edits.json").read_text())
    rows = edits.get("relabelled_rows", edits.get("dropped_rows"))
    if rows is None or not len(wrong):
        return None
    bad = {(bug.texts[i], bug.classes[int(bug.labels[i])]) for i in wrong.tolist()}
    ran = load_dataset(f"jsonl:{data}")
    hits = sum((ran.texts[r], ran.classes[int(ran.labels[r])]) in bad for r in rows)
    return {"edited_rows": len(rows), "edited_bug_rows": int(hits), "bug_rows": len(wrong)}


def same_culprit(f: dict[str, Any], g: dict[str, Any]) -> bool:
    """Whether two findings (of two splits) name the same culprit: the same kind and
    tokens; a topic or words the vocabulary hides by any word in common (each split holds
    its own few of them); a confusion by its classes, a length by its cut."""
    if f["kind"] != g["kind"]:
        return False
    if f["kind"] == "confusion":
        return f.get("classes") == g.get("classes")
    if f["kind"] == "length":
        return f.get("length_above") == g.get("length_above")
    words = set(f["tokens"]) | set(f.get("unknown_words", ()))
    other = set(g["tokens"]) | set(g.get("unknown_words", ()))
    if f["kind"] in ("subpopulation", "unknown"):
        return bool(words & other)
    return tuple(f["tokens"]) == tuple(g["tokens"])


def _replicated(run: Path, test: dict[str, Any]) -> dict[str, int]:
    """Findings significant on the validation split, and how many of them are significant
    on the test split too (``test``: its diagnosis) with the same culprit."""
    val = diagnose_run(run, top=TOP, split="val", save=False)
    key = [f for f in test["findings"] if f["significant"]]
    found = [f for f in val["findings"] if f["significant"]]
    return {"val_significant": len(found),
            "replicated_on_test": sum(any(same_culprit(f, g) for g in key) for f in found)}


def _replication(run: Path) -> dict[str, Any]:
    """Findings significant on the validation split that are significant on the test split
    too (the same kind and culprit), and the time of ``diagnose`` against ``abstract``."""
    t0 = time.perf_counter()
    abstract_run(run, n_states=40)
    abstract_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    test = diagnose_run(run, top=TOP, split="test")
    diagnose_s = time.perf_counter() - t0
    return {**_replicated(run, test), "abstract_s": round(abstract_s, 2),
            "diagnose_s": round(diagnose_s, 2),
            "diagnose_over_abstract": round(diagnose_s / abstract_s, 2)}


def _per_class_of(pred: np.ndarray, labels: np.ndarray, classes: list[str]
                  ) -> dict[str, float]:
    """Accuracy per class (of the classes present among ``labels``)."""
    return {c: round(float((pred[labels == k] == k).mean()), 4)
            for k, c in enumerate(classes) if (labels == k).any()}


def per_class_accuracy(run: Path) -> dict[str, float]:
    """Test accuracy per class of a recorded run."""
    t = Traces(Path(run) / "traces")
    tr = t["test"]
    return _per_class_of(np.asarray(tr.predictions), np.asarray(tr.labels), t.classes)


def against_clean(repaired: Path, reference: Path) -> dict[str, float]:
    """Per class, the repaired model's test accuracy minus the clean model's (same data
    set and seed): the repair's "no class loses more than a point" read against a model
    that never had the bug, not against the buggy one whose bias inflated a class."""
    ref = per_class_accuracy(reference)
    return {c: round(a - ref[c], 4) for c, a in per_class_accuracy(repaired).items()
            if c in ref}


def _named(actions: str | None) -> set[str]:
    """The action names of ``--actions`` (empty: none named)."""
    return {a.strip() for a in (actions or "").split(",") if a.strip()}


def repair_clean(run: Path, doc: dict[str, Any], where: Path,
                 actions: str | None = None) -> dict[str, Any] | None:
    """On a clean control whose test diagnosis (``doc``) is the run's saved one: repair
    with the top finding's first action (the first of ``actions`` it offers, where named),
    significant or not, and report the change with its interval (what a developer who
    acts on the best the tool offers would get where nothing was planted)."""
    f = next((f for f in doc["findings"] if f["actions"]), None)
    if f is None:
        return None
    action = next((a for a in f["actions"] if a in _named(actions)), f["actions"][0])
    try:
        out = repair_run(run, finding=f["rank"], action=action,
                         out=where / "repaired", progress=False)
    except StateseerError as exc:
        return {"finding": f["description"], "action": action, "error": str(exc)}
    return {"finding": f["description"], "significant": f["significant"],
            "action": action, "before": out["before"]["test_accuracy"],
            "after": out["after"]["test_accuracy"], "delta": out["delta"],
            "delta_ci": out["delta_ci"], "per_class_delta": out["per_class_delta"]}


def bench_one(ds: Any, family: str, seed: int, work: Path, args: argparse.Namespace,
              clean_acc: float, clean_run: Path) -> tuple[list[dict], list[dict]]:
    """Inject, train, diagnose, compare the methods and repair: one family, one seed."""
    try:
        bug = inject(family, ds, np.random.default_rng(seed))
    except DataError as exc:
        print(f"  {family}: skipped ({exc})", file=sys.stderr)
        return [], None
    where = work / f"{ds.name}-{family}-{seed}"
    where.mkdir(parents=True, exist_ok=True)
    run, acc = _train(bug, where, seed, args.epochs)
    if bug.train_options and bug.texts != list(ds.texts):
        # a pipeline bug that also edits the inputs: the clean reference is the same data
        # through the pipeline without the bug
        ref = dataclasses.replace(bug, train_options={})
        (where / "reference").mkdir(exist_ok=True)
        clean_run, clean_acc = _train(ref, where / "reference", seed, args.epochs)
    rows = []
    for method, answers_of in (("stateseer", None), ("buggy", _buggy_answers),
                               ("ig", _ig_answers), ("hypergeom", _hypergeom_answers)):
        t0 = time.perf_counter()
        if answers_of is None:
            doc = diagnose_run(run, top=TOP)
            answers = doc["findings"]
        else:
            answers = answers_of(run)
        rank = _rank(answers, bug.culprit)
        rows.append({"dataset": ds.name, "family": family, "seed": seed, "method": method,
                     "rank": rank, "hit1": rank == 1, "hit5": rank is not None and rank <= 5,
                     "bug_cost": round(clean_acc - acc, 4),
                     "seconds": round(time.perf_counter() - t0, 2)})
        if answers_of is None:  # do the validation split's findings hold on the test split?
            rows[-1].update(_replicated(run, doc))
        print(f"  {family} seed {seed} {method}: rank {rank}", file=sys.stderr)
    repairs = []
    lost = clean_acc - acc
    wrong = oracle_rows(bug, ds)
    trained = {"clean": Path(clean_run), "buggy": Path(run)}
    k = _rank(doc["findings"], bug.culprit)
    if k is not None and doc["findings"][k - 1]["significant"] and not args.no_repair:
        f = doc["findings"][k - 1]
        actions = f["actions"] if args.all_actions else f["actions"][:1]
        if args.actions:
            actions = [a for a in f["actions"] if a in _named(args.actions)]
            if not actions:
                print(f"  {family}: none of --actions {args.actions} fits the finding "
                      f"(it offers {', '.join(f['actions'])})", file=sys.stderr)
        for action in actions:
            new = where / f"repaired-{action}"
            try:
                out = repair_run(run, finding=f["rank"], action=action, out=new,
                                 progress=False)
            except StateseerError as exc:
                print(f"  {family}: repair by {action} failed ({exc})", file=sys.stderr)
                continue
            after = out["after"]["test_accuracy"]
            trained[action] = new
            repairs.append({
                "dataset": ds.name, "family": family, "seed": seed, "action": action,
                "first": action == f["actions"][0], "clean_accuracy": round(clean_acc, 4),
                "buggy_accuracy": round(acc, 4), "repaired_accuracy": after,
                "delta_ci": out["delta_ci"], "per_class_delta": out["per_class_delta"],
                "per_class_vs_clean": against_clean(new, clean_run),
                "recovered": _recovered(after, acc, lost),
                "suspects": edits_against_truth(new, where / "data.jsonl", bug, wrong)})
    if args.oracle and len(wrong) and not args.no_repair:
        # what a repair that knew exactly which labels the bug changed would recover by
        # leaving them out: the reference a repair's recovery is read against
        (where / "oracle").mkdir(exist_ok=True)
        new, after = _train(_without(bug, wrong), where / "oracle", seed, args.epochs,
                            abstract=False)
        trained["oracle-drop"] = Path(new)
        repairs.append({
            "dataset": ds.name, "family": family, "seed": seed, "action": "oracle-drop",
            "first": False, "oracle": True, "changed_rows": len(wrong),
            "clean_accuracy": round(clean_acc, 4), "buggy_accuracy": round(acc, 4),
            "repaired_accuracy": round(after, 4), "per_class_vs_clean": against_clean(
                new, clean_run),
            "recovered": _recovered(after, acc, lost)})
    _over_repeats(repairs, trained, args.repeats)
    return rows, repairs


def _recovered(after: float, buggy: float, lost: float) -> float | None:
    """``(repaired - buggy) / (clean - buggy)``; None where the bug cost less than half a
    point (no cost to recover)."""
    return round((after - buggy) / lost, 3) if lost > 0.005 else None


#: the training seeds of ``--repeats``' extra models are the run's seed plus these steps
#: (those of ``repair --seeds``)
REPEAT_STEP = SEED_STEP
_RETRAINED: dict[Path, tuple[list[float], list[dict[str, float]]]] = {}


def retrained(run: Path, repeats: int) -> tuple[list[float], list[dict[str, float]]]:
    """Test accuracies, overall and per class, of ``run``'s model and of ``repeats - 1``
    more trained on the same data with the same settings but other seeds (the run's seed
    + ``REPEAT_STEP``, + 2 x ``REPEAT_STEP`` ...; trained as ``train`` would, nothing
    written): one training's figure, and the spread of it. Cached per run (a clean control
    serves every family)."""
    from stateseer.app.workflows.retraining import _train_config, training_settings
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.train import fit_predict

    run = Path(run)
    if run not in _RETRAINED:
        src = ModelRun(run)
        accs, per = [float(src.metrics()["test_accuracy"])], [per_class_accuracy(run)]
        data = Path(training_settings(src)["dataset"].split(":", 1)[1])  # jsonl:PATH
        cfg = _train_config(src, data)
        classes = list(src.dataset().classes)
        for r in range(1, repeats):
            pred, labels = fit_predict(dataclasses.replace(
                cfg, seed=cfg.seed + r * REPEAT_STEP))
            accs.append(float((pred == labels).mean()))
            per.append(_per_class_of(pred, labels, classes))
        _RETRAINED[run] = accs, per
    return _RETRAINED[run]


def _mean_per_class(per: list[dict[str, float]]) -> dict[str, float]:
    return {c: float(np.mean([p[c] for p in per if c in p])) for c in per[0]}


def _over_repeats(rows: list[dict[str, Any]], runs: dict[str, Path], repeats: int) -> None:
    """With ``--repeats``: each repair row's ``repeats`` (the test accuracies of the
    clean, buggy and repaired data each trained with ``repeats`` seeds),
    ``recovered_mean_of_seeds``, the recovery of their means (steadier than one
    training's, whose spread is what the clean control's own seeds show), and
    ``per_class_vs_clean_mean_of_seeds``: per class, the repaired data's mean accuracy
    over the seeds minus the clean data's ("no class loses more than a point", read
    without one training's luck)."""
    if repeats < 2:
        return
    (clean_, clean_per), (buggy, _) = (retrained(runs["clean"], repeats),
                                       retrained(runs["buggy"], repeats))
    reference = _mean_per_class(clean_per)
    for r in rows:
        accs, per = retrained(runs[r["action"]], repeats)
        r["repeats"] = {"clean": clean_, "buggy": buggy, "repaired": accs}
        r["recovered_mean_of_seeds"] = _recovered(
            float(np.mean(accs)), float(np.mean(buggy)),
            float(np.mean(clean_)) - float(np.mean(buggy)))
        r["per_class_vs_clean_mean_of_seeds"] = {
            c: round(v - reference[c], 4) for c, v in _mean_per_class(per).items()
            if c in reference}


def repair_summary(repairs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per family and action: the runs, their mean recovery, the pooled recovery (the
    accuracy regained over the accuracy the bugs cost, summed over the runs: steadier than
    a mean of ratios whose denominators are a few points) and how many reach 0.8."""
    out: dict[str, dict[str, Any]] = {}
    for key in sorted({(r["family"], r["action"]) for r in repairs}):
        mine = [r for r in repairs if (r["family"], r["action"]) == key
                and r["recovered"] is not None]
        if not mine:
            continue
        gained = sum(r["repaired_accuracy"] - r["buggy_accuracy"] for r in mine)
        cost = sum(r["clean_accuracy"] - r["buggy_accuracy"] for r in mine)
        out["/".join(key)] = {
            "n": len(mine), "mean_recovered": round(float(np.mean(
                [r["recovered"] for r in mine])), 3),
            "pooled_recovered": round(gained / cost, 3) if cost > 0 else None,
            "at_least_0.8": sum(r["recovered"] >= 0.8 for r in mine)}
        steady = [r["recovered_mean_of_seeds"] for r in mine
                  if r.get("recovered_mean_of_seeds") is not None]
        if steady:  # --repeats: the recovery of the seeds' mean accuracies
            worst = [min(r["per_class_vs_clean_mean_of_seeds"].values()) for r in mine
                     if r.get("per_class_vs_clean_mean_of_seeds")]
            out["/".join(key)]["mean_of_seeds"] = {
                "mean_recovered": round(float(np.mean(steady)), 3),
                "at_least_0.8": sum(v >= 0.8 for v in steady), "n": len(steady),
                "worst_class_points": [round(w * 100, 1) for w in worst],
                "no_class_down_1pt": sum(w >= -0.01 for w in worst)}
        truth = [r["suspects"] for r in mine if r.get("suspects")]
        if truth:  # the edited rows against the rows the bug changed, pooled
            hit_ = sum(t["edited_bug_rows"] for t in truth)
            out["/".join(key)]["suspects"] = {
                "precision": round(hit_ / max(1, sum(t["edited_rows"] for t in truth)), 3),
                "recall": round(hit_ / max(1, sum(t["bug_rows"] for t in truth)), 3)}
    return out


def spread_summary(cleans: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What retraining alone moved on the clean controls (``--spread``): the test accuracy
    and the largest single class, in points (mean and largest over the controls)."""
    probes = [c["spread"] for c in cleans if c.get("spread")]
    if not probes:
        return None
    acc = [abs(p["accuracy_delta"]) * 100 for p in probes]
    cls = [max(abs(v) for v in p["per_class_delta"].values()) * 100 for p in probes]
    return {"n": len(probes), "accuracy_points_mean": round(float(np.mean(acc)), 2),
            "accuracy_points_max": round(max(acc), 2),
            "largest_class_points_mean": round(float(np.mean(cls)), 2),
            "largest_class_points_max": round(max(cls), 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default="rotten_tomatoes")
    p.add_argument("--families", default=",".join(BUGS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=None, help="default: the text default")
    p.add_argument("--train-rows", type=int, default=None, help="subsample training inputs")
    p.add_argument("--no-repair", action="store_true")
    p.add_argument("--all-actions", action="store_true",
                   help="repair a found bug by every action its finding offers, not only "
                        "the first (the same buggy model for each)")
    p.add_argument("--actions", default=None,
                   help="repair a found bug by these actions (comma-separated) where its "
                        "finding offers them, instead of the first")
    p.add_argument("--oracle", action="store_true",
                   help="also retrain each label bug without exactly the rows it changed "
                        "(the recovery of a repair that knew them)")
    p.add_argument("--spread", action="store_true",
                   help="also retrain each clean control without a random 1 %% of its "
                        "training inputs (what retraining alone moves)")
    p.add_argument("--repair-clean", default="amazon_food",
                   help="data sets whose clean controls are repaired with their top finding")
    p.add_argument("--permutations", type=int, default=20,
                   help="shuffles of the misclassification flags per clean control")
    p.add_argument("--repeats", type=int, default=1,
                   help="train the clean, buggy, repaired and oracle data this many times "
                        "each (the run's seed, then + 1000, + 2000 ...) and also report the "
                        "recovery of the mean accuracies")
    p.add_argument("--out", default=None, help="work directory (default: a temporary one)")
    args = p.parse_args(argv)
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="stateseer-diag-"))
    runs, cleans, repairs = [], [], []
    t0 = time.perf_counter()
    for name in args.datasets.split(","):
        for seed in map(int, args.seeds.split(",")):
            ds = _subset(load_dataset(name, seed=seed), args.train_rows, seed)
            where = work / f"{name}-clean-{seed}"
            where.mkdir(parents=True, exist_ok=True)
            run, clean_acc = _train(clean(ds), where, seed, args.epochs)
            doc = diagnose_run(run, top=TOP)
            cleans.append({"dataset": name, "seed": seed, "method": "stateseer",
                           "significant": doc["n_significant"],
                           "findings": [f["description"] for f in doc["findings"]
                                        if f["significant"]],
                           "test_accuracy": round(clean_acc, 4), **_replication(run),
                           "permutation_null": permutation_null(run, n=args.permutations,
                                                                seed=seed)})
            if args.spread:
                cleans[-1]["spread"] = spread(ds, where, seed, args, clean_acc, run)
            if name in args.repair_clean.split(",") and not args.no_repair:
                cleans[-1]["repair"] = repair_clean(run, doc, where, args.actions)
            hyper = _hypergeom_answers(run)
            cleans.append({"dataset": name, "seed": seed, "method": "hypergeom",
                           "significant": None, "top": hyper[0]["tokens"] if hyper else []})
            print(f"{name} seed {seed}: clean accuracy {clean_acc:.3f}, "
                  f"{doc['n_significant']} significant finding(s)", file=sys.stderr)
            for family in filter(None, args.families.split(",")):
                r, rep = bench_one(ds, family, seed, work, args, clean_acc, run)
                runs += r
                repairs += rep or []
    summary = {}
    for method in ("stateseer", "buggy", "ig", "hypergeom"):
        mine = [r for r in runs if r["method"] == method]
        learnt = [r for r in mine if r["bug_cost"] >= LEARNT]
        if mine:
            summary[method] = {"hit1": round(np.mean([r["hit1"] for r in mine]), 3),
                               "hit5": round(np.mean([r["hit5"] for r in mine]), 3),
                               "n": len(mine),
                               "learnt_hit1": round(np.mean([r["hit1"] for r in learnt]), 3)
                               if learnt else None,
                               "learnt_hit5": round(np.mean([r["hit5"] for r in learnt]), 3)
                               if learnt else None, "learnt_n": len(learnt)}
    summary["replication"] = {  # findings significant on validation, and on test too
        name: {"val_significant": sum(r.get("val_significant", 0) for r in rs),
               "replicated_on_test": sum(r.get("replicated_on_test", 0) for r in rs)}
        for name, rs in (("clean", [c for c in cleans if c["method"] == "stateseer"]),
                         ("injected", [r for r in runs if r["method"] == "stateseer"]))}
    timed = [c for c in cleans if "diagnose_over_abstract" in c]
    if timed:  # the target: diagnose within 3x abstract on the same run
        summary["speed"] = {
            "diagnose_over_abstract_median": float(np.median(
                [c["diagnose_over_abstract"] for c in timed])),
            "diagnose_over_abstract_max": max(c["diagnose_over_abstract"] for c in timed),
            "runs": len(timed)}
    if repairs:
        summary["repairs"] = repair_summary(repairs)
    if (moved := spread_summary(cleans)) is not None:
        summary["spread"] = moved
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"runs": runs, "clean": cleans, "repairs": repairs, "summary": summary,
                      "seconds": round(time.perf_counter() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
