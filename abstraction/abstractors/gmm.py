"""Gaussian-mixture abstract states (DeepSeer: 20 components, diagonal covariances)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from sklearn.mixture import GaussianMixture

from stateseer.abstraction.abstractors.base import (
    BaseAbstractor,
    one_of,
    positive_int,
    register_abstractor,
)
from stateseer.abstraction.errors import AbstractionError
from stateseer.core.defaults import N_STATES

__all__ = ["GMMAbstractor"]


def _positive(v: Any) -> bool:
    """Constraint: a positive number."""
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and v > 0


@register_abstractor
class GMMAbstractor(BaseAbstractor):
    """Projection, then a Gaussian mixture.

    Parameters
    ----------
    n_states : int, default 40
    covariance_type : {'diag', 'full', 'tied', 'spherical'}, default 'diag'
    max_iter : int, default 100
    reg_covar : float, default 1e-4
    **params
        The shared parameters of :class:`~stateseer.abstraction.abstractors.base.BaseAbstractor`.

    Attributes
    ----------
    gmm_ : GaussianMixture
        Without a class split; ``gmms_`` (one per predicted class) with one.
    cluster_centers_ : ndarray of shape (n_states_, n_components)
        The component means.
    """

    kind = "gmm"
    _parameter_constraints: ClassVar[dict[str, Callable[[Any], bool]]] = {
        "covariance_type": one_of("diag", "full", "tied", "spherical"),
        "max_iter": positive_int, "reg_covar": _positive}

    def __init__(self, n_states: int = N_STATES, *, covariance_type: str = "diag",
                 max_iter: int = 100, reg_covar: float = 1e-4, **params: Any) -> None:
        super().__init__(n_states, **params)
        self.covariance_type = covariance_type
        self.max_iter = max_iter
        self.reg_covar = reg_covar

    def _fit_states(self, Z: np.ndarray, k: int, store: bool = True) -> GaussianMixture:
        try:
            gmm = GaussianMixture(n_components=k, covariance_type=self.covariance_type,
                                  max_iter=self.max_iter, reg_covar=self.reg_covar,
                                  random_state=self.random_state).fit(Z)
        except ValueError as exc:
            raise AbstractionError(
                f"the Gaussian mixture could not be fitted ({str(exc).splitlines()[0][:80]}); "
                "use --method kmeans or fewer states"
            ) from None
        if store:
            self.gmm_ = gmm
            self.cluster_centers_ = gmm.means_.astype(np.float32)
        return gmm

    def _n_fitted(self, model: GaussianMixture) -> int:
        return int(model.n_components)

    def _merge_split(self, models: list[GaussianMixture]) -> None:
        self.gmms_ = models
        self.cluster_centers_ = np.concatenate([m.means_ for m in models]).astype(np.float32)

    def _assign(self, Z: np.ndarray) -> np.ndarray:
        return self.gmm_.predict(Z)

    def _assign_class(self, Z: np.ndarray, j: int) -> np.ndarray:
        return self.gmms_[j].predict(Z)

    def _arrays(self) -> dict[str, np.ndarray]:
        gmms = self.gmms_ if self.split_by_prediction_ else [self.gmm_]
        out = {"n_gmms": np.array(len(gmms))}
        for i, g in enumerate(gmms):
            out[f"gmm{i}_weights"] = g.weights_
            out[f"gmm{i}_means"] = g.means_
            out[f"gmm{i}_covariances"] = g.covariances_
            out[f"gmm{i}_precisions_cholesky"] = g.precisions_cholesky_
        return out

    def _restore(self, d: Any) -> None:
        gmms = []
        for i in range(int(d["n_gmms"])):
            g = GaussianMixture(n_components=len(d[f"gmm{i}_weights"]),
                                covariance_type=self.covariance_type)
            g.weights_, g.means_ = d[f"gmm{i}_weights"], d[f"gmm{i}_means"]
            g.covariances_ = d[f"gmm{i}_covariances"]
            g.precisions_cholesky_ = d[f"gmm{i}_precisions_cholesky"]
            gmms.append(g)
        if self.split_by_prediction_:
            self.gmms_ = gmms
        else:
            self.gmm_ = gmms[0]
