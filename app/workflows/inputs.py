"""Whether two runs hold the same inputs, and if not, a message saying what differs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["input_difference"]

_WHY_KEYS = (("name", "data set"), ("seed", "split seed"), ("tokenizer", "tokenizer"),
             ("max_tokens", "--max-tokens"), ("text_col", "--text-col"))


def _short(text: str, width: int = 40) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _why(data_a: Mapping[str, Any] | None, data_b: Mapping[str, Any] | None) -> str:
    if not data_a or not data_b:
        return "the runs were made from different data or splits"
    diffs = [f"{label} {data_a.get(key)!r} vs {data_b.get(key)!r}"
             for key, label in _WHY_KEYS if data_a.get(key) != data_b.get(key)]
    if not diffs:
        return "the data file changed between the runs"
    return "the runs differ in " + ", ".join(diffs)


def input_difference(split: str, texts_a: Sequence[str], texts_b: Sequence[str], *,
                     data_a: Mapping[str, Any] | None = None,
                     data_b: Mapping[str, Any] | None = None) -> str | None:
    """One line saying how the inputs of two runs differ on a split, or ``None``.

    Parameters
    ----------
    split : str
    texts_a, texts_b : sequence of str
        The split's raw texts of each run, in order.
    data_a, data_b : mapping, optional
        The runs' ``config.json["data"]`` sections, to say why they differ.

    Examples
    --------
    >>> print(input_difference("test", ["a", "b"], ["a", "c"]).split(" (")[0])
    the runs hold different test inputs: input 1 is 'b' in the first run but 'c' in the second
    """
    why = _why(data_a, data_b)
    fix = "compare runs trained on the same data set and split"
    if len(texts_a) != len(texts_b):
        return (f"the runs hold different numbers of {split} inputs ({len(texts_a):,} vs "
                f"{len(texts_b):,}) ({why}); {fix}")
    for i, (a, b) in enumerate(zip(texts_a, texts_b, strict=True)):
        if a != b:
            return (f"the runs hold different {split} inputs: input {i} is {_short(a)} in "
                    f"the first run but {_short(b)} in the second ({why}); {fix}")
    return None
