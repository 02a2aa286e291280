"""The one Graphviz DOT writer of stateseer, in AALpy's conventions.

Every automaton (the grammar :class:`~stateseer.core.automaton.DFA`, the extracted
DFA, the abstraction's FSM) is drawn by :func:`dot_document`: states are nodes
``s0, s1, ...``; an invisible ``__start0`` node with an arrow marks the initial state, as
AALpy's ``FileHandler`` writes it, so AALpy and Graphviz users feel at home.

Examples
--------
>>> print(dot_document([("s0", {"label": "s0", "shape": "doublecircle"})],
...                    [("s0", "s0", {"label": "a"})], initial="s0"), end="")
digraph automaton {
  __start0 [label="", shape=none, width=0, height=0];
  s0 [label="s0", shape=doublecircle];
  __start0 -> s0;
  s0 -> s0 [label="a"];
}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["dot_attrs", "dot_document", "dot_quote"]

START = "__start0"
BARE = frozenset({"shape", "style", "rankdir", "dir", "arrowhead", "arrowtail"})
_ID = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def dot_quote(text: Any) -> str:
    """A DOT double-quoted string; a newline in ``text`` becomes a ``\\n`` line break."""
    s = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def dot_attrs(attrs: Mapping[str, Any]) -> str:
    """``k1="v", k2=3`` — strings quoted (keywords such as ``shape=circle`` bare), numbers
    bare, ``None`` values left out."""
    parts = []
    for k, v in attrs.items():
        if v is None:
            continue
        is_number = isinstance(v, (int, float)) and not isinstance(v, bool)
        bare = is_number or (k in BARE and isinstance(v, str) and _ID.fullmatch(v))
        parts.append(f"{k}={v if bare else dot_quote(v)}")
    return ", ".join(parts)


def dot_document(
    nodes: Iterable[tuple[str, Mapping[str, Any]]],
    edges: Iterable[tuple[str, str, Mapping[str, Any]]],
    *,
    initial: str,
    name: str = "automaton",
    rankdir: str | None = None,
    graph: Mapping[str, Any] | None = None,
    node_defaults: Mapping[str, Any] | None = None,
    edge_defaults: Mapping[str, Any] | None = None,
) -> str:
    """DOT text of an automaton.

    Parameters
    ----------
    nodes : iterable of (str, dict)
        Node id and its attributes, in drawing order.
    edges : iterable of (str, str, dict)
        Source id, target id and the edge's attributes.
    initial : str
        Id of the initial node (``__start0`` points at it).
    name : str, default 'automaton'
        The graph's name.
    rankdir : str, optional
        E.g. ``'LR'``.
    graph, node_defaults, edge_defaults : dict, optional
        Graph attributes and the default node and edge attributes.

    Returns
    -------
    str
        Ends with a newline.
    """
    lines = [f"digraph {name} {{"]
    if rankdir:
        lines.append(f"  rankdir={rankdir};")
    for kind, attrs in (("graph", graph), ("node", node_defaults), ("edge", edge_defaults)):
        if attrs:
            lines.append(f"  {kind} [{dot_attrs(attrs)}];")
    lines.append(f'  {START} [label="", shape=none, width=0, height=0];')
    lines.extend(f"  {n} [{dot_attrs(a)}];" for n, a in nodes)
    lines.append(f"  {START} -> {initial};")
    for src, dst, a in edges:
        body = dot_attrs(a)
        lines.append(f"  {src} -> {dst} [{body}];" if body else f"  {src} -> {dst};")
    lines.append("}")
    return "\n".join(lines) + "\n"
