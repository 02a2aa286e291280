"""Planted bugs that cannot be overfit: found / planted per family, beside baselines.

Each bug is drawn by a randomised recipe (:mod:`stateseer.rnn_models.recipes`: ten
recipes in four families: artefact, sequence, label noise, pipeline) on a real text data
set, a model is trained on the bugged data with the default text settings, recorded,
abstracted and diagnosed on its test split, and every method answers on the same model in
the same run. Results are written as the slice-discovery literature writes them: *found /
planted* per family (Domino: 36 % of 1,235 planted slices).

Partitions, kept apart
    ``dev``     Rotten Tomatoes and Amazon fine food (the data sets diagnosis was built
                on), and, added after the report's first run, Rotten Tomatoes split by
                movie (``rotten_tomatoes_movies``: splits drawn by document, as the
                report's are) and with its plot rows (``rotten_tomatoes3``: three
                classes, as the debates have); the ``dev`` pool's tokens, topics and
                ranges, seeds 0, 1, 2 ...
    ``report``  the 2012 convention speeches and the 2016 debates (two data sets diagnosis
                never ran on before this benchmark), the ``report`` pool (tokens, topics,
                negators and ranges shared with nothing in ``dev``), seeds 100, 101 ...
                Nothing is tuned on it: it is run once diagnosis is frozen, and its first
                run's commit is the one in the docs' table.

Found (stateseer)
    a finding that is significant, ranked in the top 3, of the right kind for the family,
    and whose culprit covers the planted cause (:func:`recipes.found`: every token of a
    multi-token artefact, at least two words of a topic ...).

Baselines, on the same buggy model (credited on culprit and rank alone: none of them
says whether an answer is significant or what kind of cause it is, so none is asked to)
    ``overrep``   tokens over-represented among the misclassified inputs (hypergeometric
                  tail; the strongest single-token baseline of round 3)
    ``ngram``     an L2 logistic regression of the error indicator on binary bags of 1-3
                  grams of the test inputs; its largest coefficients, an n-gram's words
                  one answer
    ``cleanlab``  (label-noise families) ``cleanlab.filter.find_label_issues`` on the
                  training labels with 5-fold out-of-sample probabilities of a bag-of-words
                  logistic regression; its answer: the most frequent (given, suggested)
                  class pair among the flagged rows, with the five words most
                  over-represented among them
    ``ig``        (artefact and sequence families) Captum integrated gradients towards the
                  wrong prediction, averaged per token over (at most 60) misclassified
                  test inputs

Cost
    test accuracy of the clean twin (same data, seed and settings, no bug) minus the
    buggy model's. A second clean training (seed + 1000) gives the retraining noise; a bug
    whose cost is below ``max(0.02, noise)`` is counted apart as not measurable.

Repairs (``--repairs N``: the first N found bugs per recipe of the report partition)
    the finding's first action over 3 seeds (``repair --seeds 3``), and the oracle: the
    clean data (before the bug) trained with the same 3 seeds; all evaluated on the buggy
    data's test split. ``gap_closed = (repaired - buggy) / (oracle - buggy)`` on the means
    over seeds; per class, the repair's change beside the oracle's.

Usage: ``python benchmarks/bugs.py [--partitions dev,report] [--datasets ...]
[--recipes ...] [--seeds 2] [--seed0 S] [--train-rows 4000] [--repairs 1] [--out DIR]
[--rescore]``
(``--recipes ""``: clean controls only, for the count of false findings). Last line:
JSON with ``runs``, ``clean``, ``repairs`` and ``summary`` (DESIGN.md, round 4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from diagnosis import _ig_answers, _subset  # the sibling benchmark script

from stateseer import TrainConfig, abstract_run, load_dataset, record_run, train_run
from stateseer.abstraction.analysis.diagnosis import by_qvalues, token_candidates
from stateseer.app.workflows.diagnose import diagnose_run
from stateseer.core.errors import DataError
from stateseer.core.traces import Traces
from stateseer.rnn_models.injection import clean
from stateseer.rnn_models.recipes import FAMILIES, RECIPES, found, plant

PARTITIONS = {"dev": {"datasets": ["rotten_tomatoes", "amazon_food", "rotten_tomatoes_movies",
                                  "rotten_tomatoes3"], "seed0": 0},
              "report": {"datasets": ["convention2012", "debates2016"], "seed0": 100}}
TOP = 3
#: the least cost (test accuracy) a bug must have to count as measurable, besides the noise
MIN_COST = 0.02
REPAIR_SEEDS = 3
#: misclassified test inputs the integrated-gradients baseline averages over
IG_ERRORS = 60
SEED_STEP = 1000


#: ``--rescore``: a kept run's trained model is read instead of trained again
_REUSE = False


def _train(bug: Any, where: Path, seed: int, *, record: bool = True) -> tuple[Path, float]:
    if _REUSE and (where / "run").is_dir():
        from stateseer.rnn_models.run import ModelRun

        kept = ModelRun(where / "run")
        return kept.path, float(kept.metrics()["test_accuracy"])
    where.mkdir(parents=True, exist_ok=True)
    path = bug.write(where / "data.jsonl")
    run = train_run(TrainConfig(dataset=f"jsonl:{path}", arch="lstm", seed=seed,
                                **bug.train_options),
                    where / "run", force=True, progress=False)
    if record:
        record_run(run)
        abstract_run(run, n_states=40)
    return run.path, float(run.metrics()["test_accuracy"])


def _test_of(run: Path) -> tuple[list[list[str]], np.ndarray, np.ndarray]:
    tr = Traces(run / "traces")["test"]
    toks = [list(tr.tokens(i)) for i in range(tr.n_inputs)]
    return toks, np.asarray(tr.labels), np.asarray(tr.predictions)


# ----------------------------------------------------------------------------- methods
def _stateseer(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["findings"])


def _overrep(toks: list[list[str]], wrong: np.ndarray) -> list[dict[str, Any]]:
    cands = token_candidates(toks, wrong)
    q = by_qvalues([c.p_value for c in cands])
    return [{"kind": None, "tokens": list(c.tokens), "significant": bool(qv <= 0.05)}
            for c, qv in zip(cands, q, strict=True)]


def _ngram(toks: list[list[str]], wrong: np.ndarray) -> list[dict[str, Any]]:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    if wrong.all() or not wrong.any():
        return []
    vec = CountVectorizer(analyzer=lambda t: [" ".join(t[i:i + n]) for n in (1, 2, 3)
                                              for i in range(len(t) - n + 1)],
                          binary=True, min_df=5)
    X = vec.fit_transform(toks)
    coef = LogisticRegression(C=1.0, max_iter=2000).fit(X, wrong).coef_[0]
    names = vec.get_feature_names_out()
    return [{"kind": None, "tokens": str(names[j]).split()}
            for j in np.argsort(-coef)[:20].tolist()]


def _cleanlab(bug: Any) -> list[dict[str, Any]]:
    from cleanlab.filter import find_label_issues
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict

    train = np.asarray(bug.splits["train"])
    texts = [bug.texts[i] for i in train.tolist()]
    labels = np.asarray(bug.labels)[train]
    X = CountVectorizer(min_df=2, binary=True).fit_transform(texts)
    proba = cross_val_predict(LogisticRegression(max_iter=2000), X, labels, cv=5,
                              method="predict_proba")
    issues = find_label_issues(labels, proba)
    if not issues.any():
        return []
    given, suggested = labels[issues], proba[issues].argmax(1)
    pair = Counter(zip(given.tolist(), suggested.tolist(), strict=True)).most_common(1)[0][0]
    toks = [set(t.lower().split()) for t in texts]
    inside = Counter(w for k in np.flatnonzero(issues).tolist() for w in toks[k])
    outside = Counter(w for t in toks for w in t)
    n_in, n = int(issues.sum()), len(toks)
    lift = {w: (c / n_in) / (outside[w] / n) for w, c in inside.items() if c >= 5}
    words = sorted(lift, key=lift.get, reverse=True)[:5]
    # the flagged rows' given class was the noise's target; the suggestion its source
    return [{"kind": None, "tokens": words,
             "classes": [bug.classes[pair[1]], bug.classes[pair[0]]]}]


def _judge(method: str, answers: list[dict[str, Any]], bug: Any) -> dict[str, Any]:
    """The first answer in the top :data:`TOP` that names the bug (stateseer's: also
    significant and of the right kind)."""
    for k, a in enumerate(answers[:TOP], 1):
        covers, kind_ok = found(a, bug)
        if not covers:
            continue
        if method == "stateseer":
            if a.get("significant") and kind_ok:
                return {"found": True, "rank": k, "kind_correct": True}
            continue
        return {"found": True, "rank": k, "kind_correct": None}
    rank = next((k for k, a in enumerate(answers, 1) if found(a, bug)[0]), None)
    kind = None
    if method == "stateseer" and rank is not None:
        kind = found(answers[rank - 1], bug)[1]
    return {"found": False, "rank": rank, "kind_correct": kind}


def _methods_for(recipe: str) -> list[str]:
    family = FAMILIES[recipe]
    extra = {"label_noise": ["cleanlab"], "artefact": ["ig"], "sequence": ["ig"]}
    return ["stateseer", "overrep", "ngram", *extra.get(family, [])]


def one_bug(bug: Any, where: Path, seed: int, clean_acc: float, noise: float,
            meta: dict[str, Any]) -> tuple[list[dict[str, Any]], Path, dict[str, Any]]:
    run, acc = _train(bug, where, seed)
    t0 = time.perf_counter()
    doc = diagnose_run(run, top=10)
    seconds = time.perf_counter() - t0
    toks, labels, pred = _test_of(run)
    wrong = pred != labels
    cost = round(clean_acc - acc, 4)
    rows = []
    for method in _methods_for(bug.params["recipe"]):
        t1 = time.perf_counter()
        answers = {"stateseer": lambda: _stateseer(doc),
                   "overrep": lambda: _overrep(toks, wrong),
                   "ngram": lambda: _ngram(toks, wrong),
                   "cleanlab": lambda: _cleanlab(bug),
                   "ig": lambda: _ig_answers(run, limit=IG_ERRORS)[:20]}[method]()
        rows.append({**meta, "params": bug.params, "cost": cost,
                     "measurable": cost >= max(MIN_COST, noise), "method": method,
                     **_judge(method, answers, bug),
                     "top": [a["tokens"] if a.get("tokens") else a.get("kind")
                             for a in answers[:TOP]],
                     "seconds": round(seconds if method == "stateseer"
                                      else time.perf_counter() - t1, 2)})
    return rows, run, doc


# ----------------------------------------------------------------------------- repairs
def _accuracy_on(run: Path, bug: Any) -> tuple[float, dict[str, float]]:
    """A run's model's accuracy (overall, per class) on the buggy data's test split."""
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.tokenizers import get_tokenizer
    from stateseer.rnn_models.train import predict_proba

    r = ModelRun(run)
    vocab, tok = r.vocab(), get_tokenizer("word")
    test = np.asarray(bug.splits["test"])
    seqs = [vocab.encode(tok(bug.texts[i])) for i in test.tolist()]
    # the run's classes are in its data file's order (a jsonl: sorted), not the bug's
    ours = {c: k for k, c in enumerate(bug.classes)}
    to_bug = np.array([ours[c] for c in r.dataset().classes])
    pred = to_bug[predict_proba(r.load_model(), seqs).argmax(1)]
    gold = np.asarray(bug.labels)[test]
    per = {c: float((pred[gold == k] == k).mean()) for k, c in enumerate(bug.classes)
           if (gold == k).any()}
    return float((pred == gold).mean()), per


def _mean_over(runs: list[tuple[float, dict[str, float]]]) -> tuple[float, dict[str, float]]:
    return (float(np.mean([a for a, _ in runs])),
            {c: float(np.mean([p[c] for _, p in runs])) for c in runs[0][1]})


def repair_one(bug: Any, base: Any, run: Path, doc: dict[str, Any], where: Path
               ) -> dict[str, Any] | None:
    """The first action of the first significant finding that names the bug, over
    :data:`REPAIR_SEEDS` seeds, against the oracle (the data before the bug)."""
    from stateseer.app.workflows.repair import repair_run

    k = next((j for j, f in enumerate(doc["findings"], 1)
              if f["significant"] and all(found(f, bug))), None)
    if k is None:
        return None
    f = doc["findings"][k - 1]
    if not f["actions"]:  # training texts cut upstream: the fix is to export them whole
        return {"family": FAMILIES[bug.params["recipe"]], "recipe": bug.params["recipe"],
                "action": None, "gap_closed": None,
                "note": "no repair offered: the finding's fix is outside the run"}
    action = f["actions"][0]
    t0 = time.perf_counter()
    got = repair_run(run, finding=k, action=action, out=where / "repaired", progress=False,
                     force=True, seeds=REPAIR_SEEDS)
    seconds = time.perf_counter() - t0
    by_seed = got["seeds"]
    _, buggy_cls = _accuracy_on(run, bug)
    oracle = [_accuracy_on(_train(base, where / f"oracle-{s}", s, record=False)[0], bug)
              for s in by_seed["seeds"]]
    o, oc = _mean_over(oracle)
    b, r = float(np.mean(by_seed["before"])), float(np.mean(by_seed["after"]))
    gap = o - b
    rep_cls = by_seed["per_class_delta_mean"]
    ora_cls = {c: oc[c] - buggy_cls[c] for c in buggy_cls}
    return {"family": FAMILIES[bug.params["recipe"]], "recipe": bug.params["recipe"],
            "action": action, "buggy": round(b, 4), "repaired": round(r, 4),
            "oracle": round(o, 4),
            "gap_closed": round((r - b) / gap, 3) if gap > 0.005 else None,
            "seeds": by_seed["seeds"], "delta_ci": by_seed["delta_ci"],
            "per_class_repaired": rep_cls,
            "per_class_oracle": {c: round(d, 4) for c, d in ora_cls.items()},
            "worst_class_beyond_oracle": round(max(
                min(0.0, ora_cls[c]) - rep_cls[c] for c in ora_cls if c in rep_cls), 4),
            "finding_gone": got.get("finding_gone"), "repair_seconds": round(seconds, 1)}


# ----------------------------------------------------------------------------- summary
def summarise(runs: list[dict[str, Any]], cleans: list[dict[str, Any]]
              ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in sorted({r["partition"] for r in runs}):
        mine = [r for r in runs if r["partition"] == part]
        per: dict[str, Any] = {}
        for key in ("family", "recipe"):
            for name in sorted({r[key] for r in mine}):
                rows = [r for r in mine if r[key] == name]
                cell = {}
                for method in sorted({r["method"] for r in rows}):
                    m = [r for r in rows if r["method"] == method]
                    meas = [r for r in m if r["measurable"]]
                    cell[method] = {"found": sum(r["found"] for r in meas),
                                    "planted": len(meas),
                                    "found_all": sum(r["found"] for r in m),
                                    "planted_all": len(m)}
                cost = [r["cost"] for r in rows if r["method"] == "stateseer"]
                cell["mean_cost"] = round(float(np.mean(cost)), 4)
                per.setdefault(key, {})[name] = cell
        out[part] = per
    out["clean"] = {"runs": len(cleans),
                    "with_significant": sum(c["significant"] > 0 for c in cleans)}
    return out


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--partitions", default="dev,report")
    p.add_argument("--datasets", default=None, help="default: each partition's own")
    p.add_argument("--recipes", default=",".join(RECIPES))
    p.add_argument("--seeds", type=int, default=2, help="seeds per data set")
    p.add_argument("--seed0", type=int, default=None,
                   help="first seed (default: the partition's own, dev 0, report 100)")
    p.add_argument("--train-rows", type=int, default=4000)
    p.add_argument("--repairs", type=int, default=0,
                   help="repair the first N found bugs per recipe (report partition)")
    p.add_argument("--out", default=None)
    p.add_argument("--rescore", action="store_true",
                   help="with --out DIR of an earlier run: re-diagnose the models it kept "
                        "with today's code instead of training them again")
    args = p.parse_args(argv)
    global _REUSE
    _REUSE = args.rescore
    if args.rescore and not args.out:
        p.error("--rescore reads the models an earlier run kept: give its --out DIR")
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="stateseer-bugs-"))
    commit = _commit()  # the code that ran (the tree may move on while it runs)
    runs, cleans, repairs = [], [], []
    t0 = time.perf_counter()
    for part in args.partitions.split(","):
        names = args.datasets.split(",") if args.datasets else PARTITIONS[part]["datasets"]
        for name in names:
            for s in range(args.seeds):
                seed = (PARTITIONS[part]["seed0"] if args.seed0 is None else args.seed0) + s
                ds = _subset(load_dataset(name, seed=seed), args.train_rows, seed)
                base = clean(ds)
                where = work / part / f"{name}-{seed}"
                run, clean_acc = _train(base, where / "clean", seed)
                recipes = [r for r in args.recipes.split(",") if r]
                again = clean_acc  # the retraining noise matters only beside a bug
                if recipes:
                    _, again = _train(base, where / "clean-again", seed + SEED_STEP,
                                      record=False)
                noise = abs(clean_acc - again) if recipes else None
                doc = diagnose_run(run, top=10)
                cleans.append({"partition": part, "dataset": name, "seed": seed,
                               "significant": doc["n_significant"],
                               "findings": [f["description"] for f in doc["findings"]
                                            if f["significant"]],
                               "test_accuracy": round(clean_acc, 4),
                               "retrain_noise": None if noise is None else round(noise, 4)})
                again_note = f"retrained {again:.3f}" if recipes else "not retrained: no bug"
                print(f"[{part}] {name} seed {seed}: clean {clean_acc:.3f} ({again_note}), "
                      f"{doc['n_significant']} significant", file=sys.stderr)
                for recipe in recipes:
                    rng = np.random.default_rng(
                        [seed, zlib.crc32(f"{part}/{name}/{recipe}".encode())])
                    try:
                        bug = plant(recipe, ds, rng, part)
                    except DataError as e:
                        print(f"  {recipe}: not planted ({e})", file=sys.stderr)
                        continue
                    meta = {"partition": part, "dataset": name, "family": FAMILIES[recipe],
                            "recipe": recipe, "seed": seed}
                    rows, brun, bdoc = one_bug(bug, where / recipe, seed, clean_acc, noise,
                                               meta)
                    runs += rows
                    mine = rows[0]
                    print(f"  {recipe}: cost {mine['cost']:+.3f} found={mine['found']} "
                          f"rank={mine['rank']} top={mine['top']} | " + ", ".join(
                              f"{r['method']}={r['found']}" for r in rows[1:]),
                          file=sys.stderr)
                    done = sum(1 for r in repairs if r["recipe"] == recipe)
                    if part == "report" and mine["found"] and done < args.repairs:
                        rep = repair_one(bug, base, brun, bdoc, where / recipe)
                        if rep:
                            repairs.append({"dataset": name, **rep})
                            print(f"    repair {rep['action']}: gap closed "
                                  f"{rep['gap_closed']}", file=sys.stderr)
    summary = summarise(runs, cleans)
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"runs": runs, "clean": cleans, "repairs": repairs,
                      "summary": summary, "commit": commit,
                      "seconds": round(time.perf_counter() - t0, 1)}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
