"""``stateseer extract-dfa``: the deterministic automaton of a run's traces, saved beside
its abstraction."""

from __future__ import annotations

from pathlib import Path

from abstraction.dfa import ExtractedDFA, extract_dfa
from abstraction.pipeline import fresh_traces
from rnn_models.formal import GRAMMARS
from rnn_models.formats.rundir import RunDir

__all__ = ["DFA_FILE", "extract_run_dfa"]

DFA_FILE = "dfa.json"


def extract_run_dfa(run: RunDir | str | Path, *, max_states: int = 200,
                    random_state: int = 0) -> ExtractedDFA:
    """Extract the run's DFA, save ``abstraction/dfa.json`` and record its report in
    ``metrics.json["abstraction"]["dfa"]``.

    When the run's data set is a built-in grammar, the report compares the automaton with
    the grammar (``grammar_agreement_le12``, ``minimal_size_match``).
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    traces = fresh_traces(run)
    grammar = GRAMMARS.get(str(traces.meta.get("dataset")))
    dfa = extract_dfa(traces, max_states=max_states, random_state=random_state,
                      grammar=grammar)
    dfa.save(run.abstraction_dir / DFA_FILE, overwrite=True)
    m = run.metrics().get("abstraction", {})
    m["dfa"] = {k: v for k, v in dfa.report.items() if not isinstance(v, (list, dict))}
    run.update_metrics(abstraction=m)
    return dfa
