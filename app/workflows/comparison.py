"""Two runs on the same data compared: matched states, changed inputs, renamed traces.

``stateseer compare RUN OTHER`` and the explorer's comparison view (``serve --compare``)
both read :class:`RunComparison`. The runs must hold the same inputs, tokenised the same
way (e.g. the model before and after a fix, or two abstractions of one model).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from stateseer.core.errors import StateseerError

if TYPE_CHECKING:
    from stateseer.app.workflows.records import TraceRecord
    from stateseer.app.workflows.runview import RunView

__all__ = ["RunComparison", "compare_runs", "compare_split", "comparison_doc"]


def compare_split(a: RunView, b: RunView, split: str) -> dict[str, Any]:
    """State matching and changed inputs between runs ``a`` and ``b`` on ``split``.

    Returns
    -------
    dict
        ``matching`` (:class:`stateseer.abstraction.analysis.compare.StateMatching`), ``changed``
        (per
        input arrays), ``summary`` (figures), ``pred_b`` (run b's predictions).

    Raises
    ------
    StateseerError
        The runs hold different inputs, tokenise them differently, or lack ``split``.
    """
    from stateseer.abstraction.analysis.compare import changed_inputs, match_states
    from stateseer.app.workflows.inputs import input_difference

    if split not in b.splits:
        raise StateseerError(f"the compared run has no split {split!r}")
    ta, tb = a.traces[split], b.traces[split]
    differs = input_difference(split, ta.texts, tb.texts, data_a=a.run.data,
                               data_b=b.run.data)
    if differs:
        raise StateseerError(differs)
    if ta.n_steps != tb.n_steps or not np.array_equal(ta.offsets, tb.offsets):
        raise StateseerError("the runs tokenise the inputs differently; compare runs "
                             "that use the same tokenizer")
    sa, sb = a.abstraction.states[split], b.abstraction.states[split]
    m = match_states(sa, sb, a.fsm.n_states, b.fsm.n_states)
    ch = changed_inputs(m, sa, sb, ta.offsets, ta.predictions, tb.predictions)
    labels = np.asarray(ta.labels)
    summary = {
        "split": split, "n_inputs": int(ta.n_inputs),
        "accuracy_a": float((ta.predictions == labels).mean()),
        "accuracy_b": float((tb.predictions == labels).mean()),
        "prediction_changed": int(ch["prediction_changed"].sum()),
        "fixed": int(((ta.predictions != labels) & (tb.predictions == labels)).sum()),
        "broken": int(((ta.predictions == labels) & (tb.predictions != labels)).sum()),
        "path_changed": int(ch["path_changed"].sum()),
        "step_agreement": round(m.agreement, 4),
        "chance_agreement": round(m.chance, 4),
        "name_a": a.name, "name_b": b.name,
    }
    return {"matching": m, "changed": ch, "summary": summary, "pred_b": tb.predictions}


class RunComparison:
    """Run ``a`` (the one explored) compared with run ``b``, per split, computed once.

    Parameters
    ----------
    a, b : RunView
    """

    def __init__(self, a: RunView, b: RunView) -> None:
        self.a, self.b = a, b
        self._done: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The compared run's name."""
        return self.b.name

    def compare(self, split: str) -> dict[str, Any]:
        """:func:`compare_split` of ``split`` (cached)."""
        with self._lock:
            if split not in self._done:
                self._done[split] = compare_split(self.a, self.b, split)
            return self._done[split]

    def other_trace(self, split: str, i: int) -> TraceRecord:
        """Run b's trace of input ``i``, its states renamed to run a's matched states
        (unmatched states keep their id + 1000)."""
        b_to_a = self.compare(split)["matching"].b_to_a

        def rename(s: int) -> int:
            return int(b_to_a[s]) if b_to_a[s] >= 0 else 1000 + int(s)

        return self.b.trace_instance(split, i).renamed(rename, run=self.b.name)


def comparison_doc(a: RunView, cmp_: dict[str, Any], split: str, run_a: str,
                   run_b: str) -> dict[str, Any]:
    """The ``stateseer.comparison`` v1 document of :func:`compare_split`'s result: the
    summary, the state matching and every input whose path or prediction changed."""
    tr = a.traces[split]
    ch, classes = cmp_["changed"], a.classes
    changed = [
        {"index": int(i), "id": int(tr.rows[i]), "label": classes[int(tr.labels[i])],
         "prediction_a": classes[int(tr.predictions[i])],
         "prediction_b": classes[int(cmp_["pred_b"][i])],
         "n_steps": int(ch["n_steps"][i]), "n_diff": int(ch["n_diff"][i]),
         "first_diff": int(ch["first_diff"][i])}
        for i in range(tr.n_inputs) if ch["path_changed"][i] or ch["prediction_changed"][i]]
    return {"format": "stateseer.comparison", "version": 1, "run_a": run_a, "run_b": run_b,
            "summary": cmp_["summary"], "matching": cmp_["matching"].pairs(),
            "changed": changed}


def compare_runs(run_a: Any, run_b: Any, split: str | None = None, *,
                 out: Any = None) -> dict[str, Any]:
    """``stateseer compare``: two runs on the same inputs compared on ``split`` (default:
    ``test``, or ``val`` where the data has no test inputs).

    Parameters
    ----------
    run_a, run_b : str or Path
        Recorded and abstracted runs holding the same inputs.
    out : str or Path, optional
        Where to write the :func:`comparison_doc` (JSON).

    Returns
    -------
    dict
        The summary figures.

    Raises
    ------
    StateseerError
        The runs hold different inputs (one line says what differs) or lack ``split``.
    """
    import json
    from pathlib import Path

    from stateseer.app.workflows.runview import RunView
    from stateseer.core.atomic import atomic_write_text

    a, b = RunView(run_a), RunView(run_b)
    split = split or a.traces.measured_split
    if split in a.splits and not a.traces[split].n_inputs:
        raise StateseerError(f"the runs' data has no {split} inputs to compare; choose "
                             "another with --split")
    cmp_ = compare_split(a, b, split)
    if out:
        atomic_write_text(Path(out), json.dumps(
            comparison_doc(a, cmp_, split, str(run_a), str(run_b)), indent=1))
    return cmp_["summary"]
