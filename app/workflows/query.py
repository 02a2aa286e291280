"""The instance table's query: filters, sorting and paging over one split (pure numpy).

:class:`SplitIndex` holds per-split arrays built once (which inputs pass through each
state, the collapsed state paths); :func:`query_instances` answers an
:class:`InstanceQuery` with one page of rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from stateseer.abstraction.analysis.patterns import collapsed_paths, window_keys
from stateseer.abstraction.arrays import distinct
from stateseer.core.traces import SplitTraces

__all__ = ["MAX_SEARCH_CHARS", "InstanceQuery", "SplitIndex", "compile_search", "page_of",
           "query_instances"]


@dataclass(frozen=True)
class InstanceQuery:
    """Filters, sorting and paging of the instance table (all optional)."""

    split: str = "test"
    search: str = ""
    regex: bool = False
    label: str | None = None
    prediction: str | None = None
    correct: str | None = None  # "correct" | "wrong" | None
    state: int | None = None
    pattern: tuple[int, ...] | None = None
    sort_by: str | None = None
    descending: bool = False
    page: int = 0
    page_size: int = 12

    def first_page(self) -> InstanceQuery:
        return replace(self, page=0)


class SplitIndex:
    """Per-split arrays for fast filtering: states visited per input, collapsed paths.

    Parameters
    ----------
    tr : SplitTraces
    states : ndarray of shape (n_steps,)
        The abstract state of every step of the split.
    n_states : int
    """

    def __init__(self, tr: SplitTraces, states: np.ndarray, n_states: int) -> None:
        self.tr = tr
        self.n_inputs = tr.n_inputs
        self.n_states = n_states
        self._states = states
        # each part is built on first use: the first page (no filter) needs none of them,
        # and a split of a million inputs takes seconds to build them all

    @cached_property
    def _by_state(self) -> tuple[np.ndarray, np.ndarray]:
        """(state, input) presence as a CSR index: pointers (n_states + 1,) and the
        sorted inputs of each state."""
        n = max(self.n_inputs, 1)
        step_input = np.repeat(np.arange(self.n_inputs), np.diff(self.tr.offsets))
        key = distinct(self._states.astype(np.int64) * n + step_input)
        del step_input  # not kept: 8 bytes a step (the traces' cached step_input would be)
        s, i = key // n, (key % n).astype(np.int32 if n < 2**31 else np.int64)
        return np.searchsorted(s, np.arange(self.n_states + 1)), i

    @cached_property
    def _collapsed(self) -> tuple[np.ndarray, np.ndarray]:
        cstates, cinput, _, _ = collapsed_paths(self._states, self.tr.offsets)
        return cstates, cinput

    @cached_property
    def lower(self) -> list[str]:
        """Every text in lower case (the text search)."""
        return [t.lower() for t in self.tr.texts]

    def inputs_through(self, state: int) -> np.ndarray:
        if state == 0:
            return np.arange(self.n_inputs)
        if not 0 <= state < self.n_states:
            return np.zeros(0, np.int64)
        ptr, inputs = self._by_state
        return inputs[ptr[state] : ptr[state + 1]]

    def inputs_with_pattern(self, pattern: tuple[int, ...]) -> np.ndarray:
        w = len(pattern)
        key = 0
        for s in pattern:
            key = key * self.n_states + int(s)
        cstates, cinput = self._collapsed
        keys = window_keys(cstates, cinput, w, self.n_states)
        return distinct(cinput[keys == key])


class Indexed(Protocol):
    """What :func:`query_instances` reads: the classes and a split's index."""

    classes: list[str]

    def index(self, split: str) -> SplitIndex: ...


def _filter_mask(idx: SplitIndex, q: InstanceQuery, classes: list[str]) -> np.ndarray:
    tr = idx.tr
    n = tr.n_inputs
    mask = np.ones(n, bool)
    pred, labels = tr.predictions, np.asarray(tr.labels)
    if q.label in classes:
        mask &= labels == classes.index(q.label)
    if q.prediction in classes:
        mask &= pred == classes.index(q.prediction)
    if q.correct == "correct":
        mask &= pred == labels
    elif q.correct == "wrong":
        mask &= pred != labels
    if q.state is not None:
        m = np.zeros(n, bool)
        m[idx.inputs_through(int(q.state))] = True
        mask &= m
    if q.pattern:
        m = np.zeros(n, bool)
        m[idx.inputs_with_pattern(tuple(q.pattern))] = True
        mask &= m
    return mask


MAX_SEARCH_CHARS = 500
"""The longest search (text or regular expression) the table runs."""


def compile_search(pattern: str) -> tuple[Any, str]:
    r"""``(matcher, message)`` for a regular-expression search, case-insensitive.

    The expression runs on RE2 (``google-re2``: linear time in the text, no backtracking,
    so no expression can keep the server busy); it accepts the common syntax less
    backreferences and lookaround. Without RE2 installed the search is plain text (a
    Python ``re`` expression could run for minutes on one row). ``matcher`` is None, with
    ``message`` saying why, when the expression is too long or invalid.

    Examples
    --------
    >>> rx, msg = compile_search(r"^(?:\w\w|\w|\s)*!")
    >>> msg == "" and rx("no exclamation here " * 50) is False
    True
    """
    if len(pattern) > MAX_SEARCH_CHARS:
        return None, (f"search longer than {MAX_SEARCH_CHARS} characters; showing all rows "
                      "— shorten it")
    try:
        import re2
    except ImportError:
        needle = pattern.lower()
        return (lambda text: needle in text.lower()), (
            "regular expressions need google-re2 (pip install google-re2); "
            "searched as plain text")
    opts = re2.Options()
    opts.log_errors = False
    opts.case_sensitive = False
    try:
        rx = re2.compile(pattern, opts)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and \
            isinstance(exc.args[0], bytes) else str(exc)
        return None, (f"invalid regular expression ({why}; backreferences and lookaround "
                      "are not supported); showing all rows")
    return (lambda text: rx.search(text) is not None), ""


def _search(idx: SplitIndex, q: InstanceQuery, mask: np.ndarray) -> str:
    """Narrow ``mask`` to the rows matching the search; a message if it is not run."""
    cand = np.flatnonzero(mask)
    if q.regex:
        match, message = compile_search(q.search)
        if match is None:
            return message
        texts = idx.tr.texts
        hit = np.fromiter((match(texts[i]) for i in cand), bool, count=len(cand))
    else:
        if len(q.search) > MAX_SEARCH_CHARS:
            return (f"search longer than {MAX_SEARCH_CHARS} characters; showing all rows "
                    "— shorten it")
        message = ""
        needle = q.search.lower()
        hit = np.fromiter((needle in idx.lower[i] for i in cand), bool, count=len(cand))
    mask[cand[~hit]] = False
    return message


def _ordered(data: Indexed, q: InstanceQuery) -> tuple[np.ndarray, np.ndarray, str]:
    """Inputs matching ``q``'s filters in its sort order (n_matching,), their confidences,
    and the search's message."""
    idx = data.index(q.split)
    tr = idx.tr
    pred, labels = tr.predictions, np.asarray(tr.labels)
    mask = _filter_mask(idx, q, data.classes)
    message = _search(idx, q, mask) if q.search else ""
    sel = np.flatnonzero(mask)
    conf = np.asarray(tr.final_proba)[sel, pred[sel]] if len(sel) else np.zeros(0)
    if q.sort_by in ("confidence", "length", "id", "label", "prediction", "correct"):
        keys = {"confidence": conf, "length": tr.lengths[sel], "id": tr.rows[sel],
                "label": labels[sel], "prediction": pred[sel],
                "correct": (pred[sel] == labels[sel]).astype(int)}[q.sort_by]
        order = np.argsort(keys, kind="stable")
        if q.descending:
            order = order[::-1]
        sel, conf = sel[order], conf[order]
    return sel, conf, message


def query_instances(data: Indexed, q: InstanceQuery) -> tuple[list[dict[str, Any]], int, str]:
    """Filter, sort and page the instance table.

    Parameters
    ----------
    data : RunView (or anything with ``classes`` and ``index(split)``)
    q : InstanceQuery

    Returns
    -------
    rows : list of dict
        The page's rows (``index, id, text, label, prediction, correct, confidence, length``).
    total : int
        Rows matching the filters.
    message : str
        Empty, or a one-line explanation (e.g. an invalid regular expression).
    """
    tr = data.index(q.split).tr
    classes = data.classes
    pred, labels = tr.predictions, np.asarray(tr.labels)
    sel, conf, message = _ordered(data, q)
    total = len(sel)
    start = max(0, q.page) * q.page_size
    page = sel[start : start + q.page_size]
    pconf = conf[start : start + q.page_size]
    rows = [{"index": int(i), "id": int(tr.rows[i]), "text": tr.texts[i],
             "label": classes[int(labels[i])], "prediction": classes[int(pred[i])],
             "correct": "✓" if pred[i] == labels[i] else "✗",
             "confidence": round(float(c), 3), "length": int(tr.lengths[i])}
            for i, c in zip(page, pconf, strict=True)]
    return rows, total, message


def page_of(data: Indexed, q: InstanceQuery, index: int) -> int | None:
    """The page (of ``q.page_size`` rows, filtered and sorted as ``q`` says) that shows
    input ``index`` of ``q.split``, or None when the filters leave it out."""
    sel, _, _ = _ordered(data, q)
    at = np.flatnonzero(sel == index)
    return int(at[0]) // q.page_size if len(at) else None
