"""State diagram: dash-cytoscape elements and stylesheet for an FSM.

Nodes are states (size by visits, colour by prediction mix), edges are state-to-state
transitions (width by count, top tokens in the data for hover). Positions are computed
once per FSM (a seeded spring layout over the transition graph) so the diagram does not
move between interactions; other layouts (dagre, breadthfirst, cose) can be chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from abstraction.fsm import FSM

from .colors import mix_color, text_color_on

__all__ = ["LAYOUTS", "diagram_elements", "fixed_positions", "stylesheet"]

LAYOUTS = ("preset", "dagre", "breadthfirst", "cose")


def fixed_positions(fsm: FSM) -> dict[int, tuple[float, float]]:
    """Stable node positions: a seeded spring layout of the pruned transition graph,
    started from the states' centroids (compute once per FSM)."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(fsm.n_states))
    for e in fsm.pruned_edges(top_k=3, self_loops=False):
        w = float(np.log1p(e["count"]))
        if g.has_edge(e["source"], e["target"]):
            g[e["source"]][e["target"]]["weight"] += w
        else:
            g.add_edge(e["source"], e["target"], weight=w)
    # Seed the layout with the states' centroids (first two PCA coordinates) so similar
    # states start close, then let the transition graph pull connected states together.
    if fsm.coords is not None and fsm.coords.shape[1] >= 2:
        xy = fsm.coords - fsm.coords.mean(0)
        # rotate onto the centroids' two principal axes (the main one horizontal), then
        # stretch each axis to fill the frame
        _, _, vt = np.linalg.svd(xy, full_matrices=False)
        xy = xy @ vt[:2].T
        if xy.shape[1] < 2:
            xy = np.column_stack([xy, np.zeros(len(xy))])
        if fsm.n_states > 2 and fsm.prediction.shape[1] == 2 and np.corrcoef(
                xy[:, 0], fsm.prediction[:, 1])[0, 1] < 0:
            xy[:, 0] = -xy[:, 0]  # class 1 (e.g. fresh) on the right
        xy = xy / np.maximum(np.abs(xy).max(0), 1e-9)
        init = {s: tuple(xy[s]) for s in range(fsm.n_states)}
    else:
        init = None
    pos = nx.spring_layout(g, pos=init, seed=0, weight="weight", iterations=200,
                           k=1.6 / np.sqrt(max(fsm.n_states, 1)))
    xy = np.array([pos[s] for s in range(fsm.n_states)], dtype=float)
    xy -= xy.mean(0)
    xy /= np.maximum(np.abs(xy).max(0), 1e-9)  # fill the frame along both axes
    return {s: (float(x) * 560, float(y) * 300) for s, (x, y) in enumerate(xy)}


def forcing_colors(per_state: dict[str, dict[str, float]], lo: float = 0.8
                   ) -> dict[int, str]:
    """Node colours by state-forcing agreement: orange (``lo`` or less) to green (1.0);
    states without a figure stay grey.

    >>> forcing_colors({"1": {"agreement": 1.0}, "2": {"agreement": 0.8}})
    {1: '#1b9e77', 2: '#d95f02'}
    """
    low, high = np.array([217, 95, 2]), np.array([27, 158, 119])
    out = {}
    for key, v in per_state.items():
        t = float(np.clip((v["agreement"] - lo) / (1.0 - lo), 0.0, 1.0))
        rgb = low + (high - low) * t
        out[int(key)] = "#" + "".join(f"{round(float(c)):02x}" for c in rgb)
    return out


def diagram_elements(
    fsm: FSM,
    *,
    top_k: int = 3,
    min_count: int = 1,
    self_loops: bool = False,
    path: Sequence[int] | None = None,
    compare_path: Sequence[int] | None = None,
    selected_state: int | None = None,
    hover_state: int | None = None,
    positions: dict[int, tuple[float, float]] | None = None,
    colors: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """Cytoscape elements for ``fsm``.

    Parameters
    ----------
    top_k, min_count, self_loops
        Edge pruning for display (per source state).
    path : sequence of int, optional
        A trace's states (initial first): its nodes and edges get the class ``path``
        (edges on the path are drawn even when pruned).
    selected_state, hover_state : int, optional
        Nodes marked ``selected-state`` / ``hover-state``.
    positions : dict, optional
        Node positions (default: :func:`fixed_positions`, computed now).
    colors : dict of int to str, optional
        Node colours overriding the prediction mix (e.g. :func:`forcing_colors`).
    """
    pos = positions if positions is not None else fixed_positions(fsm)
    visits = fsm.visits.astype(float)
    vmax = max(visits.max(initial=1.0), 1.0)
    on_path = set(path or [])
    path_edges = {(a, b) for a, b in zip(path or [], (path or [])[1:], strict=False) if a != b}
    # a path from a compared run may hold states with no match here (ids ≥ n_states)
    cmp_edges = {(a, b) for a, b in zip(compare_path or [], (compare_path or [])[1:],
                                        strict=False)
                 if a != b and 0 <= a < fsm.n_states and 0 <= b < fsm.n_states}
    els: list[dict[str, Any]] = []
    for s in range(fsm.n_states):
        color = (colors or {}).get(s) or mix_color(fsm.prediction[s])
        label = fsm.classes[int(fsm.labels[s])]
        classes = ["state"]
        if s == fsm.initial:
            classes.append("initial")
        if s in on_path:
            classes.append("path")
        if compare_path and s in set(compare_path):
            classes.append("compare")
        if s == selected_state:
            classes.append("selected-state")
        if s == hover_state:
            classes.append("hover-state")
        els.append({
            "data": {"id": f"s{s}", "state": s, "label": "start" if s == fsm.initial else str(s),
                     "visits": int(visits[s]), "class_label": label, "color": color,
                     "text_color": text_color_on(color),
                     "size": round(22 + 48 * float(np.sqrt(visits[s] / vmax)), 1),
                     "prediction": [round(float(p), 3) for p in fsm.prediction[s]]},
            "position": {"x": pos[s][0], "y": pos[s][1]},
            "classes": " ".join(classes),
        })
    edges = fsm.pruned_edges(top_k=top_k, min_count=min_count, self_loops=self_loops)
    shown = {(e["source"], e["target"]) for e in edges}
    extra = [(a, b) for a, b in sorted(path_edges | cmp_edges) if (a, b) not in shown]
    if extra:
        lookup = {(e["source"], e["target"]): e for e in fsm.state_edges()}
        edges = edges + [lookup[k] if k in lookup else
                         {"source": k[0], "target": k[1], "count": 0, "probability": 0.0,
                          "top_tokens": [], "n_tokens": 0} for k in extra]
    cmax = max((e["count"] for e in edges), default=1) or 1
    for e in edges:
        key = (e["source"], e["target"])
        classes = ["transition"]
        if key in path_edges:
            classes.append("path")
        if key in cmp_edges:
            classes.append("compare")
        if e["source"] == e["target"]:
            classes.append("loop")
        tokens = ", ".join(f"{t} ({c})" for t, c in e["top_tokens"][:8])
        els.append({
            "data": {"id": f"e{e['source']}-{e['target']}", "source": f"s{e['source']}",
                     "target": f"s{e['target']}", "count": int(e["count"]),
                     "probability": round(float(e["probability"]), 3),
                     "width": round(1 + 7 * e["count"] / cmax, 2), "tokens": tokens,
                     "n_tokens": int(e["n_tokens"])},
            "classes": " ".join(classes),
        })
    return els


def stylesheet(selected: int | None = None, hover: int | None = None) -> list[dict[str, Any]]:
    """Cytoscape stylesheet: sizes, colours, path highlights, and the ``selected`` and
    ``hover`` states (styled by id, so a selection restyles the diagram without
    rebuilding its elements)."""
    extra = []
    if selected is not None:
        extra.append({"selector": f"#s{int(selected)}",
                      "style": {"border-width": 6, "border-color": "#111"}})
    if hover is not None:
        extra.append({"selector": f"#s{int(hover)}",
                      "style": {"overlay-color": "#ff9f1c", "overlay-opacity": 0.35,
                                "overlay-padding": 6}})
    return _BASE_STYLE + extra


_BASE_STYLE: list[dict[str, Any]] = [
        {"selector": "node", "style": {
            "background-color": "data(color)", "width": "data(size)", "height": "data(size)",
            "label": "data(label)", "color": "data(text_color)", "font-size": 11,
            "text-valign": "center", "text-halign": "center", "border-width": 1,
            "border-color": "#666"}},
        {"selector": "node.initial", "style": {"shape": "diamond", "border-width": 2,
                                               "border-color": "#222"}},
        {"selector": "edge", "style": {
            "width": "data(width)", "line-color": "#b5b5b5", "target-arrow-color": "#b5b5b5",
            "target-arrow-shape": "triangle", "curve-style": "bezier", "opacity": 0.75,
            "arrow-scale": 0.8}},
        {"selector": "edge.loop", "style": {"loop-direction": "0deg", "loop-sweep": "40deg"}},
        {"selector": "node.path", "style": {"border-width": 4, "border-color": "#ff9f1c"}},
        {"selector": "edge.path", "style": {"line-color": "#ff9f1c",
                                            "target-arrow-color": "#ff9f1c", "opacity": 1,
                                            "z-index": 9, "width": 4}},
        {"selector": "node.compare", "style": {"border-style": "dashed",
                                               "border-color": "#7b2cbf", "border-width": 4}},
        {"selector": "edge.compare", "style": {"line-color": "#7b2cbf", "line-style": "dashed",
                                               "target-arrow-color": "#7b2cbf", "opacity": 1,
                                               "width": 3}},
        {"selector": "node.selected-state", "style": {"border-width": 6,
                                                      "border-color": "#111"}},
        {"selector": "node.hover-state", "style": {"overlay-color": "#ff9f1c",
                                                   "overlay-opacity": 0.35,
                                                   "overlay-padding": 6}},
        {"selector": "edge:selected", "style": {"line-color": "#333",
                                                "target-arrow-color": "#333",
                                                "label": "data(tokens)", "font-size": 9,
                                                "text-wrap": "wrap", "text-max-width": 160,
                                                "text-background-color": "#fff",
                                                "text-background-opacity": 0.9}},
]
