"""Exports of an FSM or an extracted DFA, and of traces: pure writers, one registry.

:data:`EXPORT_FORMATS` lists every format (name, kind, file suffix, writer); ``stateseer
export --format``, the run-level :func:`~stateseer.app.workflows.exports.export_run` and
the explorer's download buttons all read it, so a new format is one
:func:`register_format` call. Every writer takes a path (never silently replaced; written
atomically) or an open file, as networkx's writers do. Reading a run directory is
:mod:`stateseer.app.workflows.exports`'s job.

``json``      the ``stateseer.fsm`` v1 exchange format (DESIGN.md)
``dot``       Graphviz DOT with AALpy's conventions: an invisible ``__start0`` node with an
              arrow to the initial state; DFAs draw accepting states as double circles.
              FSM edges are aggregated per state pair (label: top tokens, pen width by
              count) and carry every (token, count) in a ``tokens`` attribute, so the file
              loads back without loss (:func:`read_dot`) when drawn with every edge
              (``top_k=0``); by default a drawing keeps :data:`RENDERED_TOP_K` per state.
``svg``/``png``/``pdf``  rendered with the ``graphviz`` package (needs the ``dot`` binary)
``graphml``   via networkx (scalar attributes only)
``node-link`` networkx's node-link JSON, as ``networkx.node_link_graph`` reads it with
              its defaults (``"edges"``)
``traces-csv`` one row per input: ``id, split, label, prediction, tokens, states,
              simulated_states`` (JSON lists; states start with the initial state)
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from stateseer.abstraction.automata.fsm import FSM
from stateseer.abstraction.automata.io import write_output
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.csvsafe import escape_row

if TYPE_CHECKING:
    from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA

__all__ = ["EXPORT_FORMATS", "RENDERED_TOP_K", "RENDER_SECONDS", "ExportFormat", "drawn_top_k",
           "export_data", "fsm_to_dot", "read_dot", "register_format", "render",
           "write_automaton", "write_export", "write_traces_csv"]

RENDERED_TOP_K = 4
"""Edges kept per state in a drawn (dot/svg/png/pdf) FSM unless ``top_k`` says otherwise
(``top_k=0``: every edge). A many-class run holds 100k transitions, which Graphviz cannot
lay out in minutes; the explorer prunes the same way."""


@dataclass(frozen=True)
class ExportFormat:
    """One export format.

    Parameters
    ----------
    name : str
        The ``--format`` name.
    kind : {'automaton', 'graph', 'traces'}
        ``automaton``: written from the FSM or the extracted DFA itself; ``graph``: from
        its networkx view (a DFA as an FSM); ``traces``: one row per input, not a graph.
    suffix : str
        File name suffix (``.dot``).
    binary : bool
        The writer returns bytes.
    drawn : bool
        A drawing: FSM edges are pruned (``top_k``, ``min_count``, ``self_loops``).
    write : callable
        ``automaton``/``graph``: ``write(automaton, top_k=, min_count=, self_loops=)``;
        ``traces``: ``write(rows)``. Returns ``str`` or ``bytes``.
    label : str
        The explorer's button label; empty: no download button.
    """

    name: str
    kind: str
    suffix: str
    binary: bool
    drawn: bool
    write: Callable[..., bytes | str]
    label: str = ""


#: Every export format by name, in the order ``--format`` lists them.
EXPORT_FORMATS: dict[str, ExportFormat] = {}


def register_format(fmt: ExportFormat) -> ExportFormat:
    """Add ``fmt`` to :data:`EXPORT_FORMATS` (its name must be new)."""
    if fmt.name in EXPORT_FORMATS or fmt.kind not in ("automaton", "graph", "traces"):
        raise AbstractionError(f"cannot register export format {fmt.name!r}: the name is "
                               "taken or the kind is not automaton, graph or traces")
    EXPORT_FORMATS[fmt.name] = fmt
    return fmt


def fsm_to_dot(fsm: FSM, *, top_k: int | None = None, min_count: int = 1,
               self_loops: bool = True, label_tokens: int = 3, name: str = "fsm") -> str:
    """DOT text for ``fsm``: :meth:`FSM.to_dot` (see there for the parameters)."""
    return fsm.to_dot(name, top_k=top_k, min_count=min_count, self_loops=self_loops,
                      label_tokens=label_tokens)


_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\]\s]+)')
_NODE = re.compile(r"^\s*s(\d+)\s*\[(.*)\];\s*$")
_EDGE = re.compile(r"^\s*s(\d+)\s*->\s*s(\d+)\s*\[(.*)\];\s*$")
_START = re.compile(r"^\s*__start0\s*->\s*s(\d+)\s*;")
_GRAPH = re.compile(r"^\s*graph\s*\[(.*)\];\s*$")


def _attrs(text: str) -> dict[str, str]:
    out = {}
    for k, v in _ATTR.findall(text):
        if v.startswith('"'):
            v = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v[1:-1])
        out[k] = v
    return out


def read_dot(source: Any, classes: Sequence[str] | None = None) -> FSM:
    """Load an FSM written by :func:`fsm_to_dot` (with all edges) back.

    Parameters
    ----------
    source : str, os.PathLike or file
        A path to a ``.dot`` file, an open file (text or binary), or the DOT text itself
        (networkx's convention: a path or a file).
    classes : list of str, optional
        Class names, when the DOT text does not carry them.

    Raises
    ------
    AbstractionError
        The file is missing, or the text is not a stateseer DOT export.
    """
    text = _dot_text(source)
    nodes: dict[int, dict[str, str]] = {}
    triples: list[tuple[int, str, int, int]] = []
    initial = 0
    graph: dict[str, str] = {}
    for line in text.splitlines():
        if m := _GRAPH.match(line):
            graph.update(_attrs(m.group(1)))
        elif m := _START.match(line):
            initial = int(m.group(1))
        elif m := _EDGE.match(line):
            a = _attrs(m.group(3))
            if "tokens" not in a:
                raise AbstractionError("DOT edge without a 'tokens' attribute: not a "
                                       "stateseer FSM export")
            for tok, cnt in json.loads(a["tokens"]):
                triples.append((int(m.group(1)), tok, int(m.group(2)), int(cnt)))
        elif m := _NODE.match(line):
            nodes[int(m.group(1))] = _attrs(m.group(2))
    if not nodes:
        raise AbstractionError("no states found in the DOT text: not a stateseer FSM export")
    n = max(nodes) + 1
    try:
        pred = np.array([json.loads(nodes[s]["prediction"]) for s in range(n)])
        visits = np.array([int(nodes[s]["visits"]) for s in range(n)])
        labels = [nodes[s].get("class_label") for s in range(n)]
        coords = (np.array([json.loads(nodes[s]["coords"]) for s in range(n)])
                  if all("coords" in nodes[s] for s in range(n)) else None)
    except (KeyError, ValueError) as exc:
        raise AbstractionError(f"DOT node attributes are incomplete ({exc})") from None
    if classes is None and "stateseer_classes" in graph:
        classes = json.loads(graph["stateseer_classes"])
    if classes is None:
        by_index: dict[int, str] = {}
        for s in range(n):
            by_index.setdefault(int(pred[s].argmax()), labels[s])
        classes = [by_index.get(i, f"class{i}") for i in range(pred.shape[1])]
    alphabet = sorted({t for _, t, _, _ in triples})
    index = {t: i for i, t in enumerate(alphabet)}
    src = np.array([a for a, _, _, _ in triples], np.int64)
    tok = np.array([index[t] for _, t, _, _ in triples], np.int64)
    dst = np.array([b for _, _, b, _ in triples], np.int64)
    cnt = np.array([c for _, _, _, c in triples], np.int64)
    order = np.lexsort((dst, -cnt, tok, src))
    return FSM(classes=list(classes), alphabet=alphabet, visits=visits, prediction=pred,
               source=src[order], token=tok[order], target=dst[order], count=cnt[order],
               coords=coords,
               fallback=graph.get("stateseer_fallback",
                                  "displacement" if coords is not None else "stay"),
               bandwidth=float(graph.get("stateseer_bandwidth", 0.5)), initial=initial)


def _dot_text(source: Any) -> str:
    """The DOT text of a path, an open file or the text itself."""
    if hasattr(source, "read"):
        data = source.read()
        return data.decode("utf-8") if isinstance(data, bytes) else data
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "{" not in source):
        path = Path(source)
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AbstractionError(f"cannot read {path} ({exc.__class__.__name__}); pass a "
                                   "stateseer DOT export's path, file or text") from None
    return str(source)


RENDER_SECONDS = 60.0
"""Graphviz is stopped after this long (a layout too dense to finish), and the render
refused in one line."""


def render(dot_text: str, fmt: str, *, seconds: float = RENDER_SECONDS) -> bytes:
    """Render DOT to ``svg``, ``png`` or ``pdf`` bytes with Graphviz's ``dot``, within
    ``seconds``.

    Raises
    ------
    AbstractionError
        ``dot`` is not installed, fails, or runs longer than ``seconds`` (it is stopped).
    """
    import shutil
    import subprocess

    exe = shutil.which("dot")
    if exe is None:
        raise AbstractionError(
            "the Graphviz `dot` program is not installed; install it (e.g. `apt-get install "
            "graphviz`) or export --format dot and render elsewhere")
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=seconds, check=False)
    except subprocess.TimeoutExpired:
        raise AbstractionError(
            f"Graphviz did not lay out the {fmt} drawing in {seconds:g} s and was stopped; "
            "pass a smaller --top-k, or export --format dot and render it elsewhere") from None
    if done.returncode != 0:
        msg = done.stderr.decode(errors="replace").strip().splitlines()
        raise AbstractionError(f"Graphviz failed to render ({msg[0] if msg else done.returncode})")
    return done.stdout


def write_traces_csv(out: str | Path | IO[str], rows: Sequence[dict[str, Any]], *,
                     overwrite: bool = False) -> None:
    """Write traces CSV rows (keys as in DESIGN.md) to a path or an open text file; a cell
    a spreadsheet would run as a formula is escaped
    (:func:`~stateseer.core.csvsafe.escape_cell`)."""
    cols = ["id", "split", "label", "prediction", "tokens", "states", "simulated_states"]
    if any("simulated_prediction" in r for r in rows):  # a probabilistic FSM (DESIGN.md)
        cols.append("simulated_prediction")
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    w.writeheader()
    for r in rows:  # class names and ids come from the user's data: escaped
        w.writerow(escape_row({**r, "tokens": json.dumps(r["tokens"], ensure_ascii=False),
                               "states": json.dumps(r["states"]),
                               "simulated_states": json.dumps(r["simulated_states"])}))
    write_output(buf.getvalue(), out, overwrite=overwrite)


def write_export(data: bytes | str, out: str | Path | IO, *, overwrite: bool = False) -> None:
    """Write ``data`` to a path (refusing to overwrite unless asked) or an open file."""
    write_output(data, out, overwrite=overwrite)


def _dot(automaton: FSM | ExtractedDFA, *, top_k: int | None = None, min_count: int = 1,
         self_loops: bool = True) -> str:
    if not isinstance(automaton, FSM):
        return automaton.to_dot()
    return fsm_to_dot(automaton, top_k=drawn_top_k(top_k), min_count=min_count,
                      self_loops=self_loops)


def drawn_top_k(top_k: int | None) -> int | None:
    """The edges per state a drawing keeps: :data:`RENDERED_TOP_K` by default, every one
    for ``0``.

    >>> drawn_top_k(None), drawn_top_k(0), drawn_top_k(2)
    (4, None, 2)
    """
    if top_k is None:
        return RENDERED_TOP_K
    return None if top_k == 0 else top_k


def _json(automaton: FSM | ExtractedDFA, **_: Any) -> str:
    return json.dumps(automaton.to_dict(), indent=1, ensure_ascii=False)


def _rendered(fmt: str) -> Callable[..., bytes]:
    return lambda automaton, **kw: render(_dot(automaton, **kw), fmt)


def _graphml(automaton: FSM | ExtractedDFA, **_: Any) -> bytes:
    import networkx as nx

    buf = io.BytesIO()
    nx.write_graphml(automaton.to_networkx(), buf)
    return buf.getvalue()


def _node_link(automaton: FSM | ExtractedDFA, **_: Any) -> str:
    import networkx as nx

    # the key networkx >= 3.4 reads by default (node_link_graph(data) with no options)
    return json.dumps(nx.node_link_data(automaton.to_networkx(), edges="edges"),
                      ensure_ascii=False)


def _traces_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    write_traces_csv(buf, rows)
    return buf.getvalue()


for _fmt in (
    ExportFormat("json", "automaton", ".json", False, False, _json, "JSON"),
    ExportFormat("dot", "automaton", ".dot", False, True, _dot, "DOT"),
    ExportFormat("svg", "automaton", ".svg", True, True, _rendered("svg"), "SVG"),
    ExportFormat("png", "automaton", ".png", True, True, _rendered("png"), "PNG"),
    ExportFormat("pdf", "automaton", ".pdf", True, True, _rendered("pdf")),
    ExportFormat("graphml", "graph", ".graphml", True, False, _graphml),
    ExportFormat("node-link", "graph", ".json", False, False, _node_link),
    ExportFormat("traces-csv", "traces", ".csv", False, False, _traces_csv),
):
    register_format(_fmt)


def export_data(automaton: FSM | ExtractedDFA, fmt: str, *, top_k: int | None = None,
                min_count: int = 1, self_loops: bool = True) -> bytes | str:
    """The export of an FSM or an extracted DFA in ``fmt`` (an automaton or graph format
    of :data:`EXPORT_FORMATS`).

    Parameters
    ----------
    automaton : FSM or ExtractedDFA
    fmt : str
        ``json``, ``dot``, ``svg``, ``png``, ``pdf``, ``graphml``, ``node-link`` ...
    top_k : int, optional
        FSM edges kept per state in a drawing (dot/svg/png/pdf): :data:`RENDERED_TOP_K` by
        default, ``0`` for every edge.
    min_count : int
        FSM edges seen fewer times are left out of a drawing.
    self_loops : bool
        Draw an FSM's self-loops.

    Returns
    -------
    str or bytes
        ``bytes`` for the binary formats (``svg``/``png``/``pdf``/``graphml``).
    """
    spec = EXPORT_FORMATS.get(fmt)
    if spec is None or spec.kind == "traces":
        names = [f.name for f in EXPORT_FORMATS.values() if f.kind != "traces"]
        raise AbstractionError(f"unknown automaton format {fmt!r}; choose one of: "
                               f"{', '.join(names)}")
    return spec.write(automaton, top_k=top_k, min_count=min_count, self_loops=self_loops)


def write_automaton(automaton: FSM | ExtractedDFA, fmt: str, out: str | Path | IO, *,
                    top_k: int | None = None, min_count: int = 1,
                    overwrite: bool = False) -> None:
    """Write :func:`export_data` to a path (refusing to overwrite unless asked) or an open
    file (text or binary, as the format is)."""
    write_output(export_data(automaton, fmt, top_k=top_k, min_count=min_count), out,
                 overwrite=overwrite)
