"""A run as the explorer reads it, loaded once and only read.

:class:`RunView` holds a run's traces (memory-mapped), its abstraction and FSM, the
diagram's positions and the per-split table indexes. The services
(:mod:`~stateseer.app.explorer.services`), the comparison of two runs
(:mod:`~stateseer.app.workflows.comparison`) and the :class:`~stateseer.app.explorer.context.
ExplorerContext` that bundles them are built on it.
"""

from __future__ import annotations

import threading
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.colors import run_palette
from stateseer.abstraction.pipeline import Abstraction
from stateseer.app.workflows.query import SplitIndex
from stateseer.app.workflows.records import TraceRecord
from stateseer.core.errors import StateseerError
from stateseer.core.traces import Traces
from stateseer.rnn_models.run import ModelRun

__all__ = ["RunView"]


class RunView:
    """A run as the explorer reads it: traces, abstraction, FSM, classes, splits.

    Parameters
    ----------
    run_dir : str or Path
        A run with recorded traces and an abstraction (``stateseer demo`` makes one).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run = ModelRun(run_dir)
        self.config = self.run.config
        self.traces = Traces(self.run.traces_dir)
        self.abstraction = Abstraction.load(self.run.abstraction_dir)
        self.fsm = self.abstraction.fsm
        self.classes = self.traces.classes
        #: the class colours (the run's own ``colors``, else stateseer's scale)
        self.palette = run_palette(self.config, self.classes)
        self.fsm.palette = self.palette
        self.splits = [s for s in self.traces.split_names if s in self.abstraction.states]
        self._index: dict[str, SplitIndex] = {}
        self._index_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.run.path.name

    @property
    def has_predictions(self) -> bool:
        """False for traces imported without probabilities: their predictions are a
        uniform stand-in, so no view shows a prediction, a correctness or a fidelity."""
        return self.traces.meta.get("proba") is not False

    @property
    def default_split(self) -> str:
        """The split a page opens on: test if it has inputs, else val (a data set without
        a test split), else the first."""
        measured = self.traces.measured_split
        return measured if measured in self.splits else self.splits[0]

    @property
    def tokenizer(self) -> str:
        return self.config["data"].get("tokenizer", "word")

    @property
    def joiner(self) -> str:
        """How tokens are joined back into text ("" for character models)."""
        return "" if self.tokenizer == "char" else " "

    @property
    def layer(self) -> int:
        return self.traces.meta.get("layer", -1)

    def n_inputs(self) -> dict[str, int]:
        return {s: self.traces[s].n_inputs for s in self.splits}

    def index(self, split: str) -> SplitIndex:
        """The table index of ``split`` (built on first use, thread-safe)."""
        if split not in self.splits:
            raise StateseerError(f"unknown split {split!r}; choose one of {self.splits}")
        with self._index_lock:
            if split not in self._index:
                self._index[split] = SplitIndex(self.traces[split],
                                                self.abstraction.states[split],
                                                self.fsm.n_states)
            return self._index[split]

    @cached_property
    def positions(self) -> dict[int, tuple[float, float]]:
        """Stable diagram positions, computed once."""
        from stateseer.abstraction.automata.layout import fixed_positions

        return fixed_positions(self.fsm)

    @cached_property
    def metrics(self) -> dict[str, Any]:
        return self.run.metrics()

    def forcing_per_state(self) -> dict[str, dict[str, Any]]:
        """``stateseer force`` figures per state (empty when not measured)."""
        return self.metrics.get("abstraction", {}).get("forcing", {}).get("per_state", {})

    def trace_instance(self, split: str, i: int) -> TraceRecord:
        """The trace record of recorded instance ``i`` of ``split``."""
        if split not in self.splits:
            raise StateseerError(f"unknown split {split!r}; choose one of {self.splits}")
        tr = self.traces[split]
        if not 0 <= i < tr.n_inputs:
            raise StateseerError(f"instance {i} does not exist in split {split!r}")
        real, sim = self.abstraction.paths(split, i, self.traces)
        sl = tr.steps(i)
        return TraceRecord(
            text=tr.texts[i], tokens=tuple(tr.tokens(i)), known=tuple(tr.known(i).tolist()),
            proba=tuple(map(tuple, np.asarray(tr.proba[sl]).round(5).tolist())),
            initial_proba=tuple(np.asarray(self.traces.initial_proba).round(5).tolist()),
            states=tuple(int(s) for s in real), simulated=tuple(int(s) for s in sim),
            prediction=int(tr.predictions[i]), label=int(tr.labels[i]), split=split,
            index=int(i), id=int(tr.rows[i]),
            final_proba=tuple(np.asarray(tr.final_proba[i]).round(5).tolist()))

    def token_ids(self, tr: TraceRecord) -> np.ndarray:
        """Token ids of a recorded trace, shape (n_tokens,)."""
        t = self.traces[tr.split]
        return np.asarray(t.token_ids[t.steps(int(tr.index))], np.int64)

    def hidden(self, tr: TraceRecord) -> np.ndarray:
        """Hidden states of a recorded trace, shape (n_tokens, hidden_size)."""
        t = self.traces[tr.split]
        return np.asarray(t.hidden[t.steps(int(tr.index))], np.float32)
