"""The explorer's lazily loaded services: the model, and the nearest-context index.

:class:`ModelService` loads the model on first use (:meth:`ModelService.load`) and runs
what needs it: typed inputs, attribution, state forcing. :class:`ContextService` loads
(or builds) the nearest-context index and answers nearest-context and projection
queries. Both cache per trace (an LRU of 256 entries), so the same click twice is free,
and are safe to share between a server's threads.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import Any

import numpy as np

from stateseer.app.explorer.cache import LRUCache
from stateseer.app.workflows.contexts import context_index, nearest_contexts, projection_bins
from stateseer.app.workflows.forcing import forced_trace, load_centroids
from stateseer.app.workflows.records import TraceRecord
from stateseer.app.workflows.runview import RunView
from stateseer.core.errors import StateseerError
from stateseer.rnn_models.datasets import MAX_INPUT_TOKENS
from stateseer.rnn_models.threads import torch_threads

__all__ = ["MAX_ATTRIBUTION_TOKENS", "MAX_INPUT_CHARS", "MAX_INPUT_TOKENS", "ContextService",
           "ModelService"]

MAX_INPUT_CHARS = 20_000
"""The most tokens a typed input may have."""
MAX_ATTRIBUTION_TOKENS = 1_000
"""The longest input attributed (integrated gradients cost grows with its length)."""


class ModelService:
    """The run's model and what it computes for the explorer.

    Parameters
    ----------
    data : RunView
    model : Traceable, optional
        Your own model (see :class:`stateseer.rnn_models.protocol.Traceable`); default: the run's
        ``model.pt`` through the project's loader, loaded on first use.
    """

    def __init__(self, data: RunView, model: Any = None) -> None:
        self.data = data
        self._lock = threading.Lock()
        self._model = None if model is None else (model.eval(), data.run.vocab())
        self.cache = LRUCache(256)
        self._centroid_lock = threading.Lock()
        self._centroids: np.ndarray | None = None

    def load(self) -> tuple[Any, Any]:
        """``(model, vocabulary)``, loaded once (thread-safe)."""
        with self._lock:
            if self._model is None:
                self._model = (self.data.run.load_model(), self.data.run.vocab())
        return self._model

    def _record(self, text: str):
        """``record_texts`` of one text (cached by text)."""
        from stateseer.rnn_models.record import record_texts

        def compute():
            model, vocab = self.load()
            with torch_threads(1):
                return record_texts(model, vocab, [text], tokenizer=self.data.tokenizer,
                                    layer=self.data.layer,
                                    truncate=self.data.run.truncate)
        return self.cache.get(("typed", text), compute)

    def trace_text(self, text: str) -> TraceRecord:
        """Trace a typed text: tokens, known flags, per-step probabilities, real and
        simulated paths, final prediction. Raises StateseerError on bad input."""
        if len(text) > MAX_INPUT_CHARS:
            raise StateseerError(f"the text has {len(text):,} characters; the limit is "
                                 f"{MAX_INPUT_CHARS:,} — shorten it")
        d = self.data
        tr = self._record(text)
        _, vocab = self.load()
        tokens = tr.tokens(0)
        if len(tokens) > MAX_INPUT_TOKENS:
            raise StateseerError(f"the text has {len(tokens):,} tokens; the limit is "
                                 f"{MAX_INPUT_TOKENS:,} — shorten it")
        states = d.abstraction.assign(tr.hidden, tr.proba)
        sim = d.fsm.run([vocab.tokens[t] for t in tr.token_ids]) if len(tokens) else [0]
        return TraceRecord(
            text=text, tokens=tuple(tokens), known=tuple(tr.known(0).tolist()),
            proba=tuple(map(tuple, np.asarray(tr.proba).round(5).tolist())),
            initial_proba=tuple(np.asarray(d.traces.initial_proba).round(5).tolist()),
            states=(int(d.fsm.initial), *(int(s) for s in states.tolist())),
            simulated=tuple(int(s) for s in sim), prediction=int(tr.predictions[0]),
            final_proba=tuple(np.asarray(tr.final_proba[0]).round(5).tolist()))

    def token_ids(self, tr: TraceRecord) -> np.ndarray:
        """Token ids of a trace (recorded or typed), shape (n_tokens,)."""
        if tr.recorded:
            return self.data.token_ids(tr)
        return np.asarray(self._record(tr.text).token_ids, np.int64)

    def hidden(self, tr: TraceRecord) -> np.ndarray:
        """Hidden states of a trace after every token, shape (n_tokens, hidden_size)."""
        if tr.recorded:
            return self.data.hidden(tr)
        return np.asarray(self._record(tr.text).hidden, np.float32).reshape(tr.n_tokens, -1)

    def hidden_at(self, tr: TraceRecord, step: int) -> np.ndarray:
        """Hidden state after token ``step`` (0-based); -1 is the initial state."""
        if not -1 <= step < tr.n_tokens:
            raise StateseerError(f"step {step} does not exist; the input has "
                                 f"{tr.n_tokens} tokens")
        if step == -1:
            return np.asarray(self.data.traces.initial_hidden, np.float32)
        return self.hidden(tr)[step]

    def attribution(self, tr: TraceRecord, method: str = "ig", target: str = "predicted",
                    baseline: str = "pad"):
        """:func:`stateseer.rnn_models.attribution.attribute` of a trace, cached by text."""
        from stateseer.rnn_models.attribution import attribute

        if not tr.tokens:
            raise StateseerError("the input is empty; there is nothing to attribute")
        if tr.n_tokens > MAX_ATTRIBUTION_TOKENS:
            raise StateseerError(f"the input has {tr.n_tokens:,} tokens; attribution is "
                                 f"limited to {MAX_ATTRIBUTION_TOKENS:,} — pick a shorter one")
        model, vocab = self.load()

        def compute():
            with torch_threads(1):
                return attribute(model, self.token_ids(tr), list(tr.tokens), method=method,
                                 target=target, baseline=baseline, unk_id=vocab.unk_id,
                                 pad_id=vocab.pad_id)
        return self.cache.get(("attr", tr.text, method, target, baseline), compute)

    @property
    def centroids(self) -> np.ndarray:
        """Hidden-space centroids of the FSM states (computed once, thread-safe)."""
        with self._centroid_lock:
            if self._centroids is None:
                d = self.data
                self._centroids = load_centroids(d.run, d.abstraction, d.traces)
        return self._centroids

    def force(self, tr: TraceRecord, step: int | None = None) -> dict[str, Any]:
        """The trace re-run with states forced to centroids (every step, or one)."""
        model, _ = self.load()

        def compute():
            with torch_threads(1):
                return forced_trace(model, self.data.abstraction, self.centroids,
                                    self.token_ids(tr), layer=self.data.layer, step=step)
        return self.cache.get(("force", tr.key, step), compute)

    def warm(self) -> None:
        """Load the model, Captum and the centroids (what the first trace needs)."""
        import captum.attr  # noqa: F401

        self.load()
        _ = self.centroids


class ContextService:
    """Nearest training contexts of a step, and the 2-D projection of hidden states.

    Parameters
    ----------
    data : RunView
    models : ModelService
        For the hidden states of typed inputs.
    """

    def __init__(self, data: RunView, models: ModelService) -> None:
        self.data = data
        self.models = models
        self._lock = threading.Lock()
        self._index = None
        self.cache = LRUCache(256)

    def index(self, build: bool = True):
        """The nearest-context index (built on first use and saved in the run)."""
        with self._lock:
            if self._index is None:
                self._index = context_index(self.data.run, self.data.traces, build=build)
        return self._index

    def nearest(self, tr: TraceRecord, step: int, k: int = 8, window: int = 5
                ) -> dict[str, Any]:
        """Nearest training contexts of a trace's step (see
        :func:`stateseer.app.workflows.contexts.nearest_contexts`)."""
        d = self.data
        q = self.models.hidden_at(tr, step)
        return self.cache.get(("nearest", tr.key, step, k, window), lambda: nearest_contexts(
            self.index(), d.traces["train"], d.abstraction.states["train"], d.classes, q,
            k=k, window=window,
            query_state=int(tr.states[step + 1]) if tr.has_states else None))

    @cached_property
    def projection(self) -> dict[str, np.ndarray]:
        """Every training state on the first two principal axes, binned
        (:func:`~stateseer.app.workflows.contexts.projection_bins`)."""
        return projection_bins(self.index(), self.data.abstraction.states["train"])

    def project(self, tr: TraceRecord) -> np.ndarray:
        """The trace's hidden states (initial first) on the same axes, shape (n + 1, 2)."""
        idx = self.index()
        H = self.models.hidden(tr)
        H = np.vstack([np.asarray(self.data.traces.initial_hidden, np.float32)[None], H])
        return idx.transform(H)[:, :2]

    def warm(self) -> None:
        self.index()
        _ = self.projection
