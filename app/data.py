"""What the explorer shows of one run, loaded once and read-only, plus pure queries.

:class:`RunData` holds the run's traces (memory-mapped), its abstraction and, lazily, the
model for typed inputs. Every callback of the app is a thin wrapper over a function here
or in :mod:`app.views`: plain data in, plain data out, testable without a browser.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from abstraction.patterns import collapsed_paths, window_keys
from abstraction.pipeline import Abstraction
from rnn_models.errors import StateseerError
from rnn_models.run import Run
from rnn_models.traces import SplitTraces, Traces

__all__ = ["InstanceQuery", "RunData", "query_instances"]

MAX_INPUT_CHARS = 20_000


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


class SplitIndex:
    """Per-split arrays for fast filtering: states visited per input, collapsed paths."""

    def __init__(self, tr: SplitTraces, states: np.ndarray, n_states: int) -> None:
        self.tr = tr
        self.n_inputs = tr.n_inputs
        inp = tr.step_input
        # (state, input) presence as a CSR index: inputs_of_state[s] = sorted inputs
        key = np.unique(states.astype(np.int64) * max(self.n_inputs, 1) + inp)
        s, i = key // max(self.n_inputs, 1), key % max(self.n_inputs, 1)
        self._state_ptr = np.searchsorted(s, np.arange(n_states + 1))
        self._state_inputs = i
        self.cstates, self.cinput, _, _ = collapsed_paths(states, tr.offsets)
        self.n_states = n_states
        self.lower = [t.lower() for t in tr.texts]

    def inputs_through(self, state: int) -> np.ndarray:
        if state == 0:
            return np.arange(self.n_inputs)
        if not 0 <= state < self.n_states:
            return np.zeros(0, np.int64)
        return self._state_inputs[self._state_ptr[state] : self._state_ptr[state + 1]]

    def inputs_with_pattern(self, pattern: tuple[int, ...]) -> np.ndarray:
        w = len(pattern)
        key = 0
        for s in pattern:
            key = key * self.n_states + int(s)
        keys = window_keys(self.cstates, self.cinput, w, self.n_states)
        return np.unique(self.cinput[keys == key])


class RunData:
    """A run as the app needs it.

    Parameters
    ----------
    run_dir : str or Path
        A run with recorded traces and an abstraction (``stateseer demo`` makes one).
    model : Traceable, optional
        The model for typed inputs, attribution and forcing; default ``Run.load_model()``
        (the built-in classifiers). Pass your own adapter for a run of your own model.
    """

    def __init__(self, run_dir: str | Path, model=None) -> None:
        self.run = Run(run_dir)
        self.config = self.run.config
        self.traces = Traces(self.run.traces_dir)
        self.abstraction = Abstraction.load(self.run.abstraction_dir)
        self.fsm = self.abstraction.fsm
        self.classes = self.traces.classes
        self.splits = [s for s in self.traces.split_names if s in self.abstraction.states]
        self._index: dict[str, SplitIndex] = {}
        self._model_lock = threading.Lock()
        self._model = None if model is None else (model.eval(), self.run.vocab())
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._ctx_lock = threading.Lock()
        self._ctx_index = None
        self._centroid_lock = threading.Lock()
        self._centroids: np.ndarray | None = None
        self.other: RunData | None = None  # a second run to compare with (serve --compare)

    @property
    def name(self) -> str:
        return self.run.path.name

    def index(self, split: str) -> SplitIndex:
        if split not in self.splits:
            raise StateseerError(f"unknown split {split!r}; choose one of {self.splits}")
        if split not in self._index:
            self._index[split] = SplitIndex(self.traces[split],
                                            self.abstraction.states[split], self.fsm.n_states)
        return self._index[split]

    @cached_property
    def positions(self) -> dict[int, tuple[float, float]]:
        """Stable diagram positions, computed once."""
        from .views.diagram import fixed_positions

        return fixed_positions(self.fsm)

    @cached_property
    def metrics(self) -> dict[str, Any]:
        return self.run.metrics()

    # typed inputs --------------------------------------------------------------------------
    def _load_model(self):
        with self._model_lock:
            if self._model is None:
                self._model = (self.run.load_model(), self.run.vocab())
        return self._model

    def trace_text(self, text: str) -> dict[str, Any]:
        """Trace a typed text: tokens, known flags, per-step probabilities, real and
        simulated paths, final prediction. Raises StateseerError on bad input."""
        from rnn_models.record import record_texts

        if len(text) > MAX_INPUT_CHARS:
            raise StateseerError(f"the text has {len(text):,} characters; the limit is "
                                 f"{MAX_INPUT_CHARS:,} — shorten it")
        model, vocab = self._load_model()
        tokenizer = self.config["data"].get("tokenizer", "word")
        tr = record_texts(model, vocab, [text], tokenizer=tokenizer,
                          layer=self.traces.meta.get("layer", -1))
        states = self.abstraction.assign(tr.hidden, tr.proba)
        tokens = tr.tokens(0)
        sim = self.fsm.run([vocab.tokens[t] for t in tr.token_ids]) if len(tokens) else [0]
        return {
            "text": text, "tokens": tokens, "known": tr.known(0).tolist(),
            "proba": np.asarray(tr.proba).round(5).tolist(),
            "initial_proba": np.asarray(self.traces.initial_proba).round(5).tolist(),
            "states": [self.fsm.initial, *states.tolist()], "simulated": sim,
            "prediction": int(tr.predictions[0]), "label": None,
            "final_proba": np.asarray(tr.final_proba[0]).round(5).tolist(),
        }

    def trace_instance(self, split: str, i: int) -> dict[str, Any]:
        """The same record for a recorded instance."""
        tr = self.traces[split]
        if not 0 <= i < tr.n_inputs:
            raise StateseerError(f"instance {i} does not exist in split {split!r}")
        real, sim = self.abstraction.paths(split, i, self.traces)
        sl = tr.steps(i)
        return {
            "text": tr.texts[i], "tokens": tr.tokens(i), "known": tr.known(i).tolist(),
            "proba": np.asarray(tr.proba[sl]).round(5).tolist(),
            "initial_proba": np.asarray(self.traces.initial_proba).round(5).tolist(),
            "states": real, "simulated": sim, "prediction": int(tr.predictions[i]),
            "label": int(tr.labels[i]), "split": split, "index": i, "id": int(tr.rows[i]),
            "final_proba": np.asarray(tr.final_proba[i]).round(5).tolist(),
        }

    # analyses of one trace (cached: the same click twice costs nothing) ----------------------
    def _cached(self, key: tuple, compute):
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = compute()
        with self._cache_lock:
            self._cache[key] = value
            while len(self._cache) > 256:
                self._cache.popitem(last=False)
        return value

    @staticmethod
    def trace_key(tr: dict[str, Any]) -> str:
        """A stable name of a trace: ``test:12`` for a recorded one, else its text."""
        if tr.get("index") is not None and tr.get("split"):
            return f"{tr['split']}:{int(tr['index'])}"
        return "text:" + tr["text"]

    def _typed(self, text: str):
        from rnn_models.record import record_texts

        def compute():
            model, vocab = self._load_model()
            return record_texts(model, vocab, [text],
                                tokenizer=self.config["data"].get("tokenizer", "word"),
                                layer=self.traces.meta.get("layer", -1))
        return self._cached(("typed", text), compute)

    def ids_of(self, tr: dict[str, Any]) -> np.ndarray:
        """Token ids of a trace record (recorded or typed)."""
        if tr.get("index") is not None and tr.get("split"):
            t = self.traces[tr["split"]]
            return np.asarray(t.token_ids[t.steps(int(tr["index"]))], np.int64)
        return np.asarray(self._typed(tr["text"]).token_ids, np.int64)

    def hidden_of(self, tr: dict[str, Any], step: int) -> np.ndarray:
        """Hidden state after token ``step`` (0-based) of a trace; -1 is the initial state."""
        n = len(tr["tokens"])
        if not -1 <= step < n:
            raise StateseerError(f"step {step} does not exist; the input has {n} tokens")
        if step == -1:
            return np.asarray(self.traces.initial_hidden, np.float32)
        if tr.get("index") is not None and tr.get("split"):
            t = self.traces[tr["split"]]
            return np.asarray(t.hidden[t.offsets[int(tr["index"])] + step], np.float32)
        return np.asarray(self._typed(tr["text"]).hidden[step], np.float32)

    def attribution(self, tr: dict[str, Any], method: str = "ig",
                    target: str = "predicted", baseline: str = "pad"):
        """:func:`rnn_models.attribution.attribute` of a trace, cached by text."""
        from rnn_models.attribution import attribute

        if not tr["tokens"]:
            raise StateseerError("the input is empty; there is nothing to attribute")
        model, _ = self._load_model()
        return self._cached(("attr", tr["text"], method, target, baseline),
                            lambda: attribute(model, self.ids_of(tr), tr["tokens"],
                                              method=method, target=target,
                                              baseline=baseline))

    @property
    def centroids(self) -> np.ndarray:
        """Hidden-space centroids of the FSM states (computed once, thread-safe)."""
        from .analysis import load_centroids

        with self._centroid_lock:
            if self._centroids is None:
                self._centroids = load_centroids(self.run, self.abstraction, self.traces)
        return self._centroids

    def force(self, tr: dict[str, Any], step: int | None = None) -> dict[str, Any]:
        """The trace re-run with states forced to centroids (every step, or one)."""
        from .analysis import forced_trace

        model, _ = self._load_model()
        return self._cached(("force", self.trace_key(tr), step), lambda: forced_trace(
            model, self.abstraction, self.centroids, self.ids_of(tr),
            layer=self.traces.meta.get("layer", -1), step=step))

    def context_index(self, build: bool = True):
        """The nearest-context index (built on first use and saved in the run)."""
        from .analysis import context_index

        with self._ctx_lock:
            if self._ctx_index is None:
                self._ctx_index = context_index(self.run, self.traces, build=build)
        return self._ctx_index

    def nearest(self, tr: dict[str, Any], step: int, k: int = 8,
                window: int = 5) -> dict[str, Any]:
        """Nearest training contexts of a trace's step (see :func:`analysis.nearest_contexts`)."""
        from .analysis import nearest_contexts

        q = self.hidden_of(tr, step)
        return self._cached(("nearest", self.trace_key(tr), step, k, window),
                            lambda: nearest_contexts(
                                self.context_index(), self.traces["train"],
                                self.abstraction.states["train"], self.classes, q, k=k,
                                window=window, query_state=int(tr["states"][step + 1])))

    @cached_property
    def projection(self) -> dict[str, np.ndarray]:
        """A sample of training states on the first two principal axes."""
        from .analysis import projection_sample

        return projection_sample(self.context_index(), self.traces["train"],
                                 self.abstraction.states["train"])

    def project_trace(self, tr: dict[str, Any]) -> np.ndarray:
        """The trace's hidden states (initial first) on the same axes, shape (n + 1, 2)."""
        idx = self.context_index()
        n = len(tr["tokens"])
        if tr.get("index") is not None and tr.get("split"):
            t = self.traces[tr["split"]]
            sl = t.steps(int(tr["index"]))
            H = np.asarray(t.hidden[sl], np.float32)
        else:
            H = np.asarray(self._typed(tr["text"]).hidden, np.float32).reshape(n, -1)
        H = np.vstack([np.asarray(self.traces.initial_hidden, np.float32)[None], H])
        return idx.transform(H)[:, :2]

    # comparing with a second run ----------------------------------------------------------
    def comparison(self, split: str) -> dict[str, Any]:
        """State matching and changed inputs between this run and :attr:`other` on a split.

        Returns
        -------
        dict
            ``matching`` (:class:`abstraction.compare.StateMatching`), ``changed`` (per
            input arrays), ``summary`` (figures), ``pred_b`` (the other run's predictions).
        """
        from abstraction.compare import changed_inputs, match_states

        other = self.other
        if other is None:
            raise StateseerError("no run to compare with; serve with --compare OTHER_RUN")
        if split not in other.splits:
            raise StateseerError(f"the compared run has no split {split!r}")

        def compute():
            a, b = self.traces[split], other.traces[split]
            if a.n_inputs != b.n_inputs or a.texts != b.texts:
                raise StateseerError(
                    f"the runs hold different {split} inputs ({a.n_inputs:,} vs "
                    f"{b.n_inputs:,}); compare runs trained on the same data set and split")
            if a.n_steps != b.n_steps or not np.array_equal(a.offsets, b.offsets):
                raise StateseerError("the runs tokenise the inputs differently; compare runs "
                                     "that use the same tokenizer")
            sa, sb = self.abstraction.states[split], other.abstraction.states[split]
            m = match_states(sa, sb, self.fsm.n_states, other.fsm.n_states)
            ch = changed_inputs(m, sa, sb, a.offsets, a.predictions, b.predictions)
            labels = np.asarray(a.labels)
            summary = {
                "split": split, "n_inputs": int(a.n_inputs),
                "accuracy_a": float((a.predictions == labels).mean()),
                "accuracy_b": float((b.predictions == labels).mean()),
                "prediction_changed": int(ch["prediction_changed"].sum()),
                "fixed": int(((a.predictions != labels) & (b.predictions == labels)).sum()),
                "broken": int(((a.predictions == labels) & (b.predictions != labels)).sum()),
                "path_changed": int(ch["path_changed"].sum()),
                "step_agreement": round(m.agreement, 4),
                "name_a": self.name, "name_b": other.name,
            }
            return {"matching": m, "changed": ch, "summary": summary,
                    "pred_b": b.predictions}
        return self._cached(("comparison", split), compute)

    def other_trace(self, split: str, i: int) -> dict[str, Any]:
        """The compared run's trace of input ``i``, its states renamed to this run's
        matched states (unmatched states keep their id + 1000)."""
        cmp_ = self.comparison(split)
        tr = self.other.trace_instance(split, i)
        b_to_a = cmp_["matching"].b_to_a
        rename = lambda s: int(b_to_a[s]) if b_to_a[s] >= 0 else 1000 + int(s)  # noqa: E731
        tr["states_own"] = tr["states"]
        tr["states"] = [rename(s) for s in tr["states"]]
        tr["simulated"] = [rename(s) for s in tr["simulated"]]
        tr["run"] = self.other.name
        return tr


def query_instances(data: RunData, q: InstanceQuery) -> tuple[list[dict[str, Any]], int, str]:
    """Filter, sort and page the instance table.

    Returns
    -------
    rows : list of dict
        The page's rows (``index, id, text, label, prediction, correct, confidence, length``).
    total : int
        Rows matching the filters.
    message : str
        Empty, or a one-line explanation (e.g. an invalid regular expression).
    """
    idx = data.index(q.split)
    tr = idx.tr
    n = tr.n_inputs
    mask = np.ones(n, bool)
    message = ""
    classes = data.classes
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
    if q.search:
        if q.regex:
            try:
                rx = re.compile(q.search, re.IGNORECASE)
            except re.error as exc:
                rx = None
                message = f"invalid regular expression ({exc}); showing all rows"
            if rx is not None:
                cand = np.flatnonzero(mask)
                hit = np.fromiter((rx.search(tr.texts[i]) is not None for i in cand), bool,
                                  count=len(cand))
                mask[cand[~hit]] = False
        else:
            needle = q.search.lower()
            cand = np.flatnonzero(mask)
            hit = np.fromiter((needle in idx.lower[i] for i in cand), bool, count=len(cand))
            mask[cand[~hit]] = False
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
