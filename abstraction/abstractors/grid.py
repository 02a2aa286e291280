"""Grid abstract states: equal-frequency cells over the top components (DeepStellar)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from stateseer.abstraction.abstractors.base import BaseAbstractor, positive_int, register_abstractor
from stateseer.core.defaults import N_STATES

__all__ = ["GridAbstractor"]


def _cells(Z: np.ndarray, grid: dict[str, Any]) -> np.ndarray:
    """Cell index of every row of ``Z`` (row-major over the grid's components)."""
    cell = np.zeros(len(Z), dtype=np.int64)
    for j, e in enumerate(grid["edges"]):
        cell = cell * grid["bins"] + np.searchsorted(e, Z[:, j])
    return cell


@register_abstractor
class GridAbstractor(BaseAbstractor):
    """Equal-frequency grid over the top ``grid_dims`` components.

    Each of the ``grid_dims`` leading components is cut into ``b`` intervals at the
    sample's quantiles, with ``b ** grid_dims <= n_states``; a state is a grid cell. With a
    class split every predicted class gets its own grid.

    Parameters
    ----------
    n_states : int, default 40
    grid_dims : int, default 2
    **params
        The shared parameters of :class:`~stateseer.abstraction.abstractors.base.BaseAbstractor`.

    Attributes
    ----------
    grids_ : list of dict
        ``edges`` (inner interval edges per component), ``bins`` and ``centers`` per grid.
    edges_ : list of ndarray
    bins_ : int
    """

    kind = "grid"
    _parameter_constraints: ClassVar[dict[str, Callable[[Any], bool]]] = {"grid_dims": positive_int}

    def __init__(self, n_states: int = N_STATES, *, grid_dims: int = 2, **params: Any) -> None:
        super().__init__(n_states, **params)
        self.grid_dims = grid_dims

    def _fit_states(self, Z: np.ndarray, k: int, store: bool = True) -> dict[str, Any]:
        dims = int(min(self.grid_dims, Z.shape[1]))
        bins = max(1, int(np.floor(k ** (1.0 / dims) + 1e-9)))
        qs = np.linspace(0, 1, bins + 1)[1:-1]
        grid = {"edges": [np.quantile(Z[:, j], qs) for j in range(dims)], "bins": bins}
        cells = _cells(Z, grid)
        centers = np.zeros((bins**dims, Z.shape[1]), np.float32)
        for s in np.unique(cells):
            centers[s] = Z[cells == s].mean(0)
        grid["centers"] = centers
        if store:
            self.grids_ = [grid]
            self.edges_, self.bins_ = grid["edges"], bins
            self.cluster_centers_ = centers
        return grid

    def _n_fitted(self, model: dict[str, Any]) -> int:
        return len(model["centers"])

    def _merge_split(self, models: list[dict[str, Any]]) -> None:
        self.grids_ = models
        self.cluster_centers_ = np.concatenate([m["centers"] for m in models])

    def _assign(self, Z: np.ndarray) -> np.ndarray:
        return _cells(Z, self.grids_[0])

    def _assign_class(self, Z: np.ndarray, j: int) -> np.ndarray:
        return _cells(Z, self.grids_[j])

    def _arrays(self) -> dict[str, np.ndarray]:
        out = {"n_grids": np.array(len(self.grids_))}
        for j, g in enumerate(self.grids_):
            out[f"grid{j}_bins"] = np.array(g["bins"])
            out[f"grid{j}_centers"] = g["centers"]
            out[f"grid{j}_n_edges"] = np.array(len(g["edges"]))
            for i, e in enumerate(g["edges"]):
                out[f"grid{j}_edges{i}"] = e
        return out

    def _restore(self, d: Any) -> None:
        self.grids_ = [{"bins": int(d[f"grid{j}_bins"]), "centers": d[f"grid{j}_centers"],
                        "edges": [d[f"grid{j}_edges{i}"]
                                  for i in range(int(d[f"grid{j}_n_edges"]))]}
                       for j in range(int(d["n_grids"]))]
        self.edges_, self.bins_ = self.grids_[0]["edges"], self.grids_[0]["bins"]
