"""``stateseer export``: pick the FSM (or DFA) of a run and write it in a format.

The writers themselves are pure functions of :mod:`abstraction.export`; this module reads
the run directory.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

from abstraction.errors import AbstractionError
from abstraction.export import FORMATS, fsm_to_dot, render, write_export, write_traces_csv
from abstraction.fsm import FSM
from abstraction.pipeline import Abstraction
from rnn_models.formats.rundir import RunDir
from rnn_models.formats.traces import Traces

from .dfa import DFA_FILE

__all__ = ["FORMATS", "export_run", "load_run_fsm"]

RENDERED_TOP_K = 4


def load_run_fsm(run: RunDir, dfa: bool = False) -> tuple[FSM, Any]:
    """The run's FSM (and the DFA object when ``dfa``)."""
    if dfa:
        from abstraction.dfa import ExtractedDFA

        path = run.abstraction_dir / DFA_FILE
        if not path.exists():
            raise AbstractionError(
                f"no extracted DFA in {run.abstraction_dir}; run `stateseer extract-dfa "
                f"{run.path}` first"
            )
        d = ExtractedDFA.load(path)
        return FSM.from_dict(d.to_dict()), d
    path = run.abstraction_dir / "fsm.json"
    if not path.exists():
        raise AbstractionError(
            f"no FSM in {run.abstraction_dir}; run `stateseer abstract {run.path}` first"
        )
    return FSM.load(path), None


def export_run(run: RunDir | str | Path, fmt: str, out: str | Path, *, dfa: bool = False,
               top_k: int | None = None, min_count: int = 1, overwrite: bool = False) -> Path:
    """Export the run's FSM/DFA (or its traces) as ``fmt`` to ``out`` (``-``: stdout)."""
    run = run if isinstance(run, RunDir) else RunDir(run)
    _ = run.config  # a clear error if this is not a run
    if fmt not in FORMATS:
        raise AbstractionError(f"unknown --format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    data: bytes | str
    if fmt == "traces-csv":
        ab = Abstraction.load(run.abstraction_dir)
        traces = Traces(run.traces_dir)
        buf = io.StringIO()
        rows = [r for split in traces.split_names if split in ab.states
                for r in ab.trace_rows(traces, split)]
        write_traces_csv(buf, rows)
        data = buf.getvalue()
    else:
        fsm, dfa_obj = load_run_fsm(run, dfa)
        if fmt == "json":
            data = json.dumps(dfa_obj.to_dict() if dfa_obj is not None else fsm.to_dict(),
                              indent=1, ensure_ascii=False)
        elif fmt in ("dot", "svg", "png", "pdf"):
            k = top_k if top_k is not None or fmt == "dot" else RENDERED_TOP_K
            dot = (dfa_obj.to_dot() if dfa_obj is not None
                   else fsm_to_dot(fsm, top_k=k, min_count=min_count))
            data = dot if fmt == "dot" else render(dot, fmt)
        elif fmt == "graphml":
            import networkx as nx

            buf = io.BytesIO()
            nx.write_graphml(fsm.to_networkx(), buf)
            data = buf.getvalue()
        else:  # node-link
            import networkx as nx

            data = json.dumps(nx.node_link_data(fsm.to_networkx(), edges="links"),
                              ensure_ascii=False)
    if str(out) == "-":
        if isinstance(data, bytes):
            if fmt in ("png", "pdf"):
                raise AbstractionError(f"{fmt} is binary; write it to a file with --out PATH")
            data = data.decode()
        sys.stdout.write(data)
        return Path("-")
    write_export(data, out, overwrite=overwrite)
    return Path(out)
