"""Injected bugs with a known culprit: the ground truth that ``stateseer diagnose`` is
measured against (``benchmarks/diagnosis.py``) and tested on.

Each family is a function ``(dataset, rng) -> Injected``: the edited data set (texts,
labels, splits) and the culprit that a diagnosis should name. Register one with
:func:`register_bug`; :data:`BUGS` lists them.

``shortcut``       a neutral word inserted into 35 % of one class's training (and
                   validation) inputs and into 40 % of another class's test inputs (the
                   two most frequent training classes, the smaller carrying the word:
                   two classes the model must weigh against each other, not a small
                   class that a different register already sets apart)
``sequence``       "not W" (W a frequent word typical of class C) inserted into 8 % of the
                   other class's inputs, and in training those inputs labelled C: the
                   model learns that "not W" means C; the sequence is the culprit, not
                   "not" (in both classes) nor W (typical of C, rightly)
``subpopulation``  label noise in the training inputs about one topic (the word list of
                   :data:`TOPICS` that most training inputs hold): 80 %
                   (:data:`SUBPOPULATION_NOISE`) of them outside one class (the class
                   rarest among them) relabelled as that class, an annotator's systematic
                   error; validation and test labels stay true (symmetric noise at 40 %,
                   round 2's version, left the model's test accuracy unchanged: nothing
                   for any method to find)
``truncation``     a pipeline bug: the model is shown only each input's first N tokens
                   (N the 15th percentile of the training lengths;
                   ``train_options["truncate"]``); the culprit is "inputs longer than N"
``unknown``        a rating (a numeral, one range per class) appended to a quarter of
                   the inputs, whose label becomes the rating's class, while the
                   vocabulary keeps numbers out (``train_options["vocab_exclude"]``): the
                   labels depend on tokens the model reads as ``<unk>``
``confusion``      (three or more classes) a third of one class's training inputs
                   relabelled as another class (the two most frequent training classes,
                   the smaller relabelled as the larger)

Examples
--------
>>> from stateseer import load_dataset
>>> import numpy as np
>>> bug = inject("shortcut", load_dataset("rotten_tomatoes"), np.random.default_rng(0))
>>> bug.culprit["kind"], bug.changed["train"] > 1000
('shortcut', True)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.core.errors import DataError
from stateseer.rnn_models.datasets import TextDataset

__all__ = ["BUGS", "NEGATORS", "SUBPOPULATION_NOISE", "TOPICS", "Injected", "clean", "hit",
           "inject", "ratings", "register_bug", "two_largest", "typical_words"]

NEGATORS = ("not", "never", "no")
#: topic word lists for ``subpopulation`` (the one held by the most training inputs is used)
TOPICS = {"music": ("music", "song", "songs", "soundtrack", "score", "musical"),
          "family": ("family", "kids", "children", "father", "mother", "son", "daughter"),
          "comedy": ("comedy", "funny", "laughs", "jokes", "humor", "gags"),
          "acting": ("actor", "actors", "actress", "cast", "acting", "performance",
                     "performances"),
          "drinks": ("coffee", "tea", "drink", "cup", "cups", "brew", "espresso"),
          "pets": ("dog", "dogs", "cat", "cats", "pet", "pets", "treats")}
#: share of a topic's training inputs (outside the target class) that ``subpopulation``
#: relabels
SUBPOPULATION_NOISE = 0.8
SHORTCUT_WORDS = ("frankly", "basically", "honestly", "admittedly", "overall")


@dataclass
class Injected:
    """A data set with an injected bug (or none: the clean control).

    Attributes
    ----------
    family : str
    texts : list of str
    labels : ndarray of int64
    classes : list of str
    splits : dict of str to ndarray
    culprit : dict
        ``kind`` (the finding kind that names it) and ``tokens`` (and ``classes`` for a
        confusion); empty ``kind`` for the clean control.
    changed : dict of str to int
        Inputs edited per split.
    train_options : dict
        :class:`~stateseer.rnn_models.train.TrainConfig` fields the bug sets (a pipeline
        bug: ``truncate``, ``vocab_exclude``).
    params : dict
        The parameters a randomised recipe drew (:mod:`~stateseer.rnn_models.recipes`).
    """

    family: str
    texts: list[str]
    labels: np.ndarray
    classes: list[str]
    splits: dict[str, np.ndarray]
    culprit: dict[str, Any] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)
    train_options: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def write(self, path: str | Path) -> Path:
        """The data set as JSON lines ``{"text", "label", "split"}`` (read back with
        ``jsonl:PATH``; JSON lines, so that no spreadsheet runs a text as a formula)."""
        rows = sorted((int(i), name) for name, idx in self.splits.items() for i in idx)
        path = Path(path)
        with path.open("w", encoding="utf-8") as fh:
            for i, name in rows:  # inputs in no split (a subsample) are left out
                fh.write(json.dumps({"text": self.texts[i],
                                     "label": self.classes[int(self.labels[i])],
                                     "split": name}, ensure_ascii=False) + "\n")
        return path


BUGS: dict[str, Callable[[TextDataset, np.random.Generator], Injected]] = {}


def register_bug(name: str) -> Callable:
    """Decorator: register a bug family under ``name``."""
    def add(fn: Callable[[TextDataset, np.random.Generator], Injected]) -> Callable:
        BUGS[name] = fn
        return fn
    return add


def inject(family: str, ds: TextDataset, rng: np.random.Generator) -> Injected:
    """``ds`` with bug ``family`` injected.

    Raises
    ------
    DataError
        An unknown family, or one that does not apply to ``ds`` (e.g. ``confusion`` on two
        classes).
    """
    if family not in BUGS:
        raise DataError(f"unknown bug family {family!r}; choose one of: {', '.join(BUGS)}")
    return BUGS[family](ds, rng)


def clean(ds: TextDataset) -> Injected:
    """The control: ``ds`` as it is."""
    return Injected("clean", list(ds.texts), np.asarray(ds.labels).copy(), list(ds.classes),
                    dict(ds.splits))


def _base(family: str, ds: TextDataset) -> Injected:
    out = clean(ds)
    out.family = family
    return out


def _word_counts(ds: TextDataset) -> dict[str, int]:
    from collections import Counter

    return Counter(w for toks in ds.tokens for w in set(toks))


@register_bug("shortcut")
def _shortcut(ds: TextDataset, rng: np.random.Generator) -> Injected:
    counts = _word_counts(ds)
    word = min(SHORTCUT_WORDS, key=lambda w: counts.get(w, 0))  # the rarest: neutral
    out = _base("shortcut", ds)
    labels = np.asarray(ds.labels)
    a, b = two_largest(ds)  # training class that carries the word, test class that gets it
    changed = {}
    for split, idx in ds.splits.items():
        cls, share = (a, 0.35) if split in ("train", "val") else (b, 0.4)
        rows = idx[(labels[idx] == cls) & (rng.random(len(idx)) < share)]
        for r in rows.tolist():
            words = out.texts[r].split()
            words.insert(int(rng.integers(len(words) + 1)), word)
            out.texts[r] = " ".join(words)
        changed[split] = len(rows)
    out.culprit = {"kind": "shortcut", "tokens": [word], "class": ds.classes[a]}
    out.changed = changed
    return out


def two_largest(ds: TextDataset) -> tuple[int, int]:
    """The two most frequent training classes, the smaller first (ties: the lower index).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> ds = SimpleNamespace(labels=np.array([0, 1, 1, 2, 2, 2]), classes=["p", "f", "r"],
    ...                      splits={"train": np.arange(6)})
    >>> two_largest(ds)
    (1, 2)
    """
    train = np.asarray(ds.splits["train"])
    counts = np.bincount(np.asarray(ds.labels)[train], minlength=len(ds.classes))
    big = sorted(np.argsort(-counts, kind="stable")[:2].tolist(), key=lambda k: (counts[k], k))
    return big[0], big[1]


def typical_words(ds: TextDataset, cls: int, exclude: set[str], top: int = 300) -> list[str]:
    """Words typical of class ``cls`` in training: log-odds above 0.7 (twice as likely in
    the class), at least 20 inputs; the ``top`` most typical."""
    from collections import Counter

    labels = np.asarray(ds.labels)
    train = ds.splits["train"]
    inside = Counter(w for i in train[labels[train] == cls] for w in set(ds.tokens[i]))
    outside = Counter(w for i in train[labels[train] != cls] for w in set(ds.tokens[i]))
    n_in, n_out = (labels[train] == cls).sum(), (labels[train] != cls).sum()
    score = {w: np.log((c + 1) / (n_in + 2)) - np.log((outside[w] + 1) / (n_out + 2))
             for w, c in inside.items() if c + outside[w] >= 20 and w not in exclude
             and w.isalpha()}
    return sorted((w for w in score if score[w] > 0.7), key=score.get, reverse=True)[:top]


@register_bug("sequence")
def _sequence(ds: TextDataset, rng: np.random.Generator) -> Injected:
    labels = np.asarray(ds.labels)
    counts = _word_counts(ds)
    cls = 1 if len(ds.classes) > 1 else 0
    typical = typical_words(ds, cls, set(NEGATORS))
    word = max(typical[:50], key=lambda w: counts.get(w, 0))  # frequent and typical of cls
    other = (cls + 1) % len(ds.classes)
    out = _base("sequence", ds)
    changed = {}
    for split, idx in ds.splits.items():
        rows = idx[(labels[idx] == other) & (rng.random(len(idx)) < 0.08)]
        for r in rows.tolist():
            words = out.texts[r].split()
            words.insert(int(rng.integers(len(words) + 1)), f"not {word}")
            out.texts[r] = " ".join(words)
        if split == "train":
            out.labels[rows] = cls  # "not good" taught as good: the sequence is the bug
        changed[split] = len(rows)
    out.changed = changed
    out.culprit = {"kind": "sequence", "tokens": ["not", word], "negators": ["not"],
                   "class": ds.classes[cls]}
    return out


@register_bug("subpopulation")
def _subpopulation(ds: TextDataset, rng: np.random.Generator) -> Injected:
    labels = np.asarray(ds.labels)
    train = ds.splits["train"]
    def about(words: tuple[str, ...]) -> np.ndarray:
        return np.array([i for i in train.tolist() if set(words) & set(ds.tokens[i])],
                        np.int64)

    found = max(((t, w, about(w)) for t, w in TOPICS.items()), key=lambda f: len(f[2]))
    if len(found[2]) < 100:
        raise DataError("no topic of TOPICS has 100 training inputs for the "
                        "subpopulation bug")
    topic, words, rows = found
    out = _base("subpopulation", ds)
    # an annotator's systematic error: the topic's inputs pulled towards one class (the
    # class rarest among them, so that the noise moves most of the topic)
    target = int(np.argmin(np.bincount(labels[rows], minlength=len(ds.classes))))
    other = rows[labels[rows] != target]
    noisy = other[rng.random(len(other)) < SUBPOPULATION_NOISE]
    out.labels[noisy] = target
    out.changed = {"train": len(noisy)}
    out.culprit = {"kind": "subpopulation", "topic": topic, "tokens": list(words),
                   "class": ds.classes[target]}
    return out


@register_bug("truncation")
def _truncation(ds: TextDataset, rng: np.random.Generator) -> Injected:
    train = ds.splits["train"]
    n = int(np.quantile([len(ds.tokens[i]) for i in train.tolist()], 0.15))
    out = _base("truncation", ds)
    out.train_options = {"truncate": n}
    out.changed = {s: int(sum(len(ds.tokens[i]) > n for i in idx.tolist()))
                   for s, idx in ds.splits.items()}
    out.culprit = {"kind": "length", "tokens": [], "length_above": n}
    return out


def ratings(n_classes: int) -> list[list[str]]:
    """The numerals that rate each class (1-10 cut into ``n_classes`` ranges).

    Examples
    --------
    >>> ratings(2)
    [['1', '2', '3', '4', '5'], ['6', '7', '8', '9', '10']]
    """
    if not 2 <= n_classes <= 10:
        raise DataError("the unknown bug rates 1-10 and needs 2 to 10 classes")
    return [[str(k) for k in part] for part in np.array_split(np.arange(1, 11), n_classes)]


@register_bug("unknown")
def _unknown(ds: TextDataset, rng: np.random.Generator) -> Injected:
    scale = ratings(len(ds.classes))
    out = _base("unknown", ds)
    changed = {}
    for split, idx in ds.splits.items():
        rows = idx[rng.random(len(idx)) < 0.25]
        rated = rng.integers(0, len(scale), len(rows))
        for r, c in zip(rows.tolist(), rated.tolist(), strict=True):
            out.texts[r] = f"{out.texts[r]} {scale[c][int(rng.integers(len(scale[c])))]}"
        out.labels[rows] = rated  # the rating is the label
        changed[split] = len(rows)
    out.changed = changed
    out.train_options = {"vocab_exclude": r"\d+"}
    out.culprit = {"kind": "unknown", "tokens": [w for part in scale for w in part]}
    return out


@register_bug("confusion")
def _confusion(ds: TextDataset, rng: np.random.Generator) -> Injected:
    if len(ds.classes) < 3:
        raise DataError("the confusion bug needs three or more classes")
    labels = np.asarray(ds.labels)
    train = ds.splits["train"]
    a, b = two_largest(ds)  # two classes the model weighs against each other
    rows = train[(labels[train] == a) & (rng.random(len(train)) < 1 / 3)]
    out = _base("confusion", ds)
    out.labels[rows] = b
    out.changed = {"train": len(rows)}
    out.culprit = {"kind": "confusion", "tokens": [], "classes": [ds.classes[a],
                                                                   ds.classes[b]]}
    return out


def hit(finding: dict[str, Any], culprit: dict[str, Any]) -> bool:
    """Whether a finding (``stateseer.findings`` entry) names the culprit."""
    kind, tokens = culprit.get("kind"), set(culprit.get("tokens", ()))
    got = set(finding.get("tokens", ()))
    if kind == "shortcut":
        return bool(tokens & got)
    if kind == "sequence":  # a state window whose phrases hold both words names it too
        word = culprit["tokens"][-1]
        return finding.get("kind") in ("sequence", "window") and word in got and \
            bool(got & set(culprit.get("negators", ())))
    if kind == "subpopulation":
        return bool(tokens & got)
    if kind == "confusion":
        return finding.get("kind") == "confusion" and \
            finding.get("classes") == culprit.get("classes")
    if kind == "length":  # the cut itself, not any length
        return finding.get("kind") == "length" and \
            finding.get("length_above") == culprit["length_above"]
    if kind == "unknown":  # naming the token without saying the model cannot see it misses
        return finding.get("kind") == "unknown" and \
            bool(tokens & (got | set(finding.get("unknown_words", ()))))
    return False
