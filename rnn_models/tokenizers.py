"""Tokenisers and the vocabulary that maps tokens to ids.

Three tokenisers, all deterministic and dependency-free:

``word``
    Lower-cased words, numbers and single punctuation marks (``"Isn't it great!"`` →
    ``["isn't", "it", "great", "!"]``).
``char``
    One token per character (whitespace kept), for formal languages written as ``0101``.
``space``
    Split on whitespace only, case kept (for pre-tokenised data such as ``0 1 1 0``).

The :class:`Vocab` is built on the training split only; rare tokens map to ``<unk>``,
padding is id 0.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stateseer.core.errors import DataError
from stateseer.core.reading import load_json, regular_size

__all__ = ["PAD", "TOKENIZERS", "UNK", "Vocab", "get_tokenizer", "tokenize"]

PAD = "<pad>"
UNK = "<unk>"

_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*|[^\w\s]|_")


def _word(text: str) -> list[str]:
    return _WORD_RE.findall(unicodedata.normalize("NFC", text).lower())


def _char(text: str) -> list[str]:
    return list(text)


def _space(text: str) -> list[str]:
    return text.split()


TOKENIZERS = {"word": _word, "char": _char, "space": _space}


def get_tokenizer(name: str):
    """Return the tokeniser function called ``name`` (one of ``word``, ``char``, ``space``)."""
    try:
        return TOKENIZERS[name]
    except KeyError:
        raise DataError(
            f"unknown tokenizer {name!r}; choose one of: {', '.join(TOKENIZERS)}"
        ) from None


def tokenize(texts: Iterable[str], tokenizer: str = "word") -> list[list[str]]:
    """Tokenise every text with the named tokeniser."""
    fn = get_tokenizer(tokenizer)
    return [fn(t) for t in texts]


@dataclass
class Vocab:
    """Token ↔ id mapping; unknown tokens map to ``<unk>``.

    Vocabularies built here (:meth:`build`) start ``<pad>`` = 0, ``<unk>`` = 1. A user
    model's vocabulary may be any id-ordered list of distinct tokens that contains
    ``<unk>``: its id is ``unk_id``; ``<pad>`` is optional (``pad_id`` None without it).

    Parameters
    ----------
    tokens : list of str
        All tokens in id order; distinct, containing ``<unk>``.

    Examples
    --------
    >>> v = Vocab.build([["a", "b", "a"], ["a", "c"]], min_freq=2)
    >>> v.tokens
    ['<pad>', '<unk>', 'a']
    >>> v.encode(["a", "zzz"]).tolist()
    [2, 1]
    >>> theirs = Vocab(["the", "<unk>", "film"])   # a user model's itos
    >>> theirs.unk_id, theirs.pad_id, theirs.encode(["film", "zzz"]).tolist()
    (1, None, [2, 1])
    """

    tokens: list[str]
    index: dict[str, int] = field(init=False, repr=False)
    _unk: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.tokens, list) or not all(isinstance(t, str) for t in self.tokens):
            raise DataError("a vocabulary is a list of token strings in id order; rebuild "
                            "it with Vocab.build")
        if UNK not in self.tokens:
            raise DataError("vocabulary has no '<unk>' token; add it (unknown words map to "
                            "it) or rebuild with Vocab.build")
        self.index = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            dup = next(t for i, t in enumerate(self.tokens) if self.index[t] != i)
            raise DataError(f"vocabulary holds {dup!r} twice; token strings must be distinct "
                            "(one id each)")
        self._unk = self.index[UNK]

    @classmethod
    def build(
        cls, token_lists: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None,
        exclude: str | None = None,
    ) -> Vocab:
        """Build from tokenised training texts, most frequent first (ties alphabetical).

        ``exclude``: a regular expression; tokens it matches whole are left out (read as
        ``<unk>``), e.g. ``exclude=r"\\d+"`` for numbers.
        """
        counts = Counter(tok for toks in token_lists for tok in toks)
        drop = re.compile(exclude).fullmatch if exclude else (lambda _t: None)
        ranked = sorted(
            (t for t, c in counts.items() if c >= min_freq and t not in (PAD, UNK)
             and not drop(t)),
            key=lambda t: (-counts[t], t),
        )
        if max_size is not None:
            ranked = ranked[: max(0, max_size - 2)]
        return cls([PAD, UNK, *ranked])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def pad_id(self) -> int | None:
        """Id of ``<pad>`` (0 for built vocabularies), None when the vocabulary has none."""
        return self.index.get(PAD)

    @property
    def unk_id(self) -> int:
        """Id of ``<unk>`` (1 for built vocabularies)."""
        return self._unk

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """Map tokens to ids, shape (len(tokens),), unknown tokens to ``<unk>``."""
        get = self.index.get
        unk = self._unk
        return np.fromiter((get(t, unk) for t in tokens), dtype=np.int64, count=len(tokens))

    def is_known(self, tokens: Sequence[str]) -> np.ndarray:
        """Boolean mask of shape (len(tokens),): True where the token is in the vocabulary."""
        return np.fromiter((t in self.index for t in tokens), dtype=bool, count=len(tokens))

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[int(i)] for i in ids]

    def save(self, path: str | Path) -> None:
        """Write ``{"tokens": [...]}`` atomically (a crash leaves the old file or the new)."""
        from stateseer.core.atomic import atomic_write_text

        text = json.dumps({"tokens": self.tokens}, ensure_ascii=False)
        atomic_write_text(path, text)

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        path = Path(path)
        try:
            regular_size(path)  # a regular file: never a device read forever
        except FileNotFoundError:
            raise DataError(f"vocabulary {path} not found; run `stateseer train` first") from None
        except DataError as exc:
            raise DataError(f"vocabulary {exc}") from None
        try:
            data = load_json(path)
            return cls(list(data["tokens"]))
        except FileNotFoundError:
            raise DataError(f"vocabulary {path} not found; run `stateseer train` first") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(f"vocabulary {path} is corrupt ({exc}); retrain the run") from None
        except OSError as exc:
            raise DataError(
                f"vocabulary {path} cannot be read ({exc.strerror}); check the run directory"
            ) from None
