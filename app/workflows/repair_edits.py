"""How each `stateseer repair` action edits the training data (or the training
settings): the culprit's carriers, the spans deleted or inserted, the suspects of a
confusion or a topic relabelled or dropped, the noise rate a reweighting reads through, a
thinned class copied up. Each edit takes ``(ds, finding, rng, src)`` and returns the
edited data set and what it changed (`repair_edits.json`); the list of actions is in
:mod:`stateseer.app.workflows.repair`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.analysis.diagnosis import span_positions
from stateseer.app.workflows.retraining import _encoded, _train_config
from stateseer.core.errors import StateseerError

__all__ = ["DROP_SHARE", "JTT_UPWEIGHT", "expected_flips"]


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


def _has_span(toks: list[str], span: list[str]) -> bool:
    """Whether ``span`` occurs in ``toks`` whole, its tokens next to each other in order."""
    return bool(span_positions(np.asarray(toks, object), span).any())


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


def _subset(ds: Any, keep: np.ndarray) -> Any:
    new_index = -np.ones(len(ds), np.int64)
    new_index[keep] = np.arange(len(keep))
    splits = {s: new_index[idx][new_index[idx] >= 0] for s, idx in ds.splits.items()}
    return dataclasses.replace(ds, texts=[ds.texts[i] for i in keep.tolist()],
                               labels=np.asarray(ds.labels)[keep], splits=splits,
                               _tokens=None)
