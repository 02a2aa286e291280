"""Abstractors: map hidden states to a few abstract states, scikit-learn style.

This module is the index of the clustering; each piece lives in a module named for it:

``abstraction.abstractor``  :class:`BaseAbstractor` (shared parameters, validation, class
                           split, chunked assignment, save/load) and the registry
                           :data:`ABSTRACTORS`
``abstraction.features``    the spaces (``margin``, ``pca``) and chunked reading
``abstraction.kmeans``      :class:`KMeansAbstractor`  k-means (default; fast)
``abstraction.gmm``         :class:`GMMAbstractor`     Gaussian mixture (DeepSeer's choice)
``abstraction.grid``        :class:`GridAbstractor`    equal-frequency grid (DeepStellar's)

Fitting uses at most ``max_fit_samples`` rows (drawn with ``random_state``); prediction
runs in chunks of ``chunk_size`` rows, so memory-mapped traces of millions of steps are
abstracted without being loaded whole.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> H = np.concatenate([rng.normal(0, 1, (200, 8)), rng.normal(6, 1, (200, 8))])
>>> ab = KMeansAbstractor(n_states=2, features="pca", pca_components=3, random_state=0)
>>> len(np.unique(ab.fit(H).predict(H)))
2
"""

from __future__ import annotations

from .abstractor import (
    ABSTRACTORS,
    BaseAbstractor,
    abstractor_from_arrays,
    abstractor_to_arrays,
    make_abstractor,
    register_abstractor,
)
from .features import Projection, iter_rows, log_ratios
from .gmm import GMMAbstractor
from .grid import GridAbstractor
from .kmeans import KMeansAbstractor

__all__ = ["ABSTRACTORS", "BaseAbstractor", "GMMAbstractor", "GridAbstractor",
           "KMeansAbstractor", "Projection", "abstractor_from_arrays", "abstractor_to_arrays",
           "iter_rows", "log_ratios", "make_abstractor", "register_abstractor"]
