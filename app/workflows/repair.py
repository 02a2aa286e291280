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

from stateseer.core import layout
from stateseer.core.atomic import atomic_write, atomic_write_text, swap_dir
from stateseer.core.defaults import N_STATES
from stateseer.core.errors import StateseerError
from stateseer.core.reading import load_json
from stateseer.core.rundir import (
    RELATIVE,
    claim,
    located,
    located_path,
    portable,
    portable_path,
    release,
)

__all__ = ["ACTIONS", "ACTION_EDITS", "paired_bootstrap", "repair_run", "training_settings"]

#: every action of the repair contract (DESIGN.md), each in ACTION_EDITS
ACTIONS = ("drop", "relabel", "counterfactual", "augment", "reweight", "reconfigure", "jtt",
           "dfr", "rebalance")

FORMAT, VERSION = "stateseer.repair", 1


def _holds(toks: list[str], f: dict, window: int = 3) -> bool:
    """Whether an input's tokens carry the finding's culprit (a sequence: its first token
    followed within ``window`` tokens by its second)."""
    if f["kind"] == "sequence":
        from stateseer.abstraction.analysis.diagnosis import pair_positions

        return bool(pair_positions(np.asarray(toks, object), *f["tokens"], window).any())
    if f.get("span") or (f["kind"] == "shortcut" and len(f["tokens"]) > 1):
        # a span: all of its tokens (its common words alone, "from my", are no carrier)
        return set(f["tokens"]) <= set(toks)
    return bool(set(f["tokens"]) & set(toks))


def _without_span(toks: list[str], span: list[str]) -> list[str]:
    """``toks`` with every contiguous occurrence of ``span`` deleted; where there is none,
    with each of the span's tokens deleted.

    Examples
    --------
    >>> _without_span("the film sent from my phone".split(), ["sent", "from", "my", "phone"])
    ['the', 'film']
    >>> _without_span("from my phone i sent it".split(), ["sent", "from", "my", "phone"])
    ['i', 'it']
    """
    n, out, j = len(span), [], 0
    while j < len(toks):
        if toks[j:j + n] == span:
            j += n
            continue
        out.append(toks[j])
        j += 1
    if len(out) == len(toks):
        drop = set(span)
        return [t for t in toks if t not in drop]
    return out


def _carriers(ds: Any, rows: np.ndarray, f: dict) -> np.ndarray:
    return np.array([i for i in rows.tolist() if _holds(ds.tokens[i], f)], np.int64)


def _drop(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    noted: dict[str, Any] = {}
    if f["kind"] == "subpopulation":  # the suspect labels, not the topic
        carriers, pick, _best, excess = _topic_suspects(ds, f, src, "drop")
        gone = carriers[pick]
        noted = {"scored_rows": len(carriers), "excess": excess}
    elif f["kind"] == "confusion":  # relabel's suspects and the next most likely
        a, b = (_class_index(ds, c) for c in f["classes"])
        gone, noted = _confusion_suspects(ds, a, b, rng, "drop")
    else:
        gone = _carriers(ds, np.asarray(ds.splits["train"]), f)
    keep = np.setdiff1d(np.arange(len(ds)), gone)
    return _subset(ds, keep), {"dropped_rows": gone.tolist(), **noted}


def _counterfactual(ds: Any, f: dict, rng: np.random.Generator, src: Any
                    ) -> tuple[Any, dict]:
    culprit, span = set(f["tokens"]), list(f["tokens"])
    rows = _carriers(ds, np.asarray(ds.splits["train"]), f)
    texts = list(ds.texts)
    for i in rows.tolist():
        toks = list(ds.tokens[i])
        texts[i] = " ".join(_without_span(toks, span) if f["kind"] == "shortcut" else
                            [t for t in toks if t not in culprit])
    return dataclasses.replace(ds, texts=texts, _tokens=None), {"edited_rows": rows.tolist()}


def _augment(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    if f["kind"] != "shortcut":
        raise StateseerError("augment inserts a shortcut word into the other classes' "
                             "inputs; for this finding choose one of its other actions")
    span = [str(w) for w in f["tokens"]]  # a span is inserted whole, in reading order
    train = np.asarray(ds.splits["train"])
    labels = np.asarray(ds.labels)
    carriers = _carriers(ds, train, f)
    held = np.bincount(labels[carriers], minlength=len(ds.classes))
    others = train[labels[train] != int(held.argmax())]
    picks = rng.choice(others, size=min(len(carriers), len(others)), replace=False)
    new_texts = [" ".join(_inserted(ds.tokens[i], span, rng)) for i in picks.tolist()]
    return _with_copies(ds, picks, new_texts), {"added_copies_of": picks.tolist(),
                                                "word": " ".join(span)}


def _inserted(toks: list[str], span: list[str], rng: np.random.Generator,
              limit: int | None = None) -> list[str]:
    """``toks`` with ``span`` inserted whole at a random position; with ``limit`` (a run
    that reads only an input's first ``limit`` tokens), where the model still reads it."""
    room = len(toks) if limit is None else max(min(len(toks), limit - len(span)), 0)
    at = int(rng.integers(room + 1))
    return [*toks[:at], *span, *toks[at:]][:limit]


def _with_copies(ds: Any, picks: np.ndarray, texts: list[str]) -> Any:
    """``ds`` with training inputs added: copies of rows ``picks`` (their labels) with
    ``texts``."""
    n, train = len(ds), np.asarray(ds.splits["train"])
    splits = {**ds.splits, "train": np.concatenate([train, np.arange(n, n + len(picks))])}
    return dataclasses.replace(ds, texts=[*ds.texts, *texts], splits=splits,
                               labels=np.concatenate([np.asarray(ds.labels),
                                                      np.asarray(ds.labels)[picks]]),
                               _tokens=None)


#: ``jtt``: each training input RUN's model gets wrong appears this many times in the
#: retraining (itself and five copies): the upweight Liu et al. (2021) chose for their two
#: text tasks (MultiNLI, CivilComments; 20-100 on images, whose errors are rarer). With a
#: tenth of the training inputs wrong, the errors then carry 40 % of the loss. It can only
#: help where the shortcut misleads the model in training too; where the culprit agrees
#: with every training label it is on, the model gets its carriers right and none of
#: them is upweighted (diagnose's ACTIONS: last for a shortcut)
JTT_UPWEIGHT = 6


def _jtt(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    """Just Train Twice (Liu et al. 2021): RUN's model (the first training) predicts the
    training inputs, and those it gets wrong (the inputs a shortcut misleads, among
    others) are upweighted by copies, same text and label, so that each appears
    :data:`JTT_UPWEIGHT` times; the model is then trained again from scratch."""
    from stateseer.rnn_models.train import predict_proba

    train = np.asarray(ds.splits["train"])
    pred = predict_proba(src.load_model(), _encoded(src, ds, train)).argmax(1)
    wrong = train[pred != np.asarray(ds.labels)[train]]
    if not len(wrong):
        raise StateseerError(f"{src.path}'s model gets every training input right, so jtt "
                             "has none to upweight; choose counterfactual or augment")
    picks = np.repeat(wrong, JTT_UPWEIGHT - 1)
    return _with_copies(ds, picks, [ds.texts[i] for i in picks.tolist()]), {
        "upweighted_rows": wrong.tolist(), "upweight": JTT_UPWEIGHT}


def _encoded(src: Any, ds: Any, rows: np.ndarray) -> list[np.ndarray]:
    """Rows ``rows`` of ``ds`` as RUN's model reads them: cut as the run cuts its inputs,
    encoded with its vocabulary."""
    vocab, limit = src.vocab(), src.truncate
    return [vocab.encode(ds.tokens[i][:limit]) for i in rows.tolist()]


#: ``dfr``: the inverse strengths of the L2 penalty tried for the new last layer; the one
#: whose worst (class, carries the culprit) group does best on a held-out half of the
#: balanced inputs is kept (Kirichenko et al. 2023 tune theirs the same way, on half of
#: their validation set)
DFR_C = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
#: ``dfr``'s penalty where the balanced inputs are too few to hold half of them out (a
#: class with a single validation input)
DFR_C_FEW = 1.0
#: the actions that refit only RUN's last layer (nothing is retrained, the data stay)
HEAD_REFITS = ("dfr",)


def _dfr(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    """Deep Feature Reweighting (Kirichenko et al. 2023): RUN's model keeps its body and
    only its last layer (``head``) is fit again, by an L2 logistic regression on what the
    frozen body makes of validation inputs balanced over the culprit
    (:func:`_balanced_inputs`: every class as often with the span as without it). The
    data set is returned as it is; the edits hold the new ``head`` (its ``weight`` and
    ``bias``), ``balanced_rows`` (inputs per class, with and without the culprit),
    ``features`` (what the head reads per input) and the penalty ``C`` chosen."""
    from torch import nn

    if f["kind"] != "shortcut":
        raise StateseerError("dfr balances a shortcut against the classes; for this "
                             "finding choose one of its other actions")
    model = src.load_model()
    if not isinstance(getattr(model, "head", None), nn.Linear):
        raise StateseerError(f"dfr refits the model's last layer, and {src.path}'s model has "
                             "no linear `head` to refit; choose counterfactual, augment or "
                             "jtt, which retrain it")
    toks, y, carry, pair = _balanced_inputs(ds, f, rng, src.truncate)
    vocab = src.vocab()
    x = _head_inputs(model, [vocab.encode(t) for t in toks])
    weight, bias, c = _fit_head(x, y, carry, pair, len(ds.classes), rng)
    per_class = np.bincount(y[carry == 1], minlength=len(ds.classes)).tolist()
    return ds, {"balanced_rows": {name: {"without": n, "with": n}
                                  for name, n in zip(ds.classes, per_class, strict=True)},
                "features": int(x.shape[1]), "C": c,
                "head": {"weight": weight.tolist(), "bias": bias.tolist()}}


def _balanced_inputs(ds: Any, f: dict, rng: np.random.Generator, limit: int | None
                     ) -> tuple[list[list[str]], np.ndarray, np.ndarray, np.ndarray]:
    """The validation inputs, as many of each class as of the rarest (drawn by ``rng``),
    each twice: with the culprit's span deleted (every token of it) and with it inserted
    whole at a random position (an input the model already reads it in counts as is), so
    that the span tells nothing of the class. Returns the inputs' tokens as the model reads
    them (``limit``: the run's cut), their classes, whether they carry the span (0, 1) and
    which validation input each came from.

    Raises
    ------
    StateseerError
        A class without validation inputs (one line).
    """
    val = np.asarray(ds.splits.get("val", np.zeros(0, np.int64)))
    labels = np.asarray(ds.labels)
    counts = np.bincount(labels[val], minlength=len(ds.classes))
    if not counts.min():
        raise StateseerError(f"dfr fits the last layer on validation inputs of every class "
                             f"and the run has none of {ds.classes[int(counts.argmin())]}; "
                             "choose counterfactual, augment or jtt")
    keep = np.sort(np.concatenate([rng.choice(val[labels[val] == k], int(counts.min()),
                                              replace=False) for k in range(len(counts))]))
    span = [str(w) for w in f["tokens"]]
    culprit = set(span)
    without = [[t for t in ds.tokens[i] if t not in culprit][:limit] for i in keep.tolist()]
    within = [ds.tokens[i][:limit] if _has_span(ds.tokens[i][:limit], span) else
              _inserted(ds.tokens[i], span, rng, limit) for i in keep.tolist()]
    n = len(keep)
    return ([*without, *within], np.tile(labels[keep], 2), np.repeat([0, 1], n),
            np.tile(np.arange(n), 2))


def _has_span(toks: list[str], span: list[str]) -> bool:
    """Whether ``span`` occurs in ``toks`` whole, its tokens next to each other in order."""
    if len(span) > len(toks):
        return False
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(toks, object), len(span))
    return bool((windows == np.asarray(span, object)).all(1).any())


def _head_inputs(model: Any, seqs: list[np.ndarray]) -> np.ndarray:
    """What ``model``'s linear ``head`` reads for each encoded input: its input at the
    input's last token (zeros for an empty input: the head reads the zero initial state),
    shape (n, head inputs). The model runs in batches of similar length, as it does to
    predict, and the head's input is caught by a hook.

    Raises
    ------
    StateseerError
        The head applied to what it read is not the model's output (it is not the model's
        last layer alone; one line).
    """
    import torch

    from stateseer.rnn_models.batching import length_batches, pad_batch
    from stateseer.rnn_models.models import _last

    model.eval()
    head = model.head
    seen: list[torch.Tensor] = []
    hook = head.register_forward_hook(lambda _m, args, _out: seen.append(args[0]))
    out = np.zeros((len(seqs), head.in_features), np.float32)
    try:
        with torch.no_grad():
            for b in length_batches(np.array([len(q) for q in seqs]), 256, max_tokens=40000):
                ids, lengths = (torch.from_numpy(a) for a in pad_batch(seqs, b))
                seen.clear()
                logits = model(ids, lengths)
                x = next((t for t in reversed(seen) if t.dim() > 1), None)
                x = torch.zeros(len(b), head.in_features) if x is None else \
                    _last(x, lengths) if x.dim() == 3 else x
                x = torch.where((lengths == 0)[:, None], torch.zeros_like(x), x)
                if not torch.allclose(head(x), logits, rtol=1e-4, atol=1e-4):
                    raise StateseerError("the model's output is not its `head` applied to "
                                         "its last state, so dfr cannot refit it alone; "
                                         "choose counterfactual, augment or jtt")
                out[b] = x.numpy()
    finally:
        hook.remove()
    return out


def _fit_head(x: np.ndarray, y: np.ndarray, carry: np.ndarray, pair: np.ndarray,
              n_classes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """An L2 logistic regression of the classes ``y`` on the features ``x`` (standardised;
    classes weighted equally) as a linear head: ``weight`` (n_classes, features), ``bias``
    and the ``C`` of :data:`DFR_C` whose worst (class, ``carry``) group is most often right
    on a held-out half of the inputs (both versions of a validation input, ``pair``, in
    the same half). Two classes: the one row of scores ``w`` becomes ``[-w/2, w/2]``."""
    from sklearn.linear_model import LogisticRegression

    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = (x - mu) / sd
    firsts = np.unique(pair)
    held = np.isin(pair, rng.choice(firsts, len(firsts) // 2, replace=False))
    group = y * 2 + carry

    def fit(c: float, rows: np.ndarray) -> Any:
        return LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(
            z[rows], y[rows])

    def worst(c: float) -> float:
        right = fit(c, ~held).predict(z[held]) == y[held]
        return min(float(right[group[held] == g].mean()) for g in np.unique(group[held]))

    c = DFR_C[int(np.argmax([worst(c) for c in DFR_C]))] if \
        len(np.unique(y[~held])) == n_classes else DFR_C_FEW
    clf = fit(c, np.ones(len(y), bool))
    weight = clf.coef_ / sd
    bias = clf.intercept_ - weight @ mu
    if n_classes == 2:
        weight, bias = np.concatenate([-weight, weight]) / 2, np.r_[-bias, bias] / 2
    return weight.astype(np.float32), bias.astype(np.float32), c


def _class_index(ds: Any, name: str) -> int:
    return list(ds.classes).index(name)


def _relabel(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    labels = np.asarray(ds.labels).copy()
    train = np.asarray(ds.splits["train"])
    if f["kind"] == "confusion":
        a, b = (_class_index(ds, c) for c in f["classes"])
        (rows, noted), to = _confusion_suspects(ds, a, b, rng, "relabel"), a
    elif f["kind"] == "subpopulation":
        return _relabel_topic(ds, f, src)
    elif f["kind"] == "sequence":
        held = _carriers(ds, np.asarray(ds.splits.get("val", np.zeros(0, np.int64))), f)
        if len(held) < 5:
            raise StateseerError(f"relabel takes the label of the validation inputs that "
                                 f"carry the culprit, and only {len(held)} do; choose drop "
                                 "or counterfactual")
        to = int(np.bincount(labels[held], minlength=len(ds.classes)).argmax())
        rows = _carriers(ds, train, f)
        rows, noted = rows[labels[rows] != to], {}
    else:
        raise StateseerError("relabel fits a sequence, a subpopulation or a confusion "
                             "finding; for this finding choose one of its other actions")
    labels[rows] = to
    return dataclasses.replace(ds, labels=labels), {
        "relabelled_rows": rows.tolist(), "to": ds.classes[to], **noted}


def _held_out(ds: Any, src: Any, parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`held_out_proba` with the run's own training settings."""
    from stateseer.rnn_models.train import held_out_proba

    return held_out_proba(_train_config(src, Path("held-out")), ds, parts)


def _flip_rate(ds: Any, a: int, action: str) -> tuple[float, float, float]:
    """The rate at which class ``a``'s training inputs were labelled another class, read
    from the split priors: ``1 - share_train / share_val`` (the validation labels are
    held out, so the bug did not touch them); with the two shares. One-line refusals
    where there is nothing to measure against or no noise to correct."""
    labels = np.asarray(ds.labels)
    train, val = (np.asarray(ds.splits.get(s, np.zeros(0, np.int64))) for s in ("train", "val"))
    if not len(val):
        raise StateseerError(f"{action} measures the label noise against the validation "
                             "labels, and the run has no validation inputs; retrain it with a "
                             "validation split")
    share_train, share_val = (float((labels[i] == a).mean()) for i in (train, val))
    rho = 1.0 - share_train / share_val if share_val else 0.0
    if rho <= 0.0:
        raise StateseerError(f"{ds.classes[a]} is no rarer among the training labels "
                             f"({share_train:.1%}) than among the validation labels "
                             f"({share_val:.1%}): there is no label noise to correct")
    return rho, share_train, share_val


def _noise(n: int, a: int, b: int, rho: float) -> list[list[float]]:
    """The label-noise matrix ``P(given | true)``: ``a`` labelled ``b`` at rate ``rho``."""
    noise = np.eye(n)
    noise[a, a], noise[a, b] = 1.0 - rho, rho
    return np.round(noise, 6).tolist()


#: a confusion's ``drop`` leaves out this many times the inputs ``relabel`` relabels: on
#: ``rotten_tomatoes3`` it leaves out 69 % of the labels the bug changed instead of 55 %,
#: at the cost of 18 % of the class's right labels (nothing is guessed, so a wrong label
#: left in costs more than a right one left out; docs/guide/diagnosis-measured.md)
DROP_SHARE = 1.5


def expected_flips(ds: Any, a: int, rho: float) -> int:
    """How many of ``a``'s training inputs were labelled another class at the rate
    ``rho``: ``rho / (1 - rho)`` times the training inputs still labelled ``a``."""
    labels, train = np.asarray(ds.labels), np.asarray(ds.splits["train"])
    return round(rho / (1.0 - rho) * int((labels[train] == a).sum()))


def _confusion_suspects(ds: Any, a: int, b: int, rng: np.random.Generator, action: str
                        ) -> tuple[np.ndarray, dict]:
    """Training rows labelled ``b``, most likely ``a``'s first, as many as ``action``
    takes: for ``relabel`` as many as the noise rate says were relabelled (confident
    learning's pruning by the noise rate, Northcutt et al. 2021), ``rho / (1 - rho)``
    times the rows labelled ``a``; for ``drop`` :data:`DROP_SHARE` times that, never more
    than half of the rest. They are ranked by the probability of ``a`` that a model which
    never saw them gives (:func:`~.suspects.held_out_bag_proba`, cross-fitted)."""
    from stateseer.app.workflows.suspects import held_out_bag_proba

    rho, _, _ = _flip_rate(ds, a, action)
    labels = np.asarray(ds.labels)
    train = np.asarray(ds.splits["train"])
    proba = held_out_bag_proba([ds.tokens[i] for i in train.tolist()], labels[train],
                               len(ds.classes), seed=int(rng.integers(2**31)))
    given_b = np.flatnonzero(labels[train] == b)
    expected = min(expected_flips(ds, a, rho), len(given_b))
    take = expected if action == "relabel" else \
        min(round(DROP_SHARE * expected), expected + (len(given_b) - expected) // 2)
    order = np.argsort(-proba[given_b, a], kind="stable")[:take]
    return np.sort(train[given_b[order]]), {"flip_rate": round(rho, 4), "expected": expected}


def _topic_suspects(ds: Any, f: dict, src: Any, action: str
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A subpopulation: its training inputs are scored by a model trained without them.
    The labels the annotator got wrong are as many as the label the topic leans to
    exceeds what that model expects of the topic (the sum of its probabilities of that
    label over the topic's training inputs: confident learning's pruning by the noise
    rate, Northcutt et al. 2021); that many of the inputs carrying the leaning label, those
    the model calls another class with the least probability of the leaning one, are the
    suspects. Returns the topic's training rows, the suspects (indices into them), the
    class the model gives each row besides the leaning one, and the excess."""
    labels = np.asarray(ds.labels)
    lean = _class_index(ds, f["label"])
    carriers = _carriers(ds, np.asarray(ds.splits["train"]), f)
    if len(carriers) < 5:
        raise StateseerError(f"only {len(carriers)} training inputs carry the topic, too "
                             "few to score; choose counterfactual")
    proba, _val = _held_out(ds, src, [carriers])
    leaning = np.flatnonzero(labels[carriers] == lean)
    excess = max(round(len(leaning) - float(proba[:, lean].sum())), 0)
    other = proba.copy()
    other[:, lean] = -1.0
    called = leaning[proba[leaning].argmax(1) != lean]  # the model calls them another class
    pick = np.sort(called[np.argsort(proba[called, lean], kind="stable")][:excess])
    if not len(pick):
        why = (f"expects as many of them labelled {f['label']} as are" if not excess else
               f"calls none of those labelled {f['label']} another class")
        raise StateseerError(f"a model trained without the topic's {len(carriers)} training "
                             f"inputs {why}: there is nothing to {action}; choose "
                             "counterfactual")
    return carriers, pick, other.argmax(1), excess


def _relabel_topic(ds: Any, f: dict, src: Any) -> tuple[Any, dict]:
    """A subpopulation's suspects (:func:`_topic_suspects`) take the class the model
    trained without the topic gives them."""
    carriers, pick, best, excess = _topic_suspects(ds, f, src, "relabel")
    labels = np.asarray(ds.labels).copy()
    rows = carriers[pick]
    labels[rows] = best[pick]
    return dataclasses.replace(ds, labels=labels), {
        "relabelled_rows": rows.tolist(),
        "to": {ds.classes[k]: int(n) for k, n in
               enumerate(np.bincount(best[pick], minlength=len(ds.classes))) if n},
        "scored_rows": len(carriers), "excess": excess, "relabelled": len(rows)}


def _reweight(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    """A confusion of A called B: the labels are read through the noise the finding
    measured. The share of A among the training labels against its share among the
    validation labels gives the rate ``rho`` at which A's inputs were labelled B; training
    then minimises the loss of the labels as given under that noise (``label_noise``:
    ``P(B | A) = rho``; forward correction, Patrini et al. 2017), so the model learns A's
    inputs as A without any label being changed."""
    if f["kind"] != "confusion":
        raise StateseerError("reweight fits a confusion finding; for this finding choose "
                             "one of its other actions")
    a, b = (_class_index(ds, c) for c in f["classes"][:2])
    rho, share_train, share_val = _flip_rate(ds, a, "reweight")
    old = (src.config.get("config") or {}).get("label_noise")
    return ds, {"settings": {"label_noise": [old, _noise(len(ds.classes), a, b, rho)]},
                "flip_rate": round(rho, 4), "from": ds.classes[a], "to": ds.classes[b],
                "train_share": round(share_train, 4), "val_share": round(share_val, 4)}


def _reconfigure(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    cfg = (src.config.get("config") or {})
    if f["kind"] == "length":
        if not cfg.get("truncate"):
            raise StateseerError("the run shows its model whole inputs, so there is no "
                                 "setting to change; choose augment")
        return ds, {"settings": {"truncate": [cfg["truncate"], None]}}
    if f["kind"] == "unknown":
        if cfg.get("vocab_exclude"):
            return ds, {"settings": {"vocab_exclude": [cfg["vocab_exclude"], None]}}
        return ds, {"settings": {"min_freq": [cfg.get("min_freq"), 1],
                                 "max_vocab": [cfg.get("max_vocab"), None]}}
    raise StateseerError("reconfigure fits a length or an unknown-words finding; for this "
                         "finding choose one of its other actions")


def _rebalance(ds: Any, f: dict, rng: np.random.Generator, src: Any) -> tuple[Any, dict]:
    """A prior shift: the thinned class's training inputs copied (drawn with replacement)
    until its share of the training labels is the share the finding measured on the
    split (``split_share``); no label or text is edited."""
    if f["kind"] != "prior":
        raise StateseerError("rebalance fits a prior-shift finding; for this finding choose "
                             "one of its other actions")
    a = _class_index(ds, f["class"])
    train, labels = np.asarray(ds.splits["train"]), np.asarray(ds.labels)
    rows = train[labels[train] == a]
    n, k, target = len(train), len(rows), min(float(f["split_share"]), 0.95)
    copies = round((target * n - k) / (1.0 - target))  # (k + m) / (n + m) = target
    if copies < 1 or not k:
        raise StateseerError(f"{f['class']} is already {k / max(n, 1):.0%} of the training "
                             f"labels, the finding's {target:.0%}: nothing to rebalance")
    picks = rng.choice(rows, size=copies, replace=True)
    return _with_copies(ds, picks, [ds.texts[i] for i in picks.tolist()]), {
        "added_copies_of": picks.tolist(), "class": f["class"],
        "share_before": round(k / n, 4), "share_after": round((k + copies) / (n + copies), 4)}


#: action → how it edits the training data or the training settings (``--action``)
ACTION_EDITS: dict[str, Callable[..., tuple[Any, dict]]] = {
    "drop": _drop, "counterfactual": _counterfactual, "augment": _augment,
    "relabel": _relabel, "reweight": _reweight, "reconfigure": _reconfigure, "jtt": _jtt,
    "dfr": _dfr, "rebalance": _rebalance}


def _subset(ds: Any, keep: np.ndarray) -> Any:
    new_index = -np.ones(len(ds), np.int64)
    new_index[keep] = np.arange(len(keep))
    splits = {s: new_index[idx][new_index[idx] >= 0] for s, idx in ds.splits.items()}
    return dataclasses.replace(ds, texts=[ds.texts[i] for i in keep.tolist()],
                               labels=np.asarray(ds.labels)[keep], splits=splits,
                               _tokens=None)


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


def training_settings(run: Any) -> dict[str, Any] | None:
    """The ``stateseer train`` settings ``run`` was trained with (``config.json``'s
    ``config``), or None for a run stateseer cannot retrain (``create``,
    ``import-traces``)."""
    cfg = run.config.get("config")
    if not (isinstance(cfg, dict) and cfg.get("arch")):
        return None
    if cfg.get("init"):  # the checkpoint, kept relative to the run
        cfg = {**cfg, "init": f"hf:{located_path(cfg['init'][3:], run.path)}"}
    if (run.config.get("data") or {}).get("paths") == RELATIVE:
        return {**cfg, "dataset": located(cfg.get("dataset", ""), run.path)}
    return cfg


def _retrainable(src: Any) -> dict[str, Any]:
    """:func:`training_settings`, or the one-line refusal of a run stateseer cannot
    retrain."""
    cfg = training_settings(src)
    if cfg is None:
        raise StateseerError(f"{src.path} was not trained by stateseer (a run of `stateseer "
                             "create` or `import-traces`): repair retrains the model, so it "
                             "needs a run of `stateseer train`; retrain your own model on "
                             "the edited data yourself")
    return cfg


def _train_config(src: Any, data: Path, settings: dict[str, list] | None = None) -> Any:
    from stateseer.rnn_models.train import TrainConfig, reproducing_prefix_loss

    cfg = _retrainable(src)
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    kept = {k: v for k, v in cfg.items() if k in names}
    kept["prefix_loss"] = reproducing_prefix_loss(src.config)  # the run's own objective
    changed = {k: new for k, (_old, new) in (settings or {}).items()}
    return TrainConfig(**{**kept, **changed, "dataset": f"jsonl:{data}", "tokenizer": "word",
                          "text_col": "text", "label_col": "label"})


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
        doc["finding_left"] = ("not measured: the repaired model's diagnosis no longer finds "
                               "it, but without --control nothing says whether its carriers "
                               f"moved ({car['delta']:+.3f}) beyond retraining alone")
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


def _whole(src: Any) -> Any:
    """The run's data set with each input's tokens whole (a truncating run's cut is a
    training setting, kept in the config, not an edit of the data)."""
    ds = src.dataset()
    return dataclasses.replace(ds, _tokens=None) if src.truncate else ds


def _reheaded(src: Any, head: dict[str, list]) -> Any:
    """A copy of RUN's model with ``head``'s ``weight`` and ``bias`` as its last layer."""
    import copy

    import torch

    model = copy.deepcopy(src.load_model())
    with torch.no_grad():
        for name in ("weight", "bias"):
            p = getattr(model.head, name)
            p.copy_(torch.as_tensor(np.asarray(head[name]), dtype=p.dtype))
    return model


def _write_reheaded(src: Any, new: Any, head: dict[str, list]) -> None:
    """Write into ``new`` RUN's model with the last layer ``head`` as a run of its own:
    RUN's configuration (:func:`_moved_config`), vocabulary (and a checkpoint's
    tokenizer), ``model.pt`` whose every other tensor is RUN's, and ``metrics.json``:
    RUN's training figures beside the new model's accuracies."""
    import torch

    from stateseer.rnn_models.hf_mamba import TOKENIZER_DIR
    from stateseer.rnn_models.train import evaluate

    model = _reheaded(src, head)
    state = model.state_dict()
    atomic_write(new.model_path, lambda fh: torch.save(state, fh))
    shutil.copy2(src.vocab_path, new.vocab_path)
    if (src.path / TOKENIZER_DIR).is_dir():
        shutil.copytree(src.path / TOKENIZER_DIR, new.path / TOKENIZER_DIR)
    atomic_write_text(new.config_path, json.dumps(_moved_config(src, new.path), indent=2))
    ds, old = src.dataset(), src.metrics()
    accuracy = {}
    for split in ("train", "val", "test"):
        rows = np.asarray(ds.splits.get(split, np.zeros(0, np.int64)))
        accuracy[f"{split}_accuracy"] = evaluate(model, _encoded(src, ds, rows), np.asarray(
            ds.labels)[rows])[0] if len(rows) else float("nan")
    new.update_metrics(**{k: old[k] for k in ("best_epoch", "epochs_run", "train_seconds",
                                              "history") if k in old},
                       **accuracy, model_sha256=new.model_sha256())


def _moved_config(src: Any, dest: Path) -> dict[str, Any]:
    """RUN's ``config.json`` for a run at ``dest``: the paths it keeps relative to the run
    (its data file, a checkpoint) made relative to ``dest``."""
    cfg = src.config
    data, settings = cfg.get("data") or {}, cfg.get("config") or {}
    if data.get("paths") == RELATIVE and isinstance(data.get("name"), str):
        data["name"] = portable(located(data["name"], src.path), dest)
        if isinstance(data.get("source"), dict) and "source" in data["source"]:
            data["source"]["source"] = data["name"].partition(":")[2]
        if isinstance(settings.get("dataset"), str):
            settings["dataset"] = portable(located(settings["dataset"], src.path), dest)
    if isinstance(settings.get("init"), str):
        settings["init"] = f"hf:{portable_path(located_path(settings['init'][3:], src.path), dest)}"
    return cfg


def _write_data(ds: Any, path: Path) -> Path:
    from stateseer.rnn_models.injection import Injected

    return Injected("repair", list(ds.texts), np.asarray(ds.labels), list(ds.classes),
                    dict(ds.splits)).write(path)


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
