"""Abstractors: map hidden states to a few abstract states, scikit-learn style.

All abstractors project the hidden states with PCA (fitted on a sample), then cluster:

``KMeansAbstractor``   k-means (default; fast, and what most follow-ups of DeepSeer use)
``GMMAbstractor``      Gaussian mixture with diagonal covariances (DeepSeer's choice)
``GridAbstractor``     equal-frequency grid over the top PCA components (DeepStellar's)

Fitting uses at most ``max_fit_samples`` rows (drawn with ``random_state``); prediction
runs in chunks of ``chunk_size`` rows, so memory-mapped traces of millions of steps are
abstracted without being loaded whole.

Two spaces are offered (``features``): ``pca`` — PCA of the hidden state, DeepSeer's —
and ``margin`` — the classifier's own logit differences, read exactly from the recorded
intermediate predictions, plus the main direction of the hidden state orthogonal to the
head, both standardised. The margin space keeps the sentiment "level" an RNN accumulates
as one axis, which makes the FSM's transitions far more predictable from tokens alone.

If the intermediate predictions are passed to ``fit``/``predict`` (``proba``) and
``split_by_prediction`` is on, every abstract state holds hidden states of a single
predicted class: the states are clustered within each class separately, with as many
states per class as its share of the points warrants (at least one). Since the
prediction is a function of the hidden state, this is still an abstraction of ``h``
alone; it guarantees that no state straddles the classifier's decision boundary.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> H = np.concatenate([rng.normal(0, 1, (200, 8)), rng.normal(6, 1, (200, 8))])
>>> ab = KMeansAbstractor(n_states=2, pca_components=3, random_state=0).fit(H)
>>> len(np.unique(ab.predict(H)))
2
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
from sklearn.mixture import GaussianMixture
from sklearn.utils.validation import check_is_fitted

from .errors import AbstractionError

__all__ = ["ABSTRACTORS", "GMMAbstractor", "GridAbstractor", "KMeansAbstractor", "make_abstractor"]


def _as_2d(X, name: str = "hidden states") -> np.ndarray:
    if not hasattr(X, "shape") or len(X.shape) != 2:
        raise AbstractionError(f"{name} must be a 2-D array (n_steps, state_size)")
    return X


def iter_rows(X, chunk_size: int, *others):
    """Yield ``(start, X[start:stop], *others[start:stop])`` chunk by chunk.

    The block is a view when ``X`` is float32 (no copy). Memory-mapped inputs are released
    once the consumer has moved on (``madvise(DONTNEED)``), so abstracting millions of
    memory-mapped steps keeps the process's resident memory at a chunk, not at the size
    of the file; the consumer must not keep a block past its iteration.
    """
    import mmap

    mm = getattr(X, "_mmap", None)
    for start in range(0, X.shape[0], chunk_size):
        stop = min(start + chunk_size, X.shape[0])
        block = np.asarray(X[start:stop], dtype=np.float32)
        rest = tuple(None if o is None else np.asarray(o[start:stop]) for o in others)
        yield (start, block, *rest)
        del block
        if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            row = X.strides[0]
            lo = X.offset + start * row
            lo -= lo % mmap.PAGESIZE
            hi = X.offset + stop * row
            hi -= hi % mmap.PAGESIZE  # keep the page shared with the next chunk
            if hi > lo:
                mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _sample_rows(n: int, k: int, rng: np.random.Generator, run: int = 16) -> np.ndarray:
    """``k`` row indices: random runs of ``run`` consecutive rows (few page faults on a
    memory map), sorted."""
    if n <= k:
        return np.arange(n)
    n_runs = max(1, k // run)
    starts = np.sort(rng.choice(max(1, n // run), size=min(n_runs, max(1, n // run)),
                                replace=False)) * run
    idx = (starts[:, None] + np.arange(run)).ravel()
    return idx[idx < n]


def _check_finite(block: np.ndarray, start: int) -> None:
    finite = np.isfinite(block)
    if not finite.all():
        row = start + int(np.flatnonzero(~finite.all(axis=1))[0])
        raise AbstractionError(
            f"hidden state {row} contains NaN or infinity; the model or its traces are broken "
            "— retrain or re-record the run"
        )


def log_ratios(proba: np.ndarray) -> np.ndarray:
    """Logit differences log(p_c / p_0) for c = 1..C-1, shape (n, C-1).

    For a linear head these are exactly ``(W_c - W_0) h + (b_c - b_0)``: the classifier's
    own coordinates of the hidden state (the logit margin, for two classes).
    """
    P = np.clip(np.asarray(proba, dtype=np.float64), 1e-12, 1.0)
    return np.log(P[:, 1:]) - np.log(P[:, :1])


class Projection:
    """The low-dimensional space the states are clustered in (plain arrays, no pickle).

    ``pca``     PCA of the hidden state (DeepSeer): ``(h - mean) @ components.T``.
    ``margin``  the classifier's logit differences (from the intermediate predictions) and
                the top principal axes of ``h`` orthogonal to the head's directions, each
                divided by its standard deviation on the fitting sample.
    """

    def __init__(self, kind: str, arrays: dict[str, np.ndarray]) -> None:
        self.kind = kind
        self.arrays = {k: np.asarray(v) for k, v in arrays.items()}

    @property
    def n_components(self) -> int:
        return int(self.arrays["scale"].shape[0])

    @classmethod
    def fit(cls, kind: str, S: np.ndarray, P: np.ndarray | None, n_components: int,
            random_state: int | None) -> Projection:
        if kind == "pca":
            n = int(min(n_components, S.shape[1], len(S)))
            pca = PCA(n_components=n, svd_solver="covariance_eigh",
                      random_state=random_state).fit(S)
            return cls("pca", {"mean": pca.mean_, "components": pca.components_,
                               "scale": np.ones(n)})
        if P is None:
            raise AbstractionError("margin features need the intermediate predictions (proba); "
                                   "pass proba= or use --features pca")
        L = log_ratios(P)
        A = np.column_stack([S.astype(np.float64), np.ones(len(S))])
        G = A.T @ A  # least squares by the normal equations (d + 1 unknowns per class)
        G[np.diag_indices_from(G)] += 1e-8 * max(float(np.trace(G)) / len(G), 1.0)
        head = np.linalg.solve(G, A.T @ L)[:-1].T              # (C-1, d): head directions
        Q, _ = np.linalg.qr(head.T)                           # orthonormal basis of their span
        R = S - (S @ Q) @ Q.T
        n = int(min(n_components, S.shape[1] - Q.shape[1], len(S)))
        if n > 0:
            pca = PCA(n_components=n, svd_solver="covariance_eigh",
                      random_state=random_state).fit(R)
            mean, comps = pca.mean_, pca.components_
        else:
            mean, comps = np.zeros(S.shape[1]), np.zeros((0, S.shape[1]))
        raw = np.column_stack([L, (S - mean) @ comps.T])
        scale = raw.std(axis=0)
        scale[scale == 0] = 1.0
        return cls("margin", {"mean": mean, "components": comps, "scale": scale,
                              "head": head})

    def transform(self, X: np.ndarray, P: np.ndarray | None = None) -> np.ndarray:
        """Coordinates of hidden states ``X`` (n, d) with predictions ``P`` (n, C)."""
        a = self.arrays
        X = np.asarray(X, dtype=np.float32)
        comps = a["components"].astype(np.float32)
        Z = X @ comps.T - (a["mean"] @ a["components"].T).astype(np.float32)
        if self.kind == "margin":
            if P is None:
                raise AbstractionError("this abstraction uses margin features: pass proba")
            Z = np.column_stack([log_ratios(P).astype(np.float32), Z])
            Z /= a["scale"].astype(np.float32)
        return Z


class _PCAClusterer(ClusterMixin, BaseEstimator):
    """Shared PCA + chunked assignment; subclasses implement ``_fit_states`` and ``_assign``."""

    def _validate(self, n: int) -> None:
        if not isinstance(self.n_states, (int, np.integer)) or self.n_states < 1:
            raise AbstractionError(f"n_states must be a positive integer, not {self.n_states!r}")
        if n == 0:
            raise AbstractionError("no hidden states to abstract: the split is empty")
        if self.n_states > n:
            raise AbstractionError(
                f"{self.n_states} states requested but only {n} hidden states recorded; "
                f"ask for at most {n} (e.g. --states {max(1, min(n, 40) // 2)})"
            )

    def _project(self, X: np.ndarray, P: np.ndarray | None = None) -> np.ndarray:
        return self.projection_.transform(X, P)

    def fit(self, X, y=None, proba: np.ndarray | None = None):
        """Fit PCA and the clustering on (a sample of) ``X``.

        Parameters
        ----------
        X : array-like of shape (n_steps, state_size)
            Hidden states; memory maps are read in chunks.
        y : ignored
        proba : ndarray of shape (n_steps, n_classes), optional
            Intermediate predictions, used when ``split_by_prediction``.

        Returns
        -------
        self
        """
        X = _as_2d(X)
        n, d = X.shape
        self._validate(n)
        rng = np.random.default_rng(self.random_state)
        idx = _sample_rows(n, self.max_fit_samples, rng)
        S = np.asarray(X[idx], dtype=np.float32)
        finite = np.isfinite(S).all(axis=1)
        if not finite.all():
            _check_finite(np.asarray(X[idx[~finite][:1]], dtype=np.float32),
                          int(idx[~finite][0]))
        self.n_features_in_ = d
        if self.features not in ("pca", "margin"):
            raise AbstractionError(f"unknown features {self.features!r}; choose pca or margin")
        P = None if proba is None else np.asarray(proba[idx])
        n_comp = self.pca_components if self.features == "pca" else self.residual_components
        self.projection_ = Projection.fit(self.features, S, P, n_comp, self.random_state)
        Z = self._project(S, P)
        use_pred = self.split_by_prediction and proba is not None
        self.split_by_prediction_ = bool(use_pred)
        if use_pred:
            self._fit_split(Z, P.argmax(axis=1), P.shape[1])
        else:
            self.state_class_ = None
            self._fit_states(Z, self.n_states, rng)
        # A class with fewer points than its share of states, or a grid whose cells do not
        # divide n_states, yields fewer states: the fitted count is the true one.
        self.n_states_ = len(self.cluster_centers_)
        return self

    def _fit_split(self, Z: np.ndarray, pred: np.ndarray, n_classes: int) -> None:
        counts = np.bincount(pred, minlength=n_classes)
        present = np.flatnonzero(counts)
        if self.n_states < len(present):
            raise AbstractionError(
                f"{self.n_states} states cannot separate {len(present)} predicted classes; "
                f"ask for at least {len(present)} states"
            )
        # States per class proportional to its share, at least one each (largest remainder).
        share = counts[present] / counts.sum() * (self.n_states - len(present))
        alloc = 1 + np.floor(share).astype(int)
        rest = self.n_states - alloc.sum()
        alloc[np.argsort(-(share - np.floor(share)))[:rest]] += 1
        alloc = np.minimum(alloc, counts[present])
        models, classes = [], []
        for c, k in zip(present, alloc, strict=True):
            sub = Z[pred == c]
            models.append(self._fit_states(sub, int(k), np.random.default_rng(
                (self.random_state or 0) + int(c)), store=False))
            classes.extend([int(c)] * self._n_fitted(models[-1]))
        self._merge_split(models, present)
        self.state_class_ = np.array(classes, dtype=np.int64)

    @staticmethod
    def _n_fitted(model) -> int:
        """States of one fitted per-class model (centres array, mixture or grid)."""
        if hasattr(model, "n_components"):
            return int(model.n_components)
        if isinstance(model, dict):
            return len(model["centers"])
        return len(model)

    def predict(self, X, proba: np.ndarray | None = None) -> np.ndarray:
        """Abstract state of every row, shape (n_steps,), values in ``[0, n_states)``.

        ``proba`` is required when the abstractor was fitted with ``split_by_prediction``.
        """
        check_is_fitted(self, "projection_")
        X = _as_2d(X)
        if X.shape[1] != self.n_features_in_:
            raise AbstractionError(
                f"hidden states have {X.shape[1]} dimensions but the abstraction was fitted on "
                f"{self.n_features_in_}; re-run `stateseer abstract` for this model"
            )
        if (self.split_by_prediction_ or self.projection_.kind == "margin") and proba is None:
            raise AbstractionError("this abstraction needs the intermediate predictions: "
                                   "pass proba")
        out = np.empty(X.shape[0], dtype=np.int64)
        for start, block, P in iter_rows(X, self.chunk_size, proba):
            Z = self._project(block, P)
            if not np.isfinite(Z).all():  # NaN/inf in a hidden state reaches its coordinates
                _check_finite(block, start)
            if self.split_by_prediction_:
                pred = P.argmax(axis=1)
                out[start : start + len(block)] = self._assign_split(Z, pred)
            else:
                out[start : start + len(block)] = self._assign(Z)
        return out

    def transform(self, X, proba: np.ndarray | None = None) -> np.ndarray:
        """Coordinates the states are clustered in, shape (n_steps, n_components)."""
        check_is_fitted(self, "projection_")
        if X.shape[0] == 0:
            return np.zeros((0, self.projection_.n_components), np.float32)
        return np.concatenate([self._project(block, P)
                               for _, block, P in iter_rows(X, self.chunk_size, proba)])


def _nearest(Z: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Index of the nearest center for every row (squared Euclidean), vectorised."""
    d = (centers * centers).sum(1)[None, :] - 2.0 * (Z @ centers.T)
    return d.argmin(axis=1)


class KMeansAbstractor(_PCAClusterer):
    """PCA, then k-means.

    Parameters
    ----------
    n_states : int, default 40
    pca_components : int, default 20
    max_fit_samples : int, default 30_000
    chunk_size : int, default 65_536
    split_by_prediction : bool, default False
    features : {'pca', 'margin'}, default 'pca'
        ``pca``: PCA of h to ``pca_components`` dimensions (DeepSeer). ``margin``: the
        classifier's logit differences plus ``residual_components`` principal axes of h
        orthogonal to the head, standardised (needs ``proba``).
    residual_components : int, default 1
    n_init : int, default 1
        k-means++ restarts (1, as scikit-learn's "auto" does for k-means++).
    random_state : int or None, default 0

    Attributes
    ----------
    projection_ : Projection
        The fitted space (``features``: ``pca`` or ``margin``).
    cluster_centers_ : ndarray of shape (n_states, n_components)
    state_class_ : ndarray of shape (n_states,) or None
        Predicted class of each state when ``split_by_prediction``.
    n_features_in_ : int
    """

    def __init__(self, n_states: int = 40, *, pca_components: int = 20,
                 max_fit_samples: int = 30_000, chunk_size: int = 65_536,
                 split_by_prediction: bool = False, features: str = "pca",
                 residual_components: int = 1, n_init: int = 1,
                 random_state: int | None = 0) -> None:
        self.n_states = n_states
        self.features = features
        self.residual_components = residual_components
        self.pca_components = pca_components
        self.max_fit_samples = max_fit_samples
        self.chunk_size = chunk_size
        self.split_by_prediction = split_by_prediction
        self.n_init = n_init
        self.random_state = random_state

    def _fit_states(self, Z, k, rng=None, store=True):
        km = KMeans(n_clusters=k, n_init=self.n_init, random_state=self.random_state).fit(Z)
        centers = km.cluster_centers_.astype(np.float32)
        if store:
            self.cluster_centers_ = centers
        return centers

    def _merge_split(self, models, present):
        self.cluster_centers_ = np.concatenate(models)
        self._class_slices = np.cumsum([0] + [len(m) for m in models])
        self._present = present

    def _assign(self, Z):
        return _nearest(Z, self.cluster_centers_)

    def _assign_split(self, Z, pred):
        out = np.empty(len(Z), dtype=np.int64)
        for j, c in enumerate(self._present):
            lo, hi = self._class_slices[j], self._class_slices[j + 1]
            m = pred == c
            out[m] = lo + _nearest(Z[m], self.cluster_centers_[lo:hi])
        other = ~np.isin(pred, self._present)  # a class never predicted in training
        if other.any():
            out[other] = _nearest(Z[other], self.cluster_centers_)
        return out


class GMMAbstractor(_PCAClusterer):
    """PCA, then a Gaussian mixture (DeepSeer: 20 components, diagonal covariances).

    Parameters are those of :class:`KMeansAbstractor`, plus ``covariance_type`` and
    ``max_iter``; fitted attributes add ``gmm_`` (or ``gmms_`` with
    ``split_by_prediction``) and ``cluster_centers_`` (the component means).
    """

    def __init__(self, n_states: int = 40, *, pca_components: int = 20,
                 max_fit_samples: int = 30_000, chunk_size: int = 65_536,
                 split_by_prediction: bool = False, features: str = "pca",
                 residual_components: int = 1, covariance_type: str = "diag",
                 max_iter: int = 100, reg_covar: float = 1e-4,
                 random_state: int | None = 0) -> None:
        self.n_states = n_states
        self.features = features
        self.residual_components = residual_components
        self.pca_components = pca_components
        self.max_fit_samples = max_fit_samples
        self.chunk_size = chunk_size
        self.split_by_prediction = split_by_prediction
        self.covariance_type = covariance_type
        self.max_iter = max_iter
        self.reg_covar = reg_covar
        self.random_state = random_state

    def _fit_states(self, Z, k, rng=None, store=True):
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

    def _merge_split(self, models, present):
        self.gmms_ = models
        self._present = present
        self._class_slices = np.cumsum([0] + [m.n_components for m in models])
        self.cluster_centers_ = np.concatenate([m.means_ for m in models]).astype(np.float32)

    def _assign(self, Z):
        return self.gmm_.predict(Z)

    def _assign_split(self, Z, pred):
        out = np.empty(len(Z), dtype=np.int64)
        for j, c in enumerate(self._present):
            m = pred == c
            if m.any():
                out[m] = self._class_slices[j] + self.gmms_[j].predict(Z[m])
        other = ~np.isin(pred, self._present)
        if other.any():
            out[other] = _nearest(Z[other], self.cluster_centers_)
        return out


class GridAbstractor(_PCAClusterer):
    """Equal-frequency grid over the top ``grid_dims`` PCA components (DeepStellar).

    Each of the ``grid_dims`` leading components is cut into ``b`` intervals at the
    sample's quantiles, with ``b ** grid_dims <= n_states``; a state is a grid cell. With
    ``split_by_prediction`` every predicted class gets its own grid.

    Attributes
    ----------
    edges_ : list of ndarray
        Inner interval edges per component.
    bins_ : int
    """

    def __init__(self, n_states: int = 40, *, grid_dims: int = 2, pca_components: int = 20,
                 max_fit_samples: int = 30_000, chunk_size: int = 65_536,
                 split_by_prediction: bool = False, features: str = "pca",
                 residual_components: int = 1, random_state: int | None = 0) -> None:
        self.n_states = n_states
        self.features = features
        self.residual_components = residual_components
        self.grid_dims = grid_dims
        self.pca_components = pca_components
        self.max_fit_samples = max_fit_samples
        self.chunk_size = chunk_size
        self.split_by_prediction = split_by_prediction
        self.random_state = random_state

    def _fit_states(self, Z, k, rng=None, store=True):
        dims = int(min(self.grid_dims, Z.shape[1]))
        bins = max(1, int(np.floor(k ** (1.0 / dims) + 1e-9)))
        qs = np.linspace(0, 1, bins + 1)[1:-1]
        grid = {"edges": [np.quantile(Z[:, j], qs) for j in range(dims)], "bins": bins}
        cells = self._cells(Z, grid)
        centers = np.zeros((bins**dims, Z.shape[1]), np.float32)
        for s in np.unique(cells):
            centers[s] = Z[cells == s].mean(0)
        grid["centers"] = centers
        if store:
            self.grids_ = [grid]
            self.edges_, self.bins_ = grid["edges"], bins
            self.cluster_centers_ = centers
        return grid

    @staticmethod
    def _cells(Z, grid):
        cell = np.zeros(len(Z), dtype=np.int64)
        for j, e in enumerate(grid["edges"]):
            cell = cell * grid["bins"] + np.searchsorted(e, Z[:, j])
        return cell

    def _merge_split(self, models, present):
        self.grids_ = models
        self._present = present
        self._class_slices = np.cumsum([0] + [len(m["centers"]) for m in models])
        self.cluster_centers_ = np.concatenate([m["centers"] for m in models])

    def _assign(self, Z):
        return self._cells(Z, self.grids_[0])

    def _assign_split(self, Z, pred):
        out = np.empty(len(Z), dtype=np.int64)
        for j, c in enumerate(self._present):
            m = pred == c
            out[m] = self._class_slices[j] + self._cells(Z[m], self.grids_[j])
        other = ~np.isin(pred, self._present)
        if other.any():
            out[other] = _nearest(Z[other], self.cluster_centers_)
        return out


ABSTRACTORS = {"kmeans": KMeansAbstractor, "gmm": GMMAbstractor, "grid": GridAbstractor}


def make_abstractor(method: str, **params) -> _PCAClusterer:
    """Build the abstractor called ``method`` (``kmeans``, ``gmm`` or ``grid``)."""
    try:
        cls = ABSTRACTORS[method]
    except KeyError:
        raise AbstractionError(
            f"unknown --method {method!r}; choose one of: {', '.join(ABSTRACTORS)}"
        ) from None
    return cls(**params)


# ----------------------------------------------------------------------------- persistence
def abstractor_to_arrays(ab: _PCAClusterer) -> dict[str, np.ndarray]:
    """Fitted state of an abstractor as plain arrays (saved with ``np.savez``, no pickle)."""
    import json

    check_is_fitted(ab, "projection_")
    name = {v: k for k, v in ABSTRACTORS.items()}[type(ab)]
    out = {
        "method": np.array(name),
        "params": np.array(json.dumps(ab.get_params())),
        "projection_kind": np.array(ab.projection_.kind),
        **{f"projection_{k}": v for k, v in ab.projection_.arrays.items()},
        "n_features_in": np.array(ab.n_features_in_),
        "cluster_centers": ab.cluster_centers_,
        "split": np.array(ab.split_by_prediction_),
    }
    if ab.split_by_prediction_:
        out["state_class"] = ab.state_class_
        out["class_slices"] = np.asarray(ab._class_slices)
        out["present"] = np.asarray(ab._present)
    if isinstance(ab, GMMAbstractor):
        gmms = ab.gmms_ if ab.split_by_prediction_ else [ab.gmm_]
        for i, g in enumerate(gmms):
            out[f"gmm{i}_weights"] = g.weights_
            out[f"gmm{i}_means"] = g.means_
            out[f"gmm{i}_covariances"] = g.covariances_
            out[f"gmm{i}_precisions_cholesky"] = g.precisions_cholesky_
        out["n_gmms"] = np.array(len(gmms))
    if isinstance(ab, GridAbstractor):
        out["n_grids"] = np.array(len(ab.grids_))
        for j, g in enumerate(ab.grids_):
            out[f"grid{j}_bins"] = np.array(g["bins"])
            out[f"grid{j}_centers"] = g["centers"]
            out[f"grid{j}_n_edges"] = np.array(len(g["edges"]))
            for i, e in enumerate(g["edges"]):
                out[f"grid{j}_edges{i}"] = e
    return out


def abstractor_from_arrays(d) -> _PCAClusterer:
    """Rebuild a fitted abstractor from :func:`abstractor_to_arrays` output."""
    import json

    try:
        ab = make_abstractor(str(d["method"]), **json.loads(str(d["params"])))
        ab.projection_ = Projection(str(d["projection_kind"]), {
            k[len("projection_"):]: d[k] for k in (d.files if hasattr(d, "files") else d)
            if k.startswith("projection_") and k != "projection_kind"})
        ab.n_features_in_ = int(d["n_features_in"])
        ab.cluster_centers_ = d["cluster_centers"]
        ab.split_by_prediction_ = bool(d["split"])
        ab.n_states_ = len(ab.cluster_centers_)
        ab.state_class_ = d["state_class"] if ab.split_by_prediction_ else None
        if ab.split_by_prediction_:
            ab._class_slices, ab._present = d["class_slices"], d["present"]
        if isinstance(ab, GMMAbstractor):
            gmms = []
            for i in range(int(d["n_gmms"])):
                g = GaussianMixture(n_components=len(d[f"gmm{i}_weights"]),
                                    covariance_type=ab.covariance_type)
                g.weights_, g.means_ = d[f"gmm{i}_weights"], d[f"gmm{i}_means"]
                g.covariances_ = d[f"gmm{i}_covariances"]
                g.precisions_cholesky_ = d[f"gmm{i}_precisions_cholesky"]
                gmms.append(g)
            if ab.split_by_prediction_:
                ab.gmms_ = gmms
            else:
                ab.gmm_ = gmms[0]
        if isinstance(ab, GridAbstractor):
            ab.grids_ = [{"bins": int(d[f"grid{j}_bins"]), "centers": d[f"grid{j}_centers"],
                          "edges": [d[f"grid{j}_edges{i}"]
                                    for i in range(int(d[f"grid{j}_n_edges"]))]}
                         for j in range(int(d["n_grids"]))]
            ab.edges_, ab.bins_ = ab.grids_[0]["edges"], ab.grids_[0]["bins"]
        return ab
    except (KeyError, ValueError, TypeError) as exc:
        raise AbstractionError(
            f"saved abstraction is damaged ({exc}); re-run `stateseer abstract`"
        ) from None
