"""k-means abstract states (the default; fast, and what most follow-ups of DeepSeer use).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> H = np.concatenate([rng.normal(0, 1, (200, 8)), rng.normal(6, 1, (200, 8))])
>>> ab = KMeansAbstractor(n_states=2, features="pca", pca_components=3).fit(H)
>>> len(np.unique(ab.predict(H))), ab.labels_.shape
(2, (400,))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from sklearn.cluster import KMeans

from stateseer.abstraction.abstractors.base import BaseAbstractor, positive_int, register_abstractor
from stateseer.abstraction.abstractors.features import nearest_center
from stateseer.core.defaults import N_STATES

__all__ = ["KMeansAbstractor"]


@register_abstractor
class KMeansAbstractor(BaseAbstractor):
    """Projection, then k-means.

    Parameters
    ----------
    n_states : int, default 40
    n_init : int, default 1
        k-means++ restarts (1, as scikit-learn's "auto" does for k-means++).
    **params
        The shared parameters of :class:`~stateseer.abstraction.abstractors.base.BaseAbstractor`
        (``features``, ``pca_components``, ``split_by_prediction``, ``random_state`` ...).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_states_, n_components)
        And those of :class:`~stateseer.abstraction.abstractors.base.BaseAbstractor`.
    """

    kind = "kmeans"
    _parameter_constraints: ClassVar[dict[str, Callable[[Any], bool]]] = {"n_init": positive_int}

    def __init__(self, n_states: int = N_STATES, *, n_init: int = 1, **params: Any) -> None:
        super().__init__(n_states, **params)
        self.n_init = n_init

    def _fit_states(self, Z: np.ndarray, k: int, store: bool = True) -> np.ndarray:
        km = KMeans(n_clusters=k, n_init=self.n_init, random_state=self.random_state).fit(Z)
        centers = km.cluster_centers_.astype(np.float32)
        if store:
            self.cluster_centers_ = centers
        return centers

    def _merge_split(self, models: list[np.ndarray]) -> None:
        self.cluster_centers_ = np.concatenate(models)

    def _assign(self, Z: np.ndarray) -> np.ndarray:
        return nearest_center(Z, self.cluster_centers_)

    def _assign_class(self, Z: np.ndarray, j: int) -> np.ndarray:
        lo, hi = self._class_slices[j], self._class_slices[j + 1]
        return nearest_center(Z, self.cluster_centers_[lo:hi])
