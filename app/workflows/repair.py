"""``stateseer repair``: act on a finding, retrain, and measure what changed.

The training data of RUN is edited as the action says, only where the finding's culprit
is (the test and validation inputs are never touched, so both runs are measured on the
same inputs):

``drop``            training inputs that carry the culprit are left out; for a
                    subpopulation only the suspects ``relabel`` would relabel (the topic's
                    inputs a model trained without them finds mislabelled, as many as the
                    leaning label's excess); for a confusion the inputs ``relabel`` would
                    relabel and the next most likely, 1.5 times as many (a wrong label
                    left in costs more than a right one left out): no label is guessed
``counterfactual``  the culprit's tokens are deleted from those training inputs
``augment``         copies of training inputs of the *other* classes, with the culprit
                    inserted (a span whole, in reading order), are added (it no longer
                    tells the class)
``jtt``             a shortcut, Just Train Twice (Liu et al. 2021): the training inputs
                    RUN's model gets wrong are added again, same text and label, until
                    each appears ``JTT_UPWEIGHT`` times (the culprit is not looked at)
``dfr``             a shortcut, Deep Feature Reweighting (Kirichenko et al. 2023): nothing
                    is retrained and the data stay; RUN's model keeps its body and only its
                    last layer (``head``) is fit again, an L2 logistic regression on what
                    the body makes of the validation inputs of every class each with the
                    culprit's span deleted and inserted (every class as often with it as
                    without it): seconds on a CPU
``relabel``         a sequence: the training inputs that carry it take the label the
                    validation inputs carrying it have most often (the held-out data say
                    what such inputs are); a confusion of class A called B: as many of
                    the training inputs labelled B as the noise rate says were A's (the
                    rate ``reweight`` measures) are labelled A, those most likely A first
                    by models which never saw them (a bag-of-n-grams logistic regression
                    cross-fitted over ten folds, ``suspects.py``; confident learning,
                    Northcutt et al. 2021); a subpopulation: its training inputs are
                    scored by a model trained without them, and as many of those with
                    the label the topic leans to as that label exceeds the model's
                    expectation (the sum of its probabilities) take the class it gives
                    them, least likely of the leaning label first
``reweight``        a confusion of class A called B: the loss reads the training labels
                    through the noise measured (A's share of the training labels against
                    its share of the validation labels gives the rate at which A was
                    labelled B; forward correction, Patrini et al. 2017); no label changes
``reconfigure``     a pipeline setting, the data untouched: a length finding on a run that
                    truncates inputs trains on whole inputs (``truncate`` off); an unknown
                    words finding keeps those words in the vocabulary (``vocab_exclude``
                    off, or ``min_freq`` 1 and no vocabulary cap when no pattern hid them)

NEW gets the edited data set (``NEW/data.jsonl``, with ``NEW/repair_edits.json`` saying
which rows changed and how), is trained with RUN's configuration and seed through the
same code as ``stateseer train`` (``dfr``: is RUN's model with the new last layer, RUN's
configuration and data), recorded, abstracted and diagnosed, and
``NEW/repair.json`` (``stateseer.repair`` v1) compares the two models on the test split:
accuracy before and after with a paired bootstrap 95 % interval of the change, the change
per class (``classes_hurt``: those that lost more than one point), the inputs fixed and
broken, and whether the finding is gone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.app.workflows.repair_edits import (
    _augment,
    _counterfactual,
    _drop,
    _holds,
    _jtt,
    _rebalance,
    _reconfigure,
    _relabel,
    _reweight,
    _subset,
)
from stateseer.app.workflows.repair_head import HEAD_REFITS, _dfr, _reheaded, _write_reheaded
from stateseer.app.workflows.retraining import (
    _encoded,
    _retrainable,
    _train_config,
    _whole,
    _write_data,
)
from stateseer.core import layout
from stateseer.core.atomic import atomic_write_text, swap_dir
from stateseer.core.defaults import N_STATES
from stateseer.core.errors import StateseerError
from stateseer.core.reading import load_json
from stateseer.core.rundir import (
    claim,
    release,
)

__all__ = ["ACTIONS", "ACTION_EDITS", "paired_bootstrap", "repair_run"]

#: every action of the repair contract (DESIGN.md), each in ACTION_EDITS
ACTIONS = ("drop", "relabel", "counterfactual", "augment", "reweight", "reconfigure", "jtt",
           "dfr", "rebalance")

FORMAT, VERSION = "stateseer.repair", 1


#: action → how it edits the training data or the training settings (``--action``)
ACTION_EDITS: dict[str, Callable[..., tuple[Any, dict]]] = {
    "drop": _drop, "counterfactual": _counterfactual, "augment": _augment,
    "relabel": _relabel, "reweight": _reweight, "reconfigure": _reconfigure, "jtt": _jtt,
    "dfr": _dfr, "rebalance": _rebalance}


def paired_bootstrap(before: np.ndarray, after: np.ndarray, *, n_boot: int = 2000,
                     seed: int = 0) -> tuple[float, float]:
    """95 % interval of ``mean(after) - mean(before)`` resampling the inputs (pairs).

    Examples
    --------
    >>> lo, hi = paired_bootstrap(np.zeros(200, bool), np.arange(200) % 2 == 0)
    >>> 0.4 < lo < 0.5 < hi < 0.6
    True
    """
    diff = np.asarray(after, float) - np.asarray(before, float)
    if not len(diff):
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), (n_boot, len(diff)))].mean(1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(lo), float(hi)


def _finding_of(src: Any, k: int) -> dict[str, Any]:
    """Finding ``k`` of ``src``'s ``findings.json``, checked against the file's schema and
    against the model it was made for (one line naming the fix otherwise)."""
    from stateseer.app.workflows.diagnose import check_findings

    path = layout.RunLayout(src.path).findings
    if not path.exists():
        raise StateseerError(f"{src.path} has no findings; run `stateseer diagnose "
                             f"{src.path}` first")
    doc = check_findings(load_json(path), path,
                         n_classes=len(src.config["data"]["classes"]))
    current = src.model_sha256() if src.model_path.exists() else None
    if doc.get("model_sha256") != current:
        raise StateseerError(f"{path} was made for another model than {src.path}'s "
                             f"model.pt (or before findings named their model); run "
                             f"`stateseer diagnose {src.path}` again, then repair")
    ranks = [g["rank"] for g in doc["findings"]]
    if k not in ranks:
        raise StateseerError(f"there is no finding {k} in {path}; choose one of {ranks}")
    return doc["findings"][ranks.index(k)]


def check_out(src: Path, out: Path, force: bool) -> None:
    """Refuse an ``--out`` that repair cannot write whole (one line each): inside the run
    or the run itself, a dangling symbolic link, a file, a folder that holds something
    other than a run, or a run without ``force``."""
    where = Path(os.path.abspath(out))
    if out.is_symlink() and not out.exists():
        raise StateseerError(f"--out {out} is a symbolic link to {os.readlink(out)}, which "
                             "does not exist; give a new path")
    real, run = where.resolve(), src.resolve()
    if real == run or run in real.parents:
        raise StateseerError(f"--out {out} is inside the run {src} it repairs; choose a path "
                             "outside it")
    if out.exists() and not out.is_dir():
        raise StateseerError(f"--out {out} is a file; give the path of a new run directory")
    if out.is_dir() and any(out.iterdir()):
        if not (out / layout.CONFIG).exists():
            raise StateseerError(f"--out {out} is a folder that holds files but no run; "
                                 "choose a new path (repair replaces only a run)")
        if not force:
            raise StateseerError(f"{out} already holds a run; pass --force to replace it "
                                 "(only once the repair is whole) or choose another --out")


def repair_run(run: str | Path, *, finding: int, action: str, out: str | Path,
               seed: int = 0, progress: bool = True, control: bool = False,
               seeds: int = 1, log: Callable[[str], None] | None = None,
               report: Callable[[str, int, int], None] | None = None,
               force: bool = False, oracle: str | Path | None = None) -> dict[str, Any]:
    """Repair ``run`` by ``action`` on its finding ``finding`` into the new run ``out``.

    ``report(stage, done, total)`` follows the work (stages: ``training`` per epoch, then
    ``recording``, ``abstracting``, ``diagnosing``, ``comparing``, ``done``; with
    ``control``, ``control`` before ``done``; with ``seeds``, then ``seeds`` per model
    trained, ``2 (seeds - 1)`` of them); with it, no progress bar is drawn.

    With ``control``, a second model is trained as the spread of retraining to read the
    change against: RUN's own training data less a random :data:`CONTROL_SHARE` of its
    inputs (no edit of the finding; settings and seed as RUN's), in ``OUT/control``;
    ``repair.json`` gets ``control``: its test accuracy, change and per-class change
    against RUN. A change no larger than the control's is what retraining alone moves.

    With ``seeds`` > 1, RUN's data and the edited data are each trained ``seeds - 1``
    more times with other seeds (RUN's seed + :data:`SEED_STEP`, + 2 x ``SEED_STEP`` ...;
    models kept only for their test predictions; ``dfr`` trains nothing: its last layer is
    fit again with ``seed`` + :data:`SEED_STEP` ..., other inputs drawn and other positions
    of the span), and ``repair.json`` gets ``seeds``: the test accuracies per seed before
    and after, the mean change with a 95 % t-interval over the seeds' paired changes, and
    the mean change per class (``classes_hurt``: a mean loss of more than a point). One
    training's change holds the luck of that training; the mean over seeds much less.

    ``oracle``: a known-good run (trained before the bug), see :func:`_judge_oracle`.

    Returns
    -------
    dict
        The ``stateseer.repair`` document (also ``OUT/repair.json``).

    Raises
    ------
    StateseerError
        No findings, findings that break their schema or were made for another model, an
        unknown finding number, an action that does not fit the finding, a run whose model
        stateseer cannot retrain, or an ``out`` it cannot write whole (an existing run
        without ``force``, a folder that holds something else, a path inside the run, a
        dangling link; one line each, checked before anything is written). The new run
        is built in ``OUT.tmp`` and renamed into place when whole, so a killed repair
        leaves no half-written ``OUT``; with ``force`` an existing run at ``out`` is
        replaced only then.
    """
    from stateseer.rnn_models.run import ModelRun

    say = log or (lambda _line: None)
    src, out = ModelRun(run), Path(out)
    f = _finding_of(src, finding)
    check_out(src.path, out, force)
    if action not in f["actions"]:
        raise StateseerError(f"--action {action} does not fit finding {finding} "
                             f"({f['kind']}); choose one of: "
                             f"{', '.join(f['actions']) or 'none (no repair fits it)'}")
    if seeds < 1:
        raise StateseerError(f"--seeds {seeds}: give 1 (the repair alone) or more")
    if seeds > MAX_SEEDS:
        raise StateseerError(f"--seeds {seeds}: at most {MAX_SEEDS} (each seed trains two "
                             "models)")
    _retrainable(src)  # refused before any edit
    if oracle is not None:
        _oracle_accuracy(src, oracle, check_only=True)
    ds = _whole(src)
    edited, edits = ACTION_EDITS[action](ds, f, np.random.default_rng(seed), src)
    # the new run is built in OUT.tmp and renamed into place whole: a killed repair leaves
    # no half-written OUT, and the next one removes the stray OUT.tmp (its writer is dead)
    work = claim(layout.RunLayout.work(out))
    try:
        doc = _repair_into(ModelRun(work), src, ds, edited, edits, f, finding, action, seed,
                           progress, control, seeds, say, report, oracle)
        release(work)
        swap_dir(work, out)  # with --force, the old run is replaced only now
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    n_steps = 4 + control + (seeds > 1)
    (report or (lambda *_: None))("done", n_steps, n_steps)
    return doc


def _repair_into(new: Any, src: Any, ds: Any, edited: Any, edits: dict, f: dict,
                 finding: int, action: str, seed: int, progress: bool, control: bool,
                 seeds: int, say: Callable[[str], None],
                 report: Callable[[str, int, int], None] | None,
                 oracle: str | Path | None = None) -> dict[str, Any]:
    """:func:`repair_run`'s work, into the run ``new`` (the folder it is built in)."""
    data = _write_data(edited, new.path / "data.jsonl")
    cfg = _train_config(src, data, edits.get("settings"))
    atomic_write_text(new.path / layout.REPAIR_EDITS, json.dumps(
        {"source_run": str(src.path), "finding": f, "action": action, **edits}, indent=1))
    final = new.path.with_name(new.path.name.removesuffix(layout.WORK_SUFFIX))
    say(f"fitting the last layer of {src.path}'s model again into {final} ({action} on "
        f"finding {finding}; built in {new.path.name} until whole)" if action in HEAD_REFITS
        else f"training {final} on the edited data ({action} on finding {finding}; built in "
        f"{new.path.name} until whole)")
    steps = (["recording", "abstracting", "diagnosing", "comparing"] + ["control"] * control
             + ["seeds"] * (seeds > 1))
    stage = report or (lambda _stage, _done, _total: None)
    doc, outcomes = _retrain_and_compare(src, new, cfg, f, finding, action, edits, progress,
                                         say, report, steps)
    if control:
        stage("control", steps.index("control"), len(steps))
        doc["control"] = c = _control(src, new, ds, seed, progress and report is None, say,
                                      outcomes[-1])
        say(f"retraining alone (the control: {c['left_out']} random training inputs left "
            f"out, no edit) changes test accuracy by {c['delta']:+.3f} and single classes "
            f"by up to {max(map(abs, c['per_class_delta'].values()), default=0.0):.3f}")
    if seeds > 1:
        stage("seeds", 0, 2 * (seeds - 1))
        refit = (lambda s, rows: _refit_outcomes(src, ds, f, s, rows)) \
            if action in HEAD_REFITS else None
        doc["seeds"] = m = _over_seeds(src, new, ds, cfg, seeds, outcomes,
                                       progress and report is None, say,
                                       lambda k: stage("seeds", k, 2 * (seeds - 1)),
                                       refit=refit, seed=seed)
        say(f"over {seeds} seeds: test accuracy {np.mean(m['before']):.3f} -> "
            f"{np.mean(m['after']):.3f} (mean change {m['delta_mean']:+.3f}, 95 % CI "
            f"{m['delta_ci'][0]:+.3f} to {m['delta_ci'][1]:+.3f}); classes down more than "
            f"a point on average: {', '.join(m['classes_hurt']) or 'none'}")
    if oracle is not None:
        _judge_oracle(doc, _oracle_accuracy(src, oracle), str(oracle), say)
    _judge_gone(doc, say)
    atomic_write_text(new.path / layout.REPAIR, json.dumps(doc, indent=1))
    return doc


def _oracle_accuracy(src: Any, oracle: str | Path, check_only: bool = False) -> float:
    """The oracle run's model's accuracy on RUN's test inputs (its own vocabulary and
    tokenizer); with ``check_only``, only that it can be read (one line where not)."""
    from stateseer.abstraction.pipeline import fresh_traces
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.tokenizers import get_tokenizer
    from stateseer.rnn_models.train import predict_proba

    try:
        other = ModelRun(oracle)
        _ = other.config
    except StateseerError as e:
        raise StateseerError(f"--oracle {oracle}: {e}") from None
    traces = fresh_traces(src)
    classes = list(traces.classes)
    theirs = list(other.data.get("classes") or other.dataset().classes)
    if theirs != classes:
        raise StateseerError(f"--oracle {oracle}: its classes {theirs} are not RUN's "
                             f"{classes}; give a run trained on the same task")
    name = other.data.get("tokenizer", "word")
    if name not in ("word", "char", "space"):
        raise StateseerError(f"--oracle {oracle}: its tokenizer {name!r} is not one of "
                             "stateseer's; give a run trained with word, char or space")
    if check_only:
        return float("nan")
    test = traces["test"]
    tok, vocab = get_tokenizer(name), other.vocab()
    seqs = [vocab.encode(tok(t)) for t in test.texts]
    pred = predict_proba(other.load_model(), seqs).argmax(1)
    return float((pred == np.asarray(test.labels)).mean())


def _judge_oracle(doc: dict[str, Any], acc: float, path: str,
                  say: Callable[[str], None]) -> None:
    """``oracle`` (the known-good model's test accuracy) and ``gap_closed`` = (repaired -
    buggy) / (oracle - buggy) into the repair document, on the means over seeds where there
    are several (None where the oracle is not half a point better than RUN)."""
    if "seeds" in doc:
        before, after = np.mean(doc["seeds"]["before"]), np.mean(doc["seeds"]["after"])
    else:
        before, after = doc["before"]["test_accuracy"], doc["after"]["test_accuracy"]
    gap = acc - float(before)
    doc["oracle"] = {"run": path, "test_accuracy": round(acc, 4)}
    doc["gap_closed"] = round((float(after) - float(before)) / gap, 3) if gap > 0.005 else None
    say(f"the oracle ({path}) scores {acc:.3f} on these test inputs; the repair closes "
        + (f"{doc['gap_closed']:.2f} of the gap" if doc["gap_closed"] is not None else
           "no measurable gap (the oracle is no better than RUN)"))


def _judge_gone(doc: dict[str, Any], say: Callable[[str], None]) -> None:
    """``finding_gone``, only when measured: the repaired model's own diagnosis no longer
    finds the culprit *and* its carriers' accuracy moved beyond what retraining alone
    moves it (the carriers' paired 95 % interval above the control's change on them).
    Without a control it is not measured: ``finding_left`` says what is known."""
    still, car, c = doc.pop("still_found"), doc["carriers"], doc.get("control")
    if still:
        doc["finding_gone"] = False
        doc["finding_left"] = "the repaired model's own diagnosis still finds it"
    elif c is None:
        doc["finding_left"] = ("the repaired model's diagnosis no longer finds it and its "
                               f"carriers' accuracy moved {car['delta']:+.3f}, but how much "
                               "retraining alone moves them was not measured; repair again "
                               "with --control to measure it")
    elif car["delta_ci"][0] > c["carriers_delta"]:
        doc["finding_gone"] = True
    else:
        doc["finding_gone"] = False
        doc["finding_left"] = (f"its carriers moved {car['delta']:+.3f} (95 % CI "
                               f"{car['delta_ci'][0]:+.3f} to {car['delta_ci'][1]:+.3f}), not "
                               f"beyond the control's {c['carriers_delta']:+.3f}")
    say("the finding is gone (measured against the control)" if doc.get("finding_gone")
        else f"the finding is not shown gone: {doc['finding_left']}")


def _still_found(after: dict[str, Any], f: dict[str, Any]) -> bool:
    """Whether the repaired model's significant findings hold ``f``'s culprit: a token of
    it (a span or a topic may come back in part, or as another kind), or the same class
    confusion or length."""
    for g in after["findings"]:
        if not g["significant"]:
            continue
        if g["kind"] == "unknown" and f["kind"] != "unknown":  # a culprit the repair took
            continue  # out of training is unknown to the new model: nothing it leans on
        if f["tokens"] and set(g["tokens"]) & set(f["tokens"]):
            return True
        if not f["tokens"] and g["kind"] == f["kind"] and \
                g.get("classes") == f.get("classes"):
            return True
    return False


def _test_carriers(src: Any, f: dict[str, Any], gold: np.ndarray) -> np.ndarray:
    """Which test inputs carry ``f``'s culprit: its tokens (a sequence in order), a
    confusion's first class, a length's long inputs; every input for another kind."""
    from stateseer.abstraction.pipeline import fresh_traces

    test = fresh_traces(src)["test"]
    if f["kind"] == "confusion":
        return gold == f["classes"][0]
    if f["kind"] == "length":
        return np.asarray(test.lengths) > int(f["length_above"])
    if f["tokens"]:
        return np.array([_holds(test.tokens(i), f) for i in range(test.n_inputs)], bool)
    return np.ones(test.n_inputs, bool)


#: share of the training inputs the ``--control`` model leaves out at random
CONTROL_SHARE = 0.01
#: ``--seeds``: the extra models' seeds are RUN's seed plus multiples of this
SEED_STEP = 1000
#: ``--seeds``: the most it takes (each seed trains two models)
MAX_SEEDS = 20


def _over_seeds(src: Any, new: Any, ds: Any, cfg: Any, seeds: int, first: tuple,
                progress: bool, say: Callable[[str], None],
                done: Callable[[int], None] | None = None, *,
                refit: Callable[[int, np.ndarray], np.ndarray] | None = None,
                seed: int = 0) -> dict[str, Any]:
    """RUN's data and the edited data (``cfg``) each trained with ``seeds - 1`` more
    seeds; their test outcomes beside RUN's and NEW's (``first``, as
    :func:`_test_outcomes` gave them), paired by seed. ``done(k)`` is called as the
    ``k``-th model is trained. With ``refit`` (:data:`HEAD_REFITS`), nothing is
    trained: RUN's model stays as it is and its last layer is fit again with the repair's
    seeds (``seed`` + :data:`SEED_STEP` ...; ``refit(s, rows)``: whether the model so
    refit gets the test rows ``rows`` right)."""
    ok_a, ok_b, gold, classes, rows, _carry = first
    outcomes, used = [(ok_a, ok_b, gold)], [int(cfg.seed if refit is None else seed)]
    if refit is not None:
        for r in range(1, seeds):
            s = used[0] + r * SEED_STEP
            say(f"seed {s}: fitting the last layer again ({r} of {seeds - 1})")
            outcomes.append((ok_a, refit(s, rows), gold))
            used.append(s)
            if done is not None:
                done(2 * r)
    else:
        _retrained_seeds(src, new, ds, cfg, seeds, progress, say, done, outcomes, used)
    return _seed_figures(outcomes, used, classes)


def _refit_outcomes(src: Any, ds: Any, f: dict, s: int, rows: np.ndarray) -> np.ndarray:
    """Whether RUN's model with its last layer refit by ``dfr`` with seed ``s`` gets the
    rows ``rows`` of ``ds`` right."""
    from stateseer.rnn_models.train import predict_proba

    _, edits = _dfr(ds, f, np.random.default_rng(s), src)
    pred = predict_proba(_reheaded(src, edits["head"]), _encoded(src, ds, rows)).argmax(1)
    return pred == np.asarray(ds.labels)[rows]


def _retrained_seeds(src: Any, new: Any, ds: Any, cfg: Any, seeds: int, progress: bool,
                     say: Callable[[str], None], done: Callable[[int], None] | None,
                     outcomes: list[tuple], used: list[int]) -> None:
    """:func:`_over_seeds`' trainings: RUN's data and the edited data with each more seed,
    their test outcomes appended to ``outcomes`` and the seeds to ``used``."""
    from stateseer.rnn_models.train import fit_predict

    copy = new.path / "seeds_source_data.jsonl"  # RUN's data, as the edited data is read
    before_cfg = _train_config(src, _write_data(ds, copy))
    names = np.asarray(ds.classes, object)
    try:
        for r in range(1, seeds):
            s = int(cfg.seed) + r * SEED_STEP
            say(f"seed {s}: training RUN's data and the edited data ({r} of {seeds - 1})")
            pairs = []
            for c in (before_cfg, cfg):
                pred, labels = fit_predict(dataclasses.replace(c, seed=s), progress=progress)
                pairs.append((pred == labels, names[labels]))
                if done is not None:
                    done(2 * (r - 1) + len(pairs))
            (ok_x, gold_x), (ok_y, gold_y) = pairs
            if not np.array_equal(gold_x, gold_y):  # repair edits training inputs only
                raise StateseerError("the edited data's test labels differ from RUN's; "
                                     "repair only edits training inputs (a bug, please "
                                     "report it)")
            outcomes.append((ok_x, ok_y, gold_x))
            used.append(s)
    finally:
        copy.unlink(missing_ok=True)


def _seed_figures(outcomes: list[tuple], used: list[int], classes: list
                  ) -> dict[str, Any]:
    """``repair.json``'s ``seeds``: the paired test outcomes (RUN's, NEW's, the gold
    class) of each seed ``used`` summed up."""
    from scipy import stats

    seeds = len(outcomes)
    before = [float(a.mean()) for a, _, _ in outcomes]
    after = [float(b.mean()) for _, b, _ in outcomes]
    delta = np.subtract(after, before)
    half = float(stats.t.ppf(0.975, seeds - 1) * delta.std(ddof=1) / np.sqrt(seeds))
    per_seed = [_per_class(a, b, g, classes) for a, b, g in outcomes]
    per_class = {c: round(float(np.mean([p.get(c, np.nan) for p in per_seed])), 4)
                 for c in classes}
    return {"seeds": used, "before": [round(x, 4) for x in before],
            "after": [round(x, 4) for x in after],
            "delta_mean": round(float(delta.mean()), 4),
            "delta_ci": [round(float(delta.mean()) - half, 4),
                         round(float(delta.mean()) + half, 4)],
            "per_class_delta_mean": per_class,
            "classes_hurt": sorted(c for c, d in per_class.items() if d < -0.01)}


def _control(src: Any, new: Any, ds: Any, seed: int, progress: bool,
             say: Callable[[str], None], carry: np.ndarray) -> dict[str, Any]:
    """Train RUN's data less a random :data:`CONTROL_SHARE` of its training inputs with
    RUN's settings into ``NEW/control`` and compare its test predictions with RUN's."""
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.train import train_run

    train = np.asarray(ds.splits["train"])
    rng = np.random.default_rng(10_000 + seed)
    gone = np.sort(rng.choice(train, max(1, round(CONTROL_SHARE * len(train))),
                              replace=False))
    where = ModelRun(layout.RunLayout(new.path).control)
    where.path.mkdir()
    data = _write_data(_subset(ds, np.setdiff1d(np.arange(len(ds)), gone)),
                       where.path / "data.jsonl")
    say(f"training the control {where.path} ({len(gone)} random training inputs left out)")
    train_run(_train_config(src, data), where.path, force=True, progress=progress)
    record_run(where.path)
    ok_a, ok_c, gold, classes, _rows = _test_outcomes(src, where)
    return {"left_out": len(gone), "test_accuracy": round(float(ok_c.mean()), 4),
            "delta": round(float(ok_c.mean() - ok_a.mean()), 4),
            "per_class_delta": _per_class(ok_a, ok_c, gold, classes),
            "carriers_delta": round(float(ok_c[carry].mean() - ok_a[carry].mean()), 4)
            if carry.any() else 0.0}


def _test_outcomes(src: Any, new: Any
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list, np.ndarray]:
    """Per test input: RUN's prediction right, ``new``'s prediction right, the gold class
    name; the classes; and the test inputs' rows in the data set."""
    from stateseer.abstraction.pipeline import fresh_traces

    before, after = fresh_traces(src), fresh_traces(new)
    a, b = before["test"], after["test"]
    if list(a.texts) != list(b.texts):
        raise StateseerError("the repaired run's test inputs differ from the source run's; "
                             "repair only edits training inputs (a bug, please report it)")
    ok_a = np.asarray(a.predictions) == np.asarray(a.labels)
    ok_b = np.asarray(b.predictions) == np.asarray(b.labels)
    gold = np.array([before.classes[k] for k in np.asarray(a.labels).tolist()])
    return ok_a, ok_b, gold, list(before.classes), np.asarray(a.rows)


def _per_class(ok_a: np.ndarray, ok_b: np.ndarray, gold: np.ndarray, classes: list
               ) -> dict[str, float]:
    return {c: round(float(ok_b[gold == c].mean() - ok_a[gold == c].mean()), 4)
            for c in classes if (gold == c).any()}


def _retrain_and_compare(src: Any, new: Any, cfg: Any, f: dict, finding: int, action: str,
                         edits: dict, progress: bool, say: Callable[[str], None],
                         report: Callable[[str, int, int], None] | None, steps: list[str]
                         ) -> tuple[dict[str, Any], tuple]:
    """Train NEW (:data:`HEAD_REFITS`: write RUN's model with its new last layer), record,
    abstract and diagnose it, and compare it with RUN on the test split: the
    ``stateseer.repair`` document, and the per-input outcomes it was computed from
    (:func:`_test_outcomes`). ``report`` follows the epochs, then the first four of
    ``steps``."""
    from stateseer.app.workflows.abstract import abstract_workflow
    from stateseer.app.workflows.diagnose import diagnose_run
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.train import train_run

    if action in HEAD_REFITS:  # RUN's model with its new last layer: nothing is trained
        _write_reheaded(src, new, edits["head"])
    else:  # train_run writes the run whole (config, model, vocabulary) over the folder
        # repair started; the edited data and its provenance are kept
        train_run(cfg, new.path, force=True, progress=progress if report is None
                  else (lambda e, n: report("training", e, n)))

    def stage(k: int) -> None:
        if report is not None:
            report(steps[k], k, len(steps))

    stage(0)
    record_run(new.path)
    stage(1)
    n_states = src.metrics().get("abstraction", {}).get("n_states_requested", N_STATES)
    abstract_workflow(new.path, n_states=n_states, forcing=False, index=False)
    stage(2)
    after_doc = diagnose_run(new.path, split="test")
    stage(3)
    outcomes = ok_a, ok_b, gold, classes, rows = _test_outcomes(src, new)
    lo, hi = paired_bootstrap(ok_a, ok_b)
    per_class = _per_class(ok_a, ok_b, gold, classes)
    carry = _test_carriers(src, f, gold)
    c_lo, c_hi = paired_bootstrap(ok_a[carry], ok_b[carry]) if carry.any() else (0.0, 0.0)
    doc = {"format": FORMAT, "version": VERSION, "source_run": str(src.path),
           "finding": finding, "action": action, "culprit": f["tokens"],
           "changed_rows": int(sum(len(v) for v in edits.values() if isinstance(v, list))),
           "settings": edits.get("settings", {}),
           "before": {"test_accuracy": round(float(ok_a.mean()), 4)},
           "after": {"test_accuracy": round(float(ok_b.mean()), 4)},
           "delta": round(float(ok_b.mean() - ok_a.mean()), 4),
           "delta_ci": [round(lo, 4), round(hi, 4)], "per_class_delta": per_class,
           "fixed": rows[~ok_a & ok_b].tolist(), "broken": rows[ok_a & ~ok_b].tolist(),
           "classes_hurt": sorted(c for c, d in per_class.items() if d < -0.01),
           "carriers": {"n_inputs": int(carry.sum()),
                        "before": round(float(ok_a[carry].mean()), 4) if carry.any() else None,
                        "after": round(float(ok_b[carry].mean()), 4) if carry.any() else None,
                        "delta": round(float(ok_b[carry].mean() - ok_a[carry].mean()), 4)
                        if carry.any() else 0.0,
                        "delta_ci": [round(c_lo, 4), round(c_hi, 4)]},
           "still_found": _still_found(after_doc, f)}
    say(f"test accuracy {doc['before']['test_accuracy']:.3f} -> "
        f"{doc['after']['test_accuracy']:.3f} (change {doc['delta']:+.3f}, 95 % CI "
        f"{lo:+.3f} to {hi:+.3f}); on the {int(carry.sum())} test inputs that carry the "
        f"culprit {doc['carriers']['delta']:+.3f} (95 % CI {c_lo:+.3f} to {c_hi:+.3f})")
    return doc, (*outcomes, carry)
