"""``stateseer export``: pick the FSM (or DFA) of a run and write it in a format.

The writers themselves are pure functions of :mod:`stateseer.abstraction.automata.export`; this
module reads
the run directory.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stateseer.abstraction.automata import export as automata_export
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
from stateseer.core.dot import dot_document
from stateseer.core.rundir import RunDir
from stateseer.core.traces import Traces

if TYPE_CHECKING:
    from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA

__all__ = ["RENDERED", "RENDERED_MAX_EDGES", "dfa_drawing_note", "dfa_state_edges",
           "dfa_to_dot", "drawing_note", "export_run", "load_run_fsm"]

RENDERED = ("svg", "png", "pdf")
"""The formats Graphviz lays out (the others are written without a layout)."""

RENDERED_MAX_EDGES = 400
"""The most edges a rendered (svg/png/pdf) drawing may hold; a larger one is refused
before Graphviz runs. Graphviz 2.43's ``dot`` lays out 190 states with 2 random labelled
edges each in about 6 s, 100 states with 4 each in 21 s, and 190 states with 4 each not
in 5 minutes (a text run's DFA, 12,338 edges: 1.6 GB and no end in sight)."""

LABEL_TOKENS = 3
"""Symbols an edge label of a drawn DFA names (the heaviest); the rest are counted."""

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

    A drawn FSM or DFA (dot/svg/png/pdf) keeps ``top_k`` edges per state (default
    :data:`~stateseer.abstraction.automata.export.RENDERED_TOP_K`; ``0``: every edge); ``log``
    hears what it left out (:func:`drawing_note`, :func:`dfa_drawing_note`). A rendered
    drawing (svg/png/pdf) of more than :data:`RENDERED_MAX_EDGES` edges is refused before
    Graphviz runs, and Graphviz is stopped after
    :data:`~stateseer.abstraction.automata.export.RENDER_SECONDS`. ``html`` is one
    self-contained page (:mod:`~stateseer.app.workflows.html_export`): the FSM, or with
    ``input_id`` that input's trace (in ``split``, default test).

    Raises
    ------
    AbstractionError
        An unknown format, one that does not apply to the DFA (``html``, ``traces-csv``),
        a drawing too big to lay out, or ``out`` exists and ``overwrite`` is False.
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    _ = run.config  # a clear error if this is not a run
    if fmt == "html":
        return _export_html(run, out, dfa=dfa, top_k=top_k, overwrite=overwrite, log=log,
                            input_id=input_id, split=split)
    spec = EXPORT_FORMATS.get(fmt)
    if spec is None:
        raise AbstractionError(f"unknown --format {fmt!r}; choose one of: "
                               f"{', '.join(EXPORT_FORMATS)}")
    data: bytes | str
    if spec.kind == "traces":
        if dfa:
            raise AbstractionError(f"--format {fmt} writes the traces with their FSM states; "
                                   "--dfa does not apply: drop it, or export the DFA as "
                                   f"{_dfa_formats()}")
        ab = Abstraction.load(run.abstraction_dir)
        traces = Traces(run.traces_dir)
        data = spec.write([r for split in traces.split_names if split in ab.states
                           for r in ab.trace_rows(traces, split)])
    elif dfa:
        data = _dfa_data(run, fmt, top_k=top_k, min_count=min_count, log=log)
    else:
        data = _fsm_data(run, fmt, top_k=top_k, min_count=min_count, log=log)
    return _write(data, fmt, out, overwrite=overwrite)


def _export_html(run: RunDir, out: str | Path, *, dfa: bool, top_k: int | None,
                 overwrite: bool, log: Callable[[str], None] | None,
                 input_id: int | None, split: str | None) -> Path:
    """The ``html`` page of :func:`export_run` (the FSM's, or one input's trace)."""
    from stateseer.app.workflows.html_export import fsm_html, trace_html

    if dfa:
        raise AbstractionError("--format html pages show the FSM, not the DFA; export the "
                               f"DFA as {_dfa_formats()}")
    if input_id is None:
        fsm = load_run_fsm(run)[0]
        drawn = len(_fsm_drawn_edges(fsm, top_k))
        _check_drawable(drawn, fsm.n_states, "html", top_k)
        page = fsm_html(run.path, top_k=top_k)
        note = drawing_note(fsm, "svg", top_k=top_k, drawn=drawn)
        if log and note:
            log(note)
    else:
        page = trace_html(run.path, input_id, split=split)
    return _write(page, "html", out, overwrite=overwrite)


def _dfa_formats() -> str:
    """The ``--format`` names a DFA exports to, as ``a, b or c``."""
    names = [f.name for f in EXPORT_FORMATS.values() if f.kind != "traces"]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def _fsm_data(run: RunDir, fmt: str, *, top_k: int | None, min_count: int,
              log: Callable[[str], None] | None) -> bytes | str:
    """The run's FSM in ``fmt``; a rendered drawing is checked first (Graphviz lays it out
    with a time limit: :func:`~stateseer.abstraction.automata.export.render`)."""
    fsm = load_run_fsm(run)[0]
    drawn = None
    if fmt in RENDERED:
        drawn = len(_fsm_drawn_edges(fsm, top_k, min_count))
        _check_drawable(drawn, fsm.n_states, fmt, top_k)
    data = export_data(fsm, fmt, top_k=top_k, min_count=min_count)
    note = drawing_note(fsm, fmt, top_k=top_k, min_count=min_count, drawn=drawn)
    if note and log:
        log(note)
    return data


def _dfa_data(run: RunDir, fmt: str, *, top_k: int | None, min_count: int,
              log: Callable[[str], None] | None) -> bytes | str:
    """The run's extracted DFA in ``fmt``: its transitions merged per state pair and the
    ``top_k`` heaviest kept per state in a drawing (dot/svg/png/pdf); graphs
    (graphml, node-link) come from its FSM view, json from the DFA itself."""
    fsm, d = load_run_fsm(run, dfa=True)
    spec = EXPORT_FORMATS[fmt]
    if not spec.drawn:
        return export_data(fsm if spec.kind == "graph" else d, fmt)
    edges = dfa_state_edges(d)
    kept = _keep_heaviest(edges, drawn_top_k(top_k), min_count)
    if fmt in RENDERED:
        _check_drawable(len(kept), d.n_states, fmt, top_k)
    text = dfa_to_dot(d, kept, tokens=fmt not in RENDERED)
    note = dfa_drawing_note(d, len(edges), len(kept), top_k=top_k, min_count=min_count)
    if note and log:
        log(note)
    return automata_export.render(text, fmt) if fmt in RENDERED else text


def _write(data: bytes | str, fmt: str, out: str | Path, *, overwrite: bool) -> Path:
    """Write ``data`` to ``out`` (``-``: stdout, text only) and return the path."""
    if str(out) == "-":
        if isinstance(data, bytes):
            if fmt in ("png", "pdf"):  # svg and graphml are text
                raise AbstractionError(f"{fmt} is binary; write it to a file with --out PATH")
            data = data.decode()
        sys.stdout.write(data)
        return Path("-")
    write_export(data, out, overwrite=overwrite)
    return Path(out)


def _fsm_drawn_edges(fsm: FSM, top_k: int | None, min_count: int = 1
                     ) -> list[dict[str, Any]]:
    """The state-to-state edges a drawing of ``fsm`` keeps (as its DOT writer does)."""
    k = drawn_top_k(top_k)
    if k is None:
        return [e for e in fsm.state_edges(1) if e["count"] >= min_count]
    return fsm.pruned_edges(top_k=k, min_count=min_count, top_tokens=1)


def _check_drawable(n_edges: int, n_states: int, fmt: str, top_k: int | None) -> None:
    """Refuse, before Graphviz runs, a rendered drawing (svg/png/pdf, or the html page's
    svg) of more than :data:`RENDERED_MAX_EDGES` edges, naming a ``--top-k`` that fits."""
    if (fmt not in RENDERED and fmt != "html") or n_edges <= RENDERED_MAX_EDGES:
        return
    k = min(RENDERED_MAX_EDGES // max(n_states, 1), (drawn_top_k(top_k) or n_edges) - 1)
    fix = f"pass --top-k {k} or " if k >= 1 else ""
    what = "the html page's drawing" if fmt == "html" else f"the {fmt} drawing"
    per = f"top {drawn_top_k(top_k)} per state" if drawn_top_k(top_k) else "every edge"
    raise AbstractionError(
        f"{what} would have {n_edges:,} edges ({per}), too many for Graphviz to lay out in "
        f"time (at most {RENDERED_MAX_EDGES:,}); {fix}export --format dot or json instead")


def dfa_state_edges(dfa: ExtractedDFA) -> list[dict[str, Any]]:
    """The DFA's transitions merged per (source, target) state pair.

    Parameters
    ----------
    dfa : ExtractedDFA

    Returns
    -------
    list of dict
        One per state pair, by source then target: ``source``, ``target``, ``count`` (the
        training steps its symbols took, summed) and ``tokens``, its ``(symbol, count)``
        pairs heaviest first (ties in alphabet order).
    """
    n, k = dfa.transitions.shape
    src = np.repeat(np.arange(n), k)
    sym = np.tile(np.arange(k), n)
    cnt = np.asarray(dfa.counts, np.int64).reshape(-1)
    pair = src * n + np.asarray(dfa.transitions, np.int64).reshape(-1)
    order = np.lexsort((sym, -cnt, pair))
    pair, sym, cnt = pair[order], sym[order], cnt[order]
    uniq, start = np.unique(pair, return_index=True)
    ends = np.append(start[1:], len(pair))
    edges = []
    for u, a, b in zip(uniq.tolist(), start.tolist(), ends.tolist(), strict=True):
        s, t = divmod(u, n)
        toks = [(dfa.alphabet[i], c) for i, c in zip(sym[a:b].tolist(), cnt[a:b].tolist(),
                                                      strict=True)]
        edges.append({"source": s, "target": t, "count": sum(c for _, c in toks),
                      "tokens": toks})
    return edges


def _keep_heaviest(edges: list[dict[str, Any]], top_k: int | None, min_count: int
                   ) -> list[dict[str, Any]]:
    """The ``top_k`` heaviest of :func:`dfa_state_edges` per state (by count, then by
    symbols; ``None``: all), less those seen fewer than ``min_count`` times when
    ``min_count > 1`` (a DFA's completed transitions were never seen)."""
    kept = [e for e in edges if min_count <= 1 or e["count"] >= min_count]
    if top_k is None:
        return kept
    kept.sort(key=lambda e: (e["source"], -e["count"], -len(e["tokens"]), e["target"]))
    out: list[dict[str, Any]] = []
    per: dict[int, int] = {}
    for e in kept:
        if per.get(e["source"], 0) < top_k:
            out.append(e)
            per[e["source"]] = per.get(e["source"], 0) + 1
    return out


def dfa_to_dot(dfa: ExtractedDFA, edges: list[dict[str, Any]], *, tokens: bool = True
               ) -> str:
    """DOT text of ``dfa`` drawing ``edges`` (:func:`dfa_state_edges`, maybe pruned).

    Parameters
    ----------
    dfa : ExtractedDFA
    edges : list of dict
    tokens : bool, default True
        Give each edge a ``tokens`` attribute with all its ``(symbol, count)`` pairs (the
        label names the :data:`LABEL_TOKENS` heaviest).

    Returns
    -------
    str
        AALpy's conventions, as :meth:`ExtractedDFA.to_dot`; pen width by count when the
        DFA has training counts.
    """
    top = max((e["count"] for e in edges), default=0)
    drawn = []
    for e in edges:
        attrs: dict[str, Any] = {"label": _edge_label(e["tokens"])}
        if top:
            attrs.update(penwidth=round(0.5 + 4.5 * e["count"] / top, 2), count=e["count"])
        if tokens:
            attrs["tokens"] = json.dumps(e["tokens"], ensure_ascii=False)
        drawn.append((f"s{e['source']}", f"s{e['target']}", attrs))
    return dot_document(dfa.dot_nodes(), drawn, initial=f"s{dfa.initial}", name="learnedModel",
                        graph={f"stateseer_{k}": v for k, v in dfa.built_by().items()})


def _edge_label(tokens: list[tuple[str, int]]) -> str:
    """``a,b,c (+N)``: the :data:`LABEL_TOKENS` heaviest symbols and how many more."""
    shown = ",".join(t for t, _ in tokens[:LABEL_TOKENS])
    more = len(tokens) - LABEL_TOKENS
    return f"{shown} (+{more})" if more > 0 else shown


def dfa_drawing_note(dfa: ExtractedDFA, total: int, drawn: int, *, top_k: int | None = None,
                     min_count: int = 1) -> str | None:
    """One line saying how many of the DFA's ``total`` state-to-state edges (its
    transitions merged per state pair) a drawing keeps, or None when it keeps them all."""
    if drawn >= total:
        return None
    k = drawn_top_k(top_k)
    by = "training count" if np.asarray(dfa.counts).any() else "symbols carried"
    kept = f"the top {k} per state by {by}" if k else "every edge"
    seen = f", seen at least {min_count} times" if min_count > 1 else ""
    return (f"drew {drawn:,} of the DFA's {total:,} state-to-state edges (its "
            f"{dfa.transitions.size:,} transitions merged per state pair; {kept}{seen}); "
            "--top-k 0 draws every edge")


def drawing_note(fsm: FSM, fmt: str, *, top_k: int | None = None, min_count: int = 1,
                 drawn: int | None = None) -> str | None:
    """One line saying how many of the FSM's state-to-state edges a drawing in ``fmt``
    leaves out, or None when it keeps them all (or ``fmt`` is no drawing); ``drawn``: the
    edges the drawing keeps, where the caller has counted them already."""
    spec = EXPORT_FORMATS.get(fmt)
    if spec is None or spec.kind != "automaton" or fmt == "json":
        return None
    k = drawn_top_k(top_k)
    total = len(fsm.state_edges(1))
    if drawn is None:
        drawn = len(_fsm_drawn_edges(fsm, top_k, min_count))
    if drawn >= total:
        return None
    return (f"drew {drawn:,} of the FSM's {total:,} state-to-state edges (the top {k} per "
            f"state{f', seen at least {min_count} times' if min_count > 1 else ''}); "
            "--top-k 0 draws every edge")
