"""``stateseer export``: pick the FSM (or DFA) of a run and write it in a format.

The writers themselves are pure functions of :mod:`stateseer.abstraction.automata.export`; this
module reads
the run directory.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stateseer.abstraction.automata.export import (
    EXPORT_FORMATS,
    drawn_top_k,
    export_data,
    write_export,
)
from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.colors import run_palette
from stateseer.abstraction.errors import AbstractionError
from stateseer.abstraction.pipeline import Abstraction
from stateseer.core import layout
from stateseer.core.rundir import RunDir
from stateseer.core.traces import Traces

__all__ = ["drawing_note", "export_run", "load_run_fsm"]

def load_run_fsm(run: RunDir, dfa: bool = False) -> tuple[FSM, Any]:
    """The run's FSM (and the DFA object when ``dfa``)."""
    if dfa:
        from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA

        path = run.abstraction_dir / layout.DFA
        if not path.exists():
            raise AbstractionError(
                f"no extracted DFA in {run.abstraction_dir}; run `stateseer extract-dfa "
                f"{run.path}` first"
            )
        d = ExtractedDFA.load(path)
        fsm = FSM.from_dict(d.to_dict())
        fsm.info["graph_attrs"] = d.built_by()  # graph exports say how it was built
        fsm.palette = run_palette(run.config, fsm.classes)
        return fsm, d
    path = run.abstraction_dir / layout.FSM
    if not path.exists():
        raise AbstractionError(
            f"no FSM in {run.abstraction_dir}; run `stateseer abstract {run.path}` first"
        )
    fsm = FSM.load(path)
    fsm.palette = run_palette(run.config, fsm.classes)
    return fsm, None


def export_run(run: RunDir | str | Path, fmt: str, out: str | Path, *, dfa: bool = False,
               top_k: int | None = None, min_count: int = 1, overwrite: bool = False,
               log: Callable[[str], None] | None = None, input_id: int | None = None,
               split: str | None = None) -> Path:
    """Export the run's FSM/DFA (or its traces) as ``fmt`` to ``out`` (``-``: stdout).

    A drawn FSM (dot/svg/png/pdf) keeps ``top_k`` edges per state (default
    :data:`~stateseer.abstraction.automata.export.RENDERED_TOP_K`; ``0``: every edge); ``log``
    hears what it left out (:func:`drawing_note`). ``html`` is one self-contained page
    (:mod:`~stateseer.app.workflows.html_export`): the FSM, or with ``input_id`` that
    input's trace (in ``split``, default test)."""
    run = run if isinstance(run, RunDir) else RunDir(run)
    _ = run.config  # a clear error if this is not a run
    if fmt == "html":
        from stateseer.app.workflows.html_export import fsm_html, trace_html

        if dfa:
            raise AbstractionError("--format html draws the FSM; export the DFA as "
                                   "svg, dot or json")
        page = fsm_html(run.path, top_k=top_k) if input_id is None else \
            trace_html(run.path, input_id, split=split)
        if log and input_id is None:
            note = drawing_note(load_run_fsm(run)[0], "svg", top_k=top_k)
            if note:
                log(note)
        if str(out) == "-":
            sys.stdout.write(page)
            return Path("-")
        write_export(page, out, overwrite=overwrite)
        return Path(out)
    spec = EXPORT_FORMATS.get(fmt)
    if spec is None:
        raise AbstractionError(f"unknown --format {fmt!r}; choose one of: "
                               f"{', '.join(EXPORT_FORMATS)}")
    data: bytes | str
    if spec.kind == "traces":
        ab = Abstraction.load(run.abstraction_dir)
        traces = Traces(run.traces_dir)
        data = spec.write([r for split in traces.split_names if split in ab.states
                           for r in ab.trace_rows(traces, split)])
    else:
        fsm, dfa_obj = load_run_fsm(run, dfa)
        # graphs (graphml, node-link) always come from the FSM view of the automaton
        graph = spec.kind == "graph" or dfa_obj is None
        data = export_data(fsm if graph else dfa_obj, fmt, top_k=top_k, min_count=min_count)
        note = drawing_note(fsm, fmt, top_k=top_k, min_count=min_count) \
            if dfa_obj is None else None
        if note and log:
            log(note)
    if str(out) == "-":
        if isinstance(data, bytes):
            if fmt in ("png", "pdf"):  # svg and graphml are text
                raise AbstractionError(f"{fmt} is binary; write it to a file with --out PATH")
            data = data.decode()
        sys.stdout.write(data)
        return Path("-")
    write_export(data, out, overwrite=overwrite)
    return Path(out)


def drawing_note(fsm: FSM, fmt: str, *, top_k: int | None = None, min_count: int = 1
                 ) -> str | None:
    """One line saying how many of the FSM's state-to-state edges a drawing in ``fmt``
    leaves out, or None when it keeps them all (or ``fmt`` is no drawing)."""
    spec = EXPORT_FORMATS.get(fmt)
    if spec is None or spec.kind != "automaton" or fmt == "json":
        return None
    k = drawn_top_k(top_k)
    total = len(fsm.state_edges(1))
    drawn = len(fsm.pruned_edges(top_k=k or total, min_count=min_count))
    if drawn >= total:
        return None
    return (f"drew {drawn:,} of the FSM's {total:,} state-to-state edges (the top {k} per "
            f"state{f', seen at least {min_count} times' if min_count > 1 else ''}); "
            "--top-k 0 draws every edge")
