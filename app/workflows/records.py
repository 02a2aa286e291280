"""The trace record: what the explorer knows of one input's run through the model.

A :class:`TraceRecord` is built from a recorded instance (:meth:`RunView.trace_instance
<stateseer.app.workflows.runview.RunView.trace_instance>`) or from a typed text
(:meth:`ModelService.trace_text <stateseer.app.explorer.services.ModelService.trace_text>`) and
travels between callbacks in ``dcc.Store`` as JSON (:meth:`TraceRecord.to_store`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from stateseer.core.errors import StateseerError

__all__ = ["MAX_STORE_CHARS", "MAX_STORE_TOKENS", "StoreError", "TraceRecord", "record_of"]


class StoreError(StateseerError):
    """A trace record sent by the page is malformed or too large (a forged request)."""


MAX_STORE_TOKENS = 5_000
"""The most tokens a trace record from the page may have (a forged store is refused)."""
MAX_STORE_CHARS = 200_000
"""The longest text a trace record from the page may carry."""

_SEQ = {"tokens": str, "known": bool, "initial_proba": float, "states": int,
        "simulated": int, "final_proba": float, "states_own": int}


@dataclass(frozen=True)
class TraceRecord:
    """One input's trace: tokens, per-step probabilities, abstract states, prediction.

    Parameters
    ----------
    text : str
    tokens : tuple of str, shape (n_tokens,)
    known : tuple of bool, shape (n_tokens,)
        False for words outside the vocabulary.
    proba : tuple of tuple of float, shape (n_tokens, n_classes)
        Class probabilities after every token.
    initial_proba : tuple of float, shape (n_classes,)
        The classifier head on the initial hidden state.
    states : tuple of int, shape (n_tokens + 1,)
        Abstract states, the initial state first.
    simulated : tuple of int, shape (n_tokens + 1,)
        The FSM's own path on the tokens.
    prediction : int
    final_proba : tuple of float, shape (n_classes,)
    label : int, optional
        The data set's label (recorded instances only).
    split, index, id : optional
        Where a recorded instance comes from: split name, row in the split, data set id.
    run : str, optional
        Set when the trace belongs to a compared run (its states renamed to this run's).
    states_own : tuple of int, optional
        A compared run's trace: its states before renaming.
    """

    text: str
    tokens: tuple[str, ...]
    known: tuple[bool, ...]
    proba: tuple[tuple[float, ...], ...]
    initial_proba: tuple[float, ...]
    states: tuple[int, ...]
    simulated: tuple[int, ...]
    prediction: int
    final_proba: tuple[float, ...] = ()
    label: int | None = None
    split: str | None = None
    index: int | None = None
    id: int | None = None
    run: str | None = None
    states_own: tuple[int, ...] | None = None

    def _repr_html_(self) -> str:
        """In a notebook: the tokens coloured by the running prediction with their states,
        and the probability chart (:func:`~stateseer.app.workflows.fragments.
        trace_fragment`)."""
        from stateseer.app.workflows.fragments import trace_fragment

        return trace_fragment(self)

    @property
    def recorded(self) -> bool:
        """Whether the trace is a recorded instance of the run (else a typed text)."""
        return self.index is not None and bool(self.split)

    @property
    def has_states(self) -> bool:
        """False for a record stripped of its abstract states (:meth:`without_states`)."""
        return bool(self.states)

    def without_states(self) -> TraceRecord:
        """The record with no abstract state (what a study condition without state views
        may receive): ``states`` and ``simulated`` empty, ``states_own`` unset."""
        return replace(self, states=(), simulated=(), states_own=None)

    @property
    def key(self) -> str:
        """A stable name: ``test:12`` for a recorded instance, else ``text:`` + its text."""
        return f"{self.split}:{int(self.index)}" if self.recorded else "text:" + self.text

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def name(self) -> str:
        """How the page names it: ``#12`` (the data set id) or ``the typed input``."""
        return f"#{self.id}" if self.id is not None else "the typed input"

    def renamed(self, rename, run: str) -> TraceRecord:
        """The same trace with its states mapped by ``rename`` (a compared run's)."""
        return replace(self, states=tuple(rename(s) for s in self.states),
                       simulated=tuple(rename(s) for s in self.simulated),
                       states_own=self.states, run=run)

    def to_store(self) -> dict[str, Any]:
        """A JSON-ready dict for ``dcc.Store`` (optional fields left out when unset)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None and f.name not in ("label",):
                continue
            if f.name == "proba":
                v = [list(p) for p in v]
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    @classmethod
    def from_store(cls, d: Mapping[str, Any]) -> TraceRecord:
        """The record of a store dict (:meth:`to_store`'s output; unknown keys ignored).

        This is where every trace the page sends back is parsed, so sizes are checked
        here: more than :data:`MAX_STORE_TOKENS` tokens, a text over
        :data:`MAX_STORE_CHARS` characters or per-step lists of other lengths than the
        tokens raise :class:`StoreError` (callbacks answer it with no update).
        """
        _check_store(d)
        kw: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in d:
                continue
            v = d[f.name]
            if f.name == "proba":
                v = tuple(tuple(float(x) for x in p) for p in v)
            elif f.name in _SEQ and v is not None:
                v = tuple(_SEQ[f.name](x) for x in v)
            elif f.name in ("prediction", "label", "index", "id") and v is not None:
                v = int(v)
            kw[f.name] = v
        return cls(**kw)


def _check_store(d: Any) -> None:
    """Refuse a store dict that is not a trace record of a bounded size."""
    def bad(why: str) -> StoreError:
        return StoreError(f"the page sent a trace record that {why} — reload the page")

    if not isinstance(d, Mapping):
        raise bad("is not an object")
    text, tokens = d.get("text", ""), d.get("tokens", ())
    if not isinstance(text, str) or len(text) > MAX_STORE_CHARS:
        raise bad(f"has a text over {MAX_STORE_CHARS:,} characters")
    if not isinstance(tokens, (list, tuple)) or len(tokens) > MAX_STORE_TOKENS:
        raise bad(f"has over {MAX_STORE_TOKENS:,} tokens")
    n = len(tokens)
    for name, want in (("known", (n,)), ("proba", (n,)), ("states", (0, n + 1)),
                       ("simulated", (0, n + 1)), ("states_own", (0, n + 1))):
        v = d.get(name)
        if v is not None and (not isinstance(v, (list, tuple)) or len(v) not in want):
            raise bad(f"has {name} of another length than its {n} tokens")
    for name in ("proba", "initial_proba", "final_proba"):
        v = d.get(name) or ()
        rows = v if name == "proba" else [v]
        if any(not isinstance(r, (list, tuple)) or len(r) > 10_000 for r in rows):
            raise bad(f"has a malformed {name}")


def record_of(d: TraceRecord | Mapping[str, Any] | None) -> TraceRecord | None:
    """A record from a store dict, a record, or None."""
    if d is None or isinstance(d, TraceRecord):
        return d
    return TraceRecord.from_store(d)


