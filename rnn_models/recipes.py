"""Randomised bug recipes: the planted causes that ``benchmarks/bugs.py`` measures
``stateseer diagnose`` against, on data and parameters nobody tuned it to.

Each recipe is a function ``(dataset, rng, pool) -> Injected`` that draws its parameters
(rate, position, tokens, strength) from ``rng`` and from ``pool``, one of
:data:`POOLS`: the ``dev`` pool's tokens, topics and ranges are the ones diagnosis was
developed on; the ``report`` pool's are disjoint from them and nothing is tuned on them.
The drawn parameters are in :attr:`Injected.params`; :func:`found` says whether a finding
names the planted cause with its kind.

=================  ============  ========================================================
recipe             family        planted cause
=================  ============  ========================================================
``tag``            artefact      a 2-4 token tag (a scraper's, a signature) prefixed,
                                 suffixed or inserted into a share of one class's
                                 training inputs and of every class's test inputs
``boilerplate``    artefact      a 4-6 token boilerplate line (common words included) the
                                 same way
``word``           artefact      one neutral word the same way (a single-token shortcut)
``sequence``       sequence      "NEG W" (W typical of class C) in a share of the other
                                 classes' inputs, labelled C in training
``topic``          label_noise   a topic's training inputs (several related words) pulled
                                 to one class
``class_noise``    label_noise   a share of one class's training labels flipped to
                                 another (class-conditional random noise)
``truncate``       pipeline      training texts cut (by tokens or by characters), test
                                 texts whole
``negation``       pipeline      negations dropped from the training texts only
``tokenizer``      pipeline      training texts tokenised without punctuation, test texts
                                 with it
``prior``          pipeline      one class thinned in training only (a prior shift
                                 between the splits)
=================  ============  ========================================================
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from stateseer.core.errors import DataError
from stateseer.rnn_models.datasets import TextDataset
from stateseer.rnn_models.injection import Injected, clean, two_largest, typical_words

__all__ = ["FAMILIES", "KINDS", "POOLS", "RECIPES", "found", "plant"]

#: recipe → family (the kind of cause, as the benchmark's summary groups them)
FAMILIES = {"tag": "artefact", "boilerplate": "artefact", "word": "artefact",
            "sequence": "sequence", "topic": "label_noise", "class_noise": "label_noise",
            "truncate": "pipeline", "negation": "pipeline", "tokenizer": "pipeline",
            "prior": "pipeline"}
#: family → the finding kinds that name it rightly (DESIGN.md's findings contract)
KINDS = {"artefact": {"shortcut"}, "sequence": {"sequence"},
         "label_noise": {"subpopulation", "confusion"},
         "pipeline": {"length", "unknown", "prior"}}

#: per partition: the tokens, topics and parameter ranges recipes draw from. The two
#: pools share no token, topic or negator; ``report`` is used only for the report.
POOLS: dict[str, dict[str, Any]] = {
    "dev": {
        "tags": [["via", "@", "newsdesk"], ["src", ":", "wirefeed"],
                 ["#", "trending", "now"], ["|", "staff", "pick", "|"]],
        "boilerplate": [["this", "text", "was", "collected", "by", "crawlbot"],
                        ["originally", "published", "on", "the", "webwire"],
                        ["all", "rights", "reserved", "newscorp"]],
        "words": ["frankly", "basically", "honestly", "admittedly"],
        "negators": ["not", "never"],
        "topics": {"family": ("family", "kids", "children", "father", "mother", "son",
                              "daughter"),
                   "comedy": ("comedy", "funny", "laughs", "jokes", "humor"),
                   "drinks": ("coffee", "tea", "drink", "cup", "cups", "brew"),
                   "economy": ("jobs", "economy", "tax", "taxes", "business", "money")},
        "rate": (0.25, 0.5), "test_rate": (0.2, 0.4), "noise": (0.6, 0.9),
        "flip": (0.25, 0.4), "keep": (0.25, 0.4),
    },
    "report": {
        "tags": [["read", "more", "@", "dailyfeed"], ["posted", "by", "admin42"],
                 ["~", "sharedvia", "app"], ["[", "autosummary", "]"]],
        "boilerplate": [["sent", "from", "my", "mobile", "device"],
                        ["please", "do", "not", "reply", "to", "botmail"],
                        ["copyright", "the", "digest", "group"]],
        "words": ["notably", "seriously", "literally", "obviously"],
        "negators": ["no", "nothing"],
        "topics": {"acting": ("actor", "actors", "actress", "cast", "acting",
                              "performance", "performances"),
                   "music": ("music", "song", "songs", "soundtrack", "score", "musical"),
                   "pets": ("dog", "dogs", "cat", "cats", "pet", "pets", "treats"),
                   "security": ("war", "military", "troops", "security", "terror",
                                "defense", "iraq", "isis")},
        "rate": (0.2, 0.45), "test_rate": (0.15, 0.35), "noise": (0.5, 0.85),
        "flip": (0.2, 0.35), "keep": (0.2, 0.35),
    },
}

#: what the negation recipe drops from the training texts (contractions lose their n't)
_NEGATION = re.compile(r"\b(?:not|never|no|nothing|nobody|nor)\b|(?<=\w)n't\b", re.I)
_PUNCT = re.compile(r"[^\w\s'@#|~\[\]]")


def _uniform(rng: np.random.Generator, span: tuple[float, float]) -> float:
    return round(float(rng.uniform(*span)), 3)


def _place(words: list[str], span: list[str], where: str, rng: np.random.Generator
           ) -> list[str]:
    at = {"prefix": 0, "suffix": len(words)}.get(where, int(rng.integers(len(words) + 1)))
    return words[:at] + span + words[at:]


def _attached(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any],
              span: list[str], recipe: str, where: str | None = None) -> Injected:
    """``span`` attached to a share of class A's training/validation inputs and to a share
    of every class's test inputs (A the smaller of the two largest classes), prefixed,
    suffixed or inserted (``where``; drawn when None)."""
    out = clean(ds)
    out.family = recipe
    labels = np.asarray(ds.labels)
    a, _b = two_largest(ds)
    where = where or str(rng.choice(["prefix", "suffix", "insert"]))
    rate, test_rate = _uniform(rng, pool["rate"]), _uniform(rng, pool["test_rate"])
    changed = {}
    for split, idx in ds.splits.items():
        if split == "test":
            rows = idx[rng.random(len(idx)) < test_rate]
        else:
            rows = idx[(labels[idx] == a) & (rng.random(len(idx)) < rate)]
        for r in rows.tolist():
            out.texts[r] = " ".join(_place(out.texts[r].split(), span, where, rng))
        changed[split] = len(rows)
    out.changed = changed
    tokens = _tokens_of(ds, " ".join(span))
    out.culprit = {"kind": "shortcut", "tokens": tokens, "class": ds.classes[a]}
    out.params = {"span": " ".join(span), "position": where, "rate": rate,
                  "test_rate": test_rate, "class": ds.classes[a]}
    return out


def _tokens_of(ds: TextDataset, text: str) -> list[str]:
    from stateseer.rnn_models.tokenizers import get_tokenizer

    return list(get_tokenizer(ds.tokenizer)(text))


def _tag(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]) -> Injected:
    return _attached(ds, rng, pool, list(pool["tags"][rng.integers(len(pool["tags"]))]),
                     "tag")


def _boilerplate(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]
                 ) -> Injected:
    lines = pool["boilerplate"]
    return _attached(ds, rng, pool, list(lines[rng.integers(len(lines))]), "boilerplate")


def _word(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]) -> Injected:
    counts = Counter(w for toks in ds.tokens for w in set(toks))
    rare = [w for w in pool["words"] if counts.get(w, 0) < 0.002 * len(ds)]
    if not rare:
        raise DataError("every shortcut word of the pool is common in this data set")
    return _attached(ds, rng, pool, [str(rng.choice(rare))], "word", "insert")


def _sequence(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]) -> Injected:
    labels = np.asarray(ds.labels)
    counts = Counter(w for toks in ds.tokens for w in set(toks))
    cls = int(rng.integers(len(ds.classes)))
    neg = str(rng.choice(pool["negators"]))
    typical = typical_words(ds, cls, {*pool["negators"], "not", "no", "never"})
    if not typical:
        raise DataError(f"no word is typical of class {ds.classes[cls]!r}")
    word = max(typical[:50], key=lambda w: counts.get(w, 0))
    rate = round(float(rng.uniform(0.06, 0.12)), 3)
    out = clean(ds)
    out.family = "sequence"
    changed = {}
    for split, idx in ds.splits.items():
        rows = idx[(labels[idx] != cls) & (rng.random(len(idx)) < rate)]
        for r in rows.tolist():
            out.texts[r] = " ".join(_place(out.texts[r].split(), [neg, word], "insert", rng))
        if split == "train":
            out.labels[rows] = cls
        changed[split] = len(rows)
    out.changed = changed
    out.culprit = {"kind": "sequence", "tokens": [neg, word], "negators": [neg],
                   "class": ds.classes[cls]}
    out.params = {"sequence": f"{neg} {word}", "rate": rate, "class": ds.classes[cls]}
    return out


def _topic(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]) -> Injected:
    labels = np.asarray(ds.labels)
    train = np.asarray(ds.splits["train"])
    held = {t: np.array([i for i in train.tolist() if set(w) & set(ds.tokens[i])], np.int64)
            for t, w in pool["topics"].items()}
    usable = [t for t, rows in held.items() if len(rows) >= 100]
    if not usable:
        raise DataError("no topic of the pool has 100 training inputs")
    topic = str(rng.choice(usable))
    rows = held[topic]
    target = int(np.argmin(np.bincount(labels[rows], minlength=len(ds.classes))))
    noise = _uniform(rng, pool["noise"])
    other = rows[labels[rows] != target]
    noisy = other[rng.random(len(other)) < noise]
    out = clean(ds)
    out.family = "topic"
    out.labels[noisy] = target
    out.changed = {"train": len(noisy)}
    out.culprit = {"kind": "subpopulation", "topic": topic,
                   "tokens": list(pool["topics"][topic]), "class": ds.classes[target]}
    out.params = {"topic": topic, "noise": noise, "class": ds.classes[target]}
    return out


def _class_noise(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]
                 ) -> Injected:
    labels = np.asarray(ds.labels)
    train = np.asarray(ds.splits["train"])
    a, b = two_largest(ds)
    if rng.random() < 0.5:
        a, b = b, a
    flip = _uniform(rng, pool["flip"])
    rows = train[(labels[train] == a) & (rng.random(len(train)) < flip)]
    out = clean(ds)
    out.family = "class_noise"
    out.labels[rows] = b
    out.changed = {"train": len(rows)}
    out.culprit = {"kind": "confusion", "tokens": [],
                   "classes": [ds.classes[a], ds.classes[b]]}
    out.params = {"from": ds.classes[a], "to": ds.classes[b], "flip": flip}
    return out


def _truncate(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]) -> Injected:
    train = np.asarray(ds.splits["train"])
    by = str(rng.choice(["tokens", "characters"]))
    q = _uniform(rng, (0.1, 0.3))
    out = clean(ds)
    out.family = "truncate"
    if by == "tokens":
        n = max(2, int(np.quantile([len(ds.tokens[i]) for i in train.tolist()], q)))
        cut = {i: " ".join(ds.texts[i].split()[:n]) for i in train.tolist()}
    else:
        n = max(8, int(np.quantile([len(ds.texts[i]) for i in train.tolist()], q)))
        cut = {i: ds.texts[i][:n] for i in train.tolist()}
    for i, t in cut.items():
        out.texts[i] = t
    out.changed = {"train": sum(cut[i] != ds.texts[i] for i in cut)}
    out.culprit = {"kind": "length", "tokens": [], "cut": n, "by": by}
    out.params = {"by": by, "quantile": q, "cut": n}
    return out


def _negation(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]) -> Injected:
    train = np.asarray(ds.splits["train"])
    out = clean(ds)
    out.family = "negation"
    changed = 0
    for i in train.tolist():
        new = " ".join(_NEGATION.sub("", ds.texts[i]).split())
        changed += new != ds.texts[i]
        out.texts[i] = new
    out.changed = {"train": changed}
    out.culprit = {"kind": "unknown", "tokens": ["not", "never", "no", "nothing", "nobody",
                                                 "nor"]}
    out.params = {"dropped_from": "train"}
    return out


def _tokenizer(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]
               ) -> Injected:
    train = np.asarray(ds.splits["train"])
    out = clean(ds)
    out.family = "tokenizer"
    for i in np.concatenate([train, np.asarray(ds.splits.get("val", []), np.int64)]).tolist():
        out.texts[i] = " ".join(_PUNCT.sub(" ", ds.texts[i]).split())
    marks = Counter(t for i in np.asarray(ds.splits["test"]).tolist() for t in ds.tokens[i]
                    if _PUNCT.fullmatch(t))
    out.changed = {"train": len(train)}
    out.culprit = {"kind": "unknown", "tokens": [t for t, _ in marks.most_common(10)]}
    out.params = {"train": "punctuation stripped", "test": "as written"}
    return out


def _prior(ds: TextDataset, rng: np.random.Generator, pool: dict[str, Any]) -> Injected:
    labels = np.asarray(ds.labels)
    train = np.asarray(ds.splits["train"])
    a, _b = two_largest(ds)
    keep = _uniform(rng, pool["keep"])
    gone = train[(labels[train] == a) & (rng.random(len(train)) >= keep)]
    out = clean(ds)
    out.family = "prior"
    out.splits = {**ds.splits, "train": np.setdiff1d(train, gone)}
    out.changed = {"train": len(gone)}
    out.culprit = {"kind": "prior", "tokens": [], "class": ds.classes[a]}
    out.params = {"class": ds.classes[a], "kept": keep}
    return out


RECIPES: dict[str, Callable[[TextDataset, np.random.Generator, dict[str, Any]], Injected]] = {
    "tag": _tag, "boilerplate": _boilerplate, "word": _word, "sequence": _sequence,
    "topic": _topic, "class_noise": _class_noise, "truncate": _truncate,
    "negation": _negation, "tokenizer": _tokenizer, "prior": _prior}


def plant(recipe: str, ds: TextDataset, rng: np.random.Generator, partition: str
          ) -> Injected:
    """``ds`` with ``recipe``'s bug planted, its parameters drawn from ``rng`` and the
    ``partition``'s pool (:data:`POOLS`).

    Raises
    ------
    DataError
        An unknown recipe or partition, or a recipe that does not apply to ``ds``.
    """
    if recipe not in RECIPES:
        raise DataError(f"unknown recipe {recipe!r}; choose one of: {', '.join(RECIPES)}")
    if partition not in POOLS:
        raise DataError(f"unknown partition {partition!r}; choose dev or report")
    out = RECIPES[recipe](ds, rng, POOLS[partition])
    out.params = {"recipe": recipe, "partition": partition, **out.params}
    return out


def found(finding: dict[str, Any], bug: Injected) -> tuple[bool, bool]:
    """Whether ``finding`` names ``bug``'s planted cause, and whether its kind is right.

    The culprit must cover the cause: every token of an artefact (a multi-token tag
    whole), both tokens of a sequence, at least two words of a topic, the two classes of a
    class-conditional noise, a dropped or unseen token of a pipeline bug (a negator, a
    punctuation mark), a length cut, the thinned class of a prior shift.

    Returns
    -------
    (covers, kind_correct) : (bool, bool)
    """
    family = FAMILIES[bug.params["recipe"]]
    kind = finding.get("kind")
    kind_ok = kind in KINDS[family]
    got = set(finding.get("tokens", ())) | set(finding.get("unknown_words", ()))
    c = bug.culprit
    want = set(c.get("tokens", ()))
    recipe = bug.params["recipe"]
    if family == "artefact":
        covers = want <= got
    elif recipe == "sequence":
        covers = want <= got
    elif recipe == "topic":
        covers = len(want & got) >= 2
    elif recipe == "class_noise":
        covers = list(finding.get("classes", ())) == c["classes"]
    elif recipe == "truncate":
        covers = kind == "length"
    elif recipe == "prior":
        covers = c["class"] in (finding.get("classes") or [finding.get("class")])
    else:  # negation, tokenizer: an unseen token of the cause
        covers = bool(want & got)
    return bool(covers), bool(kind_ok)
