"""Where each state of an FSM is drawn: stable 2-D positions and node sizes.

The explorer's default diagram (``preset``), the notebooks and the exports use the same
picture: a seeded spring layout of the pruned transition graph, started from the states'
centroids, turned onto its principal axes (class 1 on the right), stretched to a frame
and with overlapping nodes pushed apart at their drawn sizes. Pure numpy/scipy/networkx:
compute once per FSM.

Examples
--------
>>> import numpy as np
>>> from types import SimpleNamespace
>>> fsm = SimpleNamespace(visits=np.array([10, 10, 10]), prediction=np.eye(3)[:, :2])
>>> xy = fill_frame(np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]), fsm)
>>> bool(np.linalg.norm(xy[0] - xy[1]) >= node_size(fsm.visits)[0] + 7.9)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from stateseer.abstraction.automata.fsm import FSM

__all__ = ["FRAME", "fill_frame", "fixed_positions", "node_size"]


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
    xy = fill_frame(xy, fsm)
    return {s: (float(x), float(y)) for s, (x, y) in enumerate(xy)}


#: half the width and height of the frame the fixed layout fills (cytoscape then fits it)
FRAME = (560.0, 300.0)


def node_size(visits: np.ndarray) -> np.ndarray:
    """Diameter of each state's node in layout units, shape (n_states,): 22 to 70 by the
    square root of its share of the most visited state's visits."""
    visits = np.asarray(visits, dtype=float)
    vmax = max(visits.max(initial=1.0), 1.0)
    return np.round(22 + 48 * np.sqrt(visits / vmax), 1)


def fill_frame(xy: np.ndarray, fsm: FSM, gap: float = 8.0, iterations: int = 300
                ) -> np.ndarray:
    """Spring-layout positions (n_states, 2) to the frame: turned onto their own principal
    axes (a layout that came out as a diagonal band fills the frame instead of a strip of
    it), class 1 on the right, each axis stretched to the frame, then nodes that overlap
    pushed apart until every pair is ``gap`` apart at their drawn sizes (so no state, the
    start diamond included, hides behind another). The frame is :data:`FRAME`, larger when
    the nodes would cover more than a third of it."""
    xy = xy - xy.mean(0)
    if len(xy) > 1 and not np.ptp(xy, axis=0).max() > 0:  # all in one point: a sunflower
        k = np.arange(len(xy)) + 0.5
        xy = np.sqrt(k)[:, None] * np.column_stack([np.cos(2.39996 * k), np.sin(2.39996 * k)])
        xy -= xy.mean(0)
    if len(xy) > 2 and np.ptp(xy, axis=0).max() > 0:
        _, _, vt = np.linalg.svd(xy, full_matrices=False)
        # each axis's sign fixed (its largest loading positive): the same picture from
        # any LAPACK
        vt = vt * np.where(vt[np.arange(len(vt)), np.abs(vt).argmax(1)] < 0, -1.0, 1.0)[:, None]
        xy = xy @ vt.T
        if fsm.prediction.shape[1] == 2 and np.ptp(fsm.prediction[:, 1]) > 0 and \
                np.corrcoef(xy[:, 0], fsm.prediction[:, 1])[0, 1] < 0:
            xy[:, 0] = -xy[:, 0]
    r = node_size(fsm.visits) / 2
    # the frame grows with the nodes' area (cytoscape fits whatever it gets to the view):
    # many states must have room to part, or the loop below cannot part them
    half = np.array(FRAME)
    half = half * max(1.0, float(np.sqrt(3.0 * np.pi * (r ** 2).sum() / (4 * half.prod()))))
    xy = xy / np.maximum(np.abs(xy).max(0), 1e-9) * half
    from scipy.spatial import cKDTree

    reach = 2 * float(r.max()) + gap
    lo, hi = -half + r[:, None], half - r[:, None]
    xy = np.clip(xy, lo, hi)  # whole nodes inside the frame, even with nothing to part
    for _ in range(iterations):  # over iterations; vectorised over the close pairs
        pairs = cKDTree(xy).query_pairs(reach, output_type="ndarray")
        if not len(pairs):
            break
        pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]  # a fixed order: fixed sums
        a, b = pairs[:, 0], pairs[:, 1]
        d = xy[a] - xy[b]
        dist = np.sqrt((d ** 2).sum(1))
        need = r[a] + r[b] + gap
        over = dist < need
        if not over.any():
            break
        a, b, d, dist, need = a[over], b[over], d[over], dist[over], need[over]
        same = dist == 0  # coincident states part along a direction fixed per pair
        angle = (a[same] * 0.618034 + b[same] * 0.381966) * 2 * np.pi
        d[same] = np.column_stack([np.cos(angle), np.sin(angle)])
        # and states on one line are nudged off it, by a fixed pattern
        if not np.ptp(xy, axis=0).min() > 0:
            d = d + 1e-3 * np.column_stack([np.sin(a + 2.0 * b), np.cos(3.0 * a + b)])
        dist = np.maximum(dist, 1e-9)
        move = d * ((need - dist) / (2 * dist))[:, None]
        n = len(xy)
        xy = xy + np.stack([np.bincount(a, move[:, k], n) - np.bincount(b, move[:, k], n)
                            for k in range(2)], axis=1)
        xy = np.clip(xy, lo, hi)
    return xy
